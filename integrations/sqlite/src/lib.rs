//! loopbound's journal in one SQLite file: proposals, decisions, effects started and
//! recorded, resumes and reconciliations, for one process or a few on one machine.
//!
//! SQLite is compiled into the crate (rusqlite's `bundled` feature): there is nothing to install.
//! The file runs in WAL mode with `synchronous = FULL` by default, so a commit is on disk when
//! it returns, and each state change is one transaction: an effect that its policy allows costs
//! two commits (its `started` record with everything buffered before it; its result), a read
//! none of its own.
//!
//! ```no_run
//! use loopbound::journal::RunId;
//! use loopbound_sqlite::SqliteJournal;
//!
//! # async fn demo(runtime: loopbound::Runner<impl loopbound::transport::Transport>, scope: loopbound::Scope)
//! # -> Result<(), Box<dyn std::error::Error>> {
//! let journal = SqliteJournal::open("runs.db")?;
//! let run = RunId::new("refund-42")?;
//! let mut conversation = vec![loopbound::Message::user("Refund order 42.")];
//! // The same call starts the run, and resumes it after a crash, an approval or a reconciliation.
//! let outcome = runtime.run_journaled(&journal, &run, &scope, &mut conversation, |ended| ended.has_succeeded("refund")).await?;
//! println!("{}", outcome.status());
//! # Ok(())
//! # }
//! ```
//!
//! **One attempt per run at a time**, across threads and processes sharing the file: an attempt
//! holds its run under a lease (30 s by default, [`SqliteJournal::with_lease`]) that every
//! commit renews; another attempt is refused with
//! [`LeaseHeld`](loopbound::journal::JournalError::LeaseHeld) until it is released (the
//! attempt's last commit) or expires (its process died), judged by the system clock, which the
//! processes of one machine share. An attempt whose lease expired gets `LeaseLost` at its next
//! commit and runs no further effect.
//!
//! The same file (or one of its own) can hold **shared pools** ([`SqlitePools`]): budgets that
//! every run of every process on the machine draws from, reserved before each model call (see
//! `loopbound::pool`).
//!
//! # Invariants
//!
//! - Every call runs on tokio's blocking thread pool (`spawn_blocking`): a commit under
//!   `synchronous = FULL` waits for `fsync`, milliseconds during which the caller's runtime
//!   thread stays free for other requests.
//! - Two connections per journal value, each behind a mutex: the writer's, whose writes go in
//!   groups (`group.rs`: one transaction and one sync for the writes that arrive together), and
//!   a reader's for loads, lists and cancel checks, which WAL lets run beside the writer; other
//!   processes on the same file wait for SQLite's write lock (at most 5 s, and no longer than
//!   the caller waits: a call whose future is dropped, at a run's deadline or its caller's
//!   cancellation, stops waiting and frees the connection), and the epoch check inside each
//!   write transaction fences a process whose attempt was taken over.
//! - The schema is versioned and migrated on open ([`SCHEMA_VERSION`]), inside one exclusive
//!   transaction that reads the version first: any number of processes may open one new file at
//!   once. A file that is not a loopbound journal, is damaged, or is newer than this build is
//!   refused with a typed error.

#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![warn(clippy::pedantic)]

mod busy;
mod error;
mod group;
mod lease;
mod list;
mod open;
mod pool;
mod read;
mod schema;
mod write;

use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use loopbound::journal::backend::{
    Batch, CancelWatch, Fence, ListedRow, LiveStreams, RunRow, StoredRun, UpdateRow, check_lease,
    process_holder,
};
use loopbound::journal::{DEFAULT_LEASE, Journal, JournalError, RunId, RunQuery, valid_actor};
use rusqlite::Connection;

pub use pool::{POOL_SCHEMA_VERSION, SqlitePools};
pub use schema::{APPLICATION_ID, SCHEMA_VERSION};

use crate::error::storage;
use crate::write::Holder;

