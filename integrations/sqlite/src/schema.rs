//! The file's schema, versioned with `PRAGMA user_version` and migrated on open.
//!
//! # Invariants
//!
//! - A file is a loopbound journal only if its `application_id` is [`APPLICATION_ID`]; an empty
//!   file becomes one; any other file is refused as [`Corrupt`](JournalError::Corrupt) and left
//!   untouched.
//! - Migrations run in order, each in one transaction with the version bump, so a file is always
//!   at one version of [`MIGRATIONS`]. A file newer than this build is refused
//!   ([`JournalError::UnsupportedSchema`]), never downgraded.
//! - Tables are `STRICT`: a column holds its declared type or the write fails.

use loopbound::journal::JournalError;
use rusqlite::{Connection, TransactionBehavior};

use crate::error::storage;

/// `LBJ1` as a big-endian integer: marks a loopbound journal file.
pub const APPLICATION_ID: i64 = 0x4C42_4A31;

/// Each schema version's statements; version n is `MIGRATIONS[n - 1]`.
pub(crate) const MIGRATIONS: &[&str] = &[V1];

/// The newest schema version this build writes.
pub const SCHEMA_VERSION: i64 = 1;

const V1: &str = "
CREATE TABLE runs (
    run TEXT PRIMARY KEY,
    epoch INTEGER NOT NULL,
    attempts INTEGER NOT NULL,
    conversation TEXT NOT NULL,
    ledger TEXT NOT NULL,
    state TEXT NOT NULL
) STRICT;
CREATE TABLE replies (
    run TEXT NOT NULL REFERENCES runs (run),
    ordinal INTEGER NOT NULL,
    reply TEXT NOT NULL,
    PRIMARY KEY (run, ordinal)
) STRICT;
CREATE TABLE calls (
    run TEXT NOT NULL REFERENCES runs (run),
    reply INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    operation INTEGER,
    is_error INTEGER NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (run, reply, idx)
) STRICT;
CREATE UNIQUE INDEX calls_by_operation ON calls (run, operation) WHERE operation IS NOT NULL;
CREATE TABLE proposals (
    run TEXT NOT NULL REFERENCES runs (run),
    ordinal INTEGER NOT NULL,
    reply INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    tool TEXT NOT NULL,
    capability TEXT NOT NULL,
    effect TEXT NOT NULL,
    arguments TEXT NOT NULL,
    PRIMARY KEY (run, ordinal)
) STRICT;
CREATE TABLE decisions (
    run TEXT NOT NULL REFERENCES runs (run),
    ordinal INTEGER NOT NULL,
    verdict TEXT NOT NULL,
    decided_by TEXT NOT NULL,
    PRIMARY KEY (run, ordinal)
) STRICT;
CREATE TABLE started (
    run TEXT NOT NULL REFERENCES runs (run),
    ordinal INTEGER NOT NULL,
    start INTEGER NOT NULL,
    PRIMARY KEY (run, ordinal, start)
) STRICT;
CREATE TABLE reconciliations (
    run TEXT NOT NULL REFERENCES runs (run),
    ordinal INTEGER NOT NULL,
    start INTEGER NOT NULL,
    resolution TEXT NOT NULL,
    result TEXT,
    reconciled_by TEXT NOT NULL,
    PRIMARY KEY (run, ordinal, start)
) STRICT;
CREATE TABLE events (
    run TEXT NOT NULL REFERENCES runs (run),
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    count INTEGER NOT NULL,
    operation TEXT,
    decided_by TEXT,
    PRIMARY KEY (run, seq)
) STRICT;
";

fn pragma_i64(connection: &Connection, name: &str) -> Result<i64, JournalError> {
    connection.pragma_query_value(None, name, |row| row.get(0)).map_err(storage)
}

/// Brings the file to [`SCHEMA_VERSION`], or refuses it.
pub(crate) fn migrate(connection: &mut Connection) -> Result<(), JournalError> {
    let version = pragma_i64(connection, "user_version")?;
    if version > SCHEMA_VERSION {
        return Err(JournalError::UnsupportedSchema { found: version, supported: SCHEMA_VERSION });
    }
    let application = pragma_i64(connection, "application_id")?;
    let tables: i64 = connection
        .query_row("SELECT count(*) FROM sqlite_schema WHERE type = 'table'", [], |row| row.get(0))
        .map_err(storage)?;
    let ours = application == APPLICATION_ID || (application == 0 && version == 0 && tables == 0);
    if !ours || version < 0 {
        return Err(JournalError::Corrupt(
            "the file is a SQLite database but not a loopbound journal".into(),
        ));
    }
    for (next, statements) in
        (version + 1..).zip(MIGRATIONS.iter().skip(usize::try_from(version).unwrap_or(0)))
    {
        let transaction =
            connection.transaction_with_behavior(TransactionBehavior::Exclusive).map_err(storage)?;
        transaction.execute_batch(statements).map_err(storage)?;
        transaction.pragma_update(None, "application_id", APPLICATION_ID).map_err(storage)?;
        transaction.pragma_update(None, "user_version", next).map_err(storage)?;
        transaction.commit().map_err(storage)?;
    }
    Ok(())
}
