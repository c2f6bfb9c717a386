//! Reading one run's rows inside a transaction, so that they are one consistent view.
//!
//! # Invariants
//!
//! - Rows come back in key order (events in append order), as the trait requires.
//! - An integer out of its range, a null where the journal needs a value, or a result that is
//!   not UTF-8 is [`Corrupt`](JournalError::Corrupt), never a panic; the message names the
//!   column, never the value.

use std::time::Duration;

use deadpool_postgres::Transaction;
use loopbound::journal::backend::{
    CallRow, DecisionRow, EventRow, LabelRow, ProposalRow, ReconciliationRow, ReplyRow, RunRow, StartedRow,
    StoredRun,
};
use loopbound::journal::{JournalError, Lease, RunState};
use tokio_postgres::Row;

use super::convert::{corrupt, to_u32, to_u64};
use crate::error::Redactor;
use crate::lease::time_from_micros;

fn u32_at(row: &Row, index: usize, what: &str) -> Result<u32, JournalError> {
    to_u32(row.try_get::<_, i64>(index).map_err(|_| corrupt(what))?, what)
}

pub(super) fn text_at(row: &Row, index: usize, what: &str) -> Result<String, JournalError> {
    row.try_get::<_, String>(index).map_err(|_| corrupt(what))
}

fn maybe_text_at(row: &Row, index: usize, what: &str) -> Result<Option<String>, JournalError> {
    row.try_get::<_, Option<String>>(index).map_err(|_| corrupt(what))
}

fn bytes_text(bytes: Vec<u8>, what: &str) -> Result<String, JournalError> {
    String::from_utf8(bytes).map_err(|_| corrupt(what))
}

/// Every row of `sql` (which selects one run's rows with `$1` = the run) through `decode`.
async fn rows<T>(
    transaction: &Transaction<'_>,
    redactor: &Redactor,
    sql: &str,
    run: &str,
    decode: impl Fn(&Row) -> Result<T, JournalError>,
) -> Result<Vec<T>, JournalError> {
    let fail = |error: tokio_postgres::Error| JournalError::from(redactor.postgres(&error));
    let statement = transaction.prepare_cached(sql).await.map_err(fail)?;
    let found = transaction.query(&statement, &[&run]).await.map_err(fail)?;
    found.iter().map(decode).collect()
}

/// The columns of a run's row (of the table named `table`) that [`run_row`] and a listing
/// read, in this order: the state, its operation and status, the lease's holder, its expiry
/// and its time left (microseconds, by the database's clock).
pub(super) fn state_and_lease_columns(table: &str) -> String {
    format!(
        "{table}.state, {table}.state_operation, {table}.state_status, {table}.lease_holder, \
         (extract(epoch FROM {table}.lease_until) * 1000000)::bigint, \
         greatest(0, (extract(epoch FROM {table}.lease_until - now()) * 1000000))::bigint"
    )
}

/// The state and the lease of a row whose [`state_and_lease_columns`] start at `first`.
pub(super) fn state_and_lease(row: &Row, first: usize) -> Result<(RunState, Option<Lease>), JournalError> {
    let name = text_at(row, first, "the run's state")?;
    let operation = row
        .try_get::<_, Option<i64>>(first + 1)
        .map_err(|_| corrupt("the state's operation"))?
        .map(|ordinal| to_u32(ordinal, "the state's operation"))
        .transpose()?;
    let status = maybe_text_at(row, first + 2, "the state's status")?;
    let state = RunState::from_parts(&name, operation, status.as_deref())?;
    let holder = maybe_text_at(row, first + 3, "the lease's holder")?;
    let until = row.try_get::<_, Option<i64>>(first + 4).map_err(|_| corrupt("the lease's expiry"))?;
    let remaining = row.try_get::<_, Option<i64>>(first + 5).map_err(|_| corrupt("the lease's expiry"))?;
    let lease = match (holder, until, remaining) {
        // `greatest` yields 0 for a released lease's null expiry.
        (None, None, _) => None,
        (Some(holder), Some(until), Some(remaining)) => Some(Lease {
            holder,
            until: time_from_micros(until),
            remaining: Duration::from_micros(remaining.unsigned_abs()),
        }),
        _ => return Err(corrupt("the run's lease")),
    };
    Ok((state, lease))
}

