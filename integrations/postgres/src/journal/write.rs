//! Writing: taking a run for an attempt under a lease, renewing it, and one batch of rows, each
//! in one transaction.
//!
//! # Invariants
//!
//! - A grant is one statement: an upsert whose update is conditioned on the run being
//!   unfinished and its lease released or expired, by the database's clock (a live lease is
//!   refused whoever holds it, this worker included: one attempt per run). Of attempts racing
//!   for one run, one is granted while its lease is live; the others read the holder and are
//!   refused with [`LeaseHeld`](JournalError::LeaseHeld), having written nothing.
//! - A live lease whose holder is a dead process of this machine
//!   ([`is_dead_holder`](loopbound::journal::backend::is_dead_holder)) is taken over at once, by an
//!   update conditioned on the lease still being that holder's under the epoch read: of
//!   workers racing to take one dead holder's run, one is granted and the others find its live
//!   lease and are refused. Judged by the worker, on its own machine: a holder of another
//!   machine is never judged dead, and its lease is waited out.
//! - A grant never changes an existing run's state, conversation, ledger, definition or labels;
//!   the labels are written with the run's first attempt. A grant that creates the run returns
//!   it as written (the grant's own row and the fresh rows, which it has no others yet) instead
//!   of reading it back: two statements and a round trip, where a resume reads every table.
//! - A batch under [`Fence::Epoch`] first updates the run's row where the epoch and the holder
//!   are the attempt's and the lease is live (renewing it): that checks the fence and locks the
//!   row until commit, so a takeover is ordered wholly before the batch (which then writes
//!   nothing: [`LeaseLost`](JournalError::LeaseLost)) or wholly after it. A [`Fence::Host`]
//!   batch locks the row and is refused while a lease is live. Either way the events' sequence
//!   is read under the lock.
//! - A batch's statements go to the server as one pipeline after the transaction's `BEGIN`:
//!   the fence first, then each row in the batch's order, each statement run in that order;
//!   the fence's outcome is judged first, and any failure rolls the whole transaction back.
//!   A commit costs about three round trips (begin, the pipeline, commit), not one per row.
//! - [`Entry::Release`] releases the lease in the batch's transaction, so another worker may
//!   take the run at once.
//! - Inserts never replace: a key that exists fails the statement (a unique violation, which is
//!   a [`Conflict`](JournalError::Conflict)), and the whole transaction rolls back.
//! - [`Entry::ExpectState`] reads the run's state after the fence locked its row: a state that
//!   another writer changed since the host read it fails the batch as a conflict, rolled back.

use std::time::Duration;

use deadpool_postgres::Transaction;
use futures_util::future::{join, join_all};
use loopbound::journal::backend::{Batch, Entry, EventRow, Fence, RunRow, StoredRun, is_dead_holder};
use loopbound::journal::{JournalError, RunState};
use tokio_postgres::types::ToSql;

use super::convert::corrupt;
use super::read;
use crate::error::Redactor;
use crate::id::WorkerId;
use crate::lease::epoch_param;

/// How many times `acquire` looks again when the lease it was refused turns out to be free.
pub(super) const ACQUIRE_ATTEMPTS: usize = 3;

const GRANT: &str = "
    INSERT INTO loopbound_runs AS r
           (run_id, epoch, attempts, lease_holder, lease_until, conversation, ledger, state,
            state_operation, state_status, definition)
    VALUES ($1, 1, 1, $2, now() + $3::bigint * interval '1 microsecond', $4, $5, $6, $7, $8, $9)
    ON CONFLICT (run_id) DO UPDATE
       SET epoch = r.epoch + 1,
           attempts = r.attempts + 1,
           lease_holder = excluded.lease_holder,
           lease_until = excluded.lease_until,
           conversation = coalesce(r.conversation, excluded.conversation),
           ledger = coalesce(r.ledger, excluded.ledger),
           state = coalesce(r.state, excluded.state),
           state_operation = CASE WHEN r.state IS NULL THEN excluded.state_operation ELSE r.state_operation END,
           state_status = CASE WHEN r.state IS NULL THEN excluded.state_status ELSE r.state_status END,
           definition = coalesce(r.definition, excluded.definition),
           updated_at = now()
     WHERE coalesce(r.state, '') <> 'finished'
       AND (r.lease_holder IS NULL OR r.lease_until <= now())
    RETURNING r.epoch, r.attempts = 1, r.state, r.state_operation, r.state_status, r.lease_holder,
              (extract(epoch FROM r.lease_until) * 1000000)::bigint,
              greatest(0, (extract(epoch FROM r.lease_until - now()) * 1000000))::bigint";

