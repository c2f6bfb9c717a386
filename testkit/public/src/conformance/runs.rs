//! Journaled runs of the refund task end to end: an approval; a second live attempt refused
//! while the first is inside its effect; attempts that die, a reconciliation after a later
//! attempt died too, and the resume that completes the run.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use loopbound::journal::backend::{Batch, Entry, Fence, ListedRow, RunRow, StoredRun};
use loopbound::journal::{self, Journal, JournalError, Resolution, RunId, RunQuery, RunState, StateFilter};
use loopbound::tool::{EffectKind, Policy};
use loopbound::{Outcome, RunError, Runner, Scope, Status, ToolBuilder, ToolContext, ToolSet};
use tokio::sync::Notify;

use super::{Backend, LONG, PAST_SHORT, SHORT, run, two};
use crate::refund::{self, EffectSink, MemorySink};

pub(crate) async fn check_all<B: Backend>(backend: &B) {
    let (a, _) = two(backend, LONG).await;
    an_approved_refund_runs_once_end_to_end(&a).await;
    let (a, b) = two(backend, LONG).await;
    a_second_live_attempt_is_refused_while_the_first_is_inside_its_effect(&a, &b).await;
    let (a, b) = two(backend, SHORT).await;
    a_run_whose_attempts_died_is_reconciled_and_completes_with_one_refund(&a, &b).await;
    let (a, b) = two(backend, SHORT).await;
    a_body_longer_than_the_lease_keeps_its_run_under_the_heartbeat(&a, &b).await;
}

/// One attempt of the refund task (short script) on `journal` with `tools`.
async fn attempt(journal: &impl Journal, tools: &ToolSet) -> Result<Outcome, RunError> {
    let scope = Scope::builder().grants(refund::CAPABILITIES).build().expect("valid limits");
    let runtime = Runner::new(tools, refund::model(refund::short_script(), |_| {}));
    runtime.run_journaled(journal, &run(), &scope, &mut refund::conversation(), |_| true).await
}

fn tools(sink: &Arc<MemorySink>, policy: Policy) -> ToolSet {
    refund::tools(Arc::clone(sink) as Arc<dyn EffectSink>, policy).set
}

/// What a gated refund body does before it applies the refund: it says it entered, then waits to
/// be let go.
struct Gate {
    entered: Notify,
    open: Notify,
}

/// The refund task's tools, whose refund body awaits `wait()` (a gate, a sleep past the lease)
/// before it applies the refund; no approval is asked.
fn waiting_tools<W, Fut>(sink: &Arc<MemorySink>, wait: W) -> ToolSet
where
    W: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let base = refund::tools(Arc::clone(sink) as Arc<dyn EffectSink>, Policy::Allow);
    let applied = Arc::clone(sink);
    let refund = ToolBuilder::new("refund", refund::REFUND_CAPABILITY)
        .effect(EffectKind::Effect)
        .build(move |input: refund::RefundInput, call: ToolContext| {
            let (applied, waited) = (Arc::clone(&applied), wait());
            let key = call.idempotency_key().map(str::to_owned);
            async move {
                waited.await;
                applied.apply("refund", key.as_deref());
                Ok::<_, String>(format!("refunded {}", input.amount_cents))
            }
        })
        .expect("refund is a valid name");
    ToolSet::builder()
        .add(&base.lookup_order)
        .add(&refund)
        .add(&base.send_receipt)
        .build()
        .expect("the three names are distinct")
}

/// The refund task's tools, whose refund body goes through `gate` before it applies the refund.
fn gated_tools(sink: &Arc<MemorySink>, gate: &Arc<Gate>) -> ToolSet {
    let gate = Arc::clone(gate);
    waiting_tools(sink, move || {
        let gate = Arc::clone(&gate);
        async move {
            gate.entered.notify_one();
            gate.open.notified().await;
        }
    })
}

async fn a_body_longer_than_the_lease_keeps_its_run_under_the_heartbeat<J: Journal>(a: &J, b: &J) {
    let sink = Arc::new(MemorySink::default());
    let slow = waiting_tools(&sink, || tokio::time::sleep(SHORT * 3));
    let meanwhile = async {
        // Past the lease's first expiry, while the body still runs.
        tokio::time::sleep(SHORT * 2).await;
        let refused = attempt(b, &tools(&sink, Policy::Allow)).await;
        assert!(
            matches!(&refused, Err(RunError::Journal(JournalError::LeaseHeld { holder, .. })) if holder == "attempt-a"),
            "the heartbeat keeps the run past its lease: {refused:?}"
        );
    };
    let (first, ()) = tokio::join!(attempt(a, &slow), meanwhile);
    assert_eq!(first.map(|outcome| outcome.status()), Ok(Status::Completed), "the long body's run completes");
    assert_eq!(sink.count("refund"), 1);
}