/// The run's labels, by key.
pub(super) async fn labels(
    transaction: &Transaction<'_>,
    redactor: &Redactor,
    run: &str,
) -> Result<Vec<LabelRow>, JournalError> {
    rows(
        transaction,
        redactor,
        r#"SELECT key, value FROM loopbound_labels WHERE run_id = $1 ORDER BY key COLLATE "C""#,
        run,
        |r| Ok(LabelRow { key: text_at(r, 0, "a label's key")?, value: text_at(r, 1, "a label's value")? }),
    )
    .await
}

/// The run's row and its lease, if the run exists.
pub(super) async fn run_row(
    transaction: &Transaction<'_>,
    redactor: &Redactor,
    run: &str,
) -> Result<Option<(RunRow, Option<Lease>)>, JournalError> {
    let fail = |error: tokio_postgres::Error| JournalError::from(redactor.postgres(&error));
    let sql = format!(
        "SELECT r.epoch, r.attempts, r.conversation, r.ledger, coalesce(r.definition, ''), {} \
         FROM loopbound_runs r WHERE r.run_id = $1",
        state_and_lease_columns("r")
    );
    let statement = transaction.prepare_cached(&sql).await.map_err(fail)?;
    let Some(row) = transaction.query_opt(&statement, &[&run]).await.map_err(fail)? else {
        return Ok(None);
    };
    let wide = |index: usize, what: &str| row.try_get::<_, i64>(index).map_err(|_| corrupt(what));
    let (state, lease) = state_and_lease(&row, 5)?;
    let run_row = RunRow {
        epoch: to_u64(wide(0, "the run's epoch")?, "the run's epoch")?,
        attempts: to_u32(wide(1, "the run's attempts")?, "the run's attempts")?,
        conversation: text_at(&row, 2, "the run's conversation")?,
        ledger: text_at(&row, 3, "the run's ledger")?,
        state,
        definition: text_at(&row, 4, "the run's definition")?,
        labels: labels(transaction, redactor, run).await?,
    };
    Ok(Some((run_row, lease)))
}