const LABEL: &str = "
    INSERT INTO loopbound_labels (run_id, key, value) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING";

/// A refusal's reading of the lease: the time left as of the statement, not of its
/// transaction's start, which may precede a takeover it waited for (the time left would then
/// exceed the lease).
const REFUSAL: &str = "
    SELECT coalesce(state, '') = 'finished',
           lease_holder,
           greatest(0, (extract(epoch FROM lease_until - clock_timestamp()) * 1000000))::bigint,
           epoch
      FROM loopbound_runs WHERE run_id = $1";

/// A grant from a holder judged dead: only while the lease is still its own under the epoch
/// read, so that of workers racing to take one dead holder's run, one is granted (the others'
/// updates, waiting for its row lock, then match nothing).
const TAKE_OVER: &str = "
    UPDATE loopbound_runs
       SET epoch = epoch + 1,
           attempts = attempts + 1,
           lease_holder = $4,
           lease_until = now() + $5::bigint * interval '1 microsecond',
           updated_at = now()
     WHERE run_id = $1 AND epoch = $2 AND lease_holder = $3 AND coalesce(state, '') <> 'finished'
    RETURNING epoch";

/// The fence of an attempt's batch, in one statement (so that its answer does not depend on what
/// the statements sent after it do): whether the attempt's live lease was renewed, and whether
/// the run exists.
const FENCE: &str = "
    WITH fenced AS (
        UPDATE loopbound_runs
           SET lease_until = now() + $4::bigint * interval '1 microsecond', updated_at = now()
         WHERE run_id = $1 AND epoch = $2 AND lease_holder = $3 AND lease_until > now()
        RETURNING epoch)
    SELECT EXISTS (SELECT 1 FROM fenced), EXISTS (SELECT 1 FROM loopbound_runs WHERE run_id = $1)";

const LOCK: &str = "
    SELECT lease_holder,
           greatest(0, (extract(epoch FROM lease_until - clock_timestamp()) * 1000000))::bigint
      FROM loopbound_runs WHERE run_id = $1 FOR UPDATE";

const RELEASE: &str =
    "UPDATE loopbound_runs SET lease_holder = NULL, lease_until = NULL, updated_at = now() WHERE run_id = $1";

// The statements that write each kind of entry, one row each.
const REPLY: &str = "INSERT INTO loopbound_replies (run_id, ordinal, reply) VALUES ($1, $2, $3)";
const CALL: &str = "INSERT INTO loopbound_calls (run_id, reply, idx, operation, is_error, text) \
                     VALUES ($1, $2, $3, $4, $5, $6)";
const PROPOSAL: &str = "INSERT INTO loopbound_proposals \
                     (run_id, ordinal, reply, idx, tool, capability, effect, arguments, expires) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";
const DECISION: &str = "INSERT INTO loopbound_decisions (run_id, ordinal, verdict, decided_by) \
                     VALUES ($1, $2, $3, $4)";
const STARTED: &str = "INSERT INTO loopbound_started (run_id, ordinal, start) VALUES ($1, $2, $3)";
const RECONCILIATION: &str = "INSERT INTO loopbound_reconciliations \
                     (run_id, ordinal, start, resolution, result, reconciled_by) \
                     VALUES ($1, $2, $3, $4, $5, $6)";
