//! Writing: taking a run for an attempt, renewing its lease, and one batch of rows, each inside
//! a write transaction that the caller opens and commits (one of its own, or a group's, see
//! [`group`](crate::group)).
//!
//! # Invariants
//!
//! - Every write runs inside a `BEGIN IMMEDIATE` transaction: the lease and the epoch are read,
//!   and every row written, under SQLite's write lock, so no other writer (thread or process)
//!   can take the run over in between. Of attempts racing for one run, the first to take the lock is
//!   granted; the others find its live lease and are refused
//!   ([`LeaseHeld`](JournalError::LeaseHeld)) without a write.
//! - A live lease whose holder is a dead process of this machine
//!   ([`is_dead_holder`](loopbound::journal::backend::is_dead_holder)) is taken over at once by an
//!   update conditioned on the lease still being that holder's under the same epoch (and under
//!   the write lock): of processes racing to take it, the first is granted and the others find
//!   its live lease.
//! - A batch under [`Fence::Epoch`] writes only while the epoch is the run's and its lease live
//!   (else [`LeaseLost`](JournalError::LeaseLost)), and extends the lease; one under
//!   [`Fence::Host`] only while no lease is live.
//! - Inserts never replace: a key that exists fails the statement (the tables' keys), and the
//!   whole transaction rolls back.
//! - [`Entry::ExpectState`] reads the run's state inside the same transaction: a state another
//!   writer changed since the host read it fails the batch as a conflict, nothing written.

use loopbound::journal::backend::{Batch, Entry, Fence, RunRow, StoredRun, is_dead_holder};
use loopbound::journal::{JournalError, RunId, RunState};
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};

use crate::error::storage;
use crate::lease::now_micros;
use crate::read;

fn int(value: u32) -> i64 {
    i64::from(value)
}

/// Who writes: the lease holder's name and the lease's length in microseconds.
pub(crate) struct Holder<'a> {
    pub(crate) name: &'a str,
    pub(crate) lease: i64,
}

impl Holder<'_> {
    fn until(&self, now: i64) -> i64 {
        now.saturating_add(self.lease)
    }
}

pub(crate) fn immediate(connection: &mut Connection) -> Result<Transaction<'_>, JournalError> {
    connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(storage)
}

/// Creates or takes `run` for a new attempt, inside the caller's write transaction; returns its
/// rows afterwards and whether it wrote.
pub(crate) fn acquire(
    transaction: &Connection,
    run: &str,
    fresh: &RunRow,
    holder: &Holder<'_>,
) -> Result<(StoredRun, bool), JournalError> {
    let now = now_micros()?;
    let wrote = match read::run_row(transaction, run, now)? {
        None => {
            transaction
                .execute(
                    "INSERT INTO runs (run, epoch, attempts, conversation, ledger, state, state_operation, \
                     state_status, definition, lease_holder, lease_until) \
                     VALUES (?1, 1, 1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                    params![
                        run,
                        fresh.conversation,
                        fresh.ledger,
                        fresh.state.name(),
                        fresh.state.operation().map(int),
                        fresh.state.status().map(loopbound::Status::as_str),
                        fresh.definition,
                        holder.name,
                        holder.until(now)
                    ],
                )
                .map_err(storage)?;
            for label in &fresh.labels {
                transaction
                    .execute(
                        "INSERT INTO labels (run, key, value) VALUES (?1, ?2, ?3)",
                        params![run, label.key, label.value],
                    )
                    .map_err(storage)?;
            }
            true
        }
        Some((row, _)) if row.state.is_finished() => false,
        Some((row, Some(lease))) if lease.is_live() => {
            if !(is_dead_holder(&lease.holder)
                && take_over(transaction, run, row.epoch, &lease.holder, holder, now)?)
            {
                return Err(JournalError::LeaseHeld { holder: lease.holder, remaining: lease.remaining });
            }
            true
        }
        Some((row, _)) => {
            let epoch = i64::try_from(row.epoch.saturating_add(1))
                .map_err(|_| JournalError::Corrupt("the run's epoch out of range".into()))?;
            transaction
                .execute(
                    "UPDATE runs SET epoch = ?2, attempts = attempts + 1, lease_holder = ?3, lease_until = ?4 \
                     WHERE run = ?1",
                    params![run, epoch, holder.name, holder.until(now)],
                )
                .map_err(storage)?;
            true
        }
    };
    let stored = read::stored_run(transaction, run, now)?
        .ok_or_else(|| JournalError::storage("the run vanished inside its transaction"))?;
    Ok((stored, wrote))
}

