//! A journal with a test's hook in front of it: the hook sees each call before it reaches the
//! journal, and may hold it (a store that stops answering), count it, or answer it with an
//! error instead; everything else is forwarded unchanged, the cancel watcher included.
//!
//! ```
//! use loopbound::journal::{JournalError, MemoryJournal};
//! use loopbound_test::hooked::{Call, Hook, Hooked};
//!
//! /// A disk that is full: every commit fails.
//! struct Full;
//!
//! impl Hook for Full {
//!     async fn before(&self, call: Call<'_>) -> Result<(), JournalError> {
//!         match call {
//!             Call::Commit { .. } => Err(JournalError::storage("disk full")),
//!             _ => Ok(()),
//!         }
//!     }
//! }
//!
//! let journal = Hooked::new(MemoryJournal::default(), Full);
//! # let _ = journal;
//! ```
//!
//! # Invariants
//!
//! - Every method of [`Journal`] goes through the hook, then to the wrapped journal with the
//!   same arguments; a hook's error is the call's answer, and the journal is not called.
//! - [`Journal::cancel_watch`] and [`Journal::lease`] are the wrapped journal's: a hooked
//!   journal's attempts share its watcher as the journal's own would.

use std::future::Future;
use std::time::Duration;

use loopbound::journal::backend::{Batch, CancelWatch, Fence, ListedRow, RunRow, StoredRun, UpdateRow};
use loopbound::journal::{Journal, JournalError, RunId, RunQuery};

/// A call as a hook sees it.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Call<'a> {
    /// [`Journal::acquire`].
    Acquire {
        /// The run.
        run: &'a RunId,
    },
    /// [`Journal::renew`].
    Renew {
        /// The run.
        run: &'a RunId,
        /// The attempt's epoch.
        epoch: u64,
    },
    /// [`Journal::load`].
    Load {
        /// The run.
        run: &'a RunId,
    },
    /// [`Journal::commit`].
    Commit {
        /// The run.
        run: &'a RunId,
        /// The fence.
        fence: Fence,
        /// The batch.
        batch: &'a Batch,
    },
    /// [`Journal::list_rows`].
    List,
    /// [`Journal::cancel_requested`].
    CancelRequested {
        /// The run.
        run: &'a RunId,
    },
    /// [`Journal::cancel_requests`].
    CancelRequests {
        /// The runs.
        runs: &'a [RunId],
    },
    /// [`Journal::request_cancel`].
    RequestCancel {
        /// The run.
        run: &'a RunId,
    },
}

/// What a test puts in front of a journal.
pub trait Hook: Send + Sync {
    /// Runs before `call` reaches the journal: `Ok` lets it through, an error is its answer.
    fn before(&self, call: Call<'_>) -> impl Future<Output = Result<(), JournalError>> + Send;
}

/// `inner` with `hook` in front of it.
#[derive(Debug)]
pub struct Hooked<J, H> {
    /// The journal.
    pub inner: J,
    /// The hook.
    pub hook: H,
}

impl<J, H> Hooked<J, H> {
    /// `inner` with `hook` in front of it.
    pub fn new(inner: J, hook: H) -> Self {
        Self { inner, hook }
    }
}

impl<J: Journal, H: Hook> Journal for Hooked<J, H> {
    fn lease(&self) -> Duration {
        self.inner.lease()
    }

    async fn acquire(&self, run: &RunId, fresh: RunRow) -> Result<StoredRun, JournalError> {
        self.hook.before(Call::Acquire { run }).await?;
        self.inner.acquire(run, fresh).await
    }

    async fn renew(&self, run: &RunId, epoch: u64) -> Result<(), JournalError> {
        self.hook.before(Call::Renew { run, epoch }).await?;
        self.inner.renew(run, epoch).await
    }

    async fn load(&self, run: &RunId) -> Result<Option<StoredRun>, JournalError> {
        self.hook.before(Call::Load { run }).await?;
        self.inner.load(run).await
    }

    async fn commit(&self, run: &RunId, fence: Fence, batch: Batch) -> Result<(), JournalError> {
        self.hook.before(Call::Commit { run, fence, batch: &batch }).await?;
        self.inner.commit(run, fence, batch).await
    }

    async fn list_rows(&self, query: &RunQuery) -> Result<Vec<ListedRow>, JournalError> {
        self.hook.before(Call::List).await?;
        self.inner.list_rows(query).await
    }

    async fn cancel_requested(&self, run: &RunId) -> Result<Option<String>, JournalError> {
        self.hook.before(Call::CancelRequested { run }).await?;
        self.inner.cancel_requested(run).await
    }

    async fn cancel_requests(&self, runs: &[RunId]) -> Result<Vec<RunId>, JournalError> {
        self.hook.before(Call::CancelRequests { runs }).await?;
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
        self.hook.before(Call::RequestCancel { run }).await?;
        self.inner.request_cancel(run, by).await
    }
}