/// A batch's events in one statement, numbered after the run's last one (read under the
/// fence's lock) in the batch's order.
const EVENTS: &str = "INSERT INTO loopbound_events \
                      (run_id, seq, kind, name, count, operation, decided_by, reason) \
                      SELECT $1, last.seq + e.ord, e.kind, e.name, e.count, e.operation, e.decided_by, e.reason \
                        FROM (SELECT coalesce(max(seq), 0) AS seq FROM loopbound_events WHERE run_id = $1) AS last, \
                             unnest($2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[]) \
                             WITH ORDINALITY AS e(kind, name, count, operation, decided_by, reason, ord)";
const UPDATE: &str = "INSERT INTO loopbound_updates (run_id, seq, line) VALUES ($1, $2, $3)";
const EXPIRY: &str = "UPDATE loopbound_proposals SET expires = $3 WHERE run_id = $1 AND ordinal = $2";
/// Whether the run's state is the expected one (one row) or not (none), read under the fence's
/// lock.
const EXPECT_STATE: &str = "SELECT 1 FROM loopbound_runs WHERE run_id = $1 AND state = $2 \
                     AND state_operation IS NOT DISTINCT FROM $3 AND state_status IS NOT DISTINCT FROM $4";
const LEDGER: &str = "UPDATE loopbound_runs SET ledger = $2 WHERE run_id = $1";
const STATE: &str = "UPDATE loopbound_runs SET state = $2, state_operation = $3, state_status = $4 \
                     WHERE run_id = $1";
const DEFINITION: &str = "UPDATE loopbound_runs SET definition = $2 WHERE run_id = $1";
const CANCEL_HONOURED: &str = "UPDATE loopbound_runs SET cancel_by = NULL WHERE run_id = $1";

/// The statement that writes `entry`.
fn statement(entry: &Entry) -> &'static str {
    match entry {
        Entry::Reply(_) => REPLY,
        Entry::Call(_) => CALL,
        Entry::Proposal(_) => PROPOSAL,
        Entry::Decision(_) => DECISION,
        Entry::Started(_) => STARTED,
        Entry::Reconciliation(_) => RECONCILIATION,
        Entry::Event(_) => EVENTS,
        Entry::ExpectState(_) => EXPECT_STATE,
        Entry::Ledger(_) => LEDGER,
        Entry::State(_) => STATE,
        Entry::Definition(_) => DEFINITION,
        Entry::CancelHonoured => CANCEL_HONOURED,
        Entry::Release => RELEASE,
        Entry::Update(_) => UPDATE,
        Entry::Expiry(_) => EXPIRY,
    }
}

/// A state's stored parts: its name, the operation it names, the status it names.
fn parts(state: RunState) -> (&'static str, Option<i64>, Option<&'static str>) {
    (state.name(), state.operation().map(i64::from), state.status().map(loopbound::Status::as_str))
}

/// Who writes, and how to classify the database's errors.
pub(super) struct Writer<'a> {
    pub(super) redactor: &'a Redactor,
    pub(super) worker: &'a WorkerId,
    /// The lease duration in microseconds (checked when the journal was built).
    pub(super) lease_micros: i64,
}

/// A lease's holder and time left as read, as a refusal when it is live.
fn held(holder: Option<String>, remaining: Option<i64>) -> Option<JournalError> {
    match (holder, remaining) {
        (Some(holder), Some(remaining)) if remaining > 0 => Some(JournalError::LeaseHeld {
            holder,
            remaining: Duration::from_micros(remaining.unsigned_abs()),
        }),
        _ => None,
    }
}

