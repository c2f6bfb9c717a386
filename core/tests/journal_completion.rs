//! The completion condition of a journaled run, on the in-memory journal: it reads the logical
//! run's record, so a result replayed from an earlier attempt counts though its body never ran
//! in the attempt that ends the run; a refused, failed, denied or ambiguous call never counts;
//! a condition on host state still decides the attempt whose body ran.

#![cfg(feature = "journal")]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use loopbound::journal::{self, MemoryJournal, OperationId, Resolution, RunId, RunState};
use loopbound::scripted::{Step, sequence};
use loopbound::tool::{EffectKind, Policy};
use loopbound::transport::ModelReply;
use loopbound::{Ended, Limits, Outcome, RunError, Runner, Scope, Status, ToolBuilder, ToolContext, ToolSet};
use loopbound_test::refund::{self, EffectSink, MemorySink, RefundInput};

/// What this attempt's refund body set in host memory.
#[derive(Default)]
struct Desk {
    refunded: AtomicBool,
}

/// How the refund body behaves.
#[derive(Clone, Copy)]
enum Body {
    /// Applies the refund and answers.
    Answers,
    /// Applies the refund, then fails.
    Fails,
    /// Applies the refund, then never returns (the attempt's deadline ends it).
    Hangs,
}

fn tools(sink: &Arc<MemorySink>, policy: Policy, body: Body) -> ToolSet<Desk> {
    let applied = Arc::clone(sink);
    let refund = ToolBuilder::new("refund", refund::REFUND_CAPABILITY)
        .effect(EffectKind::Effect)
        .policy(policy)
        .build(move |input: RefundInput, call: ToolContext<Desk>| {
            applied.apply("refund", call.idempotency_key());
            call.state().refunded.store(true, Ordering::SeqCst);
            async move {
                match body {
                    Body::Answers => Ok(format!("Refunded {} cents.", input.amount_cents)),
                    Body::Fails => Err("the card was declined".to_owned()),
                    Body::Hangs => std::future::pending().await,
                }
            }
        })
        .unwrap();
    ToolSet::builder().add(&refund).build().unwrap()
}

fn scope() -> Scope<Desk> {
    let limits = Limits::default().with_deadline(Duration::from_secs(5));
    Scope::builder().grants(refund::CAPABILITIES).limits(limits).state(Desk::default()).build().unwrap()
}

fn run_id() -> RunId {
    RunId::new("refund-42").unwrap()
}

