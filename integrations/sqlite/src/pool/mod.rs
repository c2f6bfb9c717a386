//! Shared pools in a SQLite file, for the processes of one machine: the journal's file or a
//! file of their own.
//!
//! ```no_run
//! use std::sync::Arc;
//! use loopbound::pool::{PoolBudget, PoolStore, Window};
//! use loopbound_sqlite::SqlitePools;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let pools = Arc::new(SqlitePools::open("pools.db")?);
//! pools.define("tenant:acme", PoolBudget::default().with_tokens(2_000_000).per(Window::Day)).await?;
//! let scope = loopbound::Scope::builder().pools(pools, ["tenant:acme"]).build()?;
//! # let _ = scope;
//! # Ok(())
//! # }
//! ```
//!
//! # Invariants
//!
//! - Every operation is one `BEGIN IMMEDIATE` transaction: SQLite's write lock is taken before
//!   anything is read, so a reservation's check and its hold are one atomic step for every
//!   process on the file (others wait, up to the busy timeout). The holds whose lease expired
//!   are charged in the same transaction, before the decision.
//! - The arithmetic is `loopbound::pool::backend::rules`', the same as every store's.
//! - Leases and windows are judged by the store's [`Clock`] (the process's clock by default;
//!   processes of one machine share it).
//! - Hold ids are never reused (`AUTOINCREMENT`).
//! - Figures are stored as SQLite integers (64-bit signed): values above `i64::MAX` are stored
//!   as `i64::MAX`.
//! - Calls run on tokio's blocking thread pool, one connection per store behind a mutex.

mod schema;

use std::fmt;
use std::future::Future;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use loopbound::pool::backend::rules::{self, PoolAsk, PoolRefusal};
use loopbound::pool::backend::{Grant, HoldId, PoolBackend, Settled, lease_millis};
use loopbound::pool::{
    Amount, Clock, PoolBudget, PoolError, PoolName, PoolState, PoolStore, SystemClock, Window, WindowTotals,
};
use loopbound::spend::Micros;
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};

pub use schema::POOL_SCHEMA_VERSION;

use crate::Synchronous;

/// Shared pools in one SQLite file.
#[derive(Clone)]
pub struct SqlitePools {
    inner: Arc<Inner>,
}

struct Inner {
    connection: Mutex<Connection>,
    clock: Arc<dyn Clock>,
}

impl fmt::Debug for SqlitePools {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqlitePools").finish_non_exhaustive()
    }
}

/// The storage error for a rusqlite failure while doing `what`.
pub(crate) fn fail(what: &'static str) -> impl Fn(rusqlite::Error) -> PoolError {
    move |error| PoolError::storage(what, error)
}

/// A figure as SQLite stores it.
fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A stored figure, or `Corrupt`.
fn figure(value: i64) -> Result<u64, PoolError> {
    u64::try_from(value).map_err(|_| PoolError::Corrupt("a pool's figure is negative".into()))
}

