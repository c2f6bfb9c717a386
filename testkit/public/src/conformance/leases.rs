//! Leases: one live attempt per run, one grant of many acquisitions racing for a new or a
//! released run; taken over once released or expired, or at once when its holder is a dead
//! process of this machine (one grant of two racing for it); kept by renewals and by commits,
//! each on its own; an expired attempt fenced out; host writes only while no lease is live.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use loopbound::journal::backend::{Entry, Fence, LabelRow, RunRow, StoredRun};
use loopbound::journal::{self, Journal, JournalError, RunId, RunState};
use tokio::sync::Barrier;

use super::rows::{event, reply};
use super::{Backend, LONG, PAST_SHORT, SHORT, batch, ending, fresh_row, pair, run, run_named, two};

pub(crate) async fn check_all<B: Backend>(backend: &B) {
    let (a, _) = two(backend, LONG).await;
    a_new_runs_grant_returns_the_run_as_it_is_stored(&a).await;
    let (a, b) = two(backend, LONG).await;
    a_live_lease_is_refused_to_every_other_attempt_and_nothing_is_written(&a, &b).await;
    let (a, b) = two(backend, LONG).await;
    a_released_run_is_taken_at_once_and_the_old_attempt_is_fenced_out(&a, &b).await;
    // The taker's lease is long: its refusal of the old holder must not race its expiry.
    let (a, b) = pair(backend, SHORT, LONG).await;
    an_expired_lease_is_lost_by_its_holder_and_taken_over(&a, &b).await;
    let (a, b) = two(backend, SHORT).await;
    renewals_and_commits_keep_a_lease_past_its_first_expiry(&a, &b).await;
    let (a, b) = two(backend, LONG).await;
    a_host_write_waits_until_no_lease_is_live(&a, &b).await;
    racing_acquisitions_of_a_free_run_grant_it_once(backend).await;
    a_dead_process_holders_lease_is_taken_over_at_once_by_one_of_two(backend).await;
    holders_alive_or_not_judged_are_waited_out(backend).await;
}

/// A holder in this process's form for a process of this machine that no longer exists: this
/// process's pid under an earlier start (a pid reused since), or, where this process has no
/// such form (not Linux), `None`.
#[must_use]
pub(crate) fn dead_process_holder() -> Option<String> {
    let holder = journal::backend::process_holder();
    let mut parts = holder.rsplitn(3, '/');
    let (scope, start, rest) = (parts.next()?, parts.next()?.parse::<u64>().ok()?, parts.next()?);
    Some(format!("{rest}/{}/{scope}", start.checked_sub(1)?))
}

async fn a_dead_process_holders_lease_is_taken_over_at_once_by_one_of_two<B: Backend>(backend: &B) {
    let Some(dead) = dead_process_holder() else {
        // Not judged here (no process form): its lease is waited out like any other.
        return;
    };
    let place = backend.fresh().await;
    let crashed = backend.open(&place, &dead, LONG).await;
    let (b, c) =
        (backend.open(&place, "attempt-b", LONG).await, backend.open(&place, "attempt-c", LONG).await);
    crashed.acquire(&run(), fresh_row()).await.expect("the run is free");
    assert!(journal::backend::is_dead_holder(&dead), "{dead} is judged dead");
    let id = run();
    let (by_b, by_c) = tokio::join!(b.acquire(&id, fresh_row()), c.acquire(&id, fresh_row()));
    let (taken, refused, winner) = match (by_b, by_c) {
        (Ok(taken), refused) => (taken, refused, "attempt-b"),
        (refused, Ok(taken)) => (taken, refused, "attempt-c"),
        (b, c) => panic!("one of two takes a dead holder's run at once: {b:?} {c:?}"),
    };
    assert_eq!((taken.run.epoch, taken.run.attempts), (2, 2), "one takeover, one epoch");
    assert_eq!(taken.lease.map(|lease| lease.holder).as_deref(), Some(winner));
    assert_held(refused, winner, LONG, "the other, after the takeover");
    let late = crashed.commit(&run(), Fence::Epoch(1), batch(vec![reply(1)])).await;
    assert_eq!(late, Err(JournalError::LeaseLost), "the dead holder's epoch writes nothing");
    let stored = stored(&b).await;
    assert_eq!((stored.run.epoch, stored.replies.len()), (2, 0));
}

async fn holders_alive_or_not_judged_are_waited_out<B: Backend>(backend: &B) {
    let alive = journal::backend::process_holder();
    let host = alive.split(':').next().unwrap_or("host-a").to_owned();
    let elsewhere = dead_process_holder().map(|dead| {
        let (rest, _) = dead.rsplit_once('/').unwrap_or_default();
        format!("{rest}/{}", "0".repeat(12))
    });
    let holders = [Some(alive), Some(format!("{host}:4194305")), Some("pod-7".to_owned()), elsewhere];
    for holder in holders.into_iter().flatten() {
        let place = backend.fresh().await;
        let holding = backend.open(&place, &holder, LONG).await;
        let other = backend.open(&place, "attempt-b", LONG).await;
        holding.acquire(&run(), fresh_row()).await.expect("the run is free");
        assert!(!journal::backend::is_dead_holder(&holder), "{holder} is not judged dead");
        assert_held(other.acquire(&run(), fresh_row()).await, &holder, LONG, &holder);
        assert_eq!(stored(&other).await.run.epoch, 1, "{holder}: the refusal wrote nothing");
    }
}

