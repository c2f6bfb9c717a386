//! The deadline bounds the store too (SPEC §24), on tokio's paused clock against a journal whose
//! calls never return from a chosen one on: the attempt ends at its deadline (or its caller's
//! cancellation) plus exactly `STORE_GRACE`, says its end is unconfirmed, and runs nothing
//! after a write it could not confirm; a renewal that never returns holds nothing up, and loses
//! the run once the lease would have expired.

#![cfg(feature = "journal")]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use loopbound::journal::{Journal, JournalError, MemoryJournal, RunId, RunState};
use loopbound::tool::Policy;
use loopbound::transport::ModelReply;
use loopbound::{
    CancellationToken, EndRecord, Limits, Outcome, RunError, Runner, STORE_GRACE, Scope, Status, ToolBuilder,
    ToolSet,
};
use loopbound_test::hooked::{Call, Hook, Hooked};
use loopbound_test::refund::{self, EffectSink, MemorySink};
use tokio::time::Instant;

/// Which of a journal's calls never return.
#[derive(Clone, Copy, Debug)]
enum Stall {
    /// Taking the run.
    Acquire,
    /// Every commit from the first (op 2's `started` record, in the short script).
    Commits,
    /// Every lease renewal.
    Renewals,
}

/// What a stalled journal's hook holds: its `stall` calls never return (a frozen server, a lock
/// never released); commits are counted.
struct Stalls {
    stall: Stall,
    commits: AtomicU32,
}

impl Hook for Stalls {
    async fn before(&self, call: Call<'_>) -> Result<(), JournalError> {
        if matches!(call, Call::Commit { .. }) {
            self.commits.fetch_add(1, Ordering::SeqCst);
        }
        let stalls = matches!(
            (self.stall, call),
            (Stall::Acquire, Call::Acquire { .. })
                | (Stall::Commits, Call::Commit { .. })
                | (Stall::Renewals, Call::Renew { .. })
        );
        if stalls {
            std::future::pending::<()>().await;
        }
        Ok(())
    }
}

/// A memory journal whose `stall` calls never return.
type Stalling = Hooked<MemoryJournal, Stalls>;

fn stalling(stall: Stall) -> Stalling {
    Hooked::new(MemoryJournal::default(), Stalls { stall, commits: AtomicU32::new(0) })
}

fn run_id() -> RunId {
    RunId::new("refund-42").unwrap()
}

/// The refund task with a refund whose body takes `body` before it applies the refund.
fn tools(sink: &Arc<MemorySink>, body: Duration) -> ToolSet {
    let applied = Arc::clone(sink);
    let refund = ToolBuilder::new("refund", refund::REFUND_CAPABILITY)
        .effect(loopbound::tool::EffectKind::Effect)
        .policy(Policy::Allow)
        .build(move |input: refund::RefundInput, call: loopbound::ToolContext| {
            let applied = Arc::clone(&applied);
            let key = call.idempotency_key().map(str::to_owned);
            async move {
                tokio::time::sleep(body).await;
                applied.apply("refund", key.as_deref());
                Ok::<_, String>(format!("Refunded {} cents.", input.amount_cents))
            }
        })
        .unwrap();
    ToolSet::builder().add(&refund).build().unwrap()
}

/// One attempt of the refund (one call, then the closing text) on `journal`, its body taking
/// `body`, under `deadline` and the caller's `token`; returns what it ended with and when.
async fn attempt(
    journal: &Stalling,
    sink: &Arc<MemorySink>,
    body: Duration,
    deadline: Duration,
    token: CancellationToken,
) -> (Result<Outcome, RunError>, Duration) {
    let tools = tools(sink, body);
    let script = vec![refund::short_script()[1].clone(), ModelReply::text(refund::CLOSING)];
    let runtime = Runner::new(&tools, refund::model(script, |_| {}));
    let scope = Scope::builder()
        .grants(refund::CAPABILITIES)
        .limits(Limits::default().with_deadline(deadline))
        .caller(token)
        .build()
        .unwrap();
    let started = Instant::now();
    let result = tokio::time::timeout(
        Duration::from_secs(86_400),
        runtime.run_journaled(journal, &run_id(), &scope, &mut refund::conversation(), |_| true),
    )
    .await
    .expect("the attempt returned: nothing it waited on held it past its bounds");
    (result, started.elapsed())
}

