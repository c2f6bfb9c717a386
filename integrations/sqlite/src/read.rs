//! Reading one run's rows, in one transaction so that they are a consistent snapshot.
//!
//! # Invariants
//!
//! - Rows come back in key order (events in append order); an integer out of its range or a
//!   value of the wrong type is [`Corrupt`](JournalError::Corrupt), never a panic.

use loopbound::journal::backend::{
    CallRow, DecisionRow, EventRow, LabelRow, ProposalRow, ReconciliationRow, ReplyRow, RunRow, StartedRow,
    StoredRun, UpdateRow,
};
use loopbound::journal::{JournalError, Lease, RunState};
use rusqlite::{Connection, OptionalExtension, Row};

use crate::error::{storage, to_u32, to_u64};
use crate::lease::lease;

fn u32_at(row: &Row<'_>, index: usize, what: &str) -> Result<u32, JournalError> {
    to_u32(row.get::<_, i64>(index).map_err(storage)?, what)
}

/// A proposal's expiry: a non-negative count of milliseconds, or none.
fn expiry_at(row: &Row<'_>, index: usize) -> Result<Option<u64>, JournalError> {
    let millis: Option<i64> = row.get(index).map_err(storage)?;
    millis.map(|millis| to_u64(millis, "a proposal's expiry")).transpose()
}

fn text_at(row: &Row<'_>, index: usize) -> Result<String, JournalError> {
    row.get::<_, String>(index).map_err(storage)
}

fn maybe_text_at(row: &Row<'_>, index: usize) -> Result<Option<String>, JournalError> {
    row.get::<_, Option<String>>(index).map_err(storage)
}