/// How many attempts race for one run in [`racing_acquisitions_of_a_free_run_grant_it_once`].
const RACERS: usize = 8;

/// [`RACERS`] journals on one storage (as many processes) released together by a barrier to
/// acquire a new run, then the same run once its winner released it: each time one is granted
/// (one more epoch) and every other is refused with `LeaseHeld` naming the winner. A store whose
/// grant checks the lease, then writes without that condition, grants several.
async fn racing_acquisitions_of_a_free_run_grant_it_once<B: Backend>(backend: &B) {
    let place = backend.fresh().await;
    let mut racers = Vec::with_capacity(RACERS);
    for n in 0..RACERS {
        racers.push(backend.open(&place, &format!("racer-{n}"), LONG).await);
    }
    let id = run_named("conformance-race");
    for (round, what) in [(1_u32, "a new run"), (2, "a released run")] {
        let barrier = Arc::new(Barrier::new(RACERS));
        // Polled together in this task (a journal need not be `'static` to be spawned).
        let results = join_all(racers.iter().map(|racer| {
            let (barrier, id) = (Arc::clone(&barrier), id.clone());
            async move {
                barrier.wait().await;
                racer.acquire(&id, fresh_row()).await
            }
        }))
        .await;
        let granted: Vec<usize> =
            results.iter().enumerate().filter(|(_, result)| result.is_ok()).map(|(n, _)| n).collect();
        let [winner] = granted[..] else {
            panic!(
                "one live attempt per run: {} of {RACERS} racing for {what} were granted it",
                granted.len()
            )
        };
        let holder = format!("racer-{winner}");
        for result in results.into_iter().filter(Result::is_err) {
            assert_held(result, &holder, LONG, &format!("a racer that lost {what}"));
        }
        let stored = load(&racers[winner], &id).await;
        assert_eq!(
            (stored.run.epoch, stored.run.attempts),
            (u64::from(round), round),
            "{what}: one grant, one epoch"
        );
        assert_eq!(stored.lease.map(|lease| lease.holder), Some(holder), "{what}: the winner's lease");
        racers[winner]
            .commit(&id, Fence::Epoch(u64::from(round)), ending(RunState::Open))
            .await
            .expect("the winner stops");
    }
}

/// `run` as `journal` reads it now.
async fn load(journal: &impl Journal, run: &RunId) -> StoredRun {
    journal.load(run).await.expect("load").expect("the run exists")
}

/// The run as `journal` reads it now.
async fn stored(journal: &impl Journal) -> StoredRun {
    journal.load(&run()).await.expect("load").expect("the run exists")
}

/// Asserts `result` is `LeaseHeld` naming `holder` with at most `lease` left.
fn assert_held<T: std::fmt::Debug>(
    result: Result<T, JournalError>,
    holder: &str,
    lease: Duration,
    what: &str,
) {
    match result {
        Err(JournalError::LeaseHeld { holder: named, remaining }) => {
            assert_eq!(named, holder, "{what}: the refusal names the holder");
            assert!(!remaining.is_zero() && remaining <= lease, "{what}: {remaining:?} left of {lease:?}");
        }
        other => panic!("{what}: expected LeaseHeld, got {other:?}"),
    }
}

async fn a_new_runs_grant_returns_the_run_as_it_is_stored(a: &impl Journal) {
    let label = |key: &str, value: &str| LabelRow { key: key.to_owned(), value: value.to_owned() };
    let fresh = RunRow {
        definition: r#"{"grants":[]}"#.to_owned(),
        labels: vec![label("user", "u-7"), label("tenant", "acme")],
        ..fresh_row()
    };
    let granted = a.acquire(&run(), fresh).await.expect("the run is free");
    let read = stored(a).await;
    assert_eq!(granted.run, read.run, "the run's row and its labels, by key");
    let held = |stored: &StoredRun| stored.lease.as_ref().map(|lease| (lease.holder.clone(), lease.until));
    assert_eq!(held(&granted), held(&read), "the lease as stored");
    assert_eq!(held(&read).map(|(holder, _)| holder).as_deref(), Some("attempt-a"));
    let empty = |stored: StoredRun| StoredRun { run: RunRow::default(), lease: None, ..stored };
    assert_eq!(empty(granted), StoredRun::default(), "no rows yet");
}