impl Writer<'_> {
    fn fail(&self, error: &tokio_postgres::Error) -> JournalError {
        JournalError::from(self.redactor.postgres(error))
    }

    async fn execute(
        &self,
        transaction: &Transaction<'_>,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, JournalError> {
        let statement = transaction.prepare_cached(sql).await.map_err(|e| self.fail(&e))?;
        transaction.execute(&statement, params).await.map_err(|e| self.fail(&e))
    }

    async fn query_opt(
        &self,
        transaction: &Transaction<'_>,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<tokio_postgres::Row>, JournalError> {
        let statement = transaction.prepare_cached(sql).await.map_err(|e| self.fail(&e))?;
        transaction.query_opt(&statement, params).await.map_err(|e| self.fail(&e))
    }

    /// Creates or takes `run` for a new attempt of this worker, or returns a finished run as it
    /// is; returns its rows (the caller commits). `Ok(None)` means the refusal turned out stale
    /// (the lease expired or was released meanwhile): look again.
    pub(super) async fn acquire(
        &self,
        transaction: &Transaction<'_>,
        run: &str,
        fresh: &RunRow,
    ) -> Result<Option<StoredRun>, JournalError> {
        let operation = fresh.state.operation().map(i64::from);
        let status = fresh.state.status().map(loopbound::Status::as_str);
        let granted = self
            .query_opt(
                transaction,
                GRANT,
                &[
                    &run,
                    &self.worker.as_str(),
                    &self.lease_micros,
                    &fresh.conversation,
                    &fresh.ledger,
                    &fresh.state.name(),
                    &operation,
                    &status,
                    &fresh.definition,
                ],
            )
            .await?;
        match granted {
            Some(row) => {
                let first: bool = row.get(1);
                if first {
                    return self.created(transaction, run, fresh, &row).await.map(Some);
                }
            }
            None => {
                let row = self.query_opt(transaction, REFUSAL, &[&run]).await?;
                let Some(row) = row else { return Ok(None) };
                let finished: bool = row.get(0);
                if !finished {
                    let holder: Option<String> = row.get(1);
                    let Some(refusal) = held(holder.clone(), row.get(2)) else { return Ok(None) };
                    let dead = holder.filter(|holder| is_dead_holder(holder));
                    let Some(dead) = dead else { return Err(refusal) };
                    // Taken over, or another worker took it first: look again.
                    if !self.take_over(transaction, run, row.get(3), &dead).await? {
                        return Ok(None);
                    }
                }
            }
        }
        read::stored_run(transaction, self.redactor, run).await?.map_or_else(
            || Err(JournalError::storage("the run vanished inside its transaction")),
            |stored| Ok(Some(stored)),
        )
    }

    /// Takes `run` over from `dead`, a holder judged dead, only while its lease is still
    /// `dead`'s under `epoch`: whether it did.
    async fn take_over(
        &self,
        transaction: &Transaction<'_>,
        run: &str,
        epoch: i64,
        dead: &str,
    ) -> Result<bool, JournalError> {
        let taken = self
            .query_opt(
                transaction,
                TAKE_OVER,
                &[&run, &epoch, &dead, &self.worker.as_str(), &self.lease_micros],
            )
            .await?;
        Ok(taken.is_some())
    }

    /// The run the grant `row` has just created from `fresh`: its labels written, and its
    /// stored form built from what was written, without reading it back (it has no rows yet).
    async fn created(
        &self,
        transaction: &Transaction<'_>,
        run: &str,
        fresh: &RunRow,
        row: &tokio_postgres::Row,
    ) -> Result<StoredRun, JournalError> {
        let labelled = fresh.labels.iter().map(|label| async move {
            self.execute(transaction, LABEL, &[&run, &label.key, &label.value]).await
        });
        join_all(labelled).await.into_iter().collect::<Result<Vec<u64>, JournalError>>()?;
        let epoch = row.try_get::<_, i64>(0).map_err(|_| corrupt("the run's epoch"))?;
        let (state, lease) = read::state_and_lease(row, 2)?;
        let mut labels = fresh.labels.clone();
        labels.sort_by(|a, b| a.key.cmp(&b.key));
        labels.dedup_by(|a, b| a.key == b.key);
        let run = RunRow {
            epoch: u64::try_from(epoch).map_err(|_| corrupt("the run's epoch"))?,
            attempts: 1,
            state,
            labels,
            ..fresh.clone()
        };
        Ok(StoredRun { run, lease, ..StoredRun::default() })
    }

    /// Checks `fence` and locks the run's row for the rest of the transaction.
    async fn fence(
        &self,
        transaction: &Transaction<'_>,
        run: &str,
        fence: Fence,
    ) -> Result<(), JournalError> {
        match fence {
            Fence::Epoch(epoch) => {
                let epoch = epoch_param(epoch).map_err(JournalError::from)?;
                let row = self
                    .query_opt(transaction, FENCE, &[&run, &epoch, &self.worker.as_str(), &self.lease_micros])
                    .await?;
                match row.map(|row| (row.get::<_, bool>(0), row.get::<_, bool>(1))) {
                    Some((true, _)) => Ok(()),
                    Some((false, true)) => Err(JournalError::LeaseLost),
                    _ => Err(JournalError::UnknownRun),
                }
            }
            Fence::Host => match self.query_opt(transaction, LOCK, &[&run]).await? {
                Some(row) => held(row.get(0), row.get(1)).map_or(Ok(()), Err),
                None => Err(JournalError::UnknownRun),
            },
        }
    }

    /// Commits `batch` alone, in a transaction of its own on `client`, if `fence` holds.
    pub(super) async fn commit_alone(
        &self,
        client: &mut deadpool_postgres::Client,
        run: &str,
        fence: Fence,
        batch: &Batch,
    ) -> Result<(), JournalError> {
        let transaction = client.transaction().await.map_err(|e| self.fail(&e))?;
        match self.commit(&transaction, run, fence, batch).await {
            Ok(()) => transaction.commit().await.map_err(|e| self.fail(&e)),
            Err(error) => Err(super::rolled_back(transaction, error).await),
        }
    }

    /// Writes `batch` if `fence` holds (the caller commits the transaction).
    pub(super) async fn commit(
        &self,
        transaction: &Transaction<'_>,
        run: &str,
        fence: Fence,
        batch: &Batch,
    ) -> Result<(), JournalError> {
        // One pipeline: the fence, then every row, sent together and executed in order by the
        // server; whatever the rows did is rolled back with the transaction if the fence fails.
        // Every statement prepared first (a cached one costs nothing), so that the pipeline's
        // statements leave in the batch's order: one waiting for its preparation would run after
        // the ones behind it.
        let fence_sql = if matches!(fence, Fence::Epoch(_)) { FENCE } else { LOCK };
        let sqls = std::iter::once(fence_sql).chain(batch.entries.iter().map(statement));
        for prepared in join_all(sqls.map(|sql| transaction.prepare_cached(sql))).await {
            prepared.map_err(|e| self.fail(&e))?;
        }
        // The events go in one statement: most of a batch's rows are events.
        let events: Vec<&EventRow> = batch
            .entries
            .iter()
            .filter_map(|entry| if let Entry::Event(row) = entry { Some(row) } else { None })
            .collect();
        let fenced = self.fence(transaction, run, fence);
        let rows = batch.entries.iter().filter_map(|entry| match entry {
            Entry::Release if matches!(fence, Fence::Host) => None,
            Entry::Event(_) => None,
            entry => Some(self.write(transaction, run, entry)),
        });
        let numbered = async {
            if events.is_empty() {
                Ok(())
            } else {
                Box::pin(self.write_events(transaction, run, &events)).await
            }
        };
        let (fenced, (written, numbered)) = join(fenced, join(join_all(rows), numbered)).await;
        fenced?;
        written.into_iter().collect::<Result<(), JournalError>>()?;
        numbered
    }

    /// Writes `events`, in their order, after the run's last event, in one statement.
    async fn write_events(
        &self,
        transaction: &Transaction<'_>,
        run: &str,
        events: &[&EventRow],
    ) -> Result<(), JournalError> {
        let kinds: Vec<&str> = events.iter().map(|event| event.kind.as_str()).collect();
        let names: Vec<&str> = events.iter().map(|event| event.name.as_str()).collect();
        let counts: Vec<i64> = events.iter().map(|event| i64::from(event.count)).collect();
        let operations: Vec<Option<&str>> = events.iter().map(|event| event.operation.as_deref()).collect();
        let deciders: Vec<Option<&str>> = events.iter().map(|event| event.by.as_deref()).collect();
        let reasons: Vec<Option<&str>> = events.iter().map(|event| event.reason.as_deref()).collect();
        self.execute(transaction, EVENTS, &[&run, &kinds, &names, &counts, &operations, &deciders, &reasons])
            .await
            .map(drop)
    }

    async fn write(
        &self,
        transaction: &Transaction<'_>,
        run: &str,
        entry: &Entry,
    ) -> Result<(), JournalError> {
        let int = i64::from;
        match entry {
            Entry::Reply(row) => {
                self.execute(transaction, REPLY, &[&run, &int(row.ordinal), &row.reply]).await
            }
            Entry::Call(row) => {
                self.execute(
                    transaction,
                    CALL,
                    &[
                        &run,
                        &int(row.reply),
                        &int(row.index),
                        &row.operation.map(int),
                        &row.is_error,
                        &row.text.as_bytes(),
                    ],
                )
                .await
            }
            Entry::Proposal(row) => {
                self.execute(
                    transaction,
                    PROPOSAL,
                    &[
                        &run,
                        &int(row.ordinal),
                        &int(row.reply),
                        &int(row.index),
                        &row.tool,
                        &row.capability,
                        &row.effect,
                        &row.arguments,
                        &row.expires.map(|millis| i64::try_from(millis).unwrap_or(i64::MAX)),
                    ],
                )
                .await
            }
            Entry::Decision(row) => {
                self.execute(transaction, DECISION, &[&run, &int(row.ordinal), &row.verdict, &row.by]).await
            }
            Entry::Started(row) => {
                self.execute(transaction, STARTED, &[&run, &int(row.ordinal), &int(row.start)]).await
            }
            Entry::Reconciliation(row) => {
                self.execute(
                    transaction,
                    RECONCILIATION,
                    &[
                        &run,
                        &int(row.ordinal),
                        &int(row.start),
                        &row.resolution,
                        &row.result.as_deref().map(str::as_bytes),
                        &row.by,
                    ],
                )
                .await
            }
            // Boxed: each row's future is as large as its largest arm.
            Entry::Event(row) => Box::pin(self.write_events(transaction, run, &[row])).await.map(|()| 1),
            Entry::ExpectState(state) => {
                let (name, operation, status) = parts(*state);
                let found =
                    self.execute(transaction, EXPECT_STATE, &[&run, &name, &operation, &status]).await?;
                if found == 1 {
                    Ok(found)
                } else {
                    Err(JournalError::Conflict("another state than the one expected".to_owned()))
                }
            }
            Entry::Ledger(ledger) => self.execute(transaction, LEDGER, &[&run, ledger]).await,
            Entry::State(state) => {
                let (name, operation, status) = parts(*state);
                self.execute(transaction, STATE, &[&run, &name, &operation, &status]).await
            }
            Entry::Definition(definition) => self.execute(transaction, DEFINITION, &[&run, definition]).await,
            Entry::CancelHonoured => self.execute(transaction, CANCEL_HONOURED, &[&run]).await,
            Entry::Release => self.execute(transaction, RELEASE, &[&run]).await,
            Entry::Expiry(row) => {
                let expires = i64::try_from(row.expires).unwrap_or(i64::MAX);
                match self.execute(transaction, EXPIRY, &[&run, &int(row.ordinal), &expires]).await? {
                    0 => Err(JournalError::Conflict("no proposal for this operation".to_owned())),
                    changed => Ok(changed),
                }
            }
            Entry::Update(row) => {
                let seq = i64::try_from(row.seq).unwrap_or(i64::MAX);
                self.execute(transaction, UPDATE, &[&run, &seq, &row.line]).await
            }
        }
        .map(drop)
    }
}
