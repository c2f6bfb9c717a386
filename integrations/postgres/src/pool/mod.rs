//! Shared pools on PostgreSQL, for workers on many machines: [`PostgresPools`] implements
//! [`loopbound::pool::PoolStore`] in the journal's database, in tables of its own.
//!
//! | table | key | columns |
//! |---|---|---|
//! | `loopbound_pools` | `pool` | `calls`, `tokens`, `cost` (null: unbounded), `window_kind` |
//! | `loopbound_pool_windows` | `(pool, start)` | settled and reserved calls, tokens, cost |
//! | `loopbound_pool_holds` | `hold` (identity) | `holder`, `expires` (ms, the server's clock), `expired`, the amount |
//! | `loopbound_pool_hold_parts` | `(hold, pool)` | `start`: the window the hold was made in |
//!
//! # Invariants
//!
//! - Every operation is one transaction that first locks the rows of the pools it touches
//!   (`SELECT … FOR UPDATE`, in name order, so two transactions never wait for each other in a
//!   cycle over pools), then charges the expired holds of those pools, then decides: a
//!   reservation's check and its hold in every pool are atomic for every worker of the
//!   database. A deadlock or serialisation failure the server reports anyway is retried whole
//!   (up to [`ATTEMPTS`] times).
//! - Window figures are only ever changed relatively (`reserved = reserved + n`), so a sweep
//!   by another transaction in between loses nothing.
//! - The arithmetic is `loopbound::pool::backend::rules`', the same as every store's; leases and windows
//!   are judged by the server's clock (`clock_timestamp()`), one clock for every machine.
//! - A worker that dies mid-call holds its rows no longer than its session lives, and a
//!   transaction left idle is ended by the server (the store's
//!   `idle_in_transaction_session_timeout`); its holds are charged whole when their lease
//!   expires.
//! - No error carries the password (every message goes through the store's redactor) nor a
//!   pool's name.

mod schema;

use std::fmt;
use std::future::Future;
use std::time::Duration;

use deadpool_postgres::Transaction;
use loopbound::pool::backend::rules::{self, PoolAsk, PoolRefusal};
use loopbound::pool::backend::{Grant, HoldId, PoolBackend, Settled, lease_millis};
use loopbound::pool::{Amount, PoolBudget, PoolError, PoolName, PoolState, PoolStore, Window, WindowTotals};
use loopbound::spend::Micros;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;

pub use schema::POOL_SCHEMA_VERSION;

use crate::store::Store;

/// How many times an operation is tried when the server reports a deadlock or a serialisation
/// failure.
pub const ATTEMPTS: u32 = 5;

/// Shared pools in a PostgreSQL database.
#[derive(Clone)]
pub struct PostgresPools {
    store: Store,
}

impl fmt::Debug for PostgresPools {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresPools").finish_non_exhaustive()
    }
}

/// Why one attempt of an operation failed.
enum Fail {
    Postgres(tokio_postgres::Error),
    Pool(PoolError),
}

impl From<tokio_postgres::Error> for Fail {
    fn from(error: tokio_postgres::Error) -> Self {
        Self::Postgres(error)
    }
}

impl From<PoolError> for Fail {
    fn from(error: PoolError) -> Self {
        Self::Pool(error)
    }
}

fn retryable(error: &tokio_postgres::Error) -> bool {
    error.code().is_some_and(|code| {
        *code == SqlState::T_R_DEADLOCK_DETECTED || *code == SqlState::T_R_SERIALIZATION_FAILURE
    })
}

/// A figure as PostgreSQL stores it.
fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A stored figure, or `Corrupt`.
fn figure(value: i64) -> Result<u64, PoolError> {
    u64::try_from(value).map_err(|_| PoolError::Corrupt("a pool's figure is negative".into()))
}

fn amount(calls: i64, tokens: i64, cost: i64) -> Result<Amount, PoolError> {
    Ok(Amount::new(figure(calls)?, figure(tokens)?, Micros(figure(cost)?)))
}

