//! Parallel tool calls (opt-in): admitted in the reply's order before any body starts, bodies at
//! most `cap` at a time, answers in the reply's order, every call answered, a stop that starts
//! nothing more, the sequential events, and, under a journal, `started` before each body.
//! Also the tools offered per request.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[cfg(feature = "journal")]
use loopbound::journal::backend::{Batch, Entry, Fence, ListedRow, RunRow, StoredRun};
#[cfg(feature = "journal")]
use loopbound::journal::{Journal, JournalError, MemoryJournal, RunId, RunQuery};
use loopbound::scripted::{Scripted, Step, sequence};
#[cfg(feature = "journal")]
use loopbound::tool::Policy;
use loopbound::transport::{ChatRequest, ModelReply, ToolCall};
use loopbound::{
    Concurrency, Limits, Message, Offer, Outcome, Runner, Scope, Status, ToolBuilder, ToolContext, ToolSet,
};
use loopbound_fixtures::Composition;
#[cfg(feature = "journal")]
use loopbound_test::refund::{self, EffectSink};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

#[derive(Deserialize, Serialize, JsonSchema)]
struct Order {
    id: u32,
}

/// What the bodies of one run did.
#[derive(Debug, Default)]
struct Bodies {
    started: AtomicUsize,
    running: AtomicUsize,
    most_at_once: AtomicUsize,
}

/// `lookup`, whose body takes 100 ms and counts how many run at once.
fn lookup_tools() -> ToolSet<Bodies> {
    let lookup = ToolBuilder::new("lookup", "orders.read")
        .build(|order: Order, call: ToolContext<Bodies>| async move {
            let bodies = call.state();
            bodies.started.fetch_add(1, Ordering::SeqCst);
            let now = bodies.running.fetch_add(1, Ordering::SeqCst) + 1;
            bodies.most_at_once.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(100)).await;
            bodies.running.fetch_sub(1, Ordering::SeqCst);
            Ok::<_, String>(format!("order {}", order.id))
        })
        .expect("a fresh set takes lookup");
    ToolSet::builder().add(&lookup).build().expect("a set of one tool")
}

