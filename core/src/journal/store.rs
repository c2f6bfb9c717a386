//! The journal's storage interface, which every backend implements: SQLite in-process
//! (`loopbound-sqlite`), PostgreSQL for many workers, and [`MemoryJournal`](super::MemoryJournal)
//! for tests.
//!
//! # Invariants
//!
//! - Three operations, each one transaction: [`acquire`](Journal::acquire) (one durable commit),
//!   [`load`](Journal::load) (a read), [`commit`](Journal::commit) (one durable commit of a whole
//!   batch, or nothing).
//! - Fencing: `acquire` bumps the run's epoch; a commit under an older epoch is refused with
//!   [`LeaseLost`](JournalError::LeaseLost) and writes nothing. The newest attempt wins.
//! - Leases: a backend shared by many workers (PostgreSQL) grants an acquisition only to a
//!   worker that may take the run (it is new, its lease expired or was released, or the worker
//!   already holds it) and refuses the others with [`LeaseHeld`](JournalError::LeaseHeld),
//!   writing nothing. A single-process backend (SQLite, memory) grants every acquisition.
//! - A commit whose batch sets the run's state ([`Entry::State`](super::Entry::State)) is its
//!   attempt's last: a backend with leases releases the run's lease in the same transaction,
//!   and that attempt's later commits are [`LeaseLost`](JournalError::LeaseLost).
//! - A finished run (state `finished:<status>`) is returned by `acquire` as it is, without a
//!   write: a finished run never gets a new attempt.
//! - The futures are `Send`: a backend may run its blocking work on a blocking thread pool, and a
//!   run that holds them can be spawned.

use std::future::Future;

use super::error::JournalError;
use super::id::RunId;
use super::row::{Batch, Fence, RunRow, StoredRun};

/// A journal backend.
pub trait Journal: Send + Sync {
    /// Takes `run` for a new attempt, in one durable commit: creates it from `fresh` with epoch 1
    /// and one attempt if it does not exist; else, unless it is finished, adds one to its epoch
    /// and its attempts and sets its state to `fresh`'s (`open`: an attempt is in flight, so no
    /// host reconciles what it may be running). Returns everything stored about it afterwards.
    /// A backend with leases refuses a run whose live lease another worker holds with
    /// [`LeaseHeld`](JournalError::LeaseHeld), and writes nothing then.
    fn acquire(
        &self,
        run: &RunId,
        fresh: RunRow,
    ) -> impl Future<Output = Result<StoredRun, JournalError>> + Send;

    /// Everything stored about `run`, or `None`.
    fn load(&self, run: &RunId) -> impl Future<Output = Result<Option<StoredRun>, JournalError>> + Send;

    /// Writes `batch` in one durable commit if `fence` holds: under [`Fence::Epoch`] the run's
    /// epoch must still be the attempt's, else [`LeaseLost`](JournalError::LeaseLost); a key
    /// written twice is a [`Conflict`](JournalError::Conflict). On any error nothing is written.
    fn commit(
        &self,
        run: &RunId,
        fence: Fence,
        batch: Batch,
    ) -> impl Future<Output = Result<(), JournalError>> + Send;

    /// Whether a host asked, from any process, to cancel `run`. An attempt running the run asks
    /// before each admission it makes (each model call it sends, each tool call it admits) and
    /// at least once a second while it waits, and ends as a caller cancellation when the answer
    /// is yes. The default answers no: a backend that records cancel requests overrides it.
    fn cancel_requested(&self, run: &RunId) -> impl Future<Output = Result<bool, JournalError>> + Send {
        let _ = run;
        std::future::ready(Ok(false))
    }
}

impl<J: Journal> Journal for &J {
    fn acquire(
        &self,
        run: &RunId,
        fresh: RunRow,
    ) -> impl Future<Output = Result<StoredRun, JournalError>> + Send {
        (**self).acquire(run, fresh)
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

    fn cancel_requested(&self, run: &RunId) -> impl Future<Output = Result<bool, JournalError>> + Send {
        (**self).cancel_requested(run)
    }
}

impl<J: Journal> Journal for std::sync::Arc<J> {
    fn acquire(
        &self,
        run: &RunId,
        fresh: RunRow,
    ) -> impl Future<Output = Result<StoredRun, JournalError>> + Send {
        (**self).acquire(run, fresh)
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

    fn cancel_requested(&self, run: &RunId) -> impl Future<Output = Result<bool, JournalError>> + Send {
        (**self).cancel_requested(run)
    }
}
