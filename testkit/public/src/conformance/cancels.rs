//! Cancel requests: recorded without a lease, read back by any journal on the storage (one run
//! at a time, or many in one call), replaced by a later request, kept through the holder's
//! commits that do not honour it, and cleared by the attempt that honours one.

use loopbound::journal::backend::{Entry, Fence};
use loopbound::journal::{Journal, JournalError, RunId, RunState};

use super::{Backend, LONG, batch, ending, fresh_row, run, two};

pub(crate) async fn check_all<B: Backend>(backend: &B) {
    let (a, b) = two(backend, LONG).await;
    a_request_needs_no_lease_and_every_journal_reads_it_until_an_attempt_honours_it(&a, &b).await;
}

async fn a_request_needs_no_lease_and_every_journal_reads_it_until_an_attempt_honours_it(
    a: &impl Journal,
    b: &impl Journal,
) {
    assert_eq!(b.request_cancel(&run(), "ops").await, Err(JournalError::UnknownRun), "an unknown run");
    assert_eq!(b.cancel_requested(&run()).await, Ok(None), "no request for an unknown run");
    a.acquire(&run(), fresh_row()).await.expect("a new run");
    assert_eq!(a.cancel_requested(&run()).await, Ok(None), "no request yet");
    let unknown = RunId::new("nobody-runs-this").expect("a run id");
    let both = [unknown.clone(), run()];
    assert_eq!(a.cancel_requests(&both).await, Ok(Vec::new()), "no request among many runs");
    b.request_cancel(&run(), "ops").await.expect("recorded while another attempt holds the run");
    assert_eq!(a.cancel_requested(&run()).await, Ok(Some("ops".to_owned())), "the attempt reads it");
    assert_eq!(a.cancel_requests(&both).await, Ok(vec![run()]), "the run asked for, among many");
    assert_eq!(a.cancel_requests(&[]).await, Ok(Vec::new()), "no run, no request");
    assert!(a.cancel_watch().is_some(), "every backend of the suite shares one watcher per handle");
    b.request_cancel(&run(), "alice").await.expect("a second request");
    assert_eq!(a.cancel_requested(&run()).await, Ok(Some("alice".to_owned())), "the later name");
    let unrelated = batch(vec![Entry::Ledger("a step".to_owned())]);
    a.commit(&run(), Fence::Epoch(1), unrelated).await.expect("the holder commits a step");
    assert_eq!(
        b.cancel_requested(&run()).await,
        Ok(Some("alice".to_owned())),
        "a commit that does not honour a cancel request keeps it"
    );
    a.commit(&run(), Fence::Epoch(1), batch(vec![Entry::CancelHonoured])).await.expect("honoured");
    assert_eq!(b.cancel_requested(&run()).await, Ok(None), "cleared for every journal");
    assert_eq!(b.cancel_requests(&both).await, Ok(Vec::new()), "cleared among many too");
    a.commit(&run(), Fence::Epoch(1), ending(RunState::Open)).await.expect("the attempt ends");
    b.request_cancel(&run(), "ops").await.expect("recorded while no attempt runs");
    assert_eq!(b.cancel_requested(&run()).await, Ok(Some("ops".to_owned())), "kept for the next attempt");
}