/// Runs `$body` (with the transaction bound to `$tx`) in a transaction of `$self`'s store,
/// committing it; retried whole on a deadlock or a serialisation failure.
macro_rules! transact {
    ($self:ident, $what:literal, |$tx:ident| $body:expr) => {{
        let redactor = $self.store.redactor();
        let storage = |error: &tokio_postgres::Error| PoolError::storage($what, redactor.postgres(error));
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut client = $self.store.client().await.map_err(|error| PoolError::storage($what, error))?;
            let $tx = client.transaction().await.map_err(|error| storage(&error))?;
            let result: Result<_, Fail> = async { $body }.await;
            let failure = match result {
                Ok(value) => match $tx.commit().await {
                    Ok(()) => break Ok(value),
                    Err(error) => error,
                },
                Err(Fail::Postgres(error)) => error,
                Err(Fail::Pool(error)) => break Err(error),
            };
            if !(retryable(&failure) && attempt < ATTEMPTS) {
                break Err(storage(&failure));
            }
        }
    }};
}

const NOW: &str = "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint";

const LOCK: &str = "SELECT pool, calls, tokens, cost, window_kind FROM loopbound_pools
     WHERE pool = ANY($1) ORDER BY pool FOR UPDATE";

/// Charges whole the expired holds touching the locked pools `$2`, at `$1`.
const SWEEP: &str = "
    WITH due AS (
        SELECT h.hold FROM loopbound_pool_holds h
         WHERE NOT h.expired AND h.expires <= $1
           AND EXISTS (SELECT 1 FROM loopbound_pool_hold_parts p WHERE p.hold = h.hold AND p.pool = ANY($2))
           FOR UPDATE OF h SKIP LOCKED
    ), marked AS (
        UPDATE loopbound_pool_holds h SET expired = true FROM due WHERE h.hold = due.hold
        RETURNING h.hold, h.calls, h.tokens, h.cost
    ), sums AS (
        SELECT p.pool, p.start,
               sum(m.calls)::bigint AS calls, sum(m.tokens)::bigint AS tokens, sum(m.cost)::bigint AS cost
          FROM marked m JOIN loopbound_pool_hold_parts p ON p.hold = m.hold
         GROUP BY p.pool, p.start
    )
    UPDATE loopbound_pool_windows w
       SET settled_calls = w.settled_calls + s.calls, settled_tokens = w.settled_tokens + s.tokens,
           settled_cost = w.settled_cost + s.cost, reserved_calls = w.reserved_calls - s.calls,
           reserved_tokens = w.reserved_tokens - s.tokens, reserved_cost = w.reserved_cost - s.cost
      FROM sums s WHERE w.pool = s.pool AND w.start = s.start";

const WINDOW: &str =
    "SELECT settled_calls, settled_tokens, settled_cost, reserved_calls, reserved_tokens, reserved_cost
     FROM loopbound_pool_windows WHERE pool = $1 AND start = $2";

/// Adds settled (`$3`-`$5`) and reserved (`$6`-`$8`) figures, each possibly negative, to a window.
const ADD: &str = "
    INSERT INTO loopbound_pool_windows AS w (pool, start, settled_calls, settled_tokens, settled_cost,
                                             reserved_calls, reserved_tokens, reserved_cost)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
    ON CONFLICT (pool, start) DO UPDATE
       SET settled_calls = w.settled_calls + excluded.settled_calls,
           settled_tokens = w.settled_tokens + excluded.settled_tokens,
           settled_cost = w.settled_cost + excluded.settled_cost,
           reserved_calls = w.reserved_calls + excluded.reserved_calls,
           reserved_tokens = w.reserved_tokens + excluded.reserved_tokens,
           reserved_cost = w.reserved_cost + excluded.reserved_cost";

impl PostgresPools {
    /// The pools in `store`'s database, their tables created or migrated first (safely when
    /// many workers connect at once).
    ///
    /// # Errors
    ///
    /// A storage error when the database cannot be reached or a migration fails (rolled back
    /// whole); [`PoolError::Corrupt`] when its pools are newer than this build.
    pub async fn connect(store: &Store) -> Result<Self, PoolError> {
        let mut client = store.client().await.map_err(|error| PoolError::storage("connecting", error))?;
        schema::migrate(&mut client, store.redactor()).await?;
        Ok(Self { store: store.clone() })
    }
}

