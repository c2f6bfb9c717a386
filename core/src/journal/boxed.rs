//! A journal a host can hold as `dyn`: [`DynJournal`], to pick SQLite or PostgreSQL at run
//! time and keep one `Arc<dyn DynJournal>` for every run.
//!
//! # Which style, and why
//!
//! [`Journal`], the trait a backend implements, writes its futures as `impl Future` in the
//! trait (return-position `impl Trait`): a backend writes plain `async` code, and a call through
//! a concrete journal allocates nothing, once per commit of every run. Such a trait cannot be a
//! `dyn` object. As tower keeps `Service` generic and boxes it in `BoxService`, and sqlx keeps
//! its drivers generic beside the `Any` driver, a host that wants one type for several backends
//! holds the boxed form: [`DynJournal`] is `Journal` with each future boxed, implemented for
//! every `Journal`, and `Journal` is implemented for `dyn DynJournal` (and so for
//! `Arc<dyn DynJournal>`, `Box<dyn DynJournal>` and references to them), so every function
//! that takes a journal takes the boxed one too. A backend implements `Journal` only.
//!
//! # Invariants
//!
//! - Every method of `dyn DynJournal` forwards to the same method of the journal inside it,
//!   the provided ones (`cancel_requests`, `cancel_watch`, `live_streams`, …) included, so a
//!   journal held as `dyn` behaves exactly as the journal itself.
//! - The boxed futures are `Send`, as `Journal`'s are.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use super::backend::{Batch, CancelWatch, Fence, ListedRow, LiveStreams, RunRow, StoredRun, UpdateRow};
use super::error::JournalError;
use super::id::RunId;
use super::query::RunQuery;
use super::store::Journal;

/// A boxed future of a journal held as `dyn`: `Send`, so a run that awaits it can be spawned.
pub type JournalFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, JournalError>> + Send + 'a>>;

/// A [`Journal`] that can be held as `dyn` (`Arc<dyn DynJournal>`), with its futures boxed.
///
/// Every `Journal` is one; hold the journal a host picks at run time as `Arc<dyn DynJournal>`
/// and pass it wherever a journal goes: `dyn DynJournal` implements `Journal`. Its methods are
/// `Journal`'s (see there for their contracts), called through the box.
///
/// ```
/// use std::sync::Arc;
/// use loopbound::journal::{self, DynJournal, MemoryJournal, RunQuery};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // Chosen at run time: SQLite, PostgreSQL, or memory for a test.
/// let journal: Arc<dyn DynJournal> = Arc::new(MemoryJournal::default());
/// let page = journal::list(&journal, &RunQuery::default()).await?;
/// assert!(page.runs().is_empty());
/// # Ok(())
/// # }
/// ```
pub trait DynJournal: Send + Sync {
    /// [`Journal::lease`].
    fn lease(&self) -> Duration;

    /// [`Journal::acquire`].
    fn acquire<'a>(&'a self, run: &'a RunId, fresh: RunRow) -> JournalFuture<'a, StoredRun>;

    /// [`Journal::renew`].
    fn renew<'a>(&'a self, run: &'a RunId, epoch: u64) -> JournalFuture<'a, ()>;

    /// [`Journal::load`].
    fn load<'a>(&'a self, run: &'a RunId) -> JournalFuture<'a, Option<StoredRun>>;

    /// [`Journal::commit`].
    fn commit<'a>(&'a self, run: &'a RunId, fence: Fence, batch: Batch) -> JournalFuture<'a, ()>;

    /// [`Journal::list_rows`].
    fn list_rows<'a>(&'a self, query: &'a RunQuery) -> JournalFuture<'a, Vec<ListedRow>>;

    /// [`Journal::cancel_requested`].
    fn cancel_requested<'a>(&'a self, run: &'a RunId) -> JournalFuture<'a, Option<String>>;

    /// [`Journal::cancel_requests`].
    fn cancel_requests<'a>(&'a self, runs: &'a [RunId]) -> JournalFuture<'a, Vec<RunId>>;

    /// [`Journal::cancel_watch`].
    fn cancel_watch(&self) -> Option<&CancelWatch>;