async fn an_approved_refund_runs_once_end_to_end(journal: &impl Journal) {
    let sink = Arc::new(MemorySink::default());
    let first = attempt(journal, &tools(&sink, Policy::Ask)).await.expect("a first attempt");
    assert_eq!(first.status(), Status::AwaitingApproval);
    let record = journal::inspect(journal, &run()).await.expect("inspect");
    assert_eq!(record.state(), RunState::AwaitingApproval(2));
    assert_eq!((record.epoch(), record.lease()), (1, None), "the stopped attempt released its lease");
    let pending = first.pending().expect("the outcome hands out the pending proposal");
    assert_eq!(record.pending(), Some(pending), "the same as the journal's");
    assert_eq!(first.operation(), Some("conformance-1/op/2"));
    assert_eq!((pending.operation().to_string().as_str(), pending.tool()), ("conformance-1/op/2", "refund"));
    let awaiting = first.events().last().map(ToString::to_string);
    assert_eq!(awaiting.as_deref(), Some("AwaitingApproval refund 2 conformance-1/op/2"), "its audit event");
    journal::approve(journal, pending, "alice").await.expect("approve");
    let approved = journal::inspect(journal, &run()).await.expect("inspect");
    assert_eq!(approved.state(), RunState::Open, "an approval makes the run ready to resume");
    let second = attempt(journal, &tools(&sink, Policy::Ask)).await.expect("the resumed attempt");
    assert_eq!(second.status(), Status::Completed, "the approved run completes");
    assert_eq!(sink.count("refund"), 1, "the refund ran exactly once");
    let record = journal::inspect(journal, &run()).await.expect("inspect");
    assert_eq!(record.state(), RunState::Finished(Status::Completed));
    assert_eq!((record.epoch(), record.attempts(), record.lease()), (2, 2, None));
    let logged: Vec<String> = record.events().iter().map(ToString::to_string).collect();
    let outcome: Vec<String> = second.events().iter().map(ToString::to_string).collect();
    assert_eq!(logged, outcome, "the journal holds the outcome's audit log");
}

async fn a_second_live_attempt_is_refused_while_the_first_is_inside_its_effect(
    a: &impl Journal,
    b: &impl Journal,
) {
    let sink = Arc::new(MemorySink::default());
    let gate = Arc::new(Gate { entered: Notify::new(), open: Notify::new() });
    let gated = gated_tools(&sink, &gate);
    let inside = async {
        gate.entered.notified().await;
        let before = b.load(&run()).await.expect("load").expect("the run exists");
        assert_eq!(before.run.state, RunState::Ambiguous(2), "the effect's start is recorded first");
        let started: Vec<(u32, u32)> = before.started.iter().map(|row| (row.ordinal, row.start)).collect();
        assert_eq!(started, [(2, 1)], "the effect's start row is written before its body runs");
        let refused = attempt(b, &tools(&sink, Policy::Allow)).await;
        assert!(
            matches!(&refused, Err(RunError::Journal(JournalError::LeaseHeld { holder, .. })) if holder == "attempt-a"),
            "a second live attempt is refused: {refused:?}"
        );
        let operation = run().operation(2);
        let reconciled = journal::reconcile(b, &operation, Resolution::NotRun, "ops").await;
        assert!(
            matches!(reconciled, Err(JournalError::LeaseHeld { .. })),
            "no reconciliation while it runs: {reconciled:?}"
        );
        let after = b.load(&run()).await.expect("load").expect("the run exists");
        assert_eq!(after, with_lease_of(&before, &after), "the refusals wrote nothing");
        let running =
            journal::list(b, &RunQuery::new().state(StateFilter::Running)).await.expect("a listing");
        assert_eq!(running.runs().len(), 1, "the run is listed as running");
        let ambiguous =
            journal::list(b, &RunQuery::new().state(StateFilter::Ambiguous)).await.expect("a listing");
        assert!(ambiguous.runs().is_empty(), "and not as ambiguous while its lease is live");
        gate.open.notify_one();
    };
    let (first, ()) = tokio::join!(attempt(a, &gated), inside);
    assert_eq!(first.map(|outcome| outcome.status()), Ok(Status::Completed));
    assert_eq!(sink.count("refund"), 1, "one refund, by the first attempt");
}

/// `before` with `after`'s lease (a read computes its time left anew).
fn with_lease_of(before: &StoredRun, after: &StoredRun) -> StoredRun {
    let mut same = before.clone();
    same.lease.clone_from(&after.lease);
    assert_eq!(
        before.lease.as_ref().map(|lease| (&lease.holder, lease.until)),
        after.lease.as_ref().map(|lease| (&lease.holder, lease.until)),
        "the lease is unchanged"
    );
    same
}

