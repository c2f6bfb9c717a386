//! The journal fixtures of `testkit/fixtures/journal-2026-12-06/`, and the upgrade check every
//! later version runs over them: a journal written once by an earlier version must open, list,
//! read and resume to the right outcome with this version's code.
//!
//! [`write()`] is what made the fixtures (run by hand through the `write-journal-fixtures`
//! program, never by a test); [`check`] is what the SQLite and PostgreSQL crates' upgrade tests
//! run over a copy of them. Six runs of the refund task, each left in a state a resume must
//! handle (see [`Fixture`]):
//!
//! | run | labels | left |
//! |---|---|---|
//! | `done` | `tenant=acme`, `tier=gold` | completed, with usage and spend |
//! | `after-effect` | `tenant=acme` | its refund ran and its result is recorded; the next model call failed |
//! | `waiting` | `tenant=globex` | awaiting the approval of its refund |
//! | `cut-before-effect` | `tenant=globex`, `region=eu-west` | its refund decided, the attempt lost before the refund started |
//! | `cut-in-effect` | `tenant=initech` | its refund started, the attempt lost before its result was recorded |
//! | `cancel-requested` | `tenant=acme` | stopped after a read, a cancel asked for by `ops-bob` |
//!
//! Every attempt that writes the fixture ends with its lease held by `fixture-writer` for
//! [`WRITER_LEASE`], long expired when a test opens the copy.
//!
//! # Invariants
//!
//! - The effects are counted outside the runs, in a [`MemorySink`] per resume: a resume that
//!   replays a recorded effect shows as a count that is too high.
//! - The conversation, arguments and replies hold nested JSON and text beyond ASCII, so a
//!   change in how either is escaped or stored shows.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use loopbound::journal::backend::Entry;
use loopbound::journal::{self, JournalError, Labels, OperationStatus, RunId, RunQuery, RunState};
use loopbound::scripted::{Scripted, Step};
use loopbound::tool::Policy;
use loopbound::transport::{Message, ModelReply, ToolCall, Transport, TransportError, Usage};
use loopbound::{Limits, Outcome, RunError, Runner, Scope};

use crate::backend::{self, AnyJournal};
use crate::hooked::{Call, Hook, Hooked};
use crate::refund::{self, EffectSink, MemorySink};

/// The holder the fixtures' attempts held their leases as.
pub const WRITER: &str = "fixture-writer";

/// How long the fixtures' leases were: expired long before any test opens a copy.
pub const WRITER_LEASE: Duration = Duration::from_secs(1);

/// The runs of the fixture, each in the state its name says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fixture {
    /// Completed, every effect recorded.
    Done,
    /// The refund ran and its result is recorded; the model call after it failed.
    AfterEffect,
    /// Awaiting the approval of its refund.
    Waiting,
    /// The refund decided; the attempt lost before it started.
    CutBeforeEffect,
    /// The refund started; the attempt lost before its result was recorded.
    CutInEffect,
    /// Stopped after a read, with a cancel requested.
    CancelRequested,
}

impl Fixture {
    /// Every run, in the order their ids sort.
    pub const ALL: [Self; 6] = [
        Self::AfterEffect,
        Self::CancelRequested,
        Self::CutBeforeEffect,
        Self::CutInEffect,
        Self::Done,
        Self::Waiting,
    ];

    /// The run's id.
    #[must_use]
    pub fn id(self) -> RunId {
        let name = match self {
            Self::Done => "done",
            Self::AfterEffect => "after-effect",
            Self::Waiting => "waiting",
            Self::CutBeforeEffect => "cut-before-effect",
            Self::CutInEffect => "cut-in-effect",
            Self::CancelRequested => "cancel-requested",
        };
        RunId::new(name).unwrap_or_else(|error| unreachable!("{name} is a run id: {error}"))
    }

