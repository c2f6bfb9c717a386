//! Loop control that knows progress (SPEC §25) through the runtime: repetition by result, the
//! poll limit, cycles, error streaks, the nudge, the live stream, and a journaled resume that
//! keeps what the checks remember.

use std::sync::atomic::{AtomicU32, Ordering};

#[cfg(feature = "journal")]
use loopbound::RunError;
#[cfg(feature = "journal")]
use loopbound::journal::{self, JournalError, MemoryJournal, RunId};
use loopbound::progress::Progress;
use loopbound::scripted::{Scripted, Step, sequence};
use loopbound::tool::Policy;
use loopbound::transport::{ChatRequest, ModelReply, ToolCall};
use loopbound::watch::{self, Update};
use loopbound::{Concurrency, Limits, Message, Outcome, Runner, Scope, Status, ToolBuilder, ToolSet};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, Serialize, JsonSchema)]
struct Job {
    job: i64,
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Query {
    q: String,
}

/// What the tools of one request have done.
#[derive(Default)]
struct Work {
    polls: AtomicU32,
    bodies: AtomicU32,
}

/// `job_status` answers `statuses` in turn (the last one from then on); `search` and `open`
/// always answer the same; `flaky` always fails; `confirm` waits for a decision.
fn tools(statuses: &'static [&'static str]) -> ToolSet<Work> {
    let job_status = ToolBuilder::new("job_status", "jobs.read")
        .build(move |_: Job, call: loopbound::ToolContext<Work>| async move {
            let at = call.state().polls.fetch_add(1, Ordering::SeqCst) as usize;
            Ok::<_, String>(statuses[at.min(statuses.len() - 1)].to_owned())
        })
        .unwrap();
    let [search, open] = ["search", "open"].map(|name| {
        ToolBuilder::new(name, "jobs.read")
            .build(|_: Query, call: loopbound::ToolContext<Work>| async move {
                call.state().bodies.fetch_add(1, Ordering::SeqCst);
                Ok::<_, String>("nothing new".to_owned())
            })
            .unwrap()
    });
    let flaky = ToolBuilder::new("flaky", "jobs.read")
        .build(|_: Query, call: loopbound::ToolContext<Work>| async move {
            call.state().bodies.fetch_add(1, Ordering::SeqCst);
            Err::<String, _>("upstream unavailable".to_owned())
        })
        .unwrap();
    let confirm = ToolBuilder::new("confirm", "jobs.read")
        .policy(Policy::Ask)
        .build(|_: Query, _call: loopbound::ToolContext<Work>| async move {
            Ok::<_, String>("confirmed".to_owned())
        })
        .unwrap();
    ToolSet::builder().add(&job_status).add(&search).add(&open).add(&flaky).add(&confirm).build().unwrap()
}

fn scope(progress: Progress, limits: Limits) -> Scope<Work> {
    Scope::builder()
        .grant("jobs.read")
        .limits(limits)
        .progress(progress)
        .state(Work::default())
        .build()
        .unwrap()
}

fn roomy() -> Limits {
    Limits::default().with_model_calls(20).with_tool_calls(20)
}