impl SqlitePools {
    /// Opens (or creates) the pools in the file at `path` (`synchronous = FULL`, the process's
    /// clock).
    ///
    /// # Errors
    ///
    /// [`PoolError::Corrupt`] for a file that is not a loopbound file, or whose pools are newer
    /// than this build; a storage error if it cannot be opened.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, PoolError> {
        Self::open_with(path, Synchronous::Full, Arc::new(SystemClock))
    }

    /// As [`open`](Self::open), with the given durability and clock.
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open).
    pub fn open_with(
        path: impl AsRef<Path>,
        synchronous: Synchronous,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, PoolError> {
        let mut connection = Connection::open(path).map_err(fail("opening the file"))?;
        connection.busy_handler(Some(crate::busy::handler)).map_err(fail("opening the file"))?;
        let mode: String = connection
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
            .map_err(fail("switching the file to WAL"))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(PoolError::Storage { what: "the file refused WAL mode", source: None });
        }
        connection
            .pragma_update(None, "synchronous", synchronous.pragma())
            .map_err(fail("opening the file"))?;
        connection.pragma_update(None, "foreign_keys", "ON").map_err(fail("opening the file"))?;
        schema::migrate(&mut connection)?;
        Ok(Self { inner: Arc::new(Inner { connection: Mutex::new(connection), clock }) })
    }

    /// Runs `work` in one `BEGIN IMMEDIATE` transaction at the clock's now, on the blocking
    /// thread pool; commits if it succeeds.
    fn write<T, F>(&self, work: F) -> impl Future<Output = Result<T, PoolError>> + Send + 'static
    where
        T: Send + 'static,
        F: FnOnce(&Transaction<'_>, u64) -> Result<T, PoolError> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        async move {
            // Dropped with this future, the flag tells the blocking thread that no one waits.
            let abandon = crate::busy::Abandon::default();
            let flag = abandon.flag();
            let task = tokio::task::spawn_blocking(move || {
                let given_up =
                    PoolError::Storage { what: "the call was given up before it ran", source: None };
                if crate::busy::given_up(&flag) {
                    return Err(given_up);
                }
                let mut connection =
                    inner.connection.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if crate::busy::given_up(&flag) {
                    return Err(given_up);
                }
                crate::busy::under(flag, LOCK_WAIT, || Self::transact(&inner, &mut connection, work))
            });
            let done = task.await.map_err(|_| PoolError::Storage {
                what: "the pool store's worker thread failed",
                source: None,
            })?;
            drop(abandon);
            done
        }
    }

    /// [`write`](Self::write)'s transaction, on the blocking thread.
    fn transact<T, F>(inner: &Inner, connection: &mut Connection, work: F) -> Result<T, PoolError>
    where
        F: FnOnce(&Transaction<'_>, u64) -> Result<T, PoolError>,
    {
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(fail("taking the file's write lock"))?;
        let now = inner.clock.now();
        expire(&transaction, now)?;
        let done = work(&transaction, now)?;
        transaction.commit().map_err(fail("committing"))?;
        Ok(done)
    }
}

/// How long a pool's statement waits for another process's write lock, unless its caller gives
/// it up first.
const LOCK_WAIT: Duration = Duration::from_secs(30);

/// Charges whole every open hold whose lease expired by `now`.
fn expire(transaction: &Transaction<'_>, now: u64) -> Result<(), PoolError> {
    let expired: Vec<(i64, Amount)> = {
        let mut statement = transaction
            .prepare_cached("SELECT hold, calls, tokens, cost FROM loopbound_pool_holds WHERE expired = 0 AND expires <= ?1")
            .map_err(fail("reading expired holds"))?;
        let rows = statement
            .query_map([int(now)], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)))
            .map_err(fail("reading expired holds"))?;
        let mut expired = Vec::new();
        for row in rows {
            let (hold, calls, tokens, cost): (i64, i64, i64, i64) =
                row.map_err(fail("reading expired holds"))?;
            expired.push((hold, Amount::new(figure(calls)?, figure(tokens)?, Micros(figure(cost)?))));
        }
        expired
    };
    for (hold, amount) in expired {
        for (pool, start) in parts(transaction, hold)? {
            let line = line(transaction, &pool, start)?;
            let line = WindowTotals::new(line.settled.plus(amount), line.reserved.minus(amount));
            put(transaction, &pool, start, &line)?;
        }
        transaction
            .execute("UPDATE loopbound_pool_holds SET expired = 1 WHERE hold = ?1", [hold])
            .map_err(fail("expiring a hold"))?;
    }
    Ok(())
}

/// The pools and window starts of `hold`.
fn parts(transaction: &Transaction<'_>, hold: i64) -> Result<Vec<(String, u64)>, PoolError> {
    let mut statement = transaction
        .prepare_cached("SELECT pool, start FROM loopbound_pool_hold_parts WHERE hold = ?1 ORDER BY pool")
        .map_err(fail("reading a hold"))?;
    let rows =
        statement.query_map([hold], |row| Ok((row.get(0)?, row.get(1)?))).map_err(fail("reading a hold"))?;
    let mut parts = Vec::new();
    for row in rows {
        let (pool, start): (String, i64) = row.map_err(fail("reading a hold"))?;
        parts.push((pool, figure(start)?));
    }
    Ok(parts)
}