impl PostgresPools {
    /// `operation`, given up with a storage error after the store's query timeout.
    async fn bounded<T, F>(&self, operation: F) -> Result<T, PoolError>
    where
        F: Future<Output = Result<T, PoolError>> + Send,
    {
        self.store.within(operation).await.unwrap_or(Err(PoolError::Storage {
            what: "the database did not answer within the query timeout",
            source: None,
        }))
    }
}

async fn now(tx: &Transaction<'_>) -> Result<u64, Fail> {
    let row = tx.query_one(NOW, &[]).await?;
    Ok(figure(row.get(0))?)
}

/// Locks `pools` (in name order) and returns their budgets, by name.
async fn lock(tx: &Transaction<'_>, pools: &[&str]) -> Result<Vec<(String, PoolBudget)>, Fail> {
    let statement = tx.prepare_cached(LOCK).await?;
    let rows = tx.query(&statement, &[&pools]).await?;
    let mut found = Vec::with_capacity(rows.len());
    for row in rows {
        let window = Window::parse(row.get(4))?;
        let mut budget = PoolBudget::default().per(window);
        if let Some(calls) = row.get::<_, Option<i64>>(1) {
            budget = budget.with_calls(figure(calls)?);
        }
        if let Some(tokens) = row.get::<_, Option<i64>>(2) {
            budget = budget.with_tokens(figure(tokens)?);
        }
        if let Some(cost) = row.get::<_, Option<i64>>(3) {
            budget = budget.with_cost(Micros(figure(cost)?));
        }
        found.push((row.get(0), budget));
    }
    let mut unique: Vec<&str> = pools.to_vec();
    unique.sort_unstable();
    unique.dedup();
    if found.len() != unique.len() {
        return Err(Fail::Pool(PoolError::UnknownPool));
    }
    Ok(found)
}

/// Locks `pools`, charges their expired holds; returns their budgets and now.
async fn open(tx: &Transaction<'_>, pools: &[&str]) -> Result<(Vec<(String, PoolBudget)>, u64), Fail> {
    let budgets = lock(tx, pools).await?;
    let now = now(tx).await?;
    let sweep = tx.prepare_cached(SWEEP).await?;
    tx.execute(&sweep, &[&int(now), &pools]).await?;
    Ok((budgets, now))
}

async fn line(tx: &Transaction<'_>, pool: &str, start: u64) -> Result<WindowTotals, Fail> {
    let statement = tx.prepare_cached(WINDOW).await?;
    let Some(row) = tx.query_opt(&statement, &[&pool, &int(start)]).await? else {
        return Ok(WindowTotals::default());
    };
    Ok(WindowTotals::new(
        amount(row.get(0), row.get(1), row.get(2))?,
        amount(row.get(3), row.get(4), row.get(5))?,
    ))
}

/// Adds `settled` and subtracts or adds `reserved` (by `sign`) to a window's figures.
async fn add(
    tx: &Transaction<'_>,
    pool: &str,
    start: u64,
    settled: Amount,
    reserved: Amount,
    sign: i64,
) -> Result<(), Fail> {
    let statement = tx.prepare_cached(ADD).await?;
    let figures: [i64; 6] = [
        int(settled.calls),
        int(settled.tokens),
        int(settled.cost.0),
        sign * int(reserved.calls),
        sign * int(reserved.tokens),
        sign * int(reserved.cost.0),
    ];
    let start = int(start);
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&pool, &start];
    params.extend(figures.iter().map(|figure| figure as &(dyn ToSql + Sync)));
    tx.execute(&statement, &params).await?;
    Ok(())
}

/// A hold's parts (pool, window start), its amount and whether it expired, locking its row.
async fn hold_row(tx: &Transaction<'_>, id: i64) -> Result<Option<(Vec<(String, u64)>, Amount, bool)>, Fail> {
    let Some(row) = tx
        .query_opt(
            "SELECT calls, tokens, cost, expired FROM loopbound_pool_holds WHERE hold = $1 FOR UPDATE",
            &[&id],
        )
        .await?
    else {
        return Ok(None);
    };
    let held = amount(row.get(0), row.get(1), row.get(2))?;
    let parts = tx
        .query("SELECT pool, start FROM loopbound_pool_hold_parts WHERE hold = $1 ORDER BY pool", &[&id])
        .await?;
    let parts = parts
        .iter()
        .map(|part| Ok((part.get(0), figure(part.get(1))?)))
        .collect::<Result<Vec<_>, PoolError>>()?;
    Ok(Some((parts, held, row.get(3))))
}