/// A model that polls job 1 until its last result says `done`, then answers.
fn poller() -> Scripted<impl Fn(u32, &ChatRequest<'_>) -> Step + Send + Sync> {
    Scripted::new(|n, request| {
        let done =
            matches!(request.messages.last(), Some(Message::Tool { content, .. }) if content == "done");
        Step::Reply(if done {
            ModelReply::text("Job 1 is done.")
        } else {
            ModelReply::call(format!("c{n}"), "job_status", r#"{"job":1}"#)
        })
    })
}

/// A model that calls `names` in turn, forever, with the same arguments each.
fn round(names: &'static [&'static str]) -> Scripted<impl Fn(u32, &ChatRequest<'_>) -> Step + Send + Sync> {
    Scripted::new(move |n, _| {
        let name = names[(n as usize - 1) % names.len()];
        Step::Reply(ModelReply::call(format!("c{n}"), name, r#"{"q":"x"}"#))
    })
}

fn lines(outcome: &Outcome) -> Vec<String> {
    outcome.events().iter().map(ToString::to_string).collect()
}

async fn run<T: loopbound::transport::Transport>(
    statuses: &'static [&'static str],
    model: T,
    scope: &Scope<Work>,
) -> (Outcome, Vec<Message>) {
    let tools = tools(statuses);
    let runtime = Runner::new(&tools, model);
    let mut conversation = vec![Message::user("Wait for job 1.")];
    let outcome = runtime.run(scope, &mut conversation, |_| true).await.unwrap();
    (outcome, conversation)
}

const PROGRESSING: &[&str] = &["queued", "running 10%", "running 60%", "done"];
const STUCK: &[&str] = &["running 10%"];

#[tokio::test]
async fn a_poll_judged_by_result_runs_to_its_end_where_exact_repetition_halts_it() {
    let exact = scope(Progress::exact(), roomy());
    let (outcome, _) = run(PROGRESSING, poller(), &exact).await;
    assert_eq!(outcome.status(), Status::RepeatedCall);
    assert_eq!(exact.state().polls.load(Ordering::SeqCst), 1, "the seed's rule halts the second poll");

    let spared = scope(Progress::exact().by_result("job_status", 10), roomy());
    let (outcome, _) = run(PROGRESSING, poller(), &spared).await;
    assert_eq!(outcome.status(), Status::Completed);
    assert_eq!(outcome.text(), Some("Job 1 is done."));
    assert_eq!(spared.state().polls.load(Ordering::SeqCst), 4);
    assert_eq!(spared.tool_calls(), 4);
}

#[tokio::test]
async fn a_poll_whose_result_does_not_change_halts_at_the_repetition_limit() {
    let limits = roomy().with_repetitions(2);
    let stuck = scope(Progress::exact().by_result("job_status", 10), limits);
    let (outcome, _) = run(STUCK, poller(), &stuck).await;
    assert_eq!(outcome.status(), Status::RepeatedCall);
    // The first poll is charged, the second is spared (a first result is news), the third is
    // charged (no change): the fourth meets the limit of 2.
    assert_eq!(stuck.state().polls.load(Ordering::SeqCst), 3);
    assert_eq!(lines(&outcome).last().map(String::as_str), Some("RepeatedCall job_status 2"));
}

#[tokio::test]
async fn the_poll_limit_bounds_a_poll_that_keeps_changing() {
    const COUNTING: &[&str] = &["1%", "2%", "3%", "4%", "5%", "6%"];
    let bounded = scope(Progress::exact().by_result("job_status", 3), roomy());
    let (outcome, _) = run(COUNTING, poller(), &bounded).await;
    assert_eq!(outcome.status(), Status::RepeatedCall);
    assert_eq!(bounded.state().polls.load(Ordering::SeqCst), 3);
    assert_eq!(lines(&outcome).last().map(String::as_str), Some("RepeatedCall job_status 3"));
}

#[tokio::test]
async fn an_oscillation_halts_no_progress_naming_its_tools() {
    let limits = roomy().with_repetitions(10);
    let cycling = scope(Progress::recommended(), limits.clone());
    let (outcome, _) = run(STUCK, round(&["search", "open"]), &cycling).await;
    assert_eq!(outcome.status(), Status::NoProgress);
    assert_eq!(
        cycling.state().bodies.load(Ordering::SeqCst),
        5,
        "the sixth call would close the third round"
    );
    assert_eq!(lines(&outcome).last().map(String::as_str), Some("NoProgress open 5"));
    assert_eq!(
        outcome.detail(),
        Some("no progress: the cycle search → open came round 3 times with no new result")
    );

    let exact = scope(Progress::exact(), limits.with_model_calls(30).with_tool_calls(12));
    let (outcome, _) = run(STUCK, round(&["search", "open"]), &exact).await;
    assert_eq!(outcome.status(), Status::ToolBudget, "without the check the tool budget stops it");
    assert_eq!(exact.state().bodies.load(Ordering::SeqCst), 12);
}

#[tokio::test]
async fn a_child_scope_runs_under_its_parents_policy_unless_its_builder_sets_one() {
    let policy = Progress::recommended().by_result("job_status", 10);
    let limits = roomy().with_repetitions(10);
    // The parent has room for all three children's calls, which are charged to it too.
    let roomier = Limits::default().with_model_calls(60).with_tool_calls(40);
    let parent =
        Scope::builder().grant("jobs.read").limits(roomier).progress(policy.clone()).build().unwrap();
    let child = |own: Option<Progress>| {
        let builder = parent.child().grant("jobs.read").limits(limits.clone().with_tool_calls(12));
        let builder = match own {
            Some(policy) => builder.progress(policy),
            None => builder,
        };
        builder.state(Work::default()).build().unwrap()
    };

    let inherited = child(None);
    assert_eq!(inherited.progress(), &policy);
    let (outcome, _) = run(STUCK, round(&["search", "open"]), &inherited).await;
    assert_eq!(outcome.status(), Status::NoProgress);
    assert_eq!(
        outcome.detail(),
        Some("no progress: the cycle search → open came round 3 times with no new result")
    );
    assert_eq!(inherited.state().bodies.load(Ordering::SeqCst), 5);

    let exact = child(Some(Progress::exact()));
    assert_eq!(exact.progress(), &Progress::exact());
    let (outcome, _) = run(STUCK, round(&["search", "open"]), &exact).await;
    assert_eq!(outcome.status(), Status::ToolBudget, "the child's own policy has no cycle check");
    assert_eq!(exact.state().bodies.load(Ordering::SeqCst), 12);

    let stricter = child(Some(Progress::exact().cycles(2, 2)));
    let (outcome, _) = run(STUCK, round(&["search", "open"]), &stricter).await;
    assert_eq!(outcome.status(), Status::NoProgress);
    assert_eq!(stricter.state().bodies.load(Ordering::SeqCst), 3, "the fourth call closes the second round");

    // An invalid policy on the child's builder is refused as on any scope.
    let refused = parent.child().grant("jobs.read").progress(Progress::exact().error_streak(0)).build();
    assert_eq!(
        refused.err(),
        Some(loopbound::LimitsError::Progress(loopbound::progress::ProgressError::ZeroErrorStreak))
    );
    assert_eq!(parent.stop_reason(), None, "the children's halts are their own");
}

#[tokio::test]
async fn a_nudge_answers_the_first_cycle_without_running_it_and_the_next_halts() {
    let limits = roomy().with_repetitions(10);
    let nudged = scope(Progress::recommended().nudge(true), limits);
    let (outcome, conversation) = run(STUCK, round(&["search", "open"]), &nudged).await;
    assert_eq!(outcome.status(), Status::NoProgress);
    // Five calls, the nudge in place of the sixth; this script then goes on with `search`,
    // which breaks the round, and closes a new one five calls later: the halt.
    assert_eq!(nudged.state().bodies.load(Ordering::SeqCst), 10);
    let told: Vec<&str> = conversation
        .iter()
        .filter_map(|message| match message {
            Message::Tool { content, is_error: true, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        told,
        ["Error: no progress: the calls search → open came round 3 times with no new result; this call \
          to open was not run. Change course: the next repeat ends the run."]
    );
    let events = lines(&outcome);
    assert_eq!(
        events.iter().filter(|line| line.starts_with("Nudged")).collect::<Vec<_>>(),
        ["Nudged open 1"]
    );
    assert_eq!(events.last().map(String::as_str), Some("NoProgress open 10"));
}

#[tokio::test]
async fn failing_calls_in_a_row_halt_no_progress_whatever_fails() {
    // A body's error, a call of no known tool, a call that does not bind: three in a row.
    let steps = [
        ModelReply::call("c1", "flaky", r#"{"q":"a"}"#),
        ModelReply::call("c2", "fetch", r#"{"q":"b"}"#),
        ModelReply::call("c3", "search", r#"{"query":"c"}"#),
        ModelReply::text("unreachable"),
    ];
    let model = || sequence(steps.iter().cloned().map(Step::Reply).collect());
    let streaky = scope(Progress::exact().error_streak(3), roomy());
    let (outcome, _) = run(STUCK, model(), &streaky).await;
    assert_eq!(outcome.status(), Status::NoProgress);
    assert_eq!(outcome.detail(), Some("no progress: 3 tool calls in a row failed"));
    assert_eq!(lines(&outcome).last().map(String::as_str), Some("NoProgress search 3"));

    let exact = scope(Progress::exact(), roomy());
    let (outcome, _) = run(STUCK, model(), &exact).await;
    assert_eq!(outcome.status(), Status::Completed, "the seed's rules let the model go on");
}

#[tokio::test]
async fn a_result_between_failures_ends_the_streak() {
    let steps = [
        ModelReply::call("c1", "flaky", r#"{"q":"a"}"#),
        ModelReply::call("c2", "flaky", r#"{"q":"b"}"#),
        ModelReply::call("c3", "search", r#"{"q":"c"}"#),
        ModelReply::call("c4", "flaky", r#"{"q":"d"}"#),
        ModelReply::call("c5", "flaky", r#"{"q":"e"}"#),
        ModelReply::text("Gave up."),
    ];
    let streaky = scope(Progress::exact().error_streak(3), roomy());
    let model = sequence(steps.into_iter().map(Step::Reply).collect());
    let (outcome, _) = run(STUCK, model, &streaky).await;
    assert_eq!(outcome.status(), Status::Completed);
    assert_eq!(streaky.state().bodies.load(Ordering::SeqCst), 5);
}

#[tokio::test]
async fn a_parallel_batch_decides_a_streak_as_one_after_another_would() {
    let calls = |names: &[(&str, &str)]| {
        let calls = names
            .iter()
            .enumerate()
            .map(|(at, (tool, arguments))| ToolCall::new(format!("c{at}"), *tool, *arguments));
        ModelReply::calls(calls.collect())
    };
    // Two failures; then a call that answers and two that do not bind: one after another, the
    // answer ends the streak before the binding failures are noted, so the run goes on to the
    // third reply, whose first failure makes three in a row. In a batch, the binding failures
    // are noted before the answer comes back: they must not halt the run.
    let steps = || {
        sequence(vec![
            Step::Reply(calls(&[("flaky", r#"{"q":"a"}"#), ("flaky", r#"{"q":"b"}"#)])),
            Step::Reply(calls(&[
                ("search", r#"{"q":"a"}"#),
                ("search", r#"{"query":1}"#),
                ("open", r#"{"q":2}"#),
            ])),
            Step::Reply(calls(&[
                ("flaky", r#"{"q":"c"}"#),
                ("flaky", r#"{"q":"d"}"#),
                ("flaky", r#"{"q":"e"}"#),
            ])),
            Step::Reply(ModelReply::text("unreachable")),
        ])
    };
    let mut endings = Vec::new();
    for parallel in [false, true] {
        let streaky = scope(Progress::exact().error_streak(3), roomy());
        let tools = tools(STUCK);
        let runtime = Runner::new(&tools, steps());
        let runtime = if parallel { runtime.parallel(Concurrency::new(3).unwrap()) } else { runtime };
        let outcome = runtime.run(&streaky, &mut vec![Message::user("Go.")], |_| true).await.unwrap();
        endings.push((outcome.status(), lines(&outcome), streaky.state().bodies.load(Ordering::SeqCst)));
    }
    assert_eq!(endings[0].0, Status::NoProgress);
    assert_eq!(endings[0].1.last().map(String::as_str), Some("NoProgress flaky 3"));
    assert_eq!(endings[0].2, 4, "two failures, the search, the failure that makes three in a row");
    let (status, events, bodies) = &endings[1];
    assert_eq!((*status, events.last()), (endings[0].0, endings[0].1.last()), "the same halt in a batch");
    assert_eq!(events[..7], endings[0].1[..7], "the same events up to the third reply");
    assert_eq!(*bodies, 6, "a batch admits its whole reply before its bodies run");
}

#[tokio::test]
async fn the_live_stream_shows_the_nudge_and_the_halt_as_they_are_recorded() {
    let (feed, mut updates) = watch::channel();
    let limits = roomy().with_repetitions(10);
    let watched = Scope::builder()
        .grant("jobs.read")
        .limits(limits)
        .progress(Progress::recommended().nudge(true))
        .watch(feed)
        .state(Work::default())
        .build()
        .unwrap();
    let (outcome, _) = run(STUCK, round(&["search", "open"]), &watched).await;
    let streamed: Vec<String> = std::iter::from_fn(|| updates.try_next())
        .filter_map(|update| match update {
            Update::Event(event) => Some(event.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(streamed, lines(&outcome));
    assert!(streamed.contains(&"Nudged open 1".to_owned()));
}

#[cfg(feature = "journal")]
#[tokio::test]
async fn a_journaled_resume_keeps_what_the_checks_remember() {
    let poll = || ModelReply::call("p", "job_status", r#"{"job":1}"#);
    let script = || {
        sequence(vec![
            Step::Reply(poll()),
            Step::Reply(poll()),
            Step::Reply(ModelReply::call("k", "confirm", r#"{"q":"go"}"#)),
            Step::Reply(poll()),
            Step::Reply(ModelReply::text("Job 1 is done.")),
        ])
    };
    let journal = MemoryJournal::default();
    let id = RunId::new("job-1").unwrap();
    let policy = || Progress::exact().by_result("job_status", 10);
    let attempt = |scope: Scope<Work>| {
        let tools = tools(STUCK);
        let journal = &journal;
        let id = &id;
        async move {
            let runtime = Runner::new(&tools, script());
            let mut conversation = vec![Message::user("Wait for job 1.")];
            runtime.run_journaled(journal, id, &scope, &mut conversation, |_| true).await
        }
    };
    let first = attempt(scope(policy(), roomy())).await.unwrap();
    assert_eq!(first.status(), Status::AwaitingApproval);
    let proposal = first.pending().expect("the confirmation waits").clone();
    journal::approve(&journal, &proposal, "alice").await.unwrap();

    let loosened = attempt(scope(Progress::exact().by_result("job_status", 50), roomy())).await;
    assert!(
        matches!(loosened, Err(RunError::Journal(JournalError::Widened))),
        "a resume with a higher poll limit than the run's is refused before anything runs"
    );
    // The run's definition carries the policy: a resume in any process rebuilds it.
    let rebuilt = journal::scope_of(&journal, &id).await.unwrap().state(Work::default()).build().unwrap();
    assert_eq!(rebuilt.progress(), &policy());
    let resumed = attempt(rebuilt).await.unwrap();
    assert_eq!(resumed.status(), Status::RepeatedCall, "the two unchanged polls were remembered");
    assert_eq!(lines(&resumed).last().map(String::as_str), Some("RepeatedCall job_status 1"));
    let record = journal::inspect(&journal, &id).await.unwrap();
    assert_eq!(record.tool_calls(), 3);
}
