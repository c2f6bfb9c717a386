//! Closing a run: a host ends a run for good with a reason; it is listed finished `Closed`, its
//! audit log names who and why, no attempt takes it again, and a proposal it waited on never
//! runs; refused while an attempt holds the run, for a finished or unknown run and for a bad
//! name or reason, writing nothing; a closing that races an approval never leaves the run open.

use std::sync::Arc;

use loopbound::journal::backend::StoredRun;
use loopbound::journal::{self, Journal, JournalError, RunId, RunQuery, RunState, StateFilter};
use loopbound::tool::Policy;
use loopbound::{Outcome, RunError, Runner, Scope, Status};

use super::{Backend, LONG, ending, fresh_row, run, run_named, two};
use crate::refund::{self, EffectSink, MemorySink};

pub(crate) async fn check_all<B: Backend>(backend: &B) {
    let (a, _) = two(backend, LONG).await;
    a_closed_run_awaiting_approval_never_runs_its_proposal(&a).await;
    let (a, b) = two(backend, LONG).await;
    closing_is_refused_while_an_attempt_holds_the_run_and_for_bad_input(&a, &b).await;
    let (a, b) = two(backend, LONG).await;
    a_closing_that_races_an_approval_leaves_the_run_closed(&a, &b).await;
}

/// One attempt of the refund task (short script) on `run`, the refund asking for approval.
async fn attempt(journal: &impl Journal, run: &RunId, sink: &Arc<MemorySink>) -> Result<Outcome, RunError> {
    let tools = refund::tools(Arc::clone(sink) as Arc<dyn EffectSink>, Policy::Ask).set;
    let scope = Scope::builder().grants(refund::CAPABILITIES).build().expect("valid limits");
    let runtime = Runner::new(&tools, refund::model(refund::short_script(), |_| {}));
    runtime.run_journaled(journal, run, &scope, &mut refund::conversation(), |_| true).await
}

const WITHDREW: &str = "the customer withdrew the request";

async fn a_closed_run_awaiting_approval_never_runs_its_proposal(journal: &impl Journal) {
    let sink = Arc::new(MemorySink::default());
    let first = attempt(journal, &run(), &sink).await.expect("a first attempt");
    assert_eq!(first.status(), Status::AwaitingApproval);
    let pending = first.pending().expect("the refund waits").clone();
    journal::close(journal, &run(), WITHDREW, "alice").await.expect("a stopped run is closed");

    let record = journal::inspect(journal, &run()).await.expect("inspect");
    assert_eq!(record.state(), RunState::Finished(Status::Closed), "the run is finished, closed");
    assert_eq!((record.epoch(), record.attempts(), record.lease()), (1, 1, None), "closing took no attempt");
    let last = record.events().last().expect("an audit log");
    assert_eq!(
        (last.to_string(), last.decided_by(), last.reason()),
        (format!("Closed run 1 by alice: {WITHDREW}"), Some("alice"), Some(WITHDREW)),
        "the log names who closed it and why"
    );
    assert_eq!(record.pending(), None, "nothing waits for a decision any more");
    let closed = journal::list(journal, &RunQuery::new().state(StateFilter::Finished(Some(Status::Closed))))
        .await
        .expect("a listing");
    let listed: Vec<(&str, RunState)> = closed.runs().iter().map(|r| (r.run().as_str(), r.state())).collect();
    assert_eq!(listed, [("conformance-1", RunState::Finished(Status::Closed))], "listed as closed");

    let before = journal.load(&run()).await.expect("load");
    assert_eq!(
        journal::approve(journal, &pending, "bob").await.err(),
        Some(JournalError::Finished(Status::Closed)),
        "its proposal is not approved"
    );
    assert_eq!(
        journal::deny(journal, &pending, "bob").await.err(),
        Some(JournalError::Finished(Status::Closed)),
        "nor denied"
    );
    let resumed = attempt(journal, &run(), &sink).await;
    assert_eq!(
        resumed.err(),
        Some(RunError::Journal(JournalError::Finished(Status::Closed))),
        "a resume is refused as for any finished run"
    );
    assert_eq!(
        journal::close(journal, &run(), WITHDREW, "alice").await,
        Err(JournalError::Finished(Status::Closed)),
        "a closed run is not closed again"
    );
    assert_eq!(journal.load(&run()).await.expect("load"), before, "the refusals wrote nothing");
    assert_eq!(sink.count("refund"), 0, "the refund never ran");
}