/// Takes `run` over from `dead`, a holder judged dead, only while its lease is still `dead`'s
/// under `epoch`: whether it did.
fn take_over(
    transaction: &Connection,
    run: &str,
    epoch: u64,
    dead: &str,
    holder: &Holder<'_>,
    now: i64,
) -> Result<bool, JournalError> {
    let epoch =
        i64::try_from(epoch).map_err(|_| JournalError::Corrupt("the run's epoch out of range".into()))?;
    let changed = transaction
        .execute(
            "UPDATE runs SET epoch = epoch + 1, attempts = attempts + 1, lease_holder = ?4, lease_until = ?5 \
             WHERE run = ?1 AND epoch = ?2 AND lease_holder = ?3 AND state <> 'finished'",
            params![run, epoch, dead, holder.name, holder.until(now)],
        )
        .map_err(storage)?;
    Ok(changed == 1)
}

/// Checks that `epoch` holds `run`'s live lease and extends it; `LeaseLost` otherwise.
fn extend(
    transaction: &Connection,
    run: &str,
    epoch: u64,
    holder: &Holder<'_>,
    now: i64,
) -> Result<(), JournalError> {
    let epoch = i64::try_from(epoch).map_err(|_| JournalError::LeaseLost)?;
    let changed = transaction
        .prepare_cached("UPDATE runs SET lease_until = ?3 WHERE run = ?1 AND epoch = ?2 AND lease_until > ?4")
        .and_then(|mut statement| statement.execute(params![run, epoch, holder.until(now), now]))
        .map_err(storage)?;
    if changed == 1 {
        return Ok(());
    }
    let exists: bool = transaction
        .query_row("SELECT count(*) FROM runs WHERE run = ?1", [run], |row| row.get::<_, i64>(0))
        .map_err(storage)?
        > 0;
    Err(if exists { JournalError::LeaseLost } else { JournalError::UnknownRun })
}

/// Extends the lease of the attempt with `epoch`, inside the caller's write transaction.
pub(crate) fn renew(
    transaction: &Connection,
    run: &str,
    epoch: u64,
    holder: &Holder<'_>,
) -> Result<(), JournalError> {
    extend(transaction, run, epoch, holder, now_micros()?)
}

/// Writes `batch` if `fence` holds, inside the caller's write transaction.
pub(crate) fn commit(
    transaction: &Connection,
    run: &str,
    fence: Fence,
    batch: &Batch,
    holder: &Holder<'_>,
) -> Result<(), JournalError> {
    let now = now_micros()?;
    match fence {
        Fence::Epoch(epoch) => extend(transaction, run, epoch, holder, now)?,
        Fence::Host => {
            let (_, lease) = read::run_row(transaction, run, now)?.ok_or(JournalError::UnknownRun)?;
            if let Some(lease) = lease.filter(loopbound::journal::Lease::is_live) {
                return Err(JournalError::LeaseHeld { holder: lease.holder, remaining: lease.remaining });
            }
        }
    }
    let mut seq: i64 = transaction
        .query_row("SELECT coalesce(max(seq), 0) FROM events WHERE run = ?1", [run], |row| row.get(0))
        .map_err(storage)?;
    for entry in &batch.entries {
        if *entry == Entry::Release && matches!(fence, Fence::Host) {
            continue;
        }
        write(transaction, run, entry, &mut seq)?;
    }
    Ok(())
}

