//! Mutation tests of the journal conformance suite (`loopbound_test::conformance`): journals that
//! each break exactly one rule a durable journal must keep, built on the memory journal, and the
//! suite run on each. The suite must fail on every one of them, with a message naming the rule;
//! a mutant it passed would be a store it certifies wrongly.
//!
//! # Invariants
//!
//! - A mutant changes one operation of the memory journal and forwards every other one: the
//!   faithful wrapper (no mutation) passes the whole suite, so a failure is the mutation's.
//! - Each test asserts the panic's message (the first rule the suite found broken), not merely
//!   that it failed: a mutant caught by an unrelated check would hide a blind spot.

use std::collections::BTreeMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::FutureExt;
use loopbound::Status;
use loopbound::journal::backend::{
    Batch, CancelWatch, Entry, Fence, ListedRow, LiveStreams, RunRow, StoredRun, UpdateRow,
};
use loopbound::journal::{Journal, JournalError, MemoryJournal, RunId, RunQuery, RunState};
use loopbound_testkit::conformance::{self, Backend};

/// The one rule a mutant breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mutation {
    /// None: the memory journal as it is, through the wrapper.
    Faithful,
    /// `acquire` checks the lease, yields, then writes unconditionally: two racing attempts can
    /// both be granted one run.
    RacyAcquire,
    /// An epoch-fenced commit writes under the run's current epoch, whatever its own.
    EpochIgnored,
    /// An epoch-fenced commit of the run's epoch writes though its lease expired.
    ExpiryIgnored,
    /// `renew` answers `Ok` for the run's epoch though its lease expired or was released.
    RenewAfterExpiry,
    /// `renew` answers `Ok` for a live lease but does not extend it.
    HollowRenew,
    /// A start of an effect written twice is dropped, not refused: the second start is allowed.
    SecondStart,
    /// An attempt's start of an effect is written with its next commit, not the one that
    /// reports it.
    LateStart,
    /// `ExpectState` is not checked: a decision (an approval) lands on whatever state the run
    /// is in.
    BlindExpectedState,
    /// Every attempt's commit clears the run's cancel request, honoured or not.
    CommitClearsCancel,
    /// The many-run cancel query (the watcher's) finds no request.
    ManyCancelsMissed,
    /// Listing leaves out runs awaiting approval.
    ListingOmitsAwaiting,
    /// Listing leaves out runs finished over their cost budget.
    ListingOmitsCostBudget,
    /// A run finished over its cost budget is stored as finished incomplete.
    LossyStatus,
    /// A batch refused as a conflict keeps the entries before the conflicting one.
    TornBatch,
    /// An attempt's last commit does not release its lease.
    ReleaseIgnored,
    /// A host's write lands while an attempt holds the run.
    HostWriteWhileHeld,
    /// `renew` extends a live lease whatever the epoch asking.
    RenewIgnoresEpoch,
    /// A proposal's expiry, as a host sets it, is not written.
    ExpiryDropped,
    /// Reading a run's stream after line `n` returns line `n` again.
    StreamRepeatsLine,
    /// A new attempt of an existing run resets its state and ledger to the fresh row's.
    ResetOnReacquire,
}

/// A memory journal with one mutation.
#[derive(Clone)]
struct Mutant {
    inner: MemoryJournal,
    mutation: Mutation,
    /// `LateStart`'s starts not yet written, by run.
    deferred: Arc<Mutex<BTreeMap<RunId, Vec<Entry>>>>,
}

impl Mutant {
    async fn stored(&self, run: &RunId) -> Result<Option<StoredRun>, JournalError> {
        self.inner.load(run).await
    }

    fn take_deferred(&self, run: &RunId) -> Vec<Entry> {
        let mut deferred = self.deferred.lock().unwrap_or_else(PoisonError::into_inner);
        deferred.remove(run).unwrap_or_default()
    }

    fn defer(&self, run: &RunId, entries: Vec<Entry>) {
        let mut deferred = self.deferred.lock().unwrap_or_else(PoisonError::into_inner);
        deferred.entry(run.clone()).or_default().extend(entries);
    }