/// Everything stored about `run`, if it exists.
pub(super) async fn stored_run(
    transaction: &Transaction<'_>,
    redactor: &Redactor,
    run: &str,
) -> Result<Option<StoredRun>, JournalError> {
    let Some((run_row, lease)) = run_row(transaction, redactor, run).await? else {
        return Ok(None);
    };
    let replies = rows(
        transaction,
        redactor,
        "SELECT ordinal, reply FROM loopbound_replies WHERE run_id = $1 ORDER BY ordinal",
        run,
        |r| Ok(ReplyRow { ordinal: u32_at(r, 0, "a reply's ordinal")?, reply: text_at(r, 1, "a reply")? }),
    )
    .await?;
    let calls = rows(
        transaction,
        redactor,
        "SELECT reply, idx, operation, is_error, text FROM loopbound_calls WHERE run_id = $1 \
         ORDER BY reply, idx",
        run,
        |r| {
            let operation = r.try_get::<_, Option<i64>>(2).map_err(|_| corrupt("a call's operation"))?;
            Ok(CallRow {
                reply: u32_at(r, 0, "a call's reply")?,
                index: u32_at(r, 1, "a call's index")?,
                operation: operation.map(|o| to_u32(o, "a call's operation")).transpose()?,
                is_error: r.try_get(3).map_err(|_| corrupt("a call's error flag"))?,
                text: bytes_text(r.try_get(4).map_err(|_| corrupt("a call's text"))?, "a call's text")?,
            })
        },
    )
    .await?;
    let proposals = rows(
        transaction,
        redactor,
        "SELECT ordinal, reply, idx, tool, capability, effect, arguments, expires FROM loopbound_proposals \
         WHERE run_id = $1 ORDER BY ordinal",
        run,
        |r| {
            Ok(ProposalRow {
                ordinal: u32_at(r, 0, "a proposal's ordinal")?,
                reply: u32_at(r, 1, "a proposal's reply")?,
                index: u32_at(r, 2, "a proposal's index")?,
                tool: text_at(r, 3, "a proposal's tool")?,
                capability: text_at(r, 4, "a proposal's capability")?,
                effect: text_at(r, 5, "a proposal's effect")?,
                arguments: text_at(r, 6, "a proposal's arguments")?,
                expires: r
                    .try_get::<_, Option<i64>>(7)
                    .map_err(|_| corrupt("a proposal's expiry"))?
                    .map(|millis| u64::try_from(millis).map_err(|_| corrupt("a proposal's expiry")))
                    .transpose()?,
            })
        },
    )
    .await?;
    let decisions = rows(
        transaction,
        redactor,
        "SELECT ordinal, verdict, decided_by FROM loopbound_decisions WHERE run_id = $1 ORDER BY ordinal",
        run,
        |r| {
            Ok(DecisionRow {
                ordinal: u32_at(r, 0, "a decision's ordinal")?,
                verdict: text_at(r, 1, "a decision's verdict")?,
                by: text_at(r, 2, "a decision's author")?,
            })
        },
    )
    .await?;
    let started = rows(
        transaction,
        redactor,
        "SELECT ordinal, start FROM loopbound_started WHERE run_id = $1 ORDER BY ordinal, start",
        run,
        |r| {
            Ok(StartedRow {
                ordinal: u32_at(r, 0, "a start's ordinal")?,
                start: u32_at(r, 1, "a start's number")?,
            })
        },
    )
    .await?;
    let reconciliations = rows(
        transaction,
        redactor,
        "SELECT ordinal, start, resolution, result, reconciled_by FROM loopbound_reconciliations \
         WHERE run_id = $1 ORDER BY ordinal, start",
        run,
        |r| {
            let result = r
                .try_get::<_, Option<Vec<u8>>>(3)
                .map_err(|_| corrupt("a reconciliation's result"))?
                .map(|bytes| bytes_text(bytes, "a reconciliation's result"))
                .transpose()?;
            Ok(ReconciliationRow {
                ordinal: u32_at(r, 0, "a reconciliation's ordinal")?,
                start: u32_at(r, 1, "a reconciliation's start")?,
                resolution: text_at(r, 2, "a reconciliation's resolution")?,
                result,
                by: text_at(r, 4, "a reconciliation's author")?,
            })
        },
    )
    .await?;
    let events = rows(
        transaction,
        redactor,
        "SELECT kind, name, count, operation, decided_by, reason FROM loopbound_events WHERE run_id = $1 \
         ORDER BY seq",
        run,
        |r| {
            Ok(EventRow {
                kind: text_at(r, 0, "an event's kind")?,
                name: text_at(r, 1, "an event's name")?,
                count: u32_at(r, 2, "an event's count")?,
                operation: maybe_text_at(r, 3, "an event's operation")?,
                by: maybe_text_at(r, 4, "an event's author")?,
                reason: maybe_text_at(r, 5, "an event's reason")?,
            })
        },
    )
    .await?;
    let last = rows(
        transaction,
        redactor,
        "SELECT coalesce(max(seq), 0) FROM loopbound_updates WHERE run_id = $1",
        run,
        |r| r.try_get::<_, i64>(0).map_err(|_| corrupt("the stream's last line")),
    )
    .await?;
    let stream =
        u64::try_from(last.first().copied().unwrap_or(0)).map_err(|_| corrupt("the stream's last line"))?;
    Ok(Some(StoredRun {
        stream,
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