    fn labels(self) -> Labels {
        let pairs: &[(&str, &str)] = match self {
            Self::Done => &[("tenant", "acme"), ("tier", "gold")],
            Self::AfterEffect | Self::CancelRequested => &[("tenant", "acme")],
            Self::Waiting => &[("tenant", "globex")],
            Self::CutBeforeEffect => &[("tenant", "globex"), ("region", "eu-west")],
            Self::CutInEffect => &[("tenant", "initech")],
        };
        pairs.iter().fold(Labels::new(), |labels, (key, value)| {
            labels.with(key, value).unwrap_or_else(|error| unreachable!("{key}={value}: {error}"))
        })
    }

    fn policy(self) -> Policy {
        if matches!(self, Self::Waiting | Self::CutBeforeEffect) { Policy::Ask } else { Policy::Allow }
    }

    fn limits(self) -> Limits {
        if self == Self::Done { refund::metered_limits() } else { Limits::default() }
    }

    /// The whole script a resume is given.
    fn script(self) -> Vec<ModelReply> {
        match self {
            Self::Done => rich_script(),
            _ => refund::short_script(),
        }
    }
}

/// The conversation every run starts from: instructions, an earlier exchange with a tool call
/// whose arguments are nested JSON, text beyond ASCII and characters JSON escapes.
#[must_use]
pub fn conversation() -> Vec<Message> {
    let earlier = ToolCall::new(
        "call-0",
        "lookup_order",
        r#"{"order":41,"filter":{"items":[{"sku":"Ä-1","qty":2}],"note":"«fragile» \"glass\"\n🚚"}}"#,
    );
    vec![
        Message::system("You handle refunds for Zoë's shop (東京). Be brief.\tThanks."),
        Message::user("Was order 41 delivered?"),
        Message::assistant_parts(Some("Let me look.".to_owned()), vec![earlier]),
        Message::tool_result("call-0", "Order 41: delivered, 12.00 €."),
        Message::tool_error("call-x", "unknown tool: \"teleport\""),
        Message::user(refund::PROMPT),
    ]
}

/// The completed run's script: the long refund script, its replies reporting usage (with
/// cached input and cache writes) and its closing text beyond ASCII.
fn rich_script() -> Vec<ModelReply> {
    let usage = Usage::new(20, 10).with_cached_input(8).with_cache_write(4);
    let mut script: Vec<ModelReply> =
        refund::long_script().into_iter().map(|reply| reply.with_usage(usage)).collect();
    if let Some(last) = script.last_mut() {
        *last = ModelReply::text("Remboursé: 15,00 € ✓ — receipt sent.").with_usage(usage);
    }
    script
}

/// Loses an attempt at one commit, as a crash would: the commit that starts `operation`'s body
/// (`starting`) or the one that records its result (otherwise) fails, and so does every call
/// after it, so nothing more is written.
struct Lose {
    operation: u32,
    starting: bool,
    lost: AtomicBool,
}

impl Lose {
    fn new(operation: u32, starting: bool) -> Self {
        Self { operation, starting, lost: AtomicBool::new(false) }
    }
}

impl Hook for Lose {
    async fn before(&self, call: Call<'_>) -> Result<(), JournalError> {
        if let Call::Commit { batch, .. } = call {
            let hit = batch.entries.iter().any(|entry| match entry {
                Entry::Started(started) => self.starting && started.ordinal == self.operation,
                Entry::Call(call) => !self.starting && call.operation == Some(self.operation),
                _ => false,
            });
            if hit {
                self.lost.store(true, Ordering::SeqCst);
            }
        }
        if self.lost.load(Ordering::SeqCst) {
            Err(JournalError::storage("the attempt was lost"))
        } else {
            Ok(())
        }
    }
}

/// The assistant messages of [`conversation`], before the run's first reply.
const EARLIER_REPLIES: usize = 1;

/// A scripted model that answers step n of `script` when the request holds n assistant
/// messages after [`conversation`]'s, and logs each step asked for in `asked`.
fn model(script: Vec<ModelReply>, asked: Arc<Mutex<Vec<usize>>>) -> impl Transport {
    Scripted::new(move |_, request| {
        let step = loopbound::scripted::turn(request).saturating_sub(EARLIER_REPLIES);
        asked.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(step);
        match step.checked_sub(1).and_then(|at| script.get(at)) {
            Some(reply) => Step::Reply(reply.clone()),
            None => Step::Fail(TransportError::other(format!("the script has no step {step}"))),
        }
    })
}