/// When a wrapped journal's process dies.
#[derive(Clone, Copy)]
enum Death {
    /// Right after the commit that starts operation 2's body.
    AfterStarting,
    /// At its first commit, before it is written.
    AtFirstCommit,
}

/// A journal whose process dies: from its death on, every write fails and nothing more runs.
struct Dying<'j, J> {
    inner: &'j J,
    death: Death,
    dead: AtomicBool,
}

fn died() -> JournalError {
    JournalError::storage("the process died")
}

impl<J: Journal> Journal for Dying<'_, J> {
    fn lease(&self) -> Duration {
        self.inner.lease()
    }

    async fn acquire(&self, run: &RunId, fresh: RunRow) -> Result<StoredRun, JournalError> {
        self.inner.acquire(run, fresh).await
    }

    async fn renew(&self, run: &RunId, epoch: u64) -> Result<(), JournalError> {
        if self.dead.load(Ordering::SeqCst) {
            return Err(died());
        }
        self.inner.renew(run, epoch).await
    }

    async fn load(&self, run: &RunId) -> Result<Option<StoredRun>, JournalError> {
        self.inner.load(run).await
    }

    async fn commit(&self, run: &RunId, fence: Fence, batch: Batch) -> Result<(), JournalError> {
        if self.dead.load(Ordering::SeqCst) || matches!(self.death, Death::AtFirstCommit) {
            self.dead.store(true, Ordering::SeqCst);
            return Err(died());
        }
        let starts = batch
            .entries
            .iter()
            .any(|entry| matches!(entry, Entry::Started(started) if started.ordinal == 2));
        self.inner.commit(run, fence, batch).await?;
        if starts {
            self.dead.store(true, Ordering::SeqCst);
            return Err(died());
        }
        Ok(())
    }

    async fn list_rows(&self, query: &RunQuery) -> Result<Vec<ListedRow>, JournalError> {
        self.inner.list_rows(query).await
    }
}

async fn a_run_whose_attempts_died_is_reconciled_and_completes_with_one_refund<J: Journal>(a: &J, b: &J) {
    let sink = Arc::new(MemorySink::default());
    let dies = |journal, death| Dying { inner: journal, death, dead: AtomicBool::new(false) };
    let first = attempt(&dies(a, Death::AfterStarting), &tools(&sink, Policy::Allow)).await;
    assert_eq!(
        first.err(),
        Some(RunError::Journal(died())),
        "the first attempt died after starting the refund"
    );
    assert_eq!(sink.count("refund"), 0, "its body never ran");
    let refused = attempt(b, &tools(&sink, Policy::Allow)).await;
    assert!(
        matches!(refused, Err(RunError::Journal(JournalError::LeaseHeld { .. }))),
        "its lease holds the run until it expires: {refused:?}"
    );
    let operation = run().operation(2);
    let early = journal::reconcile(b, &operation, Resolution::NotRun, "ops").await;
    assert!(matches!(early, Err(JournalError::LeaseHeld { .. })), "nor is it reconciled before: {early:?}");

    tokio::time::sleep(PAST_SHORT).await;
    let second = attempt(&dies(b, Death::AtFirstCommit), &tools(&sink, Policy::Allow)).await;
    assert_eq!(second.err(), Some(RunError::Journal(died())), "the second attempt died too");
    tokio::time::sleep(PAST_SHORT).await;
    let record = journal::inspect(b, &run()).await.expect("inspect");
    assert_eq!((record.state(), record.epoch(), record.is_running()), (RunState::Ambiguous(2), 2, false));
    let listed = journal::list(b, &RunQuery::new().state(StateFilter::Ambiguous)).await.expect("a listing");
    assert_eq!(listed.runs().len(), 1, "the run is listed as ambiguous");
    journal::reconcile(b, &operation, Resolution::NotRun, "ops")
        .await
        .expect("reconciled after a later attempt died");
    assert_eq!(journal::inspect(b, &run()).await.expect("inspect").state(), RunState::Open);
    let third = attempt(b, &tools(&sink, Policy::Allow)).await.expect("the third attempt");
    assert_eq!(third.status(), Status::Completed);
    assert_eq!(sink.count("refund"), 1, "the refund ran once, in the third attempt");
    let resumed: Vec<String> = third
        .events()
        .iter()
        .map(ToString::to_string)
        .filter(|line| line.starts_with("Resumed") || line.starts_with("Reconciled"))
        .collect();
    // The second attempt committed nothing, its `Resumed` event included.
    assert_eq!(resumed, ["Resumed run 3", "Reconciled refund 2 conformance-1/op/2 by ops"]);
}
