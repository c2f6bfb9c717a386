//! The journal's storage interface, which every backend implements: SQLite (`loopbound-sqlite`),
//! PostgreSQL (`loopbound-postgres`), and [`MemoryJournal`](super::MemoryJournal) for tests.
//!
//! # Invariants
//!
//! - Each operation is one transaction: [`acquire`](Journal::acquire) and
//!   [`commit`](Journal::commit) (one durable commit, or nothing written),
//!   [`renew`](Journal::renew) (one write of the lease only), [`load`](Journal::load) and
//!   [`list_rows`](Journal::list_rows) (reads).
//! - **One attempt per run at a time.** `acquire` grants a run only when it is new, its lease
//!   was released, or its lease expired (its holder died, or paused past it), by the storage's
//!   clock; it then adds one to the run's epoch and gives the lease to the new attempt for
//!   [`lease`](Journal::lease). A live lease is refused with
//!   [`LeaseHeld`](JournalError::LeaseHeld), whoever asks (another process, another task of the
//!   same process, the same journal value), and nothing is written.
//! - **A dead holder on this machine is taken over at once.** A live lease whose holder
//!   [`is_dead_holder`](super::backend::is_dead_holder) (a process of this machine's current boot and
//!   pid namespace that no longer exists) is granted as an expired one would be, in a write
//!   conditioned in the storage on the lease still being that holder's under the same epoch:
//!   of acquisitions racing to take one dead holder's run, one is granted and the others are
//!   refused with `LeaseHeld` naming it. Every other holder (another machine's, a name a host
//!   chose, the older `<host>:<pid>` form) is waited out until its lease expires.
//! - Fencing: a commit under [`Fence::Epoch`] writes only while its epoch is the run's and its
//!   lease is live, and renews the lease; otherwise it is
//!   [`LeaseLost`](JournalError::LeaseLost) and writes nothing. `renew` extends a live lease
//!   under the same conditions. An attempt whose lease expired has lost the run, whether or not
//!   another attempt took it since.
//! - A host's commit ([`Fence::Host`]) is refused with `LeaseHeld` while a lease is live.
//! - A commit whose batch holds [`Entry::Release`](super::backend::Entry::Release) is its attempt's
//!   last: the lease is released in the same transaction.
//! - `acquire` never changes the run's state, conversation, definition or labels of an
//!   existing run; a finished run ([`RunState::Finished`](super::RunState::Finished)) is
//!   returned as it is, without a write: a finished run never gets a new attempt.
//! - The futures are `Send`: a backend may run its blocking work on a blocking thread pool, and a
//!   run that holds them can be spawned.
//! - A future may be dropped at any await: an attempt gives a store call up at its deadline or
//!   its caller's cancellation (plus [`STORE_GRACE`](crate::STORE_GRACE)). Dropped, a call
//!   commits whole or not at all, as when it fails; its caller treats it as unknown. A backend
//!   should stop waiting for its storage soon after (SQLite stops waiting for a lock; a
//!   PostgreSQL transaction whose client went away is rolled back by the server).

use std::future::Future;
use std::time::Duration;

use super::error::JournalError;
use super::id::RunId;
use super::query::RunQuery;
use super::row::{Batch, Fence, ListedRow, RunRow, StoredRun, UpdateRow};

/// How long a lease holds a run unless a backend is told otherwise: 30 s.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// The longest lease a backend grants: one day.
pub const MAX_LEASE: Duration = Duration::from_hours(24);

/// `lease`, if a backend may hold runs for it: more than zero and at most [`MAX_LEASE`].
///
/// # Errors
///
/// [`JournalError::InvalidLease`] otherwise.
pub fn check_lease(lease: Duration) -> Result<Duration, JournalError> {
    if lease.is_zero() || lease > MAX_LEASE { Err(JournalError::InvalidLease) } else { Ok(lease) }
}

/// A journal backend: what a backend implements, and what a host names as the bound of the
/// functions that take a journal.
///
/// Its futures are `impl Future` in the trait, the one style of the traits a backend implements
/// here (`Journal`, [`Transport`](crate::transport::Transport), and the pool stores'
/// `PoolStore` and `PoolBackend`): a backend writes plain `async`
/// code and a call allocates nothing. Such a trait is not `dyn`-compatible; a host that holds a
/// journal chosen at run time holds `Arc<dyn` [`DynJournal`](super::DynJournal)`>`, its boxed
/// form, which implements `Journal` in turn.
pub trait Journal: Send + Sync {
    /// How long an acquisition, a renewal or a commit holds the run: an attempt that neither
    /// commits nor renews for this long loses it.
    fn lease(&self) -> Duration;