/// One attempt of `fixture`'s run over `journal` with `script`, its effects counted in `sink`
/// and the steps the model was asked for logged in `asked`.
async fn attempt<J: journal::Journal>(
    journal: &J,
    fixture: Fixture,
    script: Vec<ModelReply>,
    sink: &Arc<MemorySink>,
    asked: &Arc<Mutex<Vec<usize>>>,
) -> Result<Outcome, RunError> {
    let tools = refund::tools(Arc::clone(sink) as Arc<dyn EffectSink>, fixture.policy());
    let model = model(script, Arc::clone(asked));
    let runtime =
        Runner::new(&tools.set, model).observe(loopbound::Middleware).options(refund::metered_options());
    let scope = Scope::builder()
        .grants(refund::CAPABILITIES)
        .limits(fixture.limits())
        .labels(fixture.labels())
        .build()
        .unwrap_or_else(|error| unreachable!("the refund scope builds: {error}"));
    runtime.run_journaled(journal, &fixture.id(), &scope, &mut conversation(), |_| true).await
}

/// Writes the six runs into the empty journal at `place` (see [`backend::open`]) with this
/// version's code; returns what each attempt ended with, for the writer to print.
///
/// # Panics
///
/// When the journal cannot be opened or a run does not end as its fixture needs.
pub async fn write(place: &str) -> Vec<String> {
    let journal = open(place, WRITER, WRITER_LEASE).await;
    let sink = Arc::new(MemorySink::default());
    let asked = Arc::new(Mutex::new(Vec::new()));
    let mut ended = Vec::new();
    let mut note = |fixture: Fixture, result: &Result<Outcome, RunError>| {
        let result = match result {
            Ok(outcome) => format!("{:?}", outcome.status()),
            Err(error) => format!("error: {error}"),
        };
        ended.push(format!("{}: {result}", fixture.id()));
    };
    for fixture in [Fixture::Done, Fixture::Waiting] {
        let result = attempt(&journal, fixture, fixture.script(), &sink, &asked).await;
        note(fixture, &result);
    }
    // The model call after the refund fails: its script stops there.
    let mut script = refund::short_script();
    script.truncate(2);
    let result = attempt(&journal, Fixture::AfterEffect, script, &sink, &asked).await;
    note(Fixture::AfterEffect, &result);
    // Asked for, approved by a host, then lost before the refund started.
    let fixture = Fixture::CutBeforeEffect;
    let result = attempt(&journal, fixture, fixture.script(), &sink, &asked).await;
    note(fixture, &result);
    approve_pending(&journal, fixture).await;
    let lossy = Hooked::new(open(place, WRITER, WRITER_LEASE).await, Lose::new(2, true));
    let result = attempt(&lossy, fixture, fixture.script(), &sink, &asked).await;
    note(fixture, &result);
    // Lost after the refund started, before its result was recorded.
    let fixture = Fixture::CutInEffect;
    let lossy = Hooked::new(open(place, WRITER, WRITER_LEASE).await, Lose::new(2, false));
    let result = attempt(&lossy, fixture, fixture.script(), &sink, &asked).await;
    note(fixture, &result);
    let mut script = refund::short_script();
    script.truncate(1);
    let result = attempt(&journal, Fixture::CancelRequested, script, &sink, &asked).await;
    note(Fixture::CancelRequested, &result);
    tokio::time::sleep(WRITER_LEASE * 2).await;
    journal::cancel(&journal, &Fixture::CancelRequested.id(), "ops-bob")
        .await
        .unwrap_or_else(|error| panic!("the cancel is recorded: {error}"));
    ended
}

/// Approves, as `alice`, the refund `fixture`'s run waits for; returns its arguments.
async fn approve_pending(journal: &AnyJournal, fixture: Fixture) -> String {
    let record = journal::inspect(journal, &fixture.id()).await.unwrap_or_else(|error| panic!("{error}"));
    let proposal = record.pending().cloned().unwrap_or_else(|| panic!("{} waits for approval", fixture.id()));
    journal::approve(journal, &proposal, "alice").await.unwrap_or_else(|error| panic!("approve: {error}"));
    format!("{} {} {}", proposal.tool(), proposal.capability(), proposal.arguments())
}