fn refund_call() -> Step {
    Step::Reply(ModelReply::call("call-b", "refund", r#"{"order":42,"amount_cents":1500}"#))
}

fn closing() -> Step {
    Step::Reply(ModelReply::text(refund::CLOSING))
}

/// One attempt with a fresh scope and model; `condition` is the completion condition.
async fn attempt(
    journal: &MemoryJournal,
    tools: &ToolSet<Desk>,
    steps: Vec<Step>,
    condition: impl FnOnce(Ended<'_, Desk>) -> bool,
) -> Result<Outcome, RunError> {
    let runtime = Runner::new(tools, sequence(steps));
    runtime.run_journaled(journal, &run_id(), &scope(), &mut refund::conversation(), condition).await
}

#[tokio::test]
async fn a_journaled_run_with_a_per_tool_limit_on_a_tool_the_set_does_not_have_is_refused_before_it_starts() {
    let journal = MemoryJournal::default();
    let sink = Arc::new(MemorySink::default());
    let tools = tools(&sink, Policy::Allow, Body::Answers);
    let model = sequence(vec![closing()]);
    let limits = Limits::default().with_tool_calls_of("refunds", 1);
    let scope =
        Scope::builder().grants(refund::CAPABILITIES).limits(limits).state(Desk::default()).build().unwrap();
    let refused = Runner::new(&tools, &model)
        .run_journaled(&journal, &run_id(), &scope, &mut refund::conversation(), refunded)
        .await;
    assert_eq!(
        refused.unwrap_err(),
        RunError::InvalidLimits(loopbound::LimitsError::UnknownTool("refunds".to_owned()))
    );
    assert_eq!(model.calls(), 0);
    assert!(
        matches!(journal::inspect(&journal, &run_id()).await, Err(journal::JournalError::UnknownRun)),
        "nothing was written"
    );
}

fn refunded(ended: Ended<'_, Desk>) -> bool {
    ended.has_succeeded("refund")
}

#[tokio::test(start_paused = true)]
async fn a_result_replayed_from_an_earlier_attempt_satisfies_the_record_condition_though_host_memory_never_saw_it()
 {
    let journal = MemoryJournal::default();
    let sink = Arc::new(MemorySink::default());
    let tools = tools(&sink, Policy::Allow, Body::Answers);
    let first = attempt(&journal, &tools, vec![refund_call(), Step::Hang], refunded).await.unwrap();
    assert_eq!(
        first.status(),
        Status::DeadlineExceeded,
        "the refund's result was committed, then the attempt ended"
    );
    assert_eq!(sink.count("refund"), 1);

    let mut seen = None;
    let second = attempt(&journal, &tools, vec![refund_call(), closing()], |ended| {
        seen = Some((
            ended.state().refunded.load(Ordering::SeqCst),
            ended.succeeded().map(|(tool, text)| format!("{tool}: {text}")).collect::<Vec<_>>(),
        ));
        refunded(ended)
    })
    .await
    .unwrap();
    assert_eq!(second.status(), Status::Completed);
    assert_eq!(sink.count("refund"), 1, "the resume replayed the result; the body did not run again");
    assert_eq!(
        seen,
        Some((false, vec!["refund: Refunded 1500 cents.".to_owned()])),
        "host memory never saw the refund; the record did"
    );
}

#[tokio::test]
async fn a_call_refused_at_binding_or_failed_by_its_body_never_counts_as_succeeded() {
    let journal = MemoryJournal::default();
    let sink = Arc::new(MemorySink::default());
    let tools = tools(&sink, Policy::Allow, Body::Fails);
    let steps = vec![
        Step::Reply(ModelReply::call("call-a", "refund", r#"{"order":"forty-two"}"#)),
        refund_call(),
        closing(),
    ];
    let mut seen = None;
    let outcome = attempt(&journal, &tools, steps, |ended| {
        let results = ended.operations().map(|o| o.result().map(|r| (r.is_error(), r.text().to_owned())));
        seen = Some((ended.state().refunded.load(Ordering::SeqCst), results.collect::<Vec<_>>()));
        refunded(ended)
    })
    .await
    .unwrap();
    assert_eq!(outcome.status(), Status::Incomplete);
    assert_eq!(sink.count("refund"), 1, "only the well-formed call reached the body");
    assert_eq!(
        seen,
        Some((true, vec![Some((true, "Error: tool refund failed: the card was declined".to_owned()))])),
        "the refused call has no operation; the failed one has an error result"
    );
}

#[tokio::test]
async fn a_denied_call_never_counts_as_succeeded_and_the_condition_is_not_asked() {
    let journal = MemoryJournal::default();
    let sink = Arc::new(MemorySink::default());
    let tools = tools(&sink, Policy::Ask, Body::Answers);
    let asked = AtomicU32::new(0);
    let condition = |ended: Ended<'_, Desk>| {
        asked.fetch_add(1, Ordering::SeqCst);
        refunded(ended)
    };
    let first = attempt(&journal, &tools, vec![refund_call(), closing()], condition).await.unwrap();
    assert_eq!(first.status(), Status::AwaitingApproval);
    journal::deny(&journal, first.pending().unwrap(), "alice").await.unwrap();
    let second = attempt(&journal, &tools, vec![refund_call(), closing()], condition).await.unwrap();
    assert_eq!(second.status(), Status::Denied);
    assert_eq!((asked.load(Ordering::SeqCst), sink.count("refund")), (0, 0));

    let record = journal::inspect(&journal, &run_id()).await.unwrap();
    let desk = Desk::default();
    let ended = Ended::new(&desk, &record);
    assert_eq!((ended.operations().count(), ended.has_succeeded("refund")), (1, false));
}

#[tokio::test(start_paused = true)]
async fn an_ambiguous_effect_counts_only_once_the_host_reconciles_it_as_run() {
    let journal = MemoryJournal::default();
    let sink = Arc::new(MemorySink::default());
    let hanging = tools(&sink, Policy::Allow, Body::Hangs);
    let first = attempt(&journal, &hanging, vec![refund_call(), closing()], refunded).await.unwrap();
    assert_eq!(first.status(), Status::DeadlineExceeded);
    let second = attempt(&journal, &hanging, vec![refund_call(), closing()], refunded).await.unwrap();
    assert_eq!(second.status(), Status::Ambiguous);
    let desk = Desk::default();
    let record = journal::inspect(&journal, &run_id()).await.unwrap();
    assert_eq!(record.state(), RunState::Ambiguous(1));
    assert!(!Ended::new(&desk, &record).has_succeeded("refund"), "started, no result: not a success");

    let operation = OperationId::parse("refund-42/op/1").unwrap();
    let ran = Resolution::Ran { result: "Refunded 1500 cents (checked by ops).".to_owned() };
    journal::reconcile(&journal, &operation, ran, "ops").await.unwrap();
    let record = journal::inspect(&journal, &run_id()).await.unwrap();
    assert!(Ended::new(&desk, &record).has_succeeded("refund"), "reconciled as run");

    let answering = tools(&sink, Policy::Allow, Body::Answers);
    let third = attempt(&journal, &answering, vec![refund_call(), closing()], refunded).await.unwrap();
    assert_eq!(third.status(), Status::Completed);
    assert_eq!(sink.count("refund"), 1, "the body ran once, in the first attempt");
}

#[tokio::test(start_paused = true)]
async fn an_ambiguous_effect_reconciled_as_not_run_does_not_count_until_it_runs_again() {
    let journal = MemoryJournal::default();
    let sink = Arc::new(MemorySink::default());
    let hanging = tools(&sink, Policy::Allow, Body::Hangs);
    assert_eq!(
        attempt(&journal, &hanging, vec![refund_call(), closing()], refunded).await.unwrap().status(),
        Status::DeadlineExceeded
    );
    let operation = OperationId::parse("refund-42/op/1").unwrap();
    journal::reconcile(&journal, &operation, Resolution::NotRun, "ops").await.unwrap();
    let desk = Desk::default();
    let record = journal::inspect(&journal, &run_id()).await.unwrap();
    assert!(!Ended::new(&desk, &record).has_succeeded("refund"));

    let answering = tools(&sink, Policy::Allow, Body::Answers);
    let outcome = attempt(&journal, &answering, vec![refund_call(), closing()], refunded).await.unwrap();
    assert_eq!(outcome.status(), Status::Completed);
    assert_eq!(sink.count("refund"), 2, "the host said the first did not happen");
}

#[tokio::test]
async fn a_condition_on_host_state_decides_the_attempt_whose_body_ran() {
    let on_state = |ended: Ended<'_, Desk>| ended.state().refunded.load(Ordering::SeqCst);
    let sink = Arc::new(MemorySink::default());
    let tools = tools(&sink, Policy::Allow, Body::Answers);
    let journal = MemoryJournal::default();
    let refunding = attempt(&journal, &tools, vec![refund_call(), closing()], on_state).await.unwrap();
    assert_eq!(refunding.status(), Status::Completed);

    let journal = MemoryJournal::default();
    let idle = attempt(&journal, &tools, vec![closing()], on_state).await.unwrap();
    assert_eq!(idle.status(), Status::Incomplete, "no body set the state");
    assert_eq!(sink.count("refund"), 1);
}
