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
//! # async fn demo(runtime: loopbound::Runtime<impl loopbound::transport::Transport>, scope: loopbound::Scope)
//! # -> Result<(), Box<dyn std::error::Error>> {
//! let journal = SqliteJournal::open("runs.db")?;
//! let run = RunId::new("refund-42")?;
//! let mut conversation = vec![loopbound::Message::user("Refund order 42.")];
//! // The same call starts the run, and resumes it after a crash, an approval or a reconciliation.
//! let outcome = runtime.run_journaled(&journal, &run, &scope, &mut conversation, |()| true).await?;
//! println!("{}", outcome.status());
//! # Ok(())
//! # }
//! ```
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
//! - One connection per journal value, behind a mutex: calls on one value are serialised; other
//!   processes on the same file wait for SQLite's write lock (a busy timeout of 5 s), and the
//!   epoch check inside each write transaction fences a process whose attempt was taken over.
//! - The schema is versioned and migrated on open ([`SCHEMA_VERSION`]); a file that is not a
//!   loopbound journal, is damaged, or is newer than this build is refused with a typed error.

#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![warn(clippy::pedantic)]

mod error;
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

use loopbound::journal::{Batch, Fence, Journal, JournalError, RunId, RunRow, StoredRun};
use rusqlite::Connection;

pub use pool::{POOL_SCHEMA_VERSION, SqlitePools};
pub use schema::{APPLICATION_ID, SCHEMA_VERSION};

use crate::error::storage;

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
#[derive(Clone)]
pub struct SqliteJournal {
    inner: Arc<Inner>,
}

struct Inner {
    connection: Mutex<Connection>,
    path: PathBuf,
    synchronous: Synchronous,
    commits: AtomicU64,
}

impl fmt::Debug for SqliteJournal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteJournal")
            .field("path", &self.inner.path)
            .field("synchronous", &self.inner.synchronous)
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
        let mut connection = Connection::open(&path).map_err(storage)?;
        connection.busy_timeout(Duration::from_secs(5)).map_err(storage)?;
        let mode: String = connection
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
            .map_err(storage)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(JournalError::storage(format!("the file refused WAL mode ({mode})")));
        }
        connection.pragma_update(None, "synchronous", synchronous.pragma()).map_err(storage)?;
        connection.pragma_update(None, "foreign_keys", "ON").map_err(storage)?;
        schema::migrate(&mut connection)?;
        let inner =
            Inner { connection: Mutex::new(connection), path, synchronous, commits: AtomicU64::new(0) };
        Ok(Self { inner: Arc::new(inner) })
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

    /// How many write transactions this value committed so far (acquisitions included).
    #[must_use]
    pub fn commits(&self) -> u64 {
        self.inner.commits.load(Ordering::SeqCst)
    }

    /// Runs `work` on the connection, on the blocking thread pool.
    fn blocking<T, F>(&self, work: F) -> impl Future<Output = Result<T, JournalError>> + Send + 'static
    where
        T: Send + 'static,
        F: FnOnce(&Inner, &mut Connection) -> Result<T, JournalError> + Send + 'static,
    {
        on_blocking_thread(Arc::clone(&self.inner), work)
    }
}

async fn on_blocking_thread<T, F>(inner: Arc<Inner>, work: F) -> Result<T, JournalError>
where
    T: Send + 'static,
    F: FnOnce(&Inner, &mut Connection) -> Result<T, JournalError> + Send + 'static,
{
    let task = tokio::task::spawn_blocking(move || {
        let mut connection = inner.connection.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        work(&inner, &mut connection)
    });
    task.await.map_err(|_| JournalError::storage("the journal's worker thread failed"))?
}

impl Journal for SqliteJournal {
    fn acquire(
        &self,
        run: &RunId,
        fresh: RunRow,
    ) -> impl Future<Output = Result<StoredRun, JournalError>> + Send {
        let run = run.clone();
        self.blocking(move |inner, connection| {
            let (stored, wrote) = write::acquire(connection, run.as_str(), &fresh)?;
            if wrote {
                inner.commits.fetch_add(1, Ordering::SeqCst);
            }
            Ok(stored)
        })
    }

    fn load(&self, run: &RunId) -> impl Future<Output = Result<Option<StoredRun>, JournalError>> + Send {
        let run = run.clone();
        self.blocking(move |_, connection| {
            let transaction = connection.transaction().map_err(storage)?;
            let stored = read::stored_run(&transaction, run.as_str())?;
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
        self.blocking(move |inner, connection| {
            write::commit(connection, run.as_str(), fence, &batch)?;
            inner.commits.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
    }
}
