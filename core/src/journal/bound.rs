//! The one place where an attempt reaches its journal. An attempt (its start in
//! [`run`](super::run), its course in [`driver`](super::driver), its heartbeat in
//! [`heartbeat`](super::heartbeat)) holds its journal as a [`Store`], never as the backend
//! itself: the backend is a private field here, and every method below bounds its call.
//!
//! # Invariants
//!
//! - Every store call of an attempt that the attempt waits for (taking the run, each commit,
//!   each cancel check, the read of a recorded stream's last line) is bounded by the run's deadline and its caller's cancellation, through
//!   [`Guard::on_store`](crate::guard::Guard): it returns or is given up within
//!   [`STORE_GRACE`](crate::STORE_GRACE) of the run's stop instant, whatever the store does.
//! - A lease renewal is the one call not bounded so: it runs beside the work it protects,
//!   which is bounded itself, and is dropped with it; the heartbeat bounds it by the lease.
//! - A write that is given up may or may not have been committed. A [`Store`] that gave one
//!   up writes nothing more: its later writes are refused without reaching the backend, so
//!   nothing is built on a write whose fate is unknown, and the attempt reports its end
//!   [`Unconfirmed`](crate::EndRecord::Unconfirmed). Its lease is then left to expire.
//! - A cancel check that fails or is given up answers "no request": it changes nothing.
//! - Cancel checks are reads: a waiting attempt makes them through its handle's shared
//!   [`CancelWatch`](super::backend::CancelWatch) when the backend keeps one (one call per period for
//!   every run the handle drives, and one call for the checks before admissions that arrive
//!   together), else one per run.

use std::future::Future;
use std::time::Duration;

use super::error::JournalError;
use super::id::RunId;
use super::row::{Batch, Fence, RunRow, StoredRun};
use super::store::Journal;
use crate::guard::{Guard, Stop};

/// Why a write of an attempt did not go through.
#[derive(Debug)]
pub(crate) enum Failed {
    /// The journal refused or failed; nothing was written.
    Journal(JournalError),
    /// The run's deadline or its caller's cancellation ended the wait: the write may or may not
    /// have been committed (or an earlier one was given up, and this one was not sent).
    Unconfirmed(Stop),
}

/// An attempt's journal: the backend, reached only through bounded calls.
pub(crate) struct Store<'j, J> {
    journal: &'j J,
    /// The stop that ended the wait for a write that was given up, once one was.
    unconfirmed: Option<Stop>,
}

impl<'j, J: Journal> Store<'j, J> {
    pub(crate) fn new(journal: &'j J) -> Self {
        Self { journal, unconfirmed: None }
    }

    /// How long the backend's grants, commits and renewals hold the run.
    pub(crate) fn lease(&self) -> Duration {
        self.journal.lease()
    }

    /// Whether a write of this attempt was given up unconfirmed.
    pub(crate) fn is_unconfirmed(&self) -> bool {
        self.unconfirmed.is_some()
    }

    /// Takes `run` for a new attempt ([`Journal::acquire`]), bounded.
    pub(crate) async fn acquire(
        &mut self,
        guard: &Guard,
        run: &RunId,
        fresh: RunRow,
    ) -> Result<StoredRun, Failed> {
        let acquired = self.write(guard, |journal| journal.acquire(run, fresh)).await?;
        acquired.map_err(Failed::Journal)
    }

    /// Commits `batch` under `fence` ([`Journal::commit`]), bounded.
    pub(crate) async fn commit(
        &mut self,
        guard: &Guard,
        run: &RunId,
        fence: Fence,
        batch: Batch,
    ) -> Result<(), Failed> {
        let committed = self.write(guard, |journal| journal.commit(run, fence, batch)).await?;
        committed.map_err(Failed::Journal)
    }

    /// Who asked to cancel `run`, if someone did ([`Journal::cancel_requested`]), bounded; a
    /// check that fails or is given up answers no one.
    pub(crate) async fn cancel_requested(&self, guard: &Guard, run: &RunId) -> Option<String> {
        self.canceller().cancel_requested(guard, run).await
    }

