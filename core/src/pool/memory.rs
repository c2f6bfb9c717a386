//! Pools in one process's memory: every operation under one mutex.
//!
//! # Invariants
//!
//! - Each operation takes the mutex once, charges the holds whose lease expired, then decides
//!   and writes, so it is atomic with respect to every other operation of the store.
//! - A hold records the window of each pool it was made in; its settlement, release and expiry
//!   touch those windows' figures only.
//! - Expired holds stay until settled late (their figures are final); settled and released ones
//!   are removed.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::backend::rules::{self, PoolAsk, PoolRefusal};
use super::backend::{Grant, HoldId, PoolBackend, Settled, lease_millis};
use super::budget::{Amount, PoolBudget, PoolName};
use super::error::PoolError;
use super::{Clock, PoolState, PoolStore, SystemClock, WindowTotals};
use crate::sync::Mutex;

/// Pools kept in this process's memory: for one process, and for tests.
///
/// ```
/// use loopbound::pool::{MemoryPools, PoolBudget, PoolStore};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), loopbound::pool::PoolError> {
/// let pools = MemoryPools::new();
/// pools.define("tenant:acme", PoolBudget::default().with_calls(100)).await?;
/// assert_eq!(pools.state("tenant:acme").await?.budget.calls(), Some(100));
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct MemoryPools {
    book: Mutex<Book>,
    clock: Arc<dyn Clock>,
}

#[derive(Debug, Default)]
struct Book {
    pools: BTreeMap<PoolName, PoolBudget>,
    lines: BTreeMap<(PoolName, u64), WindowTotals>,
    holds: BTreeMap<u64, Hold>,
    next: u64,
}

#[derive(Debug)]
struct Hold {
    /// Each pool and the start of the window the hold was made in.
    parts: Vec<(PoolName, u64)>,
    amount: Amount,
    expires: u64,
    expired: bool,
}

impl Default for MemoryPools {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryPools {
    /// An empty store on the system's clock.
    #[must_use]
    pub fn new() -> Self {
        Self::with_clock(Arc::new(SystemClock))
    }

    /// An empty store on `clock`.
    #[must_use]
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        Self { book: Mutex::new(Book::default()), clock }
    }

    fn now(&self) -> u64 {
        self.clock.now()
    }
}

impl Book {
    /// Charges whole every open hold whose lease expired by `now`.
    fn expire(&mut self, now: u64) {
        for hold in self.holds.values_mut().filter(|hold| !hold.expired && hold.expires <= now) {
            hold.expired = true;
            for part in &hold.parts {
                let line = self.lines.entry(part.clone()).or_default();
                line.reserved = line.reserved.minus(hold.amount);
                line.settled = line.settled.plus(hold.amount);
            }
        }
    }

    fn budget(&self, pool: &PoolName) -> Result<PoolBudget, PoolError> {
        self.pools.get(pool).copied().ok_or(PoolError::UnknownPool)
    }

    fn reserve(&mut self, ask: &PoolAsk, now: u64) -> Result<Result<Grant, PoolRefusal>, PoolError> {
        let mut keyed = Vec::with_capacity(ask.pools.len());
        for pool in &ask.pools {
            let budget = self.budget(pool)?;
            let key = (pool.clone(), budget.window().start(now));
            let line = self.lines.get(&key).copied().unwrap_or_default();
            keyed.push((key, budget, line));
        }
        let view: Vec<_> = keyed.iter().map(|((pool, _), budget, line)| (pool, budget, line)).collect();
        let fit = match rules::fit(ask, &view) {
            Ok(fit) => fit,
            Err(refusal) => return Ok(Err(refusal)),
        };
        let parts: Vec<_> = keyed.into_iter().map(|(key, ..)| key).collect();
        for part in &parts {
            let line = self.lines.entry(part.clone()).or_default();
            line.reserved = line.reserved.plus(fit.amount);
        }
        self.next += 1;
        let id = self.next;
        let expires = now.saturating_add(lease_millis(ask.lease));
        self.holds.insert(id, Hold { parts, amount: fit.amount, expires, expired: false });
        Ok(Ok(Grant { hold: HoldId::new(id), output: fit.output, amount: fit.amount }))
    }

