//! One transaction for the fenced batches of many runs: what a group of commits and lease
//! renewals (see [`group`](super::group)) sends to the server.
//!
//! A round is four statements sent together as one pipeline on one connection, one round trip:
//!
//! 1. `BEGIN`;
//! 2. the lock: every run's row of the group, `FOR NO KEY UPDATE`, in run-id byte order, so two
//!    groups (two worker processes) that share runs lock them in one order and cannot deadlock;
//!    the rows it returns are the runs that exist;
//! 3. the write: one statement whose first part is the fence of every batch (the run's epoch
//!    and holder are the batch's and its lease is live), renewing each fenced lease and
//!    applying the batch's changes to its run's row (ledger, state, definition, cancel honoured,
//!    release) in the same update; its other parts insert the rows of the fenced batches only,
//!    one insert per table for the whole group (events numbered after their run's last, in
//!    their batch's order); it returns the fenced runs;
//! 4. `COMMIT`.
//!
//! # Invariants
//!
//! - A batch whose fence fails writes nothing, and is [`LeaseLost`](JournalError::LeaseLost)
//!   (the run exists) or [`UnknownRun`](JournalError::UnknownRun); the others of its round are
//!   not affected.
//! - Each fenced batch's effect is that of its transaction alone: the same rows, the run row's
//!   columns as its last entry of each kind leaves them, the lease renewed (or released), its
//!   events numbered in its order after the run's last one (read under the row's lock); see
//!   [`columns`](super::columns). A round holds at most one batch per run.
//! - When the lock or the write fails on the server (a unique violation, a deadlock, any
//!   statement error), the transaction has rolled back whole and the round says so
//!   ([`Round::RolledBack`]): nothing of it is written, and each batch must be committed alone to
//!   learn its own result. When the connection fails, the round's error is every batch's (a
//!   failed `COMMIT` may or may not have committed: fail closed, as a single commit does).
//! - A round told [`Round::Committed`] is committed: the server answered the `COMMIT` after
//!   both statements succeeded.

use std::collections::HashSet;

use futures_util::future::join4;
use loopbound::journal::JournalError;

use super::columns::{Columns, Fenced, WRITE};
use crate::error::Redactor;

/// The lock of a round's runs, in run-id byte order (the order of every group's lock).
const LOCK: &str = "SELECT run_id FROM loopbound_runs WHERE run_id = ANY($1::text[]) \
                    ORDER BY run_id COLLATE \"C\" FOR NO KEY UPDATE";

/// How a round ended.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Round {
    /// Committed: each batch's result, in the round's order (`Ok`: written; else its fence's
    /// failure, and nothing of it written).
    Committed(Vec<Result<(), JournalError>>),
    /// A statement failed on the server and the transaction rolled back: nothing written.
    RolledBack,
}

/// Commits `batches` (at most one per run) in one transaction on `client`, which must be idle
/// (no transaction open). On `Err` the connection may have failed mid-round: its state is
/// unknown, so the caller discards it.
pub(super) async fn round(
    client: &deadpool_postgres::Client,
    redactor: &Redactor,
    batches: &[Fenced<'_>],
) -> Result<Round, JournalError> {
    let fail = |error: &tokio_postgres::Error| JournalError::from(redactor.postgres(error));
    // Prepared first (a cached statement costs nothing), so that the four leave in order.
    let lock = client.prepare_cached(LOCK).await.map_err(|e| fail(&e))?;
    let write = client.prepare_cached(&WRITE).await.map_err(|e| fail(&e))?;
    let columns = Columns::of(batches)?;
    let params = columns.params();
    let (begun, locked, written, committed) = join4(
        client.batch_execute("BEGIN"),
        client.query(&lock, &[columns.runs()]),
        client.query(&write, &params),
        client.batch_execute("COMMIT"),
    )
    .await;
    begun.map_err(|e| fail(&e))?;
    let statements = locked.and_then(|locked| written.map(|written| (locked, written)));
    let (locked, written) = match statements {
        Ok(rows) => rows,
        // The server failed a statement: its `COMMIT` was a rollback (its answer is checked so
        // that the connection is known idle again).
        Err(error) if error.as_db_error().is_some() => {
            return committed.map(|()| Round::RolledBack).map_err(|e| fail(&e));
        }
        Err(error) => return Err(fail(&error)),
    };
    match committed {
        Ok(()) => {}
        Err(error) if error.as_db_error().is_some() => return Ok(Round::RolledBack),
        Err(error) => return Err(fail(&error)),
    }
    let names = |rows: Vec<tokio_postgres::Row>| -> Result<HashSet<String>, JournalError> {
        rows.iter().map(|row| row.try_get::<_, String>(0).map_err(|e| fail(&e))).collect()
    };
    let (existing, fenced): (HashSet<String>, HashSet<String>) = (names(locked)?, names(written)?);
    let results = batches
        .iter()
        .map(|batch| {
            if fenced.contains(batch.run) {
                Ok(())
            } else if existing.contains(batch.run) {
                Err(JournalError::LeaseLost)
            } else {
                Err(JournalError::UnknownRun)
            }
        })
        .collect();
    Ok(Round::Committed(results))
}