    /// Takes `run` for a new attempt, in one durable commit: creates it from `fresh` with epoch 1
    /// and one attempt if it does not exist; else, unless it is finished or its lease is live,
    /// adds one to its epoch and its attempts (its state and everything else unchanged). A live
    /// lease whose holder [`is_dead_holder`](super::backend::is_dead_holder) counts as expired, in a
    /// write conditioned on the lease still being that holder's under the same epoch. Either
    /// way the new attempt holds the lease. Returns everything stored about the run afterwards.
    ///
    /// # Errors
    ///
    /// [`LeaseHeld`](JournalError::LeaseHeld) while another attempt's lease is live and its
    /// holder not judged dead (nothing is written); storage errors.
    fn acquire(
        &self,
        run: &RunId,
        fresh: RunRow,
    ) -> impl Future<Output = Result<StoredRun, JournalError>> + Send;

    /// Extends the lease of the attempt with `epoch` by [`lease`](Self::lease) from now.
    ///
    /// # Errors
    ///
    /// [`LeaseLost`](JournalError::LeaseLost) when `epoch` is no longer the run's, or its lease
    /// was released or expired (nothing is written); storage errors.
    fn renew(&self, run: &RunId, epoch: u64) -> impl Future<Output = Result<(), JournalError>> + Send;

    /// Everything stored about `run`, or `None`.
    fn load(&self, run: &RunId) -> impl Future<Output = Result<Option<StoredRun>, JournalError>> + Send;

    /// Writes `batch` in one durable commit if `fence` holds (see [`Fence`]); a key written
    /// twice is a [`Conflict`](JournalError::Conflict). On any error nothing is written.
    fn commit(
        &self,
        run: &RunId,
        fence: Fence,
        batch: Batch,
    ) -> impl Future<Output = Result<(), JournalError>> + Send;

    /// The stored rows of the runs in `query`'s filters, after its cursor, in id order, at most
    /// its page size: what a backend implements. A host lists runs with
    /// [`journal::list`](super::list), which calls this and reads each row into a
    /// [`RunSummary`](super::RunSummary) of a [`RunPage`](super::RunPage).
    fn list_rows(
        &self,
        query: &RunQuery,
    ) -> impl Future<Output = Result<Vec<ListedRow>, JournalError>> + Send;

    /// Who asked, from any process, to cancel `run`, if a host did and no attempt honoured it
    /// yet. An attempt running the run asks before each admission it makes (each model call it
    /// sends, each tool call it admits) and every [`CANCEL_POLL`](super::CANCEL_POLL) while it
    /// waits, and ends as a caller cancellation when someone did; its last commit clears the
    /// request ([`Entry::CancelHonoured`](super::backend::Entry::CancelHonoured)). The default answers
    /// no one: a backend that records cancel requests overrides it.
    fn cancel_requested(
        &self,
        run: &RunId,
    ) -> impl Future<Output = Result<Option<String>, JournalError>> + Send {
        let _ = run;
        std::future::ready(Ok(None))
    }

    /// Which of `runs` a host asked, from any process, to cancel and no attempt honoured yet: one
    /// store call for all of them, which the attempts waiting on one handle share
    /// ([`cancel_watch`](Self::cancel_watch)). The default asks
    /// [`cancel_requested`](Self::cancel_requested) for each run in turn: a backend that keeps a
    /// watcher overrides it with one query.
    fn cancel_requests(
        &self,
        runs: &[RunId],
    ) -> impl Future<Output = Result<Vec<RunId>, JournalError>> + Send {
        async move {
            let mut requested = Vec::new();
            for run in runs {
                if self.cancel_requested(run).await?.is_some() {
                    requested.push(run.clone());
                }
            }
            Ok(requested)
        }
    }

    /// The watcher of cancel requests that this handle's attempts share while they wait, if the
    /// backend keeps one: one [`cancel_requests`](Self::cancel_requests) call per
    /// [`CANCEL_POLL`](super::CANCEL_POLL) for all of them, instead of one
    /// [`cancel_requested`](Self::cancel_requested) per run. The default keeps none: each waiting
    /// attempt then asks for its own run. A journal that wraps another forwards this and
    /// [`cancel_requests`](Self::cancel_requests), or its attempts poll one by one.
    fn cancel_watch(&self) -> Option<&super::backend::CancelWatch> {
        None
    }