    fn settle(&mut self, hold: HoldId, charge: Amount) -> Result<Settled, PoolError> {
        let open = self.holds.remove(&hold.get()).ok_or(PoolError::UnknownHold)?;
        let added = rules::settlement(open.amount, charge, open.expired);
        for part in &open.parts {
            let line = self.lines.entry(part.clone()).or_default();
            if !open.expired {
                line.reserved = line.reserved.minus(open.amount);
            }
            line.settled = line.settled.plus(added);
        }
        Ok(if open.expired { Settled::Late } else { Settled::InTime { over: charge.exceeds(&open.amount) } })
    }

    fn release(&mut self, hold: HoldId) -> Result<(), PoolError> {
        let open = self.holds.remove(&hold.get()).ok_or(PoolError::UnknownHold)?;
        if !open.expired {
            for part in &open.parts {
                let line = self.lines.entry(part.clone()).or_default();
                line.reserved = line.reserved.minus(open.amount);
            }
        }
        Ok(())
    }

    fn state(&self, pool: &PoolName, now: u64) -> Result<PoolState, PoolError> {
        let budget = self.budget(pool)?;
        let start = budget.window().start(now);
        let key = (pool.clone(), start);
        let line = self.lines.get(&key).copied().unwrap_or_default();
        let holds = self.holds.values().filter(|hold| !hold.expired && hold.parts.contains(&key)).count();
        Ok(PoolState {
            name: pool.clone(),
            budget,
            window_start: start,
            window_end: budget.window().end(now),
            settled: line.settled,
            reserved: line.reserved,
            holds: holds as u64,
        })
    }
}

impl PoolStore for MemoryPools {
    fn define(&self, pool: &str, budget: PoolBudget) -> impl Future<Output = Result<(), PoolError>> + Send {
        let result = PoolName::new(pool).and_then(|pool| {
            budget.validate()?;
            let mut book = self.book.lock();
            match book.pools.get(&pool) {
                Some(existing) if existing.window() != budget.window() => Err(PoolError::InvalidBudget),
                _ => {
                    book.pools.insert(pool, budget);
                    Ok(())
                }
            }
        });
        std::future::ready(result)
    }

    fn state(&self, pool: &str) -> impl Future<Output = Result<PoolState, PoolError>> + Send {
        let state = PoolName::new(pool).and_then(|pool| {
            let now = self.now();
            let mut book = self.book.lock();
            book.expire(now);
            book.state(&pool, now)
        });
        std::future::ready(state)
    }

    fn windows(
        &self,
        pool: &str,
    ) -> impl Future<Output = Result<Vec<(u64, WindowTotals)>, PoolError>> + Send {
        let windows = PoolName::new(pool).and_then(|pool| {
            let now = self.now();
            let mut book = self.book.lock();
            book.expire(now);
            book.budget(&pool).map(|_| {
                book.lines
                    .iter()
                    .filter(|((name, _), _)| *name == pool)
                    .map(|((_, start), line)| (*start, *line))
                    .collect()
            })
        });
        std::future::ready(windows)
    }
}

impl PoolBackend for MemoryPools {
    fn reserve(
        &self,
        ask: PoolAsk,
    ) -> impl Future<Output = Result<Result<Grant, PoolRefusal>, PoolError>> + Send {
        let now = self.now();
        let mut book = self.book.lock();
        book.expire(now);
        std::future::ready(book.reserve(&ask, now))
    }

    fn renew(&self, hold: HoldId, lease: Duration) -> impl Future<Output = Result<bool, PoolError>> + Send {
        let now = self.now();
        let mut book = self.book.lock();
        book.expire(now);
        let renewed = match book.holds.get_mut(&hold.get()) {
            Some(open) if !open.expired => {
                open.expires = now.saturating_add(lease_millis(lease));
                true
            }
            _ => false,
        };
        std::future::ready(Ok(renewed))
    }

    fn settle(
        &self,
        hold: HoldId,
        charge: Amount,
    ) -> impl Future<Output = Result<Settled, PoolError>> + Send {
        let now = self.now();
        let mut book = self.book.lock();
        book.expire(now);
        std::future::ready(book.settle(hold, charge))
    }

    fn release(&self, hold: HoldId) -> impl Future<Output = Result<(), PoolError>> + Send {
        let now = self.now();
        let mut book = self.book.lock();
        book.expire(now);
        std::future::ready(book.release(hold))
    }
}
