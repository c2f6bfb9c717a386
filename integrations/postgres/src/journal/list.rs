//! Listing runs by state and by label, one page in run-id order, in one read-only snapshot.
//!
//! # Invariants
//!
//! - One statement for the page and one for its labels, shaped from a fixed set by the query's
//!   filters, every value a bound parameter; each walks an index in run-id byte order
//!   (`COLLATE "C"`) from the cursor, so a page costs about the same wherever it starts.
//! - A run whose lease is live (by the database's clock) is `Running` and in no other state's
//!   listing. Rows that a host leased through [`Store::acquire`](crate::Store::acquire) without
//!   ever journaling them (no state) are not runs of the journal and are never listed.

use std::collections::BTreeMap;

use deadpool_postgres::Transaction;
use loopbound::journal::backend::{LabelRow, ListedRow};
use loopbound::journal::{JournalError, RunQuery, StateFilter};
use tokio_postgres::types::ToSql;

use super::convert::{corrupt, to_u32, to_u64};
use super::read::{state_and_lease, state_and_lease_columns, text_at};
use crate::error::Redactor;

/// The stored state name a filter selects, if it selects by name.
fn state_name(filter: StateFilter) -> Option<&'static str> {
    match filter {
        StateFilter::Open => Some("open"),
        StateFilter::AwaitingApproval => Some("awaiting_approval"),
        StateFilter::Ambiguous => Some("ambiguous"),
        StateFilter::Finished(_) => Some("finished"),
        _ => None,
    }
}

/// One page of `query`.
pub(super) async fn page(
    transaction: &Transaction<'_>,
    redactor: &Redactor,
    query: &RunQuery,
) -> Result<Vec<ListedRow>, JournalError> {
    let after = query.cursor().map_or("", |cursor| cursor.as_str()).to_owned();
    let limit = i64::from(query.page_size());
    let mut params: Vec<Box<dyn ToSql + Sync + Send>> = vec![Box::new(after), Box::new(limit)];
    let mut placeholder = |value: Box<dyn ToSql + Sync + Send>| {
        params.push(value);
        format!("${}", params.len())
    };
    let (from, id) = match query.label_filter() {
        Some((key, value)) => {
            let key = placeholder(Box::new(key.to_owned()));
            let value = placeholder(Box::new(value.to_owned()));
            (
                format!(
                    "loopbound_labels l JOIN loopbound_runs r ON r.run_id = l.run_id AND l.key = {key} AND l.value = {value}"
                ),
                "l.run_id",
            )
        }
        None => ("loopbound_runs r".to_owned(), "r.run_id"),
    };
    let mut conditions = vec![format!(r#"{id} COLLATE "C" > $1"#), "r.state IS NOT NULL".to_owned()];
    match query.state_filter() {
        None => {}
        // `lease_holder IS NOT NULL` (implied by a live lease) lets the leased runs' partial
        // index serve the walk in id order.
        Some(StateFilter::Running) => {
            conditions.push("r.lease_holder IS NOT NULL AND r.lease_until > now()".to_owned());
        }
        Some(filter) => {
            conditions.push("(r.lease_until IS NULL OR r.lease_until <= now())".to_owned());
            let name = placeholder(Box::new(state_name(filter).unwrap_or_default().to_owned()));
            conditions.push(format!("r.state = {name}"));
            if let StateFilter::Finished(Some(status)) = filter {
                let status = placeholder(Box::new(status.as_str().to_owned()));
                conditions.push(format!("r.state_status = {status}"));
            }
        }
    }
    let columns = state_and_lease_columns("r");
    let sql = format!(
        r#"SELECT r.run_id, r.epoch, r.attempts, {columns} FROM {from} WHERE {} ORDER BY {id} COLLATE "C" LIMIT $2"#,
        conditions.join(" AND ")
    );
    let fail = |error: tokio_postgres::Error| JournalError::from(redactor.postgres(&error));
    let statement = transaction.prepare_cached(&sql).await.map_err(fail)?;
    let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|param| &**param as &(dyn ToSql + Sync)).collect();
    let rows = transaction.query(&statement, &refs).await.map_err(fail)?;
    let mut listed = Vec::with_capacity(rows.len());
    for row in &rows {
        let wide = |index: usize, what: &str| row.try_get::<_, i64>(index).map_err(|_| corrupt(what));
        let (state, lease) = state_and_lease(row, 3)?;
        listed.push(ListedRow {
            run: text_at(row, 0, "a run's id")?,
            epoch: to_u64(wide(1, "a run's epoch")?, "a run's epoch")?,
            attempts: to_u32(wide(2, "a run's attempts")?, "a run's attempts")?,
            state,
            lease,
            labels: Vec::new(),
        });
    }
    let ids: Vec<&str> = listed.iter().map(|run| run.run.as_str()).collect();
    let statement = transaction
        .prepare_cached(
            r#"SELECT run_id, key, value FROM loopbound_labels WHERE run_id = ANY($1) ORDER BY run_id, key COLLATE "C""#,
        )
        .await
        .map_err(fail)?;
    let mut labels: BTreeMap<String, Vec<LabelRow>> = BTreeMap::new();
    for row in transaction.query(&statement, &[&ids]).await.map_err(fail)? {
        let label =
            LabelRow { key: text_at(&row, 1, "a label's key")?, value: text_at(&row, 2, "a label's value")? };
        labels.entry(text_at(&row, 0, "a label's run")?).or_default().push(label);
    }
    for run in &mut listed {
        run.labels = labels.remove(&run.run).unwrap_or_default();
    }
    Ok(listed)
}