async fn open(place: &str, holder: &str, lease: Duration) -> AnyJournal {
    backend::open(place, holder, lease).await.unwrap_or_else(|error| panic!("{place}: {error}"))
}

/// One line per run as listed and as its record reads: state, attempts, lease, labels, replies,
/// counters, settled spend, and each operation's tool, status, starts and result; then one
/// line of its audit log (each event's kind, subject, count and decider).
async fn describe(journal: &AnyJournal) -> Vec<String> {
    let page = journal::list(journal, &RunQuery::new()).await.unwrap_or_else(|error| panic!("list: {error}"));
    let mut lines = Vec::new();
    for summary in page.runs() {
        let record = journal::inspect(journal, summary.run())
            .await
            .unwrap_or_else(|error| panic!("inspect {}: {error}", summary.run()));
        let labels: Vec<String> =
            summary.labels().iter().map(|(key, value)| format!("{key}={value}")).collect();
        let spend = record.spend().settled;
        let operations: Vec<String> = record
            .operations()
            .map(|operation| {
                let status = match operation.status() {
                    OperationStatus::Settled(_) => "settled".to_owned(),
                    other => format!("{other:?}"),
                };
                format!(
                    "{} {status} starts={} result={:?}",
                    operation.proposal().tool(),
                    operation.starts(),
                    operation.result().map(journal::CallResult::text),
                )
            })
            .collect();
        let events: Vec<String> = record
            .events()
            .iter()
            .map(|event| {
                let by = event.decided_by().map(|by| format!(" by {by}")).unwrap_or_default();
                format!("{:?} {} {}{by}", event.kind(), event.name(), event.count())
            })
            .collect();
        let lease = match summary.lease() {
            Some(lease) => format!("{} live={}", lease.holder, summary.is_running()),
            None => "none".to_owned(),
        };
        lines.push(format!(
            "{} {:?} attempts={} lease={lease} labels=[{}] replies={} model={} tools={} usage={}/{}/{}/{} ops=[{}]",
            summary.run(),
            summary.state(),
            summary.attempts(),
            labels.join(","),
            record.replies(),
            record.model_calls(),
            record.tool_calls(),
            spend.input_tokens,
            spend.cached_input_tokens,
            spend.cache_write_tokens,
            spend.output_tokens,
            operations.join("; "),
        ));
        lines.push(format!("{} events: {}", summary.run(), events.join(", ")));
    }
    lines
}