fn write(transaction: &Connection, run: &str, entry: &Entry, seq: &mut i64) -> Result<(), JournalError> {
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
            "INSERT INTO proposals (run, ordinal, reply, idx, tool, capability, effect, arguments, expires) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                run,
                int(row.ordinal),
                int(row.reply),
                int(row.index),
                row.tool,
                row.capability,
                row.effect,
                row.arguments,
                row.expires.map(|millis| i64::try_from(millis).unwrap_or(i64::MAX))
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
                "INSERT INTO events (run, seq, kind, name, count, operation, decided_by, reason) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![run, *seq, row.kind, row.name, int(row.count), row.operation, row.by, row.reason],
            )
        }
        Entry::ExpectState(state) => expect_state(transaction, run, *state),
        Entry::Ledger(ledger) => execute("UPDATE runs SET ledger = ?2 WHERE run = ?1", params![run, ledger]),
        Entry::State(state) => execute(
            "UPDATE runs SET state = ?2, state_operation = ?3, state_status = ?4 WHERE run = ?1",
            params![
                run,
                state.name(),
                state.operation().map(int),
                state.status().map(loopbound::Status::as_str)
            ],
        ),
        Entry::Definition(definition) => {
            execute("UPDATE runs SET definition = ?2 WHERE run = ?1", params![run, definition])
        }
        Entry::CancelHonoured => execute("UPDATE runs SET cancel_by = NULL WHERE run = ?1", params![run]),
        Entry::Release => {
            execute("UPDATE runs SET lease_holder = NULL, lease_until = NULL WHERE run = ?1", params![run])
        }
        Entry::Expiry(row) => {
            let mut statement = transaction
                .prepare_cached("UPDATE proposals SET expires = ?3 WHERE run = ?1 AND ordinal = ?2")
                .map_err(storage)?;
            let expires = i64::try_from(row.expires).unwrap_or(i64::MAX);
            match statement.execute(params![run, int(row.ordinal), expires]).map_err(storage)? {
                0 => Err(JournalError::Conflict("no proposal for this operation".into())),
                _ => Ok(()),
            }
        }
        Entry::Update(row) => execute(
            "INSERT INTO updates (run, seq, line) VALUES (?1, ?2, ?3)",
            params![run, i64::try_from(row.seq).unwrap_or(i64::MAX), row.line],
        ),
    }
}

/// Refuses the batch unless `run`'s state is `state` now (under the transaction's write lock).
fn expect_state(transaction: &Connection, run: &str, state: RunState) -> Result<(), JournalError> {
    let (row, _) = read::run_row(transaction, run, now_micros()?)?.ok_or(JournalError::UnknownRun)?;
    if row.state == state {
        Ok(())
    } else {
        Err(JournalError::Conflict("another state than the one expected".into()))
    }
}

/// Records that `by` asks to cancel `run`.
pub(crate) fn request_cancel(connection: &mut Connection, run: &str, by: &str) -> Result<(), JournalError> {
    let transaction = immediate(connection)?;
    let changed = transaction
        .execute("UPDATE runs SET cancel_by = ?2 WHERE run = ?1", params![run, by])
        .map_err(storage)?;
    if changed == 0 {
        return Err(JournalError::UnknownRun);
    }
    transaction.commit().map_err(storage)
}

/// Who asked to cancel `run`, if anyone did and no attempt honoured it.
/// How many run ids one statement of [`cancel_requests`] names.
const CANCEL_CHUNK: usize = 256;

/// Which of `runs` have a cancel request, in one read transaction (a statement per
/// [`CANCEL_CHUNK`] runs, each looking them up by primary key).
pub(crate) fn cancel_requests(
    connection: &mut Connection,
    runs: &[RunId],
) -> Result<Vec<RunId>, JournalError> {
    let transaction = connection.transaction().map_err(storage)?;
    let mut requested = Vec::new();
    for chunk in runs.chunks(CANCEL_CHUNK) {
        let marks = vec!["?"; chunk.len()].join(",");
        let sql = format!("SELECT run FROM runs WHERE cancel_by IS NOT NULL AND run IN ({marks})");
        let mut statement = transaction.prepare_cached(&sql).map_err(storage)?;
        let ids = chunk.iter().map(RunId::as_str);
        let found = statement
            .query_map(rusqlite::params_from_iter(ids), |row| row.get::<_, String>(0))
            .map_err(storage)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(storage)?;
        for id in found {
            requested.push(RunId::new(&id).map_err(|_| JournalError::Corrupt(format!("run id {id:?}")))?);
        }
    }
    transaction.commit().map_err(storage)?;
    Ok(requested)
}

pub(crate) fn cancel_requested(connection: &Connection, run: &str) -> Result<Option<String>, JournalError> {
    let mut statement =
        connection.prepare_cached("SELECT cancel_by FROM runs WHERE run = ?1").map_err(storage)?;
    let by: Option<Option<String>> =
        statement.query_row([run], |row| row.get(0)).optional().map_err(storage)?;
    Ok(by.flatten())
}