/// The pools a hold touches, read without locking (a hold's parts never change).
async fn hold_pools(tx: &Transaction<'_>, id: i64) -> Result<Vec<String>, Fail> {
    let rows = tx.query("SELECT pool FROM loopbound_pool_hold_parts WHERE hold = $1", &[&id]).await?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}

/// Settles (`Some(charge)`) or releases (`None`) hold `id`.
async fn conclude(tx: &Transaction<'_>, id: i64, charge: Option<Amount>) -> Result<Settled, Fail> {
    let pools = hold_pools(tx, id).await?;
    let names: Vec<&str> = pools.iter().map(String::as_str).collect();
    if names.is_empty() {
        return Err(Fail::Pool(PoolError::UnknownHold));
    }
    open(tx, &names).await?;
    let (parts, held, expired) = hold_row(tx, id).await?.ok_or(Fail::Pool(PoolError::UnknownHold))?;
    let added = charge.map_or(Amount::ZERO, |charge| rules::settlement(held, charge, expired));
    let released = if expired { Amount::ZERO } else { held };
    for (pool, start) in &parts {
        add(tx, pool, *start, added, released, -1).await?;
    }
    tx.execute("DELETE FROM loopbound_pool_holds WHERE hold = $1", &[&id]).await?;
    Ok(match charge {
        Some(_) if expired => Settled::Late,
        Some(charge) => Settled::InTime { over: charge.exceeds(&held) },
        None => Settled::InTime { over: false },
    })
}

impl PoolStore for PostgresPools {
    fn define(&self, pool: &str, budget: PoolBudget) -> impl Future<Output = Result<(), PoolError>> + Send {
        self.bounded(async move {
            let pool = PoolName::new(pool)?;
            budget.validate()?;
            transact!(self, "writing a pool", |tx| {
                let existing = tx
                    .query_opt(
                        "SELECT window_kind FROM loopbound_pools WHERE pool = $1 FOR UPDATE",
                        &[&pool.as_str()],
                    )
                    .await?;
                if let Some(row) = existing
                    && Window::parse(row.get(0))? != budget.window()
                {
                    return Err(Fail::Pool(PoolError::InvalidBudget));
                }
                tx.execute(
                    "INSERT INTO loopbound_pools (pool, calls, tokens, cost, window_kind) VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (pool) DO UPDATE SET calls = excluded.calls, tokens = excluded.tokens, cost = excluded.cost",
                    &[
                        &pool.as_str(),
                        &budget.calls().map(int),
                        &budget.tokens().map(int),
                        &budget.cost().map(|cost| int(cost.0)),
                        &budget.window().as_str(),
                    ],
                )
                .await?;
                Ok(())
            })
        })
    }

    fn state(&self, pool: &str) -> impl Future<Output = Result<PoolState, PoolError>> + Send {
        self.bounded(async move {
            let pool = PoolName::new(pool)?;
            transact!(self, "reading a pool", |tx| {
                let (budgets, now) = open(&tx, &[pool.as_str()]).await?;
                let budget = budgets[0].1;
                let start = budget.window().start(now);
                let line = line(&tx, pool.as_str(), start).await?;
                let holds: i64 = tx
                    .query_one(
                        "SELECT count(*) FROM loopbound_pool_hold_parts p JOIN loopbound_pool_holds h ON h.hold = p.hold
                          WHERE p.pool = $1 AND p.start = $2 AND NOT h.expired",
                        &[&pool.as_str(), &int(start)],
                    )
                    .await?
                    .get(0);
                Ok(PoolState::new(pool.clone(), budget, start, budget.window().end(now), line, figure(holds)?))
            })
        })
    }

    fn windows(
        &self,
        pool: &str,
    ) -> impl Future<Output = Result<Vec<(u64, WindowTotals)>, PoolError>> + Send {
        self.bounded(async move {
            let pool = PoolName::new(pool)?;
            transact!(self, "reading a pool's windows", |tx| {
                open(&tx, &[pool.as_str()]).await?;
                let rows = tx
                    .query(
                        "SELECT start, settled_calls, settled_tokens, settled_cost, reserved_calls, reserved_tokens,
                                reserved_cost
                           FROM loopbound_pool_windows WHERE pool = $1 ORDER BY start",
                        &[&pool.as_str()],
                    )
                    .await?;
                let mut windows = Vec::with_capacity(rows.len());
                for row in rows {
                    let line = WindowTotals::new(
                        amount(row.get(1), row.get(2), row.get(3))?,
                        amount(row.get(4), row.get(5), row.get(6))?,
                    );
                    windows.push((figure(row.get(0))?, line));
                }
                Ok(windows)
            })
        })
    }
}