/// The figures of `pool`'s window starting at `start` (zero if it has none yet).
fn line(transaction: &Transaction<'_>, pool: &str, start: u64) -> Result<WindowTotals, PoolError> {
    let mut statement = transaction
        .prepare_cached(
            "SELECT settled_calls, settled_tokens, settled_cost, reserved_calls, reserved_tokens, reserved_cost
             FROM loopbound_pool_windows WHERE pool = ?1 AND start = ?2",
        )
        .map_err(fail("reading a pool's window"))?;
    let row: Option<[i64; 6]> = statement
        .query_row(params![pool, int(start)], |row| {
            Ok([row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?, row.get(5)?])
        })
        .optional()
        .map_err(fail("reading a pool's window"))?;
    let Some(row) = row else { return Ok(WindowTotals::default()) };
    let amount = |calls: i64, tokens: i64, cost: i64| -> Result<Amount, PoolError> {
        Ok(Amount::new(figure(calls)?, figure(tokens)?, Micros(figure(cost)?)))
    };
    Ok(WindowTotals::new(amount(row[0], row[1], row[2])?, amount(row[3], row[4], row[5])?))
}

/// Writes the figures of `pool`'s window starting at `start`.
fn put(transaction: &Transaction<'_>, pool: &str, start: u64, line: &WindowTotals) -> Result<(), PoolError> {
    let (settled, reserved) = (line.settled, line.reserved);
    transaction
        .prepare_cached(
            "INSERT INTO loopbound_pool_windows (pool, start, settled_calls, settled_tokens, settled_cost,
                 reserved_calls, reserved_tokens, reserved_cost)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
             ON CONFLICT (pool, start) DO UPDATE SET settled_calls = excluded.settled_calls,
                 settled_tokens = excluded.settled_tokens, settled_cost = excluded.settled_cost,
                 reserved_calls = excluded.reserved_calls, reserved_tokens = excluded.reserved_tokens,
                 reserved_cost = excluded.reserved_cost",
        )
        .and_then(|mut statement| {
            statement.execute(params![
                pool,
                int(start),
                int(settled.calls),
                int(settled.tokens),
                int(settled.cost.0),
                int(reserved.calls),
                int(reserved.tokens),
                int(reserved.cost.0),
            ])
        })
        .map_err(fail("writing a pool's window"))?;
    Ok(())
}

/// `pool`'s budget, or `UnknownPool`.
fn budget(transaction: &Transaction<'_>, pool: &str) -> Result<PoolBudget, PoolError> {
    type Row = (Option<i64>, Option<i64>, Option<i64>, String);
    let row: Option<Row> = transaction
        .prepare_cached("SELECT calls, tokens, cost, window FROM loopbound_pools WHERE pool = ?1")
        .and_then(|mut statement| {
            statement
                .query_row([pool], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)))
                .optional()
        })
        .map_err(fail("reading a pool"))?;
    let (calls, tokens, cost, window) = row.ok_or(PoolError::UnknownPool)?;
    let mut budget = PoolBudget::default().per(Window::parse(&window)?);
    if let Some(calls) = calls {
        budget = budget.with_calls(figure(calls)?);
    }
    if let Some(tokens) = tokens {
        budget = budget.with_tokens(figure(tokens)?);
    }
    if let Some(cost) = cost {
        budget = budget.with_cost(Micros(figure(cost)?));
    }
    Ok(budget)
}