async fn closing_is_refused_while_an_attempt_holds_the_run_and_for_bad_input(
    a: &impl Journal,
    b: &impl Journal,
) {
    a.acquire(&run(), fresh_row()).await.expect("the run is free");
    match journal::close(b, &run(), WITHDREW, "alice").await {
        Err(JournalError::LeaseHeld { holder, remaining }) => {
            assert_eq!(holder, "attempt-a", "the refusal names the holder");
            assert!(!remaining.is_zero() && remaining <= LONG, "{remaining:?} left");
        }
        other => panic!("a held run is not closed: {other:?}"),
    }
    let long = "x".repeat(journal::MAX_REASON_LEN + 1);
    for (by, reason, refusal) in [
        ("", WITHDREW, JournalError::InvalidActor),
        ("alice", "", JournalError::InvalidReason),
        ("alice", "two\nlines", JournalError::InvalidReason),
        ("alice", long.as_str(), JournalError::InvalidReason),
    ] {
        assert_eq!(journal::close(b, &run(), reason, by).await, Err(refusal), "{by:?} {reason:?}");
    }
    let unknown = run_named("conformance-unknown");
    assert_eq!(journal::close(b, &unknown, WITHDREW, "alice").await, Err(JournalError::UnknownRun));
    let held: StoredRun = b.load(&run()).await.expect("load").expect("the run exists");
    assert_eq!((held.run.state, held.events.len()), (RunState::Open, 0), "the refusals wrote nothing");

    a.commit(&run(), loopbound::journal::backend::Fence::Epoch(1), ending(RunState::Open))
        .await
        .expect("the attempt stops");
    let longest = "y".repeat(journal::MAX_REASON_LEN);
    journal::close(b, &run(), &longest, "ops").await.expect("an idle run is closed");
    let closed = b.load(&run()).await.expect("load").expect("the run exists");
    assert_eq!(closed.run.state, RunState::Finished(Status::Closed));
    let reasons: Vec<Option<&str>> = closed.events.iter().map(|event| event.reason.as_deref()).collect();
    assert_eq!(reasons, [Some(longest.as_str())], "the longest reason is kept whole");
    assert_eq!(
        a.acquire(&run(), fresh_row()).await.map(|stored| (stored.run.epoch, stored.lease)),
        Ok((1, None)),
        "no attempt takes a closed run"
    );
}

async fn a_closing_that_races_an_approval_leaves_the_run_closed<J: Journal>(a: &J, b: &J) {
    let sink = Arc::new(MemorySink::default());
    for round in 0..5 {
        let run = run_named(&format!("closing-race-{round}"));
        let first = attempt(a, &run, &sink).await.expect("a first attempt");
        let pending = first.pending().expect("the refund waits").clone();
        let (approved, closed) =
            tokio::join!(journal::approve(a, &pending, "bob"), journal::close(b, &run, WITHDREW, "alice"));
        assert_eq!(closed, Ok(()), "round {round}: the closing wins or comes after the approval");
        match approved {
            Ok(_) | Err(JournalError::Finished(Status::Closed)) => {}
            other => panic!("round {round}: the approval lands first or is refused: {other:?}"),
        }
        let record = journal::inspect(a, &run).await.expect("inspect");
        assert_eq!(record.state(), RunState::Finished(Status::Closed), "round {round}: never reopened");
        let resumed = attempt(a, &run, &sink).await;
        assert_eq!(resumed.err(), Some(RunError::Journal(JournalError::Finished(Status::Closed))));
    }
    assert_eq!(sink.count("refund"), 0, "no refund ran");
}