/// Every row of `sql` (which selects one run's rows with `?1` = the run) through `decode`.
fn rows<T>(
    connection: &Connection,
    sql: &str,
    run: &str,
    decode: impl Fn(&Row<'_>) -> Result<T, JournalError>,
) -> Result<Vec<T>, JournalError> {
    let mut statement = connection.prepare_cached(sql).map_err(storage)?;
    let mut rows = statement.query([run]).map_err(storage)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(storage)? {
        out.push(decode(row)?);
    }
    Ok(out)
}

/// The state stored as its three columns.
pub(crate) fn state(
    name: &str,
    operation: Option<i64>,
    status: Option<&str>,
) -> Result<RunState, JournalError> {
    let operation = operation.map(|ordinal| to_u32(ordinal, "the state's operation")).transpose()?;
    RunState::from_parts(name, operation, status)
}

/// The run's labels, by key.
pub(crate) fn labels(connection: &Connection, run: &str) -> Result<Vec<LabelRow>, JournalError> {
    rows(connection, "SELECT key, value FROM labels WHERE run = ?1 ORDER BY key", run, |r| {
        Ok(LabelRow { key: text_at(r, 0)?, value: text_at(r, 1)? })
    })
}

/// The run's row and its lease as of `now`, if the run exists.
pub(crate) fn run_row(
    connection: &Connection,
    run: &str,
    now: i64,
) -> Result<Option<(RunRow, Option<Lease>)>, JournalError> {
    let mut statement = connection
        .prepare_cached(
            "SELECT epoch, attempts, conversation, ledger, state, state_operation, state_status, definition, \
             lease_holder, lease_until FROM runs WHERE run = ?1",
        )
        .map_err(storage)?;
    let row = statement
        .query_row([run], |row| {
            Ok((
                (
                    row.get::<_, i64>(0)?,
                    row.get::<_, i64>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, String>(3)?,
                ),
                (row.get::<_, String>(4)?, row.get::<_, Option<i64>>(5)?, row.get::<_, Option<String>>(6)?),
                row.get::<_, String>(7)?,
                (row.get::<_, Option<String>>(8)?, row.get::<_, Option<i64>>(9)?),
            ))
        })
        .optional()
        .map_err(storage)?;
    let Some((
        (epoch, attempts, conversation, ledger),
        (name, operation, status),
        definition,
        (holder, until),
    )) = row
    else {
        return Ok(None);
    };
    let row = RunRow {
        epoch: to_u64(epoch, "the run's epoch")?,
        attempts: to_u32(attempts, "the run's attempts")?,
        conversation,
        ledger,
        state: state(&name, operation, status.as_deref())?,
        definition,
        labels: labels(connection, run)?,
    };
    Ok(Some((row, lease(holder, until, now)?)))
}

/// Everything stored about `run`, if it exists.
pub(crate) fn stored_run(
    connection: &Connection,
    run: &str,
    now: i64,
) -> Result<Option<StoredRun>, JournalError> {
    let Some((run_row, lease)) = run_row(connection, run, now)? else {
        return Ok(None);
    };
    let replies =
        rows(connection, "SELECT ordinal, reply FROM replies WHERE run = ?1 ORDER BY ordinal", run, |r| {
            Ok(ReplyRow { ordinal: u32_at(r, 0, "a reply's ordinal")?, reply: text_at(r, 1)? })
        })?;
    let calls = calls(connection, run)?;
    let proposals = rows(
        connection,
        "SELECT ordinal, reply, idx, tool, capability, effect, arguments, expires FROM proposals \
         WHERE run = ?1 ORDER BY ordinal",
        run,
        |r| {
            Ok(ProposalRow {
                ordinal: u32_at(r, 0, "a proposal's ordinal")?,
                reply: u32_at(r, 1, "a proposal's reply")?,
                index: u32_at(r, 2, "a proposal's index")?,
                tool: text_at(r, 3)?,
                capability: text_at(r, 4)?,
                effect: text_at(r, 5)?,
                arguments: text_at(r, 6)?,
                expires: expiry_at(r, 7)?,
            })
        },
    )?;
    let decisions = rows(
        connection,
        "SELECT ordinal, verdict, decided_by FROM decisions WHERE run = ?1 ORDER BY ordinal",
        run,
        |r| {
            Ok(DecisionRow {
                ordinal: u32_at(r, 0, "a decision's ordinal")?,
                verdict: text_at(r, 1)?,
                by: text_at(r, 2)?,
            })
        },
    )?;
    let started = rows(
        connection,
        "SELECT ordinal, start FROM started WHERE run = ?1 ORDER BY ordinal, start",
        run,
        |r| {
            Ok(StartedRow {
                ordinal: u32_at(r, 0, "a start's ordinal")?,
                start: u32_at(r, 1, "a start's number")?,
            })
        },
    )?;
    let reconciliations = reconciliations(connection, run)?;
    let events = rows(
        connection,
        "SELECT kind, name, count, operation, decided_by, reason FROM events WHERE run = ?1 ORDER BY seq",
        run,
        |r| {
            Ok(EventRow {
                kind: text_at(r, 0)?,
                name: text_at(r, 1)?,
                count: u32_at(r, 2, "an event's count")?,
                operation: maybe_text_at(r, 3)?,
                by: maybe_text_at(r, 4)?,
                reason: maybe_text_at(r, 5)?,
            })
        },
    )?;
    let stream: i64 = connection
        .query_row("SELECT coalesce(max(seq), 0) FROM updates WHERE run = ?1", [run], |row| row.get(0))
        .map_err(storage)?;
    Ok(Some(StoredRun {
        stream: to_u64(stream, "the stream's last line")?,
        run: run_row,
        lease,
        replies,
        calls,
        proposals,
        decisions,
        started,
        reconciliations,
        events,
    }))
}

fn calls(connection: &Connection, run: &str) -> Result<Vec<CallRow>, JournalError> {
    rows(
        connection,
        "SELECT reply, idx, operation, is_error, text FROM calls WHERE run = ?1 ORDER BY reply, idx",
        run,
        |r| {
            let operation = r.get::<_, Option<i64>>(2).map_err(storage)?;
            let is_error = r.get::<_, i64>(3).map_err(storage)?;
            Ok(CallRow {
                reply: u32_at(r, 0, "a call's reply")?,
                index: u32_at(r, 1, "a call's index")?,
                operation: operation.map(|o| to_u32(o, "a call's operation")).transpose()?,
                is_error: match is_error {
                    0 => false,
                    1 => true,
                    _ => return Err(JournalError::Corrupt("a call's error flag".into())),
                },
                text: text_at(r, 4)?,
            })
        },
    )
}

fn reconciliations(connection: &Connection, run: &str) -> Result<Vec<ReconciliationRow>, JournalError> {
    rows(
        connection,
        "SELECT ordinal, start, resolution, result, reconciled_by FROM reconciliations WHERE run = ?1 \
         ORDER BY ordinal, start",
        run,
        |r| {
            Ok(ReconciliationRow {
                ordinal: u32_at(r, 0, "a reconciliation's ordinal")?,
                start: u32_at(r, 1, "a reconciliation's start")?,
                resolution: text_at(r, 2)?,
                result: maybe_text_at(r, 3)?,
                by: text_at(r, 4)?,
            })
        },
    )
}

/// Lines of `run`'s recorded stream after `after`, in order, at most `limit`.
pub(crate) fn updates(
    connection: &Connection,
    run: &str,
    after: u64,
    limit: usize,
) -> Result<Vec<UpdateRow>, JournalError> {
    let after = i64::try_from(after).unwrap_or(i64::MAX);
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut statement = connection
        .prepare_cached("SELECT seq, line FROM updates WHERE run = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3")
        .map_err(storage)?;
    let mut rows = statement.query(rusqlite::params![run, after, limit]).map_err(storage)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(storage)? {
        let seq = to_u64(row.get::<_, i64>(0).map_err(storage)?, "a stream line's number")?;
        out.push(UpdateRow { seq, line: text_at(row, 1)? });
    }
    Ok(out)
}