/// Opens the fixture's copy at `place` with this version's code and checks that it lists and
/// reads as written, then resumes every run that can go on and checks each outcome, the steps
/// the model was asked for (the others replayed from the journal) and how often each effect
/// ran, counted outside the run.
///
/// # Panics
///
/// When anything differs from what the fixture was written with.
pub async fn check(place: &str) {
    let journal = open(place, "upgrade-test", Duration::from_secs(30)).await;
    assert_eq!(describe(&journal).await, expected_before(), "the fixture as listed and read");
    let acme = RunQuery::new().label("tenant", "acme").unwrap_or_else(|error| panic!("{error}"));
    let page = journal::list(&journal, &acme).await.unwrap_or_else(|error| panic!("{error}"));
    let listed: Vec<&str> = page.runs().iter().map(|run| run.run().as_str()).collect();
    assert_eq!(listed, ["after-effect", "cancel-requested", "done"]);

    // The waiting refund's proposal, as it was proposed, approved now.
    let approved = approve_pending(&journal, Fixture::Waiting).await;
    assert_eq!(approved, r#"refund payments.refund {"amount_cents":1500,"order":42}"#);
    let mut resumed = Vec::new();
    for fixture in Fixture::ALL {
        resumed.push(resume(&journal, fixture).await);
    }
    // The refund that started without a recorded result is the host's to settle: it ran.
    let ran = journal::Resolution::Ran { result: "Refunded 1500 cents on order 42.".to_owned() };
    let operation = ambiguous(&journal, Fixture::CutInEffect).await;
    journal::reconcile(&journal, &operation, ran, "ops-carol")
        .await
        .unwrap_or_else(|error| panic!("reconcile: {error}"));
    resumed.push(resume(&journal, Fixture::CutInEffect).await);
    assert_eq!(resumed, expected_resumed(), "each run resumed");
    assert_eq!(describe(&journal).await, expected_after(), "the journal after the resumes");
}

/// One more attempt of `fixture`'s run with its whole script: how it ended, the steps the
/// model was asked for and how often each effect ran.
async fn resume(journal: &AnyJournal, fixture: Fixture) -> String {
    let sink = Arc::new(MemorySink::default());
    let asked = Arc::new(Mutex::new(Vec::new()));
    let result = match attempt(journal, fixture, fixture.script(), &sink, &asked).await {
        Ok(outcome) => format!("{:?}", outcome.status()),
        Err(error) => format!("{error:?}"),
    };
    let asked = asked.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    format!(
        "{}: {result} asked={asked:?} refund={} receipt={}",
        fixture.id(),
        sink.count("refund"),
        sink.count("send_receipt")
    )
}

/// The id of the operation `fixture`'s run is ambiguous on.
async fn ambiguous(journal: &AnyJournal, fixture: Fixture) -> journal::OperationId {
    let record = journal::inspect(journal, &fixture.id()).await.unwrap_or_else(|error| panic!("{error}"));
    let RunState::Ambiguous(ordinal) = record.state() else {
        panic!("{} is ambiguous, not {:?}", fixture.id(), record.state())
    };
    record
        .operation(ordinal)
        .map(|operation| operation.proposal().operation().clone())
        .unwrap_or_else(|| panic!("{} has operation {ordinal}", fixture.id()))
}

fn expected_before() -> Vec<String> {
    [
        r#"after-effect Open attempts=1 lease=none labels=[tenant=acme] replies=2 model=3 tools=2 usage=0/0/0/0 ops=[lookup_order settled starts=0 result=Some("Order 42: 15.00 EUR, paid, delivered damaged."); refund settled starts=1 result=Some("Refunded 1500 cents on order 42.")]"#,
        r#"after-effect events: ModelCall model 1, Middleware lookup_order 1, ToolCall lookup_order 1, Proposed lookup_order 1, Allowed lookup_order 1 by policy, ModelCall model 2, Middleware refund 2, ToolCall refund 2, Proposed refund 2, Allowed refund 2 by policy, EffectStarted refund 2, EffectRecorded refund 2, ModelCall model 3"#,
        r#"cancel-requested Open attempts=1 lease=none labels=[tenant=acme] replies=1 model=2 tools=1 usage=0/0/0/0 ops=[lookup_order settled starts=0 result=Some("Order 42: 15.00 EUR, paid, delivered damaged.")]"#,
        r#"cancel-requested events: ModelCall model 1, Middleware lookup_order 1, ToolCall lookup_order 1, Proposed lookup_order 1, Allowed lookup_order 1 by policy, ModelCall model 2"#,
        r#"cut-before-effect Open attempts=2 lease=fixture-writer live=false labels=[region=eu-west,tenant=globex] replies=2 model=2 tools=2 usage=0/0/0/0 ops=[lookup_order settled starts=0 result=Some("Order 42: 15.00 EUR, paid, delivered damaged."); refund Ready { start: 1 } starts=0 result=None]"#,
        r#"cut-before-effect events: ModelCall model 1, Middleware lookup_order 1, ToolCall lookup_order 1, Proposed lookup_order 1, Allowed lookup_order 1 by policy, ModelCall model 2, Middleware refund 2, ToolCall refund 2, Proposed refund 2, AwaitingApproval refund 2"#,
        r#"cut-in-effect Ambiguous(2) attempts=1 lease=fixture-writer live=false labels=[tenant=initech] replies=2 model=2 tools=2 usage=0/0/0/0 ops=[lookup_order settled starts=0 result=Some("Order 42: 15.00 EUR, paid, delivered damaged."); refund Started { start: 1 } starts=1 result=None]"#,
        r#"cut-in-effect events: ModelCall model 1, Middleware lookup_order 1, ToolCall lookup_order 1, Proposed lookup_order 1, Allowed lookup_order 1 by policy, ModelCall model 2, Middleware refund 2, ToolCall refund 2, Proposed refund 2, Allowed refund 2 by policy, EffectStarted refund 2"#,
        r#"done Finished(Completed) attempts=1 lease=none labels=[tenant=acme,tier=gold] replies=5 model=5 tools=4 usage=100/40/20/50 ops=[lookup_order settled starts=0 result=Some("Order 42: 15.00 EUR, paid, delivered damaged."); refund settled starts=1 result=Some("Refunded 1500 cents on order 42."); refund settled starts=1 result=Some("Refunded 700 cents on order 43."); send_receipt settled starts=1 result=Some("Receipt for order 42 sent.")]"#,
        r#"done events: ModelCall model 1, Middleware lookup_order 1, ToolCall lookup_order 1, Proposed lookup_order 1, Allowed lookup_order 1 by policy, ModelCall model 2, Middleware refund 2, ToolCall refund 2, Proposed refund 2, Allowed refund 2 by policy, EffectStarted refund 2, EffectRecorded refund 2, ModelCall model 3, Middleware refund 3, ToolCall refund 3, Proposed refund 3, Allowed refund 3 by policy, EffectStarted refund 3, EffectRecorded refund 3, ModelCall model 4, Middleware send_receipt 4, ToolCall send_receipt 4, Proposed send_receipt 4, Allowed send_receipt 4 by policy, EffectStarted send_receipt 4, EffectRecorded send_receipt 4, ModelCall model 5"#,
        r#"waiting AwaitingApproval(2) attempts=1 lease=none labels=[tenant=globex] replies=2 model=2 tools=2 usage=0/0/0/0 ops=[lookup_order settled starts=0 result=Some("Order 42: 15.00 EUR, paid, delivered damaged."); refund AwaitingDecision starts=0 result=None]"#,
        r#"waiting events: ModelCall model 1, Middleware lookup_order 1, ToolCall lookup_order 1, Proposed lookup_order 1, Allowed lookup_order 1 by policy, ModelCall model 2, Middleware refund 2, ToolCall refund 2, Proposed refund 2, AwaitingApproval refund 2"#,
    ]
    .map(str::to_owned)
    .to_vec()
}

fn expected_resumed() -> Vec<String> {
    [
        r#"after-effect: Completed asked=[3] refund=0 receipt=0"#,
        r#"cancel-requested: Cancelled asked=[] refund=0 receipt=0"#,
        r#"cut-before-effect: Completed asked=[3] refund=1 receipt=0"#,
        r#"cut-in-effect: Ambiguous asked=[] refund=0 receipt=0"#,
        r#"done: Journal(Finished(Completed)) asked=[] refund=0 receipt=0"#,
        r#"waiting: Completed asked=[3] refund=1 receipt=0"#,
        r#"cut-in-effect: Completed asked=[3] refund=0 receipt=0"#,
    ]
    .map(str::to_owned)
    .to_vec()
}

fn expected_after() -> Vec<String> {
    [
        r#"after-effect Finished(Completed) attempts=2 lease=none labels=[tenant=acme] replies=3 model=4 tools=2 usage=0/0/0/0 ops=[lookup_order settled starts=0 result=Some("Order 42: 15.00 EUR, paid, delivered damaged."); refund settled starts=1 result=Some("Refunded 1500 cents on order 42.")]"#,
        r#"after-effect events: ModelCall model 1, Middleware lookup_order 1, ToolCall lookup_order 1, Proposed lookup_order 1, Allowed lookup_order 1 by policy, ModelCall model 2, Middleware refund 2, ToolCall refund 2, Proposed refund 2, Allowed refund 2 by policy, EffectStarted refund 2, EffectRecorded refund 2, ModelCall model 3, Resumed run 2, ModelCall model 4"#,
        r#"cancel-requested Open attempts=2 lease=none labels=[tenant=acme] replies=1 model=2 tools=1 usage=0/0/0/0 ops=[lookup_order settled starts=0 result=Some("Order 42: 15.00 EUR, paid, delivered damaged.")]"#,
        r#"cancel-requested events: ModelCall model 1, Middleware lookup_order 1, ToolCall lookup_order 1, Proposed lookup_order 1, Allowed lookup_order 1 by policy, ModelCall model 2, Resumed run 2, Cancelled run 2 by ops-bob"#,
        r#"cut-before-effect Finished(Completed) attempts=3 lease=none labels=[region=eu-west,tenant=globex] replies=3 model=3 tools=2 usage=0/0/0/0 ops=[lookup_order settled starts=0 result=Some("Order 42: 15.00 EUR, paid, delivered damaged."); refund settled starts=1 result=Some("Refunded 1500 cents on order 42.")]"#,
        r#"cut-before-effect events: ModelCall model 1, Middleware lookup_order 1, ToolCall lookup_order 1, Proposed lookup_order 1, Allowed lookup_order 1 by policy, ModelCall model 2, Middleware refund 2, ToolCall refund 2, Proposed refund 2, AwaitingApproval refund 2, Resumed run 3, Allowed refund 2 by approver alice, EffectStarted refund 2, EffectRecorded refund 2, ModelCall model 3"#,
        r#"cut-in-effect Finished(Completed) attempts=3 lease=none labels=[tenant=initech] replies=3 model=3 tools=2 usage=0/0/0/0 ops=[lookup_order settled starts=0 result=Some("Order 42: 15.00 EUR, paid, delivered damaged."); refund settled starts=1 result=Some("Refunded 1500 cents on order 42.")]"#,
        r#"cut-in-effect events: ModelCall model 1, Middleware lookup_order 1, ToolCall lookup_order 1, Proposed lookup_order 1, Allowed lookup_order 1 by policy, ModelCall model 2, Middleware refund 2, ToolCall refund 2, Proposed refund 2, Allowed refund 2 by policy, EffectStarted refund 2, Resumed run 2, Resumed run 3, Reconciled refund 2 by ops-carol, ModelCall model 3"#,
        r#"done Finished(Completed) attempts=1 lease=none labels=[tenant=acme,tier=gold] replies=5 model=5 tools=4 usage=100/40/20/50 ops=[lookup_order settled starts=0 result=Some("Order 42: 15.00 EUR, paid, delivered damaged."); refund settled starts=1 result=Some("Refunded 1500 cents on order 42."); refund settled starts=1 result=Some("Refunded 700 cents on order 43."); send_receipt settled starts=1 result=Some("Receipt for order 42 sent.")]"#,
        r#"done events: ModelCall model 1, Middleware lookup_order 1, ToolCall lookup_order 1, Proposed lookup_order 1, Allowed lookup_order 1 by policy, ModelCall model 2, Middleware refund 2, ToolCall refund 2, Proposed refund 2, Allowed refund 2 by policy, EffectStarted refund 2, EffectRecorded refund 2, ModelCall model 3, Middleware refund 3, ToolCall refund 3, Proposed refund 3, Allowed refund 3 by policy, EffectStarted refund 3, EffectRecorded refund 3, ModelCall model 4, Middleware send_receipt 4, ToolCall send_receipt 4, Proposed send_receipt 4, Allowed send_receipt 4 by policy, EffectStarted send_receipt 4, EffectRecorded send_receipt 4, ModelCall model 5"#,
        r#"waiting Finished(Completed) attempts=2 lease=none labels=[tenant=globex] replies=3 model=3 tools=2 usage=0/0/0/0 ops=[lookup_order settled starts=0 result=Some("Order 42: 15.00 EUR, paid, delivered damaged."); refund settled starts=1 result=Some("Refunded 1500 cents on order 42.")]"#,
        r#"waiting events: ModelCall model 1, Middleware lookup_order 1, ToolCall lookup_order 1, Proposed lookup_order 1, Allowed lookup_order 1 by policy, ModelCall model 2, Middleware refund 2, ToolCall refund 2, Proposed refund 2, AwaitingApproval refund 2, Resumed run 2, Allowed refund 2 by approver alice, EffectStarted refund 2, EffectRecorded refund 2, ModelCall model 3"#,
    ]
    .map(str::to_owned)
    .to_vec()
}