    async fn acquire_mutated(&self, run: &RunId, fresh: RunRow) -> Result<StoredRun, JournalError> {
        match self.mutation {
            Mutation::RacyAcquire => self.acquire_racily(run, fresh).await,
            Mutation::ResetOnReacquire => {
                let granted = self.inner.acquire(run, fresh.clone()).await?;
                if granted.run.epoch == 1 || granted.run.state.is_finished() {
                    return Ok(granted);
                }
                let reset = vec![Entry::State(fresh.state), Entry::Ledger(fresh.ledger)];
                self.inner.commit(run, Fence::Epoch(granted.run.epoch), Batch { entries: reset }).await?;
                self.stored(run).await?.ok_or(JournalError::UnknownRun)
            }
            _ => self.inner.acquire(run, fresh).await,
        }
    }

    /// `entries` written one commit each, up to the first refused, the lease released last.
    async fn commit_one_by_one(
        &self,
        run: &RunId,
        fence: Fence,
        entries: Vec<Entry>,
    ) -> Result<(), JournalError> {
        let (release, entries): (Vec<Entry>, Vec<Entry>) =
            entries.into_iter().partition(|entry| *entry == Entry::Release);
        for entry in entries.into_iter().chain(release) {
            self.inner.commit(run, fence, Batch { entries: vec![entry] }).await?;
        }
        Ok(())
    }

    async fn cancel_requests_mutated(&self, runs: &[RunId]) -> Result<Vec<RunId>, JournalError> {
        let requested = self.inner.cancel_requests(runs).await?;
        Ok(if self.mutation == Mutation::ManyCancelsMissed { Vec::new() } else { requested })
    }

    async fn acquire_racily(&self, run: &RunId, fresh: RunRow) -> Result<StoredRun, JournalError> {
        let stored = self.stored(run).await?;
        let free = stored.as_ref().is_none_or(|stored| {
            !stored.run.state.is_finished() && stored.lease.as_ref().is_none_or(|lease| !lease.is_live())
        });
        if !free {
            return self.inner.acquire(run, fresh).await;
        }
        // Checked, then written without the condition: another attempt may have taken the run
        // in between, and its lease is overwritten.
        tokio::task::yield_now().await;
        self.inner.expire(run);
        self.inner.acquire(run, fresh).await
    }

    async fn commit_mutated(&self, run: &RunId, fence: Fence, batch: Batch) -> Result<(), JournalError> {
        let mut entries = batch.entries;
        match (self.mutation, fence) {
            (Mutation::EpochIgnored, Fence::Epoch(_)) => {
                let epoch = self.stored(run).await?.map_or(1, |stored| stored.run.epoch);
                return self.inner.commit(run, Fence::Epoch(epoch), Batch { entries }).await;
            }
            (Mutation::ExpiryIgnored, Fence::Epoch(epoch)) => {
                let stored = self.stored(run).await?;
                let expired = stored.is_some_and(|stored| {
                    stored.run.epoch == epoch && stored.lease.as_ref().is_some_and(|lease| !lease.is_live())
                });
                let fence = if expired { Fence::Host } else { fence };
                return self.inner.commit(run, fence, Batch { entries }).await;
            }
            (Mutation::SecondStart, _) => {
                let stored = self.stored(run).await?.unwrap_or_default();
                entries.retain(|entry| !matches!(entry, Entry::Started(row) if stored.started.contains(row)));
            }
            (Mutation::LateStart, Fence::Epoch(_)) => {
                let (starts, rest): (Vec<Entry>, Vec<Entry>) =
                    entries.into_iter().partition(|entry| matches!(entry, Entry::Started(_)));
                let mut written = self.take_deferred(run);
                written.extend(rest);
                self.defer(run, starts);
                entries = written;
            }
            (Mutation::BlindExpectedState, _) => {
                entries.retain(|entry| !matches!(entry, Entry::ExpectState(_)));
            }
            (Mutation::CommitClearsCancel, Fence::Epoch(_)) if !entries.contains(&Entry::CancelHonoured) => {
                entries.push(Entry::CancelHonoured);
            }
            (Mutation::LossyStatus, _) => {
                for entry in &mut entries {
                    if *entry == Entry::State(RunState::Finished(Status::CostBudget)) {
                        *entry = Entry::State(RunState::Finished(Status::Incomplete));
                    }
                }
            }
            (Mutation::TornBatch, _) => {
                let whole = self.inner.commit(run, fence, Batch { entries: entries.clone() }).await;
                return match whole {
                    Err(JournalError::Conflict(_)) => self.commit_one_by_one(run, fence, entries).await,
                    other => other,
                };
            }
            (Mutation::ReleaseIgnored, Fence::Epoch(_)) => entries.retain(|entry| *entry != Entry::Release),
            (Mutation::HostWriteWhileHeld, Fence::Host) => {
                let stored = self.stored(run).await?;
                let held = stored
                    .as_ref()
                    .and_then(|stored| stored.lease.as_ref())
                    .is_some_and(|lease| lease.is_live());
                if let Some(stored) = stored.filter(|_| held) {
                    entries.retain(|entry| *entry != Entry::Release);
                    return self.inner.commit(run, Fence::Epoch(stored.run.epoch), Batch { entries }).await;
                }
            }
            (Mutation::ExpiryDropped, _) => entries.retain(|entry| !matches!(entry, Entry::Expiry(_))),
            _ => {}
        }
        self.inner.commit(run, fence, Batch { entries }).await
    }

