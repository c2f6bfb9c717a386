//! Writing: taking a run for an attempt, and one batch of rows, each in one transaction.
//!
//! # Invariants
//!
//! - A batch's writes and its fence check are one `BEGIN IMMEDIATE` transaction: the epoch read
//!   and every insert happen under SQLite's write lock, so no other writer (thread or process)
//!   can take the run over in between.
//! - Inserts never replace: a key that exists fails the statement (the tables' keys), and the
//!   whole transaction rolls back.

use loopbound::journal::{Batch, Entry, Fence, JournalError, RunRow, StoredRun};
use rusqlite::{Connection, Transaction, TransactionBehavior, params};

use crate::error::{storage, to_u64};
use crate::read;

fn int(value: u32) -> i64 {
    i64::from(value)
}

/// Creates or takes `run` for a new attempt; returns its rows afterwards and whether it wrote.
pub(crate) fn acquire(
    connection: &mut Connection,
    run: &str,
    fresh: &RunRow,
) -> Result<(StoredRun, bool), JournalError> {
    let transaction =
        connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(storage)?;
    let wrote = match read::run_row(&transaction, run)? {
        None => {
            transaction
                .execute(
                    "INSERT INTO runs (run, epoch, attempts, conversation, ledger, state) VALUES (?1, 1, 1, ?2, ?3, ?4)",
                    params![run, fresh.conversation, fresh.ledger, fresh.state],
                )
                .map_err(storage)?;
            true
        }
        Some(row) if row.state.starts_with("finished:") => false,
        Some(row) => {
            let epoch = i64::try_from(row.epoch.saturating_add(1))
                .map_err(|_| JournalError::Corrupt("the run's epoch out of range".into()))?;
            transaction
                .execute(
                    "UPDATE runs SET epoch = ?2, attempts = attempts + 1, state = ?3 WHERE run = ?1",
                    params![run, epoch, fresh.state],
                )
                .map_err(storage)?;
            true
        }
    };
    let stored = read::stored_run(&transaction, run)?
        .ok_or_else(|| JournalError::storage("the run vanished inside its transaction"))?;
    transaction.commit().map_err(storage)?;
    Ok((stored, wrote))
}

/// Writes `batch` if `fence` holds.
pub(crate) fn commit(
    connection: &mut Connection,
    run: &str,
    fence: Fence,
    batch: &Batch,
) -> Result<(), JournalError> {
    let transaction =
        connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(storage)?;
    let epoch: i64 = transaction
        .query_row("SELECT epoch FROM runs WHERE run = ?1", [run], |row| row.get(0))
        .map_err(|error| match error {
            rusqlite::Error::QueryReturnedNoRows => JournalError::UnknownRun,
            other => storage(other),
        })?;
    if let Fence::Epoch(expected) = fence
        && to_u64(epoch, "the run's epoch")? != expected
    {
        return Err(JournalError::LeaseLost);
    }
    let mut seq: i64 = transaction
        .query_row("SELECT coalesce(max(seq), 0) FROM events WHERE run = ?1", [run], |row| row.get(0))
        .map_err(storage)?;
    for entry in &batch.entries {
        write(&transaction, run, entry, &mut seq)?;
    }
    transaction.commit().map_err(storage)
}

fn write(transaction: &Transaction<'_>, run: &str, entry: &Entry, seq: &mut i64) -> Result<(), JournalError> {
    let execute = |sql: &str, values: &[&dyn rusqlite::ToSql]| {
        let mut statement = transaction.prepare_cached(sql).map_err(storage)?;
        statement.execute(values).map(drop).map_err(storage)
    };
    match entry {
        Entry::Reply(row) => execute(
            "INSERT INTO replies (run, ordinal, reply) VALUES (?1, ?2, ?3)",
            params![run, int(row.ordinal), row.reply],
        ),
        Entry::Call(row) => execute(
            "INSERT INTO calls (run, reply, idx, operation, is_error, text) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                run,
                int(row.reply),
                int(row.index),
                row.operation.map(int),
                i64::from(row.is_error),
                row.text
            ],
        ),
        Entry::Proposal(row) => execute(
            "INSERT INTO proposals (run, ordinal, reply, idx, tool, capability, effect, arguments) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                run,
                int(row.ordinal),
                int(row.reply),
                int(row.index),
                row.tool,
                row.capability,
                row.effect,
                row.arguments
            ],
        ),
        Entry::Decision(row) => execute(
            "INSERT INTO decisions (run, ordinal, verdict, decided_by) VALUES (?1, ?2, ?3, ?4)",
            params![run, int(row.ordinal), row.verdict, row.by],
        ),
        Entry::Started(row) => execute(
            "INSERT INTO started (run, ordinal, start) VALUES (?1, ?2, ?3)",
            params![run, int(row.ordinal), int(row.start)],
        ),
        Entry::Reconciliation(row) => execute(
            "INSERT INTO reconciliations (run, ordinal, start, resolution, result, reconciled_by) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![run, int(row.ordinal), int(row.start), row.resolution, row.result, row.by],
        ),
        Entry::Event(row) => {
            *seq = seq
                .checked_add(1)
                .ok_or_else(|| JournalError::Corrupt("the events' sequence out of range".into()))?;
            execute(
                "INSERT INTO events (run, seq, kind, name, count, operation, decided_by) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![run, *seq, row.kind, row.name, int(row.count), row.operation, row.by],
            )
        }
        Entry::Ledger(ledger) => execute("UPDATE runs SET ledger = ?2 WHERE run = ?1", params![run, ledger]),
        Entry::State(state) => execute("UPDATE runs SET state = ?2 WHERE run = ?1", params![run, state]),
    }
}