/// When a commit is on disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Synchronous {
    /// `fsync` at every commit: a committed record survives a power loss. The default, and what
    /// the journal requires of `started`.
    #[default]
    Full,
    /// `fsync` at checkpoints only (WAL): a committed record survives a crash of the process, not
    /// necessarily a power loss. Faster; for hosts that accept that.
    Normal,
}

impl Synchronous {
    pub(crate) const fn pragma(self) -> &'static str {
        match self {
            Self::Full => "FULL",
            Self::Normal => "NORMAL",
        }
    }
}

/// A journal in one SQLite file.
///
/// Clones share one connection; each value names the holder of the leases its attempts take
/// ([`with_holder`](Self::with_holder), this process's
/// [`process_holder`] by default) and their length
/// ([`with_lease`](Self::with_lease), 30 s by default). A lease whose holder is a process of
/// this machine that no longer exists is taken over at once, not after it expires
/// ([`is_dead_holder`](loopbound::journal::backend::is_dead_holder)); a name given to `with_holder` is
/// never judged so, and its lease is waited out.
#[derive(Clone)]
pub struct SqliteJournal {
    inner: Arc<Inner>,
    holder: Arc<str>,
    lease: Duration,
}

struct Inner {
    connection: Mutex<Connection>,
    /// A second connection, for reads (loads, lists, cancel checks): WAL lets them run beside
    /// the writer's transactions instead of queueing behind their syncs.
    reader: Mutex<Connection>,
    /// The watcher of cancel requests that every attempt driven through this connection
    /// shares while it waits.
    watch: CancelWatch,
    /// The live ends of the streams of the runs this connection's attempts run.
    live: LiveStreams,
    path: PathBuf,
    synchronous: Synchronous,
    commits: AtomicU64,
    renewals: AtomicU64,
    /// The writes (acquisitions, commits, renewals) waiting for the next group.
    group: group::Group,
    /// How many write transactions groups committed.
    groups: AtomicU64,
}

impl group::Writer for Inner {
    fn group(&self) -> &group::Group {
        &self.group
    }

    fn connection(&self) -> &Mutex<Connection> {
        &self.connection
    }

    fn committed(&self, tally: group::Tally) {
        self.groups.fetch_add(tally.groups, Ordering::SeqCst);
    }
}

impl fmt::Debug for SqliteJournal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteJournal")
            .field("path", &self.inner.path)
            .field("synchronous", &self.inner.synchronous)
            .field("holder", &self.holder)
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}