async fn a_live_lease_is_refused_to_every_other_attempt_and_nothing_is_written(
    a: &impl Journal,
    b: &impl Journal,
) {
    a.acquire(&run(), fresh_row()).await.expect("the run is free");
    let before = stored(a).await;
    assert_held(b.acquire(&run(), fresh_row()).await, "attempt-a", LONG, "another process");
    assert_held(a.acquire(&run(), fresh_row()).await, "attempt-a", LONG, "the same journal value");
    let after = stored(b).await;
    assert_eq!((after.run.epoch, after.run.attempts), (1, 1), "the refusals wrote nothing");
    assert_eq!(after.run, before.run, "not a byte of the run's row");
    assert_eq!(after.lease.map(|lease| lease.holder), Some("attempt-a".to_owned()), "nor the lease");
}

async fn a_released_run_is_taken_at_once_and_the_old_attempt_is_fenced_out(
    a: &impl Journal,
    b: &impl Journal,
) {
    a.acquire(&run(), fresh_row()).await.expect("the run is free");
    a.commit(&run(), Fence::Epoch(1), ending(RunState::AwaitingApproval(3))).await.expect("a stops");
    let released = stored(b).await;
    assert_eq!(released.lease, None, "the last commit released the lease");
    assert_eq!(a.renew(&run(), 1).await, Err(JournalError::LeaseLost), "a released lease is not renewed");
    let taken = b.acquire(&run(), fresh_row()).await.expect("a released run is taken at once");
    assert_eq!((taken.run.epoch, taken.run.attempts), (2, 2));
    assert_eq!(taken.run.state, RunState::AwaitingApproval(3), "the state is the stopped attempt's");
    assert_eq!(taken.lease.map(|lease| lease.holder), Some("attempt-b".to_owned()));
    let late = a.commit(&run(), Fence::Epoch(1), batch(vec![reply(1), event("ModelCall", 1)])).await;
    assert_eq!(late, Err(JournalError::LeaseLost), "the old epoch writes nothing");
    assert!(stored(a).await.replies.is_empty(), "not a row");
    b.commit(&run(), Fence::Epoch(2), batch(vec![reply(1)])).await.expect("the new epoch writes");
}

async fn an_expired_lease_is_lost_by_its_holder_and_taken_over(a: &impl Journal, b: &impl Journal) {
    a.acquire(&run(), fresh_row()).await.expect("the run is free");
    a.commit(&run(), Fence::Epoch(1), batch(vec![Entry::Ledger("before".to_owned())]))
        .await
        .expect("a writes");
    tokio::time::sleep(PAST_SHORT).await;
    let expired = stored(b).await.lease.expect("an expired lease is still there");
    assert!(!expired.is_live(), "it is not live: {expired:?}");
    let late = a.commit(&run(), Fence::Epoch(1), batch(vec![Entry::Ledger("late".to_owned())])).await;
    assert_eq!(
        late,
        Err(JournalError::LeaseLost),
        "an attempt past its lease writes nothing, taken over or not"
    );
    assert_eq!(a.renew(&run(), 1).await, Err(JournalError::LeaseLost), "nor renews it");
    let taken = b.acquire(&run(), fresh_row()).await.expect("an expired lease is taken over");
    assert_eq!((taken.run.epoch, taken.run.attempts, taken.run.ledger.as_str()), (2, 2, "before"));
    assert_held(a.acquire(&run(), fresh_row()).await, "attempt-b", LONG, "the old holder");
}

/// Renewals alone carry the lease past its first expiry, then commits alone past the last
/// renewal's: each extends it, neither only answers that it did.
async fn renewals_and_commits_keep_a_lease_past_its_first_expiry(a: &impl Journal, b: &impl Journal) {
    a.acquire(&run(), fresh_row()).await.expect("the run is free");
    for round in 0..7 {
        tokio::time::sleep(SHORT / 3).await;
        if round < 4 {
            let renewed = a.renew(&run(), 1).await;
            assert_eq!(renewed, Ok(()), "round {round}: a renewal extends the holder's lease");
        } else {
            let committed = a.commit(&run(), Fence::Epoch(1), batch(vec![])).await;
            assert_eq!(committed, Ok(()), "round {round}: a commit extends the holder's lease");
        }
    }
    assert_held(b.acquire(&run(), fresh_row()).await, "attempt-a", SHORT, "past the first expiry");
    assert_eq!(b.renew(&run(), 2).await, Err(JournalError::LeaseLost), "another epoch does not renew it");
    a.commit(&run(), Fence::Epoch(1), batch(vec![reply(1)])).await.expect("the holder still writes");
}

async fn a_host_write_waits_until_no_lease_is_live(a: &impl Journal, b: &impl Journal) {
    a.acquire(&run(), fresh_row()).await.expect("the run is free");
    assert_held(
        b.commit(&run(), Fence::Host, batch(vec![reply(1)])).await,
        "attempt-a",
        LONG,
        "a host write",
    );
    assert!(stored(b).await.replies.is_empty(), "the refused host write wrote nothing");
    a.commit(&run(), Fence::Epoch(1), ending(RunState::Open)).await.expect("a stops");
    b.commit(&run(), Fence::Host, batch(vec![reply(1), Entry::Release])).await.expect("the host writes now");
    assert_eq!(stored(b).await.replies.len(), 1);
}