    async fn renew_mutated(&self, run: &RunId, epoch: u64) -> Result<(), JournalError> {
        let stored = self.stored(run).await?;
        let ours = stored.as_ref().is_some_and(|stored| stored.run.epoch == epoch);
        let live =
            stored.as_ref().and_then(|stored| stored.lease.as_ref()).is_some_and(|lease| lease.is_live());
        match self.mutation {
            Mutation::RenewAfterExpiry if ours => Ok(()),
            Mutation::HollowRenew if ours && live => Ok(()),
            Mutation::RenewIgnoresEpoch if live => {
                let current = stored.map_or(epoch, |stored| stored.run.epoch);
                self.inner.renew(run, current).await
            }
            _ => self.inner.renew(run, epoch).await,
        }
    }

    async fn list_mutated(&self, query: &RunQuery) -> Result<Vec<ListedRow>, JournalError> {
        let mut rows = self.inner.list_rows(query).await?;
        rows.retain(|row| match self.mutation {
            Mutation::ListingOmitsAwaiting => !matches!(row.state, RunState::AwaitingApproval(_)),
            Mutation::ListingOmitsCostBudget => row.state != RunState::Finished(Status::CostBudget),
            _ => true,
        });
        Ok(rows)
    }
}

impl Journal for Mutant {
    fn lease(&self) -> Duration {
        self.inner.lease()
    }

    fn acquire(
        &self,
        run: &RunId,
        fresh: RunRow,
    ) -> impl Future<Output = Result<StoredRun, JournalError>> + Send {
        self.acquire_mutated(run, fresh)
    }

    fn renew(&self, run: &RunId, epoch: u64) -> impl Future<Output = Result<(), JournalError>> + Send {
        self.renew_mutated(run, epoch)
    }

    fn load(&self, run: &RunId) -> impl Future<Output = Result<Option<StoredRun>, JournalError>> + Send {
        self.inner.load(run)
    }

    fn commit(
        &self,
        run: &RunId,
        fence: Fence,
        batch: Batch,
    ) -> impl Future<Output = Result<(), JournalError>> + Send {
        self.commit_mutated(run, fence, batch)
    }

    fn list_rows(
        &self,
        query: &RunQuery,
    ) -> impl Future<Output = Result<Vec<ListedRow>, JournalError>> + Send {
        self.list_mutated(query)
    }

    fn cancel_requested(
        &self,
        run: &RunId,
    ) -> impl Future<Output = Result<Option<String>, JournalError>> + Send {
        self.inner.cancel_requested(run)
    }

    fn cancel_requests(
        &self,
        runs: &[RunId],
    ) -> impl Future<Output = Result<Vec<RunId>, JournalError>> + Send {
        self.cancel_requests_mutated(runs)
    }

    fn cancel_watch(&self) -> Option<&CancelWatch> {
        self.inner.cancel_watch()
    }

    fn request_cancel(&self, run: &RunId, by: &str) -> impl Future<Output = Result<(), JournalError>> + Send {
        self.inner.request_cancel(run, by)
    }

    fn updates(
        &self,
        run: &RunId,
        after: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<UpdateRow>, JournalError>> + Send {
        let after =
            if self.mutation == Mutation::StreamRepeatsLine { after.saturating_sub(1) } else { after };
        self.inner.updates(run, after, limit)
    }

    fn live_streams(&self) -> Option<&LiveStreams> {
        self.inner.live_streams()
    }
}

/// The suite's backend: fresh memory storage, journals on it with `0`'s mutation.
struct Mutated(Mutation);

impl Backend for Mutated {
    type Place = Mutant;
    type Journal = Mutant;