impl PoolBackend for PostgresPools {
    fn reserve(
        &self,
        ask: PoolAsk,
    ) -> impl Future<Output = Result<Result<Grant, PoolRefusal>, PoolError>> + Send {
        self.bounded(async move {
            transact!(self, "reserving", |tx| {
                let names: Vec<&str> = ask.pools.iter().map(PoolName::as_str).collect();
                let (budgets, now) = open(&tx, &names).await?;
                let mut pools = Vec::with_capacity(ask.pools.len());
                for pool in &ask.pools {
                    let budget = budgets
                        .iter()
                        .find(|(name, _)| name == pool.as_str())
                        .map(|(_, budget)| *budget)
                        .ok_or(Fail::Pool(PoolError::UnknownPool))?;
                    let start = budget.window().start(now);
                    pools.push((pool, budget, start, line(&tx, pool.as_str(), start).await?));
                }
                let view: Vec<_> =
                    pools.iter().map(|(pool, budget, _, line)| (*pool, budget, line)).collect();
                let fit = match rules::fit(&ask, &view) {
                    Ok(fit) => fit,
                    Err(refusal) => return Ok(Err(refusal)),
                };
                let expires = int(now.saturating_add(lease_millis(ask.lease)));
                let held = fit.amount;
                let id: i64 = tx
                    .query_one(
                        "INSERT INTO loopbound_pool_holds (holder, expires, expired, calls, tokens, cost)
                         VALUES ($1, $2, false, $3, $4, $5) RETURNING hold",
                        &[&&*ask.holder, &expires, &int(held.calls), &int(held.tokens), &int(held.cost.0)],
                    )
                    .await?
                    .get(0);
                for (pool, _, start, _) in &pools {
                    tx.execute(
                        "INSERT INTO loopbound_pool_hold_parts (hold, pool, start) VALUES ($1, $2, $3)",
                        &[&id, &pool.as_str(), &int(*start)],
                    )
                    .await?;
                    add(&tx, pool.as_str(), *start, Amount::ZERO, held, 1).await?;
                }
                let hold = HoldId::new(figure(id)?);
                Ok(Ok(Grant::new(hold, fit.output, held)))
            })
        })
    }

    fn renew(&self, hold: HoldId, lease: Duration) -> impl Future<Output = Result<bool, PoolError>> + Send {
        self.bounded(async move {
            let Ok(id) = i64::try_from(hold.get()) else { return Ok(false) };
            let lease = int(lease_millis(lease));
            transact!(self, "renewing a hold", |tx| {
                // A hold past its lease is not renewed: the next sweep charges it whole.
                let changed = tx
                    .execute(
                        "UPDATE loopbound_pool_holds
                            SET expires = (extract(epoch FROM clock_timestamp()) * 1000)::bigint + $2
                          WHERE hold = $1 AND NOT expired
                            AND expires > (extract(epoch FROM clock_timestamp()) * 1000)::bigint",
                        &[&id, &lease],
                    )
                    .await?;
                Ok(changed == 1)
            })
        })
    }

    fn settle(
        &self,
        hold: HoldId,
        charge: Amount,
    ) -> impl Future<Output = Result<Settled, PoolError>> + Send {
        self.bounded(async move {
            let id = i64::try_from(hold.get()).map_err(|_| PoolError::UnknownHold)?;
            transact!(self, "settling a hold", |tx| conclude(&tx, id, Some(charge)).await)
        })
    }

    fn release(&self, hold: HoldId) -> impl Future<Output = Result<(), PoolError>> + Send {
        self.bounded(async move {
            let id = i64::try_from(hold.get()).map_err(|_| PoolError::UnknownHold)?;
            transact!(self, "releasing a hold", |tx| conclude(&tx, id, None).await.map(|_| ()))
        })
    }
}