/// Whether `hold` is in the store, and if so its amount and whether it expired.
fn hold_row(transaction: &Transaction<'_>, hold: HoldId) -> Result<Option<(i64, Amount, bool)>, PoolError> {
    let Ok(id) = i64::try_from(hold.get()) else { return Ok(None) };
    let row: Option<(i64, i64, i64, i64)> = transaction
        .prepare_cached("SELECT calls, tokens, cost, expired FROM loopbound_pool_holds WHERE hold = ?1")
        .and_then(|mut statement| {
            statement
                .query_row([id], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)))
                .optional()
        })
        .map_err(fail("reading a hold"))?;
    row.map(|(calls, tokens, cost, expired)| {
        Ok((id, Amount::new(figure(calls)?, figure(tokens)?, Micros(figure(cost)?)), expired != 0))
    })
    .transpose()
}

fn delete_hold(transaction: &Transaction<'_>, id: i64) -> Result<(), PoolError> {
    transaction
        .execute("DELETE FROM loopbound_pool_holds WHERE hold = ?1", [id])
        .map_err(fail("removing a hold"))?;
    Ok(())
}

fn reserve(
    transaction: &Transaction<'_>,
    ask: &PoolAsk,
    now: u64,
) -> Result<Result<Grant, PoolRefusal>, PoolError> {
    let mut pools = Vec::with_capacity(ask.pools.len());
    for pool in &ask.pools {
        let budget = budget(transaction, pool.as_str())?;
        let start = budget.window().start(now);
        pools.push((pool, budget, start, line(transaction, pool.as_str(), start)?));
    }
    let view: Vec<_> = pools.iter().map(|(pool, budget, _, line)| (*pool, budget, line)).collect();
    let fit = match rules::fit(ask, &view) {
        Ok(fit) => fit,
        Err(refusal) => return Ok(Err(refusal)),
    };
    let expires = now.saturating_add(lease_millis(ask.lease));
    transaction
        .execute(
            "INSERT INTO loopbound_pool_holds (holder, expires, expired, calls, tokens, cost) VALUES (?1, ?2, 0, ?3, ?4, ?5)",
            params![&*ask.holder, int(expires), int(fit.amount.calls), int(fit.amount.tokens), int(fit.amount.cost.0)],
        )
        .map_err(fail("writing a hold"))?;
    let id = transaction.last_insert_rowid();
    for (pool, _, start, line) in &pools {
        transaction
            .execute(
                "INSERT INTO loopbound_pool_hold_parts (hold, pool, start) VALUES (?1, ?2, ?3)",
                params![id, pool.as_str(), int(*start)],
            )
            .map_err(fail("writing a hold"))?;
        let held = WindowTotals::new(line.settled, line.reserved.plus(fit.amount));
        put(transaction, pool.as_str(), *start, &held)?;
    }
    let hold =
        HoldId::new(u64::try_from(id).map_err(|_| PoolError::Corrupt("a hold id is negative".into()))?);
    Ok(Ok(Grant::new(hold, fit.output, fit.amount)))
}

impl PoolStore for SqlitePools {
    fn define(&self, pool: &str, budget: PoolBudget) -> impl Future<Output = Result<(), PoolError>> + Send {
        let checked = PoolName::new(pool).and_then(|pool| budget.validate().map(|()| pool));
        let write = checked.map(|pool| {
            self.write(move |transaction, _| {
                match self::budget(transaction, pool.as_str()) {
                    Ok(existing) if existing.window() != budget.window() => return Err(PoolError::InvalidBudget),
                    Ok(_) | Err(PoolError::UnknownPool) => {}
                    Err(error) => return Err(error),
                }
                transaction
                    .execute(
                        "INSERT INTO loopbound_pools (pool, calls, tokens, cost, window) VALUES (?1, ?2, ?3, ?4, ?5)
                         ON CONFLICT (pool) DO UPDATE SET calls = excluded.calls, tokens = excluded.tokens,
                             cost = excluded.cost",
                        params![
                            pool.as_str(),
                            budget.calls().map(int),
                            budget.tokens().map(int),
                            budget.cost().map(|cost| int(cost.0)),
                            budget.window().as_str(),
                        ],
                    )
                    .map_err(fail("writing a pool"))?;
                Ok(())
            })
        });
        async move { write?.await }
    }