impl SqliteJournal {
    /// Opens (or creates) the journal at `path` with `synchronous = FULL`.
    ///
    /// # Errors
    ///
    /// [`JournalError::Corrupt`] for a file that is not a loopbound journal or is damaged;
    /// [`JournalError::UnsupportedSchema`] for one written by a newer version;
    /// [`JournalError::Storage`] if it cannot be opened or created.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, JournalError> {
        Self::open_with(path, Synchronous::Full)
    }

    /// Opens (or creates) the journal at `path` with the given durability.
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open).
    pub fn open_with(path: impl AsRef<Path>, synchronous: Synchronous) -> Result<Self, JournalError> {
        let path = path.as_ref().to_path_buf();
        let connection = open::connection(&path, synchronous.pragma())?;
        let reader = open::reader(&path)?;
        let inner = Inner {
            connection: Mutex::new(connection),
            reader: Mutex::new(reader),
            watch: CancelWatch::new(),
            live: LiveStreams::default(),
            path,
            synchronous,
            commits: AtomicU64::new(0),
            renewals: AtomicU64::new(0),
            group: group::Group::default(),
            groups: AtomicU64::new(0),
        };
        Ok(Self { inner: Arc::new(inner), holder: Arc::from(process_holder()), lease: DEFAULT_LEASE })
    }

    /// This journal (the same file and connection) holding each run it acquires for `lease`
    /// from every grant, commit or renewal: an attempt that neither commits nor renews for that
    /// long loses the run, and another process may take it over.
    ///
    /// # Errors
    ///
    /// [`JournalError::InvalidLease`] for a zero duration or one over a day.
    pub fn with_lease(mut self, lease: Duration) -> Result<Self, JournalError> {
        self.lease = check_lease(lease)?;
        Ok(self)
    }

    /// This journal naming the holder of its leases `holder` (what another process's
    /// [`LeaseHeld`](JournalError::LeaseHeld) and a host's inspection show). A chosen name is
    /// never judged dead: a lease it holds is waited out until it expires, even once its
    /// process is gone.
    ///
    /// # Errors
    ///
    /// [`JournalError::InvalidActor`] for an empty name, one over 64 bytes or with a control
    /// character.
    pub fn with_holder(mut self, holder: &str) -> Result<Self, JournalError> {
        if !valid_actor(holder) {
            return Err(JournalError::InvalidActor);
        }
        self.holder = Arc::from(holder);
        Ok(self)
    }

    /// The name this journal's leases carry.
    #[must_use]
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// The file's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The durability the file was opened with.
    #[must_use]
    pub fn synchronous(&self) -> Synchronous {
        self.inner.synchronous
    }

    /// How many write transactions of journal records this value committed so far
    /// (acquisitions included, lease renewals apart).
    #[must_use]
    pub fn commits(&self) -> u64 {
        self.inner.commits.load(Ordering::SeqCst)
    }

    /// How many lease renewals this value wrote so far.
    #[must_use]
    pub fn renewals(&self) -> u64 {
        self.inner.renewals.load(Ordering::SeqCst)
    }

    /// How many write transactions (each one sync) the connection's grouped writes took so far:
    /// acquisitions, commits and renewals that arrive together share one
    /// ([`commits`](Self::commits) and [`renewals`](Self::renewals) count them one by one).
    #[must_use]
    pub fn groups(&self) -> u64 {
        self.inner.groups.load(Ordering::SeqCst)
    }

    /// Runs `work` in the connection's next group of writes, with this value's holder.
    fn grouped<T, F>(&self, work: F) -> impl Future<Output = Result<T, JournalError>> + Send + 'static
    where
        T: Send + 'static,
        F: FnOnce(&Connection, &Holder<'_>) -> Result<T, JournalError> + Send + 'static,
    {
        group::write(Arc::clone(&self.inner), Arc::clone(&self.holder), lease::micros(self.lease), work)
    }

    /// Runs `work` on the writer's connection, on the blocking thread pool, with this value's
    /// holder.
    fn blocking<T, F>(&self, work: F) -> impl Future<Output = Result<T, JournalError>> + Send + 'static
    where
        T: Send + 'static,
        F: FnOnce(&Inner, &mut Connection, &Holder<'_>) -> Result<T, JournalError> + Send + 'static,
    {
        let holder = (Arc::clone(&self.holder), lease::micros(self.lease));
        on_blocking_thread(Arc::clone(&self.inner), |inner| &inner.connection, holder, work)
    }

    /// Runs `work`, a read, on the reader's connection, on the blocking thread pool.
    fn reading<T, F>(&self, work: F) -> impl Future<Output = Result<T, JournalError>> + Send + 'static
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, JournalError> + Send + 'static,
    {
        let holder = (Arc::clone(&self.holder), lease::micros(self.lease));
        on_blocking_thread(
            Arc::clone(&self.inner),
            |inner| &inner.reader,
            holder,
            |_, connection, _| work(connection),
        )
    }
}

async fn on_blocking_thread<T, F>(
    inner: Arc<Inner>,
    which: fn(&Inner) -> &Mutex<Connection>,
    (holder, lease): (Arc<str>, i64),
    work: F,
) -> Result<T, JournalError>
where
    T: Send + 'static,
    F: FnOnce(&Inner, &mut Connection, &Holder<'_>) -> Result<T, JournalError> + Send + 'static,
{
    // Dropped with this future, the flag tells the blocking thread that no one waits any more.
    let abandon = busy::Abandon::default();
    let flag = abandon.flag();
    let task = tokio::task::spawn_blocking(move || {
        let given_up = || JournalError::storage("the call was given up before it ran");
        if busy::given_up(&flag) {
            return Err(given_up());
        }
        let mut connection = which(&inner).lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if busy::given_up(&flag) {
            return Err(given_up());
        }
        busy::under(flag, busy::BUSY_TIMEOUT, || {
            work(&inner, &mut connection, &Holder { name: &holder, lease })
        })
    });
    let done = task.await.map_err(|_| JournalError::storage("the journal's worker thread failed"))?;
    drop(abandon);
    done
}

impl Journal for SqliteJournal {
    fn lease(&self) -> Duration {
        self.lease
    }

    fn acquire(
        &self,
        run: &RunId,
        fresh: RunRow,
    ) -> impl Future<Output = Result<StoredRun, JournalError>> + Send {
        let run = run.clone();
        let inner = Arc::clone(&self.inner);
        let acquired =
            self.grouped(move |connection, holder| write::acquire(connection, run.as_str(), &fresh, holder));
        async move {
            let (stored, wrote) = acquired.await?;
            if wrote {
                inner.commits.fetch_add(1, Ordering::SeqCst);
            }
            Ok(stored)
        }
    }

    fn renew(&self, run: &RunId, epoch: u64) -> impl Future<Output = Result<(), JournalError>> + Send {
        let run = run.clone();
        let inner = Arc::clone(&self.inner);
        let renewed =
            self.grouped(move |connection, holder| write::renew(connection, run.as_str(), epoch, holder));
        async move {
            renewed.await?;
            inner.renewals.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    fn load(&self, run: &RunId) -> impl Future<Output = Result<Option<StoredRun>, JournalError>> + Send {
        let run = run.clone();
        self.reading(move |connection| {
            let transaction = connection.transaction().map_err(storage)?;
            let stored = read::stored_run(&transaction, run.as_str(), lease::now_micros()?)?;
            transaction.commit().map_err(storage)?;
            Ok(stored)
        })
    }

    fn commit(
        &self,
        run: &RunId,
        fence: Fence,
        batch: Batch,
    ) -> impl Future<Output = Result<(), JournalError>> + Send {
        let run = run.clone();
        let inner = Arc::clone(&self.inner);
        let committed = self.grouped(move |connection, holder| {
            write::commit(connection, run.as_str(), fence, &batch, holder)
        });
        async move {
            committed.await?;
            inner.commits.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    fn list_rows(
        &self,
        query: &RunQuery,
    ) -> impl Future<Output = Result<Vec<ListedRow>, JournalError>> + Send {
        let query = query.clone();
        self.reading(move |connection| {
            let transaction = connection.transaction().map_err(storage)?;
            let page = list::page(&transaction, &query, lease::now_micros()?)?;
            transaction.commit().map_err(storage)?;
            Ok(page)
        })
    }

    fn cancel_requested(
        &self,
        run: &RunId,
    ) -> impl Future<Output = Result<Option<String>, JournalError>> + Send {
        let run = run.clone();
        self.reading(move |connection| write::cancel_requested(connection, run.as_str()))
    }

    fn cancel_requests(
        &self,
        runs: &[RunId],
    ) -> impl Future<Output = Result<Vec<RunId>, JournalError>> + Send {
        let runs = runs.to_vec();
        self.reading(move |connection| write::cancel_requests(connection, &runs))
    }

    fn cancel_watch(&self) -> Option<&CancelWatch> {
        Some(&self.inner.watch)
    }

    fn updates(
        &self,
        run: &RunId,
        after: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<UpdateRow>, JournalError>> + Send {
        let run = run.clone();
        self.reading(move |connection| read::updates(connection, run.as_str(), after, limit))
    }

    fn live_streams(&self) -> Option<&LiveStreams> {
        Some(&self.inner.live)
    }

    fn request_cancel(&self, run: &RunId, by: &str) -> impl Future<Output = Result<(), JournalError>> + Send {
        let (run, by) = (run.clone(), by.to_owned());
        self.blocking(move |inner, connection, _| {
            write::request_cancel(connection, run.as_str(), &by)?;
            inner.commits.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
    }
}