    /// Records that `by` asks to cancel `run`, in one durable write that needs no lease and
    /// never waits for one: the attempt running the run (or, if none does, the next one to take
    /// it) ends at its next admission or poll. A second request replaces the first's name.
    ///
    /// # Errors
    ///
    /// [`UnknownRun`](JournalError::UnknownRun); a storage error. The default records nothing
    /// and refuses with [`CancelUnsupported`](JournalError::CancelUnsupported).
    fn request_cancel(&self, run: &RunId, by: &str) -> impl Future<Output = Result<(), JournalError>> + Send {
        let _ = (run, by);
        std::future::ready(Err(JournalError::CancelUnsupported))
    }

    /// The lines of `run`'s recorded stream after line `after` (0: from the first), in order,
    /// at most `limit` of them: what [`follow`](super::follow) reads. Each line is one
    /// [`Update`](crate::watch::Update) that an attempt of the run committed
    /// ([`Entry::Update`](super::backend::Entry::Update)); a run the journal does not know has none.
    ///
    /// # Errors
    ///
    /// A storage error. The default keeps no stream and refuses with
    /// [`StreamUnsupported`](JournalError::StreamUnsupported).
    fn updates(
        &self,
        run: &RunId,
        after: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<UpdateRow>, JournalError>> + Send {
        let _ = (run, after, limit);
        std::future::ready(Err(JournalError::StreamUnsupported))
    }

    /// The live ends of the recorded streams of the runs this handle's attempts run, if the
    /// backend keeps them: what lets [`follow`](super::follow) in this process see a step as it
    /// happens, before its attempt commits it. The default keeps none: a follower then sees
    /// lines as they are committed. A journal that wraps another forwards this.
    fn live_streams(&self) -> Option<&super::backend::LiveStreams> {
        None
    }
}

/// The trait's methods delegated to `**self`.
macro_rules! delegate {
    () => {
        fn lease(&self) -> Duration {
            (**self).lease()
        }

        fn acquire(
            &self,
            run: &RunId,
            fresh: RunRow,
        ) -> impl Future<Output = Result<StoredRun, JournalError>> + Send {
            (**self).acquire(run, fresh)
        }

        fn renew(&self, run: &RunId, epoch: u64) -> impl Future<Output = Result<(), JournalError>> + Send {
            (**self).renew(run, epoch)
        }

        fn load(&self, run: &RunId) -> impl Future<Output = Result<Option<StoredRun>, JournalError>> + Send {
            (**self).load(run)
        }

        fn commit(
            &self,
            run: &RunId,
            fence: Fence,
            batch: Batch,
        ) -> impl Future<Output = Result<(), JournalError>> + Send {
            (**self).commit(run, fence, batch)
        }

        fn list_rows(
            &self,
            query: &RunQuery,
        ) -> impl Future<Output = Result<Vec<ListedRow>, JournalError>> + Send {
            (**self).list_rows(query)
        }

        fn cancel_requested(
            &self,
            run: &RunId,
        ) -> impl Future<Output = Result<Option<String>, JournalError>> + Send {
            (**self).cancel_requested(run)
        }

        fn request_cancel(
            &self,
            run: &RunId,
            by: &str,
        ) -> impl Future<Output = Result<(), JournalError>> + Send {
            (**self).request_cancel(run, by)
        }

        fn cancel_requests(
            &self,
            runs: &[RunId],
        ) -> impl Future<Output = Result<Vec<RunId>, JournalError>> + Send {
            (**self).cancel_requests(runs)
        }

        fn cancel_watch(&self) -> Option<&super::backend::CancelWatch> {
            (**self).cancel_watch()
        }

        fn updates(
            &self,
            run: &RunId,
            after: u64,
            limit: usize,
        ) -> impl Future<Output = Result<Vec<UpdateRow>, JournalError>> + Send {
            (**self).updates(run, after, limit)
        }

        fn live_streams(&self) -> Option<&super::backend::LiveStreams> {
            (**self).live_streams()
        }
    };
}

impl<J: Journal + ?Sized> Journal for &J {
    delegate!();
}

impl<J: Journal + ?Sized> Journal for std::sync::Arc<J> {
    delegate!();
}

impl<J: Journal + ?Sized> Journal for Box<J> {
    delegate!();
}
