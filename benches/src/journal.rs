//! What the journal benches share: a journal that times each effect between its two commits and
//! counts the calls that reach its store, and the nearest-rank percentile of those times.
//!
//! # Invariants
//!
//! - An effect's time runs from the start of the commit that holds its `started` record to the
//!   end of the commit that holds its result, per run and operation ordinal; a result whose
//!   start was not seen (a read, or a run begun elsewhere) adds nothing.
//! - The wrapper changes nothing it forwards: same calls, same order, same errors.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use loopbound::journal::backend::{
    Batch, CancelWatch, Entry, Fence, ListedRow, RunRow, StoredRun, UpdateRow,
};
use loopbound::journal::{Journal, JournalError, RunId, RunQuery};

/// A journal that times each effect from its `started` commit to its result commit.
#[derive(Debug)]
pub struct TimedJournal<J> {
    inner: J,
    started: Mutex<HashMap<(String, u32), Instant>>,
    effects: Arc<Mutex<Vec<Duration>>>,
    calls: AtomicU64,
}

impl<J> TimedJournal<J> {
    /// Times `inner`'s effects into a list of its own.
    pub fn new(inner: J) -> Self {
        Self::sharing(inner, Arc::default())
    }

    /// Times `inner`'s effects into `effects`, which other journals may share.
    pub fn sharing(inner: J, effects: Arc<Mutex<Vec<Duration>>>) -> Self {
        Self { inner, started: Mutex::new(HashMap::new()), effects, calls: AtomicU64::new(0) }
    }

    /// How many calls reached the store so far: every acquisition, commit, renewal, read and
    /// cancel query (one for many runs counts one).
    pub fn store_calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    fn count(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }

    /// The journal underneath.
    pub fn inner(&self) -> &J {
        &self.inner
    }

    /// The effect times recorded so far, in the order their results were committed.
    pub fn effects(&self) -> Vec<Duration> {
        self.effects.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl<J: Journal> Journal for TimedJournal<J> {
    fn lease(&self) -> Duration {
        self.inner.lease()
    }

    async fn renew(&self, run: &RunId, epoch: u64) -> Result<(), JournalError> {
        self.count();
        self.inner.renew(run, epoch).await
    }

    async fn list_rows(&self, query: &RunQuery) -> Result<Vec<ListedRow>, JournalError> {
        self.count();
        self.inner.list_rows(query).await
    }

    async fn acquire(&self, run: &RunId, fresh: RunRow) -> Result<StoredRun, JournalError> {
        self.count();
        self.inner.acquire(run, fresh).await
    }

    async fn load(&self, run: &RunId) -> Result<Option<StoredRun>, JournalError> {
        self.count();
        self.inner.load(run).await
    }

    async fn cancel_requested(&self, run: &RunId) -> Result<Option<String>, JournalError> {
        self.count();
        self.inner.cancel_requested(run).await
    }

    async fn cancel_requests(&self, runs: &[RunId]) -> Result<Vec<RunId>, JournalError> {
        self.count();
        self.inner.cancel_requests(runs).await
    }

    fn cancel_watch(&self) -> Option<&CancelWatch> {
        self.inner.cancel_watch()
    }

    async fn updates(&self, run: &RunId, after: u64, limit: usize) -> Result<Vec<UpdateRow>, JournalError> {
        self.inner.updates(run, after, limit).await
    }

    fn live_streams(&self) -> Option<&loopbound::journal::backend::LiveStreams> {
        self.inner.live_streams()
    }

    async fn request_cancel(&self, run: &RunId, by: &str) -> Result<(), JournalError> {
        self.count();
        self.inner.request_cancel(run, by).await
    }

    async fn commit(&self, run: &RunId, fence: Fence, batch: Batch) -> Result<(), JournalError> {
        self.count();
        let at = Instant::now();
        let starts: Vec<u32> = batch
            .entries
            .iter()
            .filter_map(|e| if let Entry::Started(s) = e { Some(s.ordinal) } else { None })
            .collect();
        let results: Vec<u32> = batch
            .entries
            .iter()
            .filter_map(|e| if let Entry::Call(c) = e { c.operation } else { None })
            .collect();
        self.inner.commit(run, fence, batch).await?;
        let done = Instant::now();
        let mut started = self.started.lock().unwrap_or_else(PoisonError::into_inner);
        for ordinal in starts {
            started.insert((run.as_str().to_owned(), ordinal), at);
        }
        for ordinal in results {
            if let Some(at) = started.remove(&(run.as_str().to_owned(), ordinal)) {
                self.effects.lock().unwrap_or_else(PoisonError::into_inner).push(done - at);
            }
        }
        Ok(())
    }
}

/// The nearest-rank percentile `per_mille` / 1000 of `sorted` (ascending, not empty).
///
/// # Panics
///
/// If `sorted` is empty.
#[must_use]
pub fn percentile(sorted: &[Duration], per_mille: usize) -> Duration {
    let rank = (sorted.len() * per_mille).div_ceil(1000).max(1) - 1;
    sorted[rank.min(sorted.len() - 1)]
}
