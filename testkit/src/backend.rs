//! One journal type over every durable backend, chosen at run time by a short text: what test
//! processes (the crash matrix's workers, the racing and pausing children) open when their
//! parent tells them where the journal is.
//!
//! # Invariants
//!
//! - [`AnyJournal`] forwards every call unchanged to the backend it holds.
//! - A place is `sqlite-full:<path>`, `sqlite-normal:<path>` or `postgres:<url>`; anything else
//!   is refused by [`open`] with a message, never a panic.

use std::time::Duration;

use loopbound::journal::backend::{Batch, CancelWatch, Fence, ListedRow, RunRow, StoredRun, UpdateRow};
use loopbound::journal::{Journal, JournalError, RunId, RunQuery};
use loopbound_postgres::{Config, PostgresJournal, WorkerId};
use loopbound_sqlite::{SqliteJournal, Synchronous};

/// The journal of a SQLite file or a PostgreSQL database.
#[derive(Debug)]
pub enum AnyJournal {
    /// A SQLite file.
    Sqlite(SqliteJournal),
    /// A PostgreSQL database.
    Postgres(Box<PostgresJournal>),
}

/// The place of the SQLite file `path` under `synchronous`.
#[must_use]
pub fn sqlite_place(path: &std::path::Path, synchronous: Synchronous) -> String {
    let mode = if synchronous == Synchronous::Normal { "normal" } else { "full" };
    format!("sqlite-{mode}:{}", path.display())
}

/// The place of the PostgreSQL database at `url`.
#[must_use]
pub fn postgres_place(url: &str) -> String {
    format!("postgres:{url}")
}

/// Opens the journal at `place`, its leases held by `holder` for `lease`.
///
/// # Errors
///
/// A message naming what failed.
pub async fn open(place: &str, holder: &str, lease: Duration) -> Result<AnyJournal, String> {
    let sqlite = |path: &str, synchronous| {
        SqliteJournal::open_with(path, synchronous)
            .and_then(|journal| journal.with_lease(lease))
            .and_then(|journal| journal.with_holder(holder))
            .map(AnyJournal::Sqlite)
            .map_err(|error| error.to_string())
    };
    match place.split_once(':') {
        Some(("sqlite-full", path)) => sqlite(path, Synchronous::Full),
        Some(("sqlite-normal", path)) => sqlite(path, Synchronous::Normal),
        Some(("postgres", url)) => {
            let config = Config::new(url).map_err(|error| error.to_string())?;
            let worker = WorkerId::new(holder).map_err(|error| error.to_string())?;
            PostgresJournal::connect(&config)
                .await
                .and_then(|journal| journal.with_worker(worker).with_lease(lease))
                .map(|journal| AnyJournal::Postgres(Box::new(journal)))
                .map_err(|error| error.to_string())
        }
        _ => Err(format!("not a journal's place: {place}")),
    }
}

macro_rules! each {
    ($self:ident, $journal:ident => $call:expr) => {
        match $self {
            Self::Sqlite($journal) => $call,
            Self::Postgres($journal) => $call,
        }
    };
}

impl Journal for AnyJournal {
    fn lease(&self) -> Duration {
        each!(self, journal => journal.lease())
    }

    async fn acquire(&self, run: &RunId, fresh: RunRow) -> Result<StoredRun, JournalError> {
        each!(self, journal => journal.acquire(run, fresh).await)
    }

    async fn renew(&self, run: &RunId, epoch: u64) -> Result<(), JournalError> {
        each!(self, journal => journal.renew(run, epoch).await)
    }

    async fn load(&self, run: &RunId) -> Result<Option<StoredRun>, JournalError> {
        each!(self, journal => journal.load(run).await)
    }

    async fn commit(&self, run: &RunId, fence: Fence, batch: Batch) -> Result<(), JournalError> {
        each!(self, journal => journal.commit(run, fence, batch).await)
    }

    async fn list_rows(&self, query: &RunQuery) -> Result<Vec<ListedRow>, JournalError> {
        each!(self, journal => journal.list_rows(query).await)
    }

    async fn cancel_requested(&self, run: &RunId) -> Result<Option<String>, JournalError> {
        each!(self, journal => journal.cancel_requested(run).await)
    }

    async fn request_cancel(&self, run: &RunId, by: &str) -> Result<(), JournalError> {
        each!(self, journal => journal.request_cancel(run, by).await)
    }

    async fn cancel_requests(&self, runs: &[RunId]) -> Result<Vec<RunId>, JournalError> {
        each!(self, journal => journal.cancel_requests(runs).await)
    }

    fn cancel_watch(&self) -> Option<&CancelWatch> {
        each!(self, journal => journal.cancel_watch())
    }

    async fn updates(&self, run: &RunId, after: u64, limit: usize) -> Result<Vec<UpdateRow>, JournalError> {
        each!(self, journal => journal.updates(run, after, limit).await)
    }

    fn live_streams(&self) -> Option<&loopbound::journal::backend::LiveStreams> {
        each!(self, journal => journal.live_streams())
    }
}