    /// Whether someone asked to cancel `run` ([`Canceller::is_requested`]): the check before
    /// each admission.
    pub(crate) async fn is_requested(&self, guard: &Guard, run: &RunId) -> bool {
        self.canceller().is_requested(guard, run).await
    }

    /// The line numbered `number` of `run`'s recorded stream ([`Journal::updates`]), bounded;
    /// `None` when there is none, or it cannot be read in time: a read the attempt can do
    /// without (it then assumes the worst of the run's last attempt).
    pub(crate) async fn line(&self, guard: &Guard, run: &RunId, number: u64) -> Option<String> {
        let after = number.checked_sub(1)?;
        match guard.on_store(self.journal.updates(run, after, 1)).await {
            Ok(Ok(mut rows)) => rows.pop().filter(|row| row.seq == number).map(|row| row.line),
            _ => None,
        }
    }

    /// A handle for asking about cancel requests beside the attempt's course.
    pub(crate) fn canceller(&self) -> Canceller<'j, J> {
        Canceller { journal: self.journal }
    }

    /// One renewal of the lease of `run`'s attempt `epoch` ([`Journal::renew`]), for the
    /// heartbeat, which runs it beside the work and bounds it by the lease.
    pub(crate) fn renewal(
        &self,
        run: &RunId,
        epoch: u64,
    ) -> impl Future<Output = Result<(), JournalError>> + Send + 'j {
        let (journal, run) = (self.journal, run.clone());
        async move { journal.renew(&run, epoch).await }
    }

    /// Runs one write, bounded; refuses it unsent once a write was given up.
    async fn write<F: Future>(
        &mut self,
        guard: &Guard,
        write: impl FnOnce(&'j J) -> F,
    ) -> Result<F::Output, Failed> {
        if let Some(stop) = self.unconfirmed {
            return Err(Failed::Unconfirmed(stop));
        }
        match guard.on_store(write(self.journal)).await {
            Ok(output) => Ok(output),
            Err(stop) => {
                self.unconfirmed = Some(stop);
                Err(Failed::Unconfirmed(stop))
            }
        }
    }
}

/// Asks an attempt's journal for cancel requests while the attempt's course runs (see
/// [`Store::cancel_requested`]): the one other way to reach the journal, reads only.
pub(crate) struct Canceller<'j, J> {
    journal: &'j J,
}

impl<J> Clone for Canceller<'_, J> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<J> Copy for Canceller<'_, J> {}

impl<'j, J: Journal> Canceller<'j, J> {
    /// Who asked to cancel `run`, if someone did; bounded as every store call is.
    pub(crate) async fn cancel_requested(&self, guard: &Guard, run: &RunId) -> Option<String> {
        guard.on_store(self.journal.cancel_requested(run)).await.ok()?.ok()?
    }

    /// Whether someone asked to cancel `run`, bounded as every store call is: through the
    /// handle's shared watcher when the backend keeps one (the checks of the handle's attempts
    /// that arrive together share one call), else one call of its own. A check that fails or
    /// is given up answers `false`.
    pub(crate) async fn is_requested(&self, guard: &Guard, run: &RunId) -> bool {
        let Some(watch) = self.watch() else {
            return self.cancel_requested(guard, run).await.is_some();
        };
        let journal = self.journal;
        let ask = |runs: Vec<RunId>| async move { journal.cancel_requests(&runs).await.ok() };
        guard.on_store(watch.check(run, ask)).await.unwrap_or(false)
    }

    /// Which of `runs` someone asked to cancel, in one call, bounded as every store call is;
    /// `None` when the store could not tell.
    pub(crate) async fn cancel_requests(&self, guard: &Guard, runs: &[RunId]) -> Option<Vec<RunId>> {
        guard.on_store(self.journal.cancel_requests(runs)).await.ok()?.ok()
    }

    /// The handle's shared watcher of cancel requests, if its backend keeps one.
    pub(crate) fn watch(self) -> Option<&'j super::backend::CancelWatch> {
        self.journal.cancel_watch()
    }
}