#[tokio::test(start_paused = true)]
async fn an_acquisition_that_never_returns_ends_the_attempt_at_its_deadline_plus_the_grace() {
    let journal = stalling(Stall::Acquire);
    let sink = Arc::new(MemorySink::default());
    let deadline = Duration::from_secs(3);
    let (result, elapsed) =
        attempt(&journal, &sink, Duration::ZERO, deadline, CancellationToken::new()).await;
    let outcome = result.unwrap();
    assert_eq!((outcome.status(), outcome.end_record()), (Status::DeadlineExceeded, EndRecord::Unconfirmed));
    assert_eq!(elapsed, deadline + STORE_GRACE);
    let lines: Vec<String> = outcome.events().iter().map(ToString::to_string).collect();
    assert_eq!(lines, ["DeadlineExceeded run 0"], "the deadline passed while the run waited on its store");
    assert_eq!((sink.count("refund"), journal.hook.commits.load(Ordering::SeqCst)), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_commit_that_never_returns_ends_the_attempt_at_its_deadline_and_nothing_runs_after_it() {
    let journal = stalling(Stall::Commits);
    let sink = Arc::new(MemorySink::default());
    let deadline = Duration::from_secs(3);
    let (result, elapsed) =
        attempt(&journal, &sink, Duration::ZERO, deadline, CancellationToken::new()).await;
    let outcome = result.unwrap();
    assert_eq!((outcome.status(), outcome.end_record()), (Status::DeadlineExceeded, EndRecord::Unconfirmed));
    assert_eq!(elapsed, deadline + STORE_GRACE);
    assert_eq!(sink.count("refund"), 0, "the body never starts before its `started` record is confirmed");
    assert_eq!(journal.hook.commits.load(Ordering::SeqCst), 1, "no write follows one that was given up");
}

#[tokio::test(start_paused = true)]
async fn a_caller_cancellation_under_a_commit_that_never_returns_ends_the_attempt_within_the_grace() {
    let journal = stalling(Stall::Commits);
    let sink = Arc::new(MemorySink::default());
    let token = CancellationToken::new();
    let cancelling = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        cancelling.cancel();
    });
    let (result, elapsed) = attempt(&journal, &sink, Duration::ZERO, Duration::from_secs(60), token).await;
    assert_eq!(result, Err(RunError::CancelledUnrecorded));
    assert_eq!(result.unwrap_err().kind(), loopbound::RunErrorKind::Cancelled);
    assert_eq!(elapsed, Duration::from_secs(1) + STORE_GRACE);
    assert_eq!(sink.count("refund"), 0);
}

#[tokio::test(start_paused = true)]
async fn a_renewal_that_never_returns_does_not_hold_the_body_up() {
    let journal = stalling(Stall::Renewals);
    let sink = Arc::new(MemorySink::default());
    // Renewals start every 10 s (a third of the 30 s lease) and never return; the body ends
    // at 25 s, before the lease would expire.
    let body = Duration::from_secs(25);
    let (result, elapsed) =
        attempt(&journal, &sink, body, Duration::from_secs(60), CancellationToken::new()).await;
    let outcome = result.unwrap();
    assert_eq!((outcome.status(), outcome.end_record()), (Status::Completed, EndRecord::Recorded));
    assert_eq!(elapsed, body);
    assert_eq!(sink.count("refund"), 1);
    let stored = journal.inner.load(&run_id()).await.unwrap().unwrap();
    assert_eq!(stored.run.state, RunState::Finished(Status::Completed), "the end was recorded");
}

#[tokio::test(start_paused = true)]
async fn a_renewal_that_never_returns_loses_the_run_when_the_lease_would_expire() {
    let journal = stalling(Stall::Renewals);
    let sink = Arc::new(MemorySink::default());
    let (result, elapsed) = attempt(
        &journal,
        &sink,
        Duration::from_secs(3600),
        Duration::from_secs(7200),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(result, Err(RunError::Journal(JournalError::LeaseLost)));
    // The lease runs from the `started` commit, which the body followed at once.
    assert_eq!(elapsed, journal.inner.lease());
    assert_eq!(sink.count("refund"), 0, "the body was dropped before it applied anything");
}

#[tokio::test]
async fn a_healthy_journals_attempt_says_its_end_was_recorded_and_serialises_it() {
    let journal = stalling(Stall::Renewals);
    let sink = Arc::new(MemorySink::default());
    let (result, _) =
        attempt(&journal, &sink, Duration::ZERO, Duration::from_secs(60), CancellationToken::new()).await;
    let outcome = result.unwrap();
    assert_eq!((outcome.status(), outcome.end_record()), (Status::Completed, EndRecord::Recorded));
    let json = serde_json::to_value(&outcome).unwrap();
    assert_eq!(json["end_record"], "recorded");
    let plain = Runner::new(&ToolSet::default(), refund::model(vec![ModelReply::text("Done.")], |_| {}));
    let scope = Scope::builder().build().unwrap();
    let unjournaled = plain.run(&scope, &mut refund::conversation(), |_| true).await.unwrap();
    assert_eq!(unjournaled.end_record(), EndRecord::NotJournaled);
    assert!(serde_json::to_value(&unjournaled).unwrap().get("end_record").is_none());
}
