//! The file's schema, versioned with `PRAGMA user_version` and migrated on open.
//!
//! # Invariants
//!
//! - A file is a loopbound journal only if its `application_id` is [`APPLICATION_ID`]; an empty
//!   file becomes one; any other file is refused as [`Corrupt`](JournalError::Corrupt) and left
//!   untouched.
//! - The version is read, and every migration applied, inside one exclusive transaction: of
//!   processes opening one new file at once, one migrates it and the others, waiting for its
//!   lock, find it migrated. A file is always at one version of [`MIGRATIONS`]. A file newer than
//!   this build is refused ([`JournalError::UnsupportedSchema`]), never downgraded.
//! - Tables are `STRICT`: a column holds its declared type or the write fails.

use loopbound::journal::JournalError;
use rusqlite::{Connection, TransactionBehavior};

use crate::error::storage;

/// `LBJ1` as a big-endian integer: marks a loopbound journal file.
pub const APPLICATION_ID: i64 = 0x4C42_4A31;

/// Each schema version's statements; version n is `MIGRATIONS[n - 1]`.
pub(crate) const MIGRATIONS: &[&str] = &[V1, V2, V3, V4, V5];

/// The newest schema version this build writes.
pub const SCHEMA_VERSION: i64 = 5;

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

/// Version 2: the run's state as its parts (no text to slice), its lease (holder, expiry in
/// microseconds since the Unix epoch), its definition, and its labels, with the indexes that
/// listing by state and by label reads. Version 1's `name:detail` states are split once here.
const V2: &str = "
ALTER TABLE runs ADD COLUMN state_operation INTEGER;
ALTER TABLE runs ADD COLUMN state_status TEXT;
ALTER TABLE runs ADD COLUMN lease_holder TEXT;
ALTER TABLE runs ADD COLUMN lease_until INTEGER;
ALTER TABLE runs ADD COLUMN definition TEXT NOT NULL DEFAULT '';
UPDATE runs SET state_operation = CAST(substr(state, instr(state, ':') + 1) AS INTEGER),
                state = substr(state, 1, instr(state, ':') - 1)
 WHERE state LIKE 'awaiting_approval:%' OR state LIKE 'ambiguous:%';
UPDATE runs SET state_status = substr(state, length('finished:') + 1), state = 'finished'
 WHERE state LIKE 'finished:%';
CREATE TABLE labels (
    run TEXT NOT NULL REFERENCES runs (run),
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (run, key)
) STRICT;
CREATE INDEX labels_by_value ON labels (key, value, run);
CREATE INDEX runs_by_state ON runs (state, run);
CREATE INDEX runs_by_status ON runs (state, state_status, run);
CREATE INDEX runs_by_lease ON runs (lease_until);
";

/// Version 3: who asked to cancel the run, until an attempt honours it.
const V3: &str = "
ALTER TABLE runs ADD COLUMN cancel_by TEXT;
";

/// Version 4: when a proposal expires (milliseconds since the Unix epoch), if it does; the
/// host's reason an event gives (a closed run's).
const V4: &str = "
ALTER TABLE proposals ADD COLUMN expires INTEGER;
ALTER TABLE events ADD COLUMN reason TEXT;
";

/// Version 5: each run's recorded stream, one update's JSON per line, numbered from 1.
const V5: &str = "
CREATE TABLE updates (
    run TEXT NOT NULL REFERENCES runs (run),
    seq INTEGER NOT NULL,
    line TEXT NOT NULL,
    PRIMARY KEY (run, seq)
) STRICT, WITHOUT ROWID;
";

fn pragma_i64(connection: &Connection, name: &str) -> Result<i64, JournalError> {
    connection.pragma_query_value(None, name, |row| row.get(0)).map_err(storage)
}

/// Brings the file to [`SCHEMA_VERSION`], or refuses it, in one exclusive transaction.
pub(crate) fn migrate(connection: &mut Connection) -> Result<(), JournalError> {
    let transaction =
        connection.transaction_with_behavior(TransactionBehavior::Exclusive).map_err(storage)?;
    let version = pragma_i64(&transaction, "user_version")?;
    if version > SCHEMA_VERSION {
        return Err(JournalError::UnsupportedSchema { found: version, supported: SCHEMA_VERSION });
    }
    let application = pragma_i64(&transaction, "application_id")?;
    let tables: i64 = transaction
        .query_row("SELECT count(*) FROM sqlite_schema WHERE type = 'table'", [], |row| row.get(0))
        .map_err(storage)?;
    let ours = application == APPLICATION_ID || (application == 0 && version == 0 && tables == 0);
    if !ours || version < 0 {
        return Err(JournalError::Corrupt(
            "the file is a SQLite database but not a loopbound journal".into(),
        ));
    }
    if version == SCHEMA_VERSION {
        // Nothing to write: ending the transaction without a commit leaves the file as it was.
        return Ok(());
    }
    for statements in MIGRATIONS.iter().skip(usize::try_from(version).unwrap_or(0)) {
        transaction.execute_batch(statements).map_err(storage)?;
    }
    transaction.pragma_update(None, "application_id", APPLICATION_ID).map_err(storage)?;
    transaction.pragma_update(None, "user_version", SCHEMA_VERSION).map_err(storage)?;
    transaction.commit().map_err(storage)
}

#[cfg(test)]
mod tests {
    use loopbound::Status;
    use loopbound::journal::RunState;
    use rusqlite::Connection;

    use super::{APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION, migrate};
    use crate::read;

    #[test]
    fn a_version_one_file_is_migrated_and_its_states_become_typed() {
        let mut connection = Connection::open_in_memory().unwrap();
        connection.execute_batch(MIGRATIONS[0]).unwrap();
        connection.pragma_update(None, "application_id", APPLICATION_ID).unwrap();
        connection.pragma_update(None, "user_version", 1).unwrap();
        for (run, state) in [
            ("a", "open"),
            ("b", "awaiting_approval:3"),
            ("c", "ambiguous:12"),
            ("d", "finished:Completed"),
            ("e", "finished:Denied"),
        ] {
            connection
                .execute(
                    "INSERT INTO runs (run, epoch, attempts, conversation, ledger, state) VALUES (?1, 1, 1, '[]', '', ?2)",
                    [run, state],
                )
                .unwrap();
        }
        migrate(&mut connection).unwrap();
        let version: i64 = connection.pragma_query_value(None, "user_version", |row| row.get(0)).unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        let states: Vec<(RunState, Option<String>)> = ["a", "b", "c", "d", "e"]
            .into_iter()
            .map(|run| {
                let (row, lease) = read::run_row(&connection, run, 0).unwrap().unwrap();
                assert_eq!((row.definition.as_str(), row.labels.len()), ("", 0));
                (row.state, lease.map(|lease| lease.holder))
            })
            .collect();
        assert_eq!(
            states,
            [
                (RunState::Open, None),
                (RunState::AwaitingApproval(3), None),
                (RunState::Ambiguous(12), None),
                (RunState::Finished(Status::Completed), None),
                (RunState::Finished(Status::Denied), None),
            ]
        );
        migrate(&mut connection).unwrap();
    }
}