    /// [`Journal::request_cancel`].
    fn request_cancel<'a>(&'a self, run: &'a RunId, by: &'a str) -> JournalFuture<'a, ()>;

    /// [`Journal::updates`].
    fn updates<'a>(&'a self, run: &'a RunId, after: u64, limit: usize) -> JournalFuture<'a, Vec<UpdateRow>>;

    /// [`Journal::live_streams`].
    fn live_streams(&self) -> Option<&LiveStreams>;
}

impl<J: Journal> DynJournal for J {
    fn lease(&self) -> Duration {
        Journal::lease(self)
    }

    fn acquire<'a>(&'a self, run: &'a RunId, fresh: RunRow) -> JournalFuture<'a, StoredRun> {
        Box::pin(Journal::acquire(self, run, fresh))
    }

    fn renew<'a>(&'a self, run: &'a RunId, epoch: u64) -> JournalFuture<'a, ()> {
        Box::pin(Journal::renew(self, run, epoch))
    }

    fn load<'a>(&'a self, run: &'a RunId) -> JournalFuture<'a, Option<StoredRun>> {
        Box::pin(Journal::load(self, run))
    }

    fn commit<'a>(&'a self, run: &'a RunId, fence: Fence, batch: Batch) -> JournalFuture<'a, ()> {
        Box::pin(Journal::commit(self, run, fence, batch))
    }

    fn list_rows<'a>(&'a self, query: &'a RunQuery) -> JournalFuture<'a, Vec<ListedRow>> {
        Box::pin(Journal::list_rows(self, query))
    }

    fn cancel_requested<'a>(&'a self, run: &'a RunId) -> JournalFuture<'a, Option<String>> {
        Box::pin(Journal::cancel_requested(self, run))
    }

    fn cancel_requests<'a>(&'a self, runs: &'a [RunId]) -> JournalFuture<'a, Vec<RunId>> {
        Box::pin(Journal::cancel_requests(self, runs))
    }

    fn cancel_watch(&self) -> Option<&CancelWatch> {
        Journal::cancel_watch(self)
    }

    fn request_cancel<'a>(&'a self, run: &'a RunId, by: &'a str) -> JournalFuture<'a, ()> {
        Box::pin(Journal::request_cancel(self, run, by))
    }

    fn updates<'a>(&'a self, run: &'a RunId, after: u64, limit: usize) -> JournalFuture<'a, Vec<UpdateRow>> {
        Box::pin(Journal::updates(self, run, after, limit))
    }

    fn live_streams(&self) -> Option<&LiveStreams> {
        Journal::live_streams(self)
    }
}

// The methods are `async fn`s so that each future captures the call's lifetimes as the
// trait's `impl Future` does, rather than one lifetime shorter than both.
impl Journal for dyn DynJournal {
    fn lease(&self) -> Duration {
        DynJournal::lease(self)
    }

    async fn acquire(&self, run: &RunId, fresh: RunRow) -> Result<StoredRun, JournalError> {
        DynJournal::acquire(self, run, fresh).await
    }

    async fn renew(&self, run: &RunId, epoch: u64) -> Result<(), JournalError> {
        DynJournal::renew(self, run, epoch).await
    }

    async fn load(&self, run: &RunId) -> Result<Option<StoredRun>, JournalError> {
        DynJournal::load(self, run).await
    }

    async fn commit(&self, run: &RunId, fence: Fence, batch: Batch) -> Result<(), JournalError> {
        DynJournal::commit(self, run, fence, batch).await
    }

    async fn list_rows(&self, query: &RunQuery) -> Result<Vec<ListedRow>, JournalError> {
        DynJournal::list_rows(self, query).await
    }

    async fn cancel_requested(&self, run: &RunId) -> Result<Option<String>, JournalError> {
        DynJournal::cancel_requested(self, run).await
    }

    async fn cancel_requests(&self, runs: &[RunId]) -> Result<Vec<RunId>, JournalError> {
        DynJournal::cancel_requests(self, runs).await
    }

    fn cancel_watch(&self) -> Option<&CancelWatch> {
        DynJournal::cancel_watch(self)
    }

    async fn request_cancel(&self, run: &RunId, by: &str) -> Result<(), JournalError> {
        DynJournal::request_cancel(self, run, by).await
    }

    async fn updates(&self, run: &RunId, after: u64, limit: usize) -> Result<Vec<UpdateRow>, JournalError> {
        DynJournal::updates(self, run, after, limit).await
    }

    fn live_streams(&self) -> Option<&LiveStreams> {
        DynJournal::live_streams(self)
    }
}
