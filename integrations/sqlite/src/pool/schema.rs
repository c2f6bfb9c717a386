//! The pools' tables, versioned apart from the journal's, so that one file may hold both.
//!
//! # Invariants
//!
//! - The pools' schema version is the row of `loopbound_pool_schema` (the journal's own is the
//!   file's `user_version`, untouched here); migrations run in one exclusive transaction with
//!   the version's update, so processes that open one new file at once create the tables once.
//! - A file is used only if it is a loopbound file (its `application_id` is
//!   [`APPLICATION_ID`](crate::APPLICATION_ID)) or empty (it then becomes one, so that the
//!   journal accepts it too); any other file is refused as [`PoolError::Corrupt`], untouched.
//! - A file whose pools' version is newer than this build's is refused, never downgraded.

use loopbound::pool::PoolError;
use rusqlite::{Connection, TransactionBehavior};

use super::fail;
use crate::APPLICATION_ID;

/// The newest pools' schema version this build writes.
pub const POOL_SCHEMA_VERSION: i64 = 1;

const V1: &str = "
CREATE TABLE loopbound_pools (
    pool TEXT PRIMARY KEY,
    calls INTEGER,
    tokens INTEGER,
    cost INTEGER,
    window TEXT NOT NULL
) STRICT;
CREATE TABLE loopbound_pool_windows (
    pool TEXT NOT NULL REFERENCES loopbound_pools (pool),
    start INTEGER NOT NULL,
    settled_calls INTEGER NOT NULL,
    settled_tokens INTEGER NOT NULL,
    settled_cost INTEGER NOT NULL,
    reserved_calls INTEGER NOT NULL,
    reserved_tokens INTEGER NOT NULL,
    reserved_cost INTEGER NOT NULL,
    PRIMARY KEY (pool, start)
) STRICT;
CREATE TABLE loopbound_pool_holds (
    hold INTEGER PRIMARY KEY AUTOINCREMENT,
    holder TEXT NOT NULL,
    expires INTEGER NOT NULL,
    expired INTEGER NOT NULL,
    calls INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    cost INTEGER NOT NULL
) STRICT;
CREATE INDEX loopbound_pool_holds_open ON loopbound_pool_holds (expires) WHERE expired = 0;
CREATE TABLE loopbound_pool_hold_parts (
    hold INTEGER NOT NULL REFERENCES loopbound_pool_holds (hold) ON DELETE CASCADE,
    pool TEXT NOT NULL,
    start INTEGER NOT NULL,
    PRIMARY KEY (hold, pool)
) STRICT;
";

/// Each version's statements; version n is `MIGRATIONS[n - 1]`.
const MIGRATIONS: &[&str] = &[V1];

/// Brings the file's pools to [`POOL_SCHEMA_VERSION`], or refuses the file.
pub(crate) fn migrate(connection: &mut Connection) -> Result<(), PoolError> {
    let transaction = connection
        .transaction_with_behavior(TransactionBehavior::Exclusive)
        .map_err(fail("opening the file"))?;
    let pragma = |name: &str| -> Result<i64, PoolError> {
        transaction
            .pragma_query_value(None, name, |row| row.get(0))
            .map_err(fail("reading the file's header"))
    };
    let application = pragma("application_id")?;
    let tables: i64 = transaction
        .query_row("SELECT count(*) FROM sqlite_schema WHERE type = 'table'", [], |row| row.get(0))
        .map_err(fail("reading the file's tables"))?;
    if application != APPLICATION_ID && !(application == 0 && tables == 0) {
        return Err(PoolError::Corrupt("the file is a SQLite database but not a loopbound file".into()));
    }
    transaction
        .execute_batch("CREATE TABLE IF NOT EXISTS loopbound_pool_schema (version INTEGER NOT NULL) STRICT")
        .map_err(fail("creating the pools' tables"))?;
    let version: i64 = transaction
        .query_row("SELECT coalesce(max(version), 0) FROM loopbound_pool_schema", [], |row| row.get(0))
        .map_err(fail("reading the pools' schema version"))?;
    if version > POOL_SCHEMA_VERSION {
        return Err(PoolError::Corrupt("the pools' tables are newer than this build".into()));
    }
    for (next, statements) in
        (version + 1..).zip(MIGRATIONS.iter().skip(usize::try_from(version).unwrap_or(0)))
    {
        transaction.execute_batch(statements).map_err(fail("creating the pools' tables"))?;
        transaction
            .execute("DELETE FROM loopbound_pool_schema", [])
            .and_then(|_| {
                transaction.execute("INSERT INTO loopbound_pool_schema (version) VALUES (?1)", [next])
            })
            .map_err(fail("recording the pools' schema version"))?;
    }
    transaction.pragma_update(None, "application_id", APPLICATION_ID).map_err(fail("marking the file"))?;
    transaction.commit().map_err(fail("creating the pools' tables"))
}