    async fn fresh(&self) -> Mutant {
        Mutant { inner: MemoryJournal::default(), mutation: self.0, deferred: Arc::default() }
    }

    async fn open(&self, place: &Mutant, holder: &str, lease: Duration) -> Mutant {
        let inner = place
            .inner
            .clone()
            .with_holder(holder)
            .and_then(|journal| journal.with_lease(lease))
            .expect("a valid holder and lease");
        Mutant { inner, ..place.clone() }
    }
}

/// The message the suite panicked with on `mutation`, or `None` if it passed.
async fn suite_on(mutation: Mutation) -> Option<String> {
    let outcome = AssertUnwindSafe(conformance::check_all(&Mutated(mutation))).catch_unwind().await;
    let payload = outcome.err()?;
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|text| (*text).to_owned()))
        .unwrap_or_else(|| "a panic without a message".to_owned());
    Some(message)
}

/// Asserts the suite fails on `mutation` with a message containing `rule`.
async fn caught(mutation: Mutation, rule: &str) {
    let message = suite_on(mutation).await;
    eprintln!("{mutation:?}: {message:?}");
    let message = message.unwrap_or_else(|| panic!("the suite passed a journal with {mutation:?}"));
    assert!(message.contains(rule), "{mutation:?} caught, but not by the rule {rule:?}: {message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_faithful_wrapper_passes() {
    assert_eq!(suite_on(Mutation::Faithful).await, None, "the wrapper alone breaks no rule");
}

macro_rules! mutant {
    ($name:ident, $mutation:ident, $rule:literal) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            caught(Mutation::$mutation, $rule).await;
        }
    };
}

mutant!(
    a_racy_acquire_is_caught,
    RacyAcquire,
    "one live attempt per run: 8 of 8 racing for a new run were granted it"
);
mutant!(a_commit_ignoring_its_epoch_is_caught, EpochIgnored, "the old epoch writes nothing");
mutant!(a_commit_ignoring_its_expiry_is_caught, ExpiryIgnored, "an attempt past its lease writes nothing");
mutant!(a_renewal_after_expiry_is_caught, RenewAfterExpiry, "a released lease is not renewed");
mutant!(a_hollow_renewal_is_caught, HollowRenew, "a renewal extends the holder's lease");
mutant!(a_second_start_is_caught, SecondStart, "the same start twice must be a conflict");
mutant!(a_late_start_is_caught, LateStart, "the effect's start row is written before its body runs");
mutant!(a_blind_expected_state_is_caught, BlindExpectedState, "another state is a conflict");
mutant!(
    a_commit_clearing_cancels_is_caught,
    CommitClearsCancel,
    "a commit that does not honour a cancel request keeps it"
);
mutant!(missed_cancels_among_many_are_caught, ManyCancelsMissed, "the run asked for, among many");
mutant!(
    a_listing_without_awaiting_runs_is_caught,
    ListingOmitsAwaiting,
    "runs awaiting approval are listed as such"
);
mutant!(
    a_listing_without_cost_budget_runs_is_caught,
    ListingOmitsCostBudget,
    "a run finished CostBudget is listed as such"
);
mutant!(
    a_lossy_status_is_caught,
    LossyStatus,
    "every state reads back as written\n  left: Finished(Incomplete)"
);
mutant!(a_torn_batch_is_caught, TornBatch, "nothing of a refused batch is written");
mutant!(
    an_unreleased_lease_is_caught,
    ReleaseIgnored,
    "the stopping commit released the run for another attempt"
);
mutant!(a_host_write_under_a_live_lease_is_caught, HostWriteWhileHeld, "a host write: expected LeaseHeld");
mutant!(a_renewal_by_another_epoch_is_caught, RenewIgnoresEpoch, "another epoch does not renew it");
mutant!(a_dropped_expiry_is_caught, ExpiryDropped, "asking again stores the proposal's new expiry");
mutant!(a_stream_repeating_a_line_is_caught, StreamRepeatsLine, "after line 1, one line");
mutant!(
    a_reset_on_reacquire_is_caught,
    ResetOnReacquire,
    "acquiring keeps the state, conversation, definition and labels"
);
