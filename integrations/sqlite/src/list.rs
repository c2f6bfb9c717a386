//! Listing runs by state and by label, one page in run-id order, in one read transaction.
//!
//! # Invariants
//!
//! - One statement per page, its shape chosen from a fixed set by the query's filters (never
//!   built from a stored or given text: every value is a bound parameter), walking an index in
//!   run-id order from the cursor: a page costs about the same wherever it starts.
//! - A run whose lease is live is `Running` and in no other state's listing, by the same clock
//!   the leases are judged by.

use loopbound::journal::backend::ListedRow;
use loopbound::journal::{JournalError, RunQuery, StateFilter};
use rusqlite::{Connection, params};

use crate::error::{storage, to_u32, to_u64};
use crate::lease::lease;
use crate::read;

/// The `WHERE` clause's state condition for `filter`, over the parameters `?3` (now), `?4` (the
/// state's name), `?5` (a status); `?6` and `?7` are a label's key and value.
fn state_condition(filter: Option<StateFilter>) -> &'static str {
    match filter {
        None => "1",
        Some(StateFilter::Running) => "r.lease_until > ?3",
        Some(StateFilter::Finished(Some(_))) => {
            "(r.lease_until IS NULL OR r.lease_until <= ?3) AND r.state = ?4 AND r.state_status = ?5"
        }
        Some(_) => "(r.lease_until IS NULL OR r.lease_until <= ?3) AND r.state = ?4",
    }
}

/// The stored state name a filter selects.
fn state_name(filter: Option<StateFilter>) -> &'static str {
    match filter {
        Some(StateFilter::Open) => "open",
        Some(StateFilter::AwaitingApproval) => "awaiting_approval",
        Some(StateFilter::Ambiguous) => "ambiguous",
        Some(StateFilter::Finished(_)) => "finished",
        _ => "",
    }
}

/// One page of `query` as of `now`.
pub(crate) fn page(
    connection: &Connection,
    query: &RunQuery,
    now: i64,
) -> Result<Vec<ListedRow>, JournalError> {
    let filter = query.state_filter();
    let (from, key, value) = match query.label_filter() {
        Some((key, value)) => {
            ("labels l JOIN runs r ON r.run = l.run AND l.key = ?6 AND l.value = ?7", key, value)
        }
        None => ("runs r", "", ""),
    };
    let run = if query.label_filter().is_some() { "l.run" } else { "r.run" };
    let sql = format!(
        "SELECT r.run, r.epoch, r.attempts, r.state, r.state_operation, r.state_status, r.lease_holder, \
         r.lease_until FROM {from} WHERE {run} > ?1 AND {} ORDER BY {run} LIMIT ?2",
        state_condition(filter)
    );
    let status = match filter {
        Some(StateFilter::Finished(Some(status))) => status.as_str(),
        _ => "",
    };
    let after = query.cursor().map_or("", |cursor| cursor.as_str());
    let mut statement = connection.prepare_cached(&sql).map_err(storage)?;
    let every = params![after, i64::from(query.page_size()), now, state_name(filter), status, key, value];
    // The statement numbers its parameters up to the highest it uses; the others are not bound.
    let used = every.get(..statement.parameter_count()).unwrap_or(every);
    let mut rows = statement.query(used).map_err(storage)?;
    let mut found = Vec::new();
    while let Some(row) = rows.next().map_err(storage)? {
        let run: String = row.get(0).map_err(storage)?;
        let name: String = row.get(3).map_err(storage)?;
        let status: Option<String> = row.get(5).map_err(storage)?;
        found.push(ListedRow {
            epoch: to_u64(row.get(1).map_err(storage)?, "a run's epoch")?,
            attempts: to_u32(row.get(2).map_err(storage)?, "a run's attempts")?,
            state: read::state(&name, row.get(4).map_err(storage)?, status.as_deref())?,
            lease: lease(row.get(6).map_err(storage)?, row.get(7).map_err(storage)?, now)?,
            labels: Vec::new(),
            run,
        });
    }
    drop(rows);
    for listed in &mut found {
        listed.labels = read::labels(connection, &listed.run)?;
    }
    Ok(found)
}
