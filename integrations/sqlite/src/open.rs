//! Opening the file: one connection in WAL mode with the journal's pragmas, its schema migrated.
//!
//! # Invariants
//!
//! - Any number of processes may open one new file at the same moment, and all succeed: the
//!   switch to WAL mode, which needs the file to itself for an instant, is retried while another
//!   process holds it (within the busy timeout), and the migration reads the schema version
//!   inside its exclusive transaction ([`schema::migrate`]).
//! - A file that is not a loopbound journal is refused before anything is created in it.

use std::path::Path;
use std::time::{Duration, Instant};

use loopbound::journal::JournalError;
use rusqlite::{Connection, ErrorCode};

use crate::busy::{self, BUSY_TIMEOUT};
use crate::error::storage;
use crate::schema;

/// Whether `error` is another connection holding a lock this one needs.
fn busy(error: &rusqlite::Error) -> bool {
    matches!(error.sqlite_error_code(), Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
}

/// Switches the file to WAL mode, retrying while other connections hold it, for at most the
/// busy timeout.
fn wal(connection: &Connection) -> Result<(), JournalError> {
    let started = Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        let mode =
            connection.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get::<_, String>(0));
        match mode {
            Ok(mode) if mode.eq_ignore_ascii_case("wal") => return Ok(()),
            Ok(mode) if started.elapsed() >= BUSY_TIMEOUT => {
                return Err(JournalError::storage(format!("the file refused WAL mode ({mode})")));
            }
            Err(error) if !busy(&error) || started.elapsed() >= BUSY_TIMEOUT => return Err(storage(error)),
            _ => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
        }
    }
}

/// Opens `path` (creating it if absent) as a journal with `synchronous` (`FULL` or `NORMAL`).
pub(crate) fn connection(path: &Path, synchronous: &str) -> Result<Connection, JournalError> {
    let mut connection = Connection::open(path).map_err(storage)?;
    connection.busy_handler(Some(busy::handler)).map_err(storage)?;
    wal(&connection)?;
    connection.pragma_update(None, "synchronous", synchronous).map_err(storage)?;
    connection.pragma_update(None, "foreign_keys", "ON").map_err(storage)?;
    schema::migrate(&mut connection)?;
    Ok(connection)
}

/// A second connection to `path`, an opened journal, for reads only: in WAL mode its reads wait
/// neither for the writer's transactions nor for their syncs.
pub(crate) fn reader(path: &Path) -> Result<Connection, JournalError> {
    let mut connection = Connection::open(path).map_err(storage)?;
    connection.busy_handler(Some(busy::handler)).map_err(storage)?;
    connection.pragma_update(None, "query_only", "ON").map_err(storage)?;
    Ok(connection)
}