fn eight_lookups() -> Vec<Step> {
    let calls =
        (1..=8).map(|id| ToolCall::new(format!("c{id}"), "lookup", format!(r#"{{"id":{id}}}"#))).collect();
    vec![Step::Reply(ModelReply::calls(calls)), Step::Reply(ModelReply::text("Done."))]
}

struct Ran {
    outcome: Outcome,
    elapsed: Duration,
    conversation: Vec<Message>,
    bodies: Arc<Scope<Bodies>>,
}

async fn run(limits: Limits, parallel: Option<usize>, composition: Composition) -> Ran {
    let scope =
        Scope::builder().grant("orders.read").limits(limits).state(Bodies::default()).build().unwrap();
    let mut runtime = composition.runner(&lookup_tools(), sequence(eight_lookups()));
    if let Some(cap) = parallel {
        runtime = runtime.parallel(Concurrency::new(cap).unwrap());
    }
    let mut conversation = vec![Message::user("Look orders 1 to 8 up.")];
    let started = Instant::now();
    let outcome = runtime.run(&scope, &mut conversation, |_| true).await.unwrap();
    Ran { outcome, elapsed: started.elapsed(), conversation, bodies: Arc::new(scope) }
}

fn lines(outcome: &Outcome) -> Vec<String> {
    outcome.events().iter().map(ToString::to_string).collect()
}

#[tokio::test(start_paused = true)]
async fn eight_calls_with_a_cap_of_four_take_two_rounds_and_record_the_sequential_events() {
    let limits = Limits::default().with_tool_calls(8);
    for composition in [Composition::Harness, Composition::Simple] {
        let sequential = run(limits.clone(), None, composition).await;
        let parallel = run(limits.clone(), Some(4), composition).await;
        assert_eq!(sequential.elapsed, Duration::from_millis(800));
        assert_eq!(parallel.elapsed, Duration::from_millis(200), "two rounds of four");
        assert_eq!(parallel.bodies.state().most_at_once.load(Ordering::SeqCst), 4);
        assert_eq!(parallel.bodies.state().started.load(Ordering::SeqCst), 8);
        assert_eq!(parallel.outcome.status(), Status::Completed);
        assert_eq!(lines(&parallel.outcome), lines(&sequential.outcome), "the sequential events");
        assert_eq!(parallel.conversation, sequential.conversation, "answers in the reply's order");
    }
}

#[tokio::test(start_paused = true)]
async fn eight_calls_under_a_tool_budget_of_four_run_four_bodies_and_answer_all_eight() {
    let limits = Limits::default().with_tool_calls(4);
    let sequential = run(limits.clone(), None, Composition::Harness).await;
    for cap in [2, 4, 8] {
        let parallel = run(limits.clone(), Some(cap), Composition::Harness).await;
        assert_eq!(parallel.outcome.status(), Status::ToolBudget, "cap {cap}");
        assert_eq!(
            parallel.bodies.state().started.load(Ordering::SeqCst),
            4,
            "cap {cap}: exactly four bodies"
        );
        assert_eq!(lines(&parallel.outcome), lines(&sequential.outcome), "cap {cap}");
        let answers: Vec<&Message> = parallel.conversation[2..].iter().collect();
        assert_eq!(answers.len(), 8, "cap {cap}: every call answered");
        for (n, answer) in answers.iter().enumerate() {
            let Message::Tool { call_id, content, is_error, .. } = answer else { panic!("a tool message") };
            assert_eq!(call_id, &format!("c{}", n + 1));
            if n < 4 {
                assert_eq!((content.as_str(), *is_error), (format!("order {}", n + 1).as_str(), false));
            } else {
                assert!(*is_error && content.starts_with("not run"), "cap {cap}: {content}");
            }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_deadline_during_the_batch_starts_nothing_more_and_hands_nothing_on() {
    let limits = Limits::default().with_tool_calls(8).with_deadline(Duration::from_millis(50));
    let parallel = run(limits, Some(4), Composition::Harness).await;
    assert_eq!(parallel.outcome.status(), Status::DeadlineExceeded);
    assert_eq!(parallel.elapsed, Duration::from_millis(50));
    assert_eq!(parallel.bodies.state().started.load(Ordering::SeqCst), 4, "the second round never started");
    let answers = &parallel.conversation[2..];
    assert_eq!(answers.len(), 8);
    assert!(answers.iter().all(|m| matches!(m, Message::Tool { is_error: true, .. })), "{answers:?}");
    assert_eq!(lines(&parallel.outcome).last().map(String::as_str), Some("DeadlineExceeded lookup 8"));
}

#[test]
fn a_cap_below_two_is_refused() {
    assert_eq!(Concurrency::new(0).map(Concurrency::get).map_err(|error| error.0), Err(0));
    assert_eq!(Concurrency::new(1).map(Concurrency::get).map_err(|error| error.0), Err(1));
    assert_eq!(Concurrency::new(2).map(Concurrency::get), Ok(2));
}

/// The journal and the bodies write to one log: commits with the operations they start, and
/// bodies with the operation they run as.
#[cfg(feature = "journal")]
struct Logged {
    inner: MemoryJournal,
    log: Arc<Mutex<Vec<String>>>,
}

#[cfg(feature = "journal")]
impl Journal for Logged {
    fn lease(&self) -> Duration {
        self.inner.lease()
    }

    async fn acquire(&self, run: &RunId, fresh: RunRow) -> Result<StoredRun, JournalError> {
        self.inner.acquire(run, fresh).await
    }

    async fn renew(&self, run: &RunId, epoch: u64) -> Result<(), JournalError> {
        self.inner.renew(run, epoch).await
    }

    async fn list_rows(&self, query: &RunQuery) -> Result<Vec<ListedRow>, JournalError> {
        self.inner.list_rows(query).await
    }

    async fn load(&self, run: &RunId) -> Result<Option<StoredRun>, JournalError> {
        self.inner.load(run).await
    }

    async fn commit(&self, run: &RunId, fence: Fence, batch: Batch) -> Result<(), JournalError> {
        let started: Vec<String> = batch
            .entries
            .iter()
            .filter_map(|entry| match entry {
                Entry::Started(row) => Some(row.ordinal.to_string()),
                _ => None,
            })
            .collect();
        self.inner.commit(run, fence, batch).await?;
        if !started.is_empty() {
            self.log.lock().unwrap().push(format!("commit started {}", started.join(",")));
        }
        Ok(())
    }
}

#[cfg(feature = "journal")]
struct LogSink(Arc<Mutex<Vec<String>>>);

#[cfg(feature = "journal")]
impl EffectSink for LogSink {
    fn apply(&self, tool: &str, key: Option<&str>) {
        let ordinal = key.and_then(|key| key.rsplit('/').next()).unwrap_or("-");
        self.0.lock().unwrap().push(format!("body {tool} {ordinal}"));
    }

    fn applied(&self) -> Vec<(String, Option<String>)> {
        Vec::new()
    }
}

#[cfg(feature = "journal")]
#[tokio::test]
async fn a_journaled_batch_commits_its_started_records_before_its_bodies() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let journal = Logged { inner: MemoryJournal::default(), log: Arc::clone(&log) };
    let tools = refund::tools(Arc::new(LogSink(Arc::clone(&log))) as Arc<dyn EffectSink>, Policy::Allow);
    let script = vec![
        ModelReply::call("call-a", "lookup_order", r#"{"order":42}"#),
        ModelReply::calls(vec![
            ToolCall::new("call-b", "refund", r#"{"order":42,"amount_cents":1500}"#),
            ToolCall::new("call-c", "refund", r#"{"order":43,"amount_cents":700}"#),
            ToolCall::new("call-d", "send_receipt", r#"{"order":42}"#),
        ]),
        ModelReply::text(refund::CLOSING),
    ];
    let runtime =
        Runner::new(&tools.set, refund::model(script, |_| {})).parallel(Concurrency::new(2).unwrap());
    let scope = Scope::builder().grants(refund::CAPABILITIES).build().unwrap();
    let run = RunId::new("refund-42").unwrap();
    let outcome = runtime.run_journaled(&journal, &run, &scope, &mut refund::conversation(), |_| true).await;
    assert_eq!(outcome.map(|o| o.status()), Ok(Status::Completed));
    assert_eq!(
        log.lock().unwrap().clone(),
        ["commit started 2,3", "body refund 2", "body refund 3", "commit started 4", "body send_receipt 4",],
        "each wave's started records are committed together, before its bodies"
    );
}

/// A model that answers with text and remembers the tools it was offered.
fn offered_to(
    seen: Arc<Mutex<Vec<String>>>,
) -> Scripted<impl Fn(u32, &ChatRequest<'_>) -> Step + Send + Sync> {
    Scripted::new(move |_, request| {
        let names = request.tools.iter().map(|tool| tool.name.clone()).collect::<Vec<_>>().join(",");
        seen.lock().unwrap().push(names);
        Step::Reply(ModelReply::text("ok"))
    })
}

#[tokio::test]
async fn the_model_is_offered_every_tool_unless_the_host_offers_only_granted_ones() {
    let tools = loopbound_fixtures::review::tools();
    for (offer, expected) in [(Offer::All, "read_ticket,finish_review"), (Offer::Granted, "finish_review")] {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let scope = loopbound_fixtures::review::scope(["review.finish"], Limits::default()).unwrap();
        let runtime = Runner::new(&tools.set, offered_to(Arc::clone(&seen))).offer(offer);
        runtime.run(&scope, &mut Vec::new(), |_| true).await.unwrap();
        assert_eq!(seen.lock().unwrap().clone(), [expected], "{offer:?}");
    }
}