    fn state(&self, pool: &str) -> impl Future<Output = Result<PoolState, PoolError>> + Send {
        let pool = PoolName::new(pool);
        self.write(move |transaction, now| {
            let pool = pool?;
            let budget = budget(transaction, pool.as_str())?;
            let start = budget.window().start(now);
            let line = line(transaction, pool.as_str(), start)?;
            let holds: i64 = transaction
                .query_row(
                    "SELECT count(*) FROM loopbound_pool_hold_parts p JOIN loopbound_pool_holds h ON h.hold = p.hold
                     WHERE p.pool = ?1 AND p.start = ?2 AND h.expired = 0",
                    params![pool.as_str(), int(start)],
                    |row| row.get(0),
                )
                .map_err(fail("counting a pool's holds"))?;
            Ok(PoolState::new(pool, budget, start, budget.window().end(now), line, figure(holds)?))
        })
    }

    fn windows(
        &self,
        pool: &str,
    ) -> impl Future<Output = Result<Vec<(u64, WindowTotals)>, PoolError>> + Send {
        let pool = PoolName::new(pool);
        self.write(move |transaction, _| {
            let pool = pool?;
            budget(transaction, pool.as_str())?;
            let starts: Vec<i64> = {
                let mut statement = transaction
                    .prepare_cached("SELECT start FROM loopbound_pool_windows WHERE pool = ?1 ORDER BY start")
                    .map_err(fail("reading a pool's windows"))?;
                let rows = statement
                    .query_map([pool.as_str()], |row| row.get(0))
                    .map_err(fail("reading a pool's windows"))?;
                rows.collect::<Result<_, _>>().map_err(fail("reading a pool's windows"))?
            };
            starts
                .into_iter()
                .map(|start| {
                    let start = figure(start)?;
                    Ok((start, line(transaction, pool.as_str(), start)?))
                })
                .collect()
        })
    }
}

impl PoolBackend for SqlitePools {
    fn reserve(
        &self,
        ask: PoolAsk,
    ) -> impl Future<Output = Result<Result<Grant, PoolRefusal>, PoolError>> + Send {
        self.write(move |transaction, now| reserve(transaction, &ask, now))
    }

    fn renew(&self, hold: HoldId, lease: Duration) -> impl Future<Output = Result<bool, PoolError>> + Send {
        self.write(move |transaction, now| {
            let Ok(id) = i64::try_from(hold.get()) else { return Ok(false) };
            let expires = int(now.saturating_add(lease_millis(lease)));
            let changed = transaction
                .execute(
                    "UPDATE loopbound_pool_holds SET expires = ?1 WHERE hold = ?2 AND expired = 0",
                    [expires, id],
                )
                .map_err(fail("renewing a hold"))?;
            Ok(changed == 1)
        })
    }

    fn settle(&self, id: HoldId, charge: Amount) -> impl Future<Output = Result<Settled, PoolError>> + Send {
        self.write(move |transaction, _| {
            let (row, held, expired) = hold_row(transaction, id)?.ok_or(PoolError::UnknownHold)?;
            let added = rules::settlement(held, charge, expired);
            for (pool, start) in parts(transaction, row)? {
                let line = line(transaction, &pool, start)?;
                let reserved = if expired { line.reserved } else { line.reserved.minus(held) };
                put(transaction, &pool, start, &WindowTotals::new(line.settled.plus(added), reserved))?;
            }
            delete_hold(transaction, row)?;
            Ok(if expired { Settled::Late } else { Settled::InTime { over: charge.exceeds(&held) } })
        })
    }

    fn release(&self, id: HoldId) -> impl Future<Output = Result<(), PoolError>> + Send {
        self.write(move |transaction, _| {
            let (row, held, expired) = hold_row(transaction, id)?.ok_or(PoolError::UnknownHold)?;
            if !expired {
                for (pool, start) in parts(transaction, row)? {
                    let line = line(transaction, &pool, start)?;
                    put(
                        transaction,
                        &pool,
                        start,
                        &WindowTotals::new(line.settled, line.reserved.minus(held)),
                    )?;
                }
            }
            delete_hold(transaction, row)
        })
    }
}
