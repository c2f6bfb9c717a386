//! The reservation race can fail: a store that checks a pool's room, lets go, and writes its
//! hold a moment later grants more than the pool has room for, and the race says so.
//!
//! # Invariants
//!
//! - [`Gap`] keeps each pool's real budget itself and defines the pool in the memory store
//!   inside it with every bound many times larger, so the inner store's own check never refuses:
//!   the room is judged once, by [`rules::fit`] on the real budget, before the gap.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use loopbound::pool::backend::rules::{self, PoolAsk, PoolRefusal};
use loopbound::pool::backend::{Grant, HoldId, PoolBackend, Settled};
use loopbound::pool::{
    Amount, MemoryPools, PoolBudget, PoolError, PoolName, PoolState, PoolStore, WindowTotals,
};
use loopbound::spend::Micros;

use super::reservations::{self, EXACTLY_THE_ROOM, RACERS};

/// How much larger the inner store's bounds are than the real ones.
const LOOSE: u64 = RACERS + 1;

/// How a [`Gap`] waits between reading the room and writing its hold.
#[derive(Clone, Copy, Debug)]
enum Wait {
    /// Awaits a timer: every other racer runs meanwhile.
    Timer(Duration),
    /// Blocks its thread: only racers on the runtime's other threads run meanwhile.
    Thread(Duration),
}

/// A store that reads the room, waits, then writes: two steps where one transaction belongs.
#[derive(Debug)]
struct Gap {
    inner: MemoryPools,
    budgets: Mutex<BTreeMap<PoolName, PoolBudget>>,
    wait: Wait,
}

impl Gap {
    fn new(wait: Wait) -> Self {
        Self { inner: MemoryPools::new(), budgets: Mutex::default(), wait }
    }

    fn budget(&self, pool: &PoolName) -> Result<PoolBudget, PoolError> {
        let budgets = self.budgets.lock().unwrap_or_else(PoisonError::into_inner);
        budgets.get(pool).copied().ok_or(PoolError::UnknownPool)
    }
}

/// `budget` with every bound [`LOOSE`] times larger.
fn loose(budget: PoolBudget) -> PoolBudget {
    let mut loose = PoolBudget::default().per(budget.window());
    if let Some(calls) = budget.calls() {
        loose = loose.with_calls(calls.saturating_mul(LOOSE));
    }
    if let Some(tokens) = budget.tokens() {
        loose = loose.with_tokens(tokens.saturating_mul(LOOSE));
    }
    if let Some(cost) = budget.cost() {
        loose = loose.with_cost(Micros(cost.0.saturating_mul(LOOSE)));
    }
    loose
}

impl PoolBackend for Gap {
    async fn reserve(&self, ask: PoolAsk) -> Result<Result<Grant, PoolRefusal>, PoolError> {
        let mut figures = Vec::with_capacity(ask.pools.len());
        for pool in &ask.pools {
            let state = self.inner.state(pool.as_str()).await?;
            figures.push((pool, self.budget(pool)?, WindowTotals::new(state.settled, state.reserved)));
        }
        let view: Vec<_> = figures.iter().map(|(pool, budget, line)| (*pool, budget, line)).collect();
        let fit = match rules::fit(&ask, &view) {
            Ok(fit) => fit,
            Err(refusal) => return Ok(Err(refusal)),
        };
        // The gap: others read the same room meanwhile.
        match self.wait {
            Wait::Timer(pause) => tokio::time::sleep(pause).await,
            Wait::Thread(pause) => std::thread::sleep(pause),
        }
        self.inner.reserve(ask.cap(fit.output).min_output(fit.output)).await
    }

    async fn renew(&self, hold: HoldId, lease: Duration) -> Result<bool, PoolError> {
        self.inner.renew(hold, lease).await
    }

    async fn settle(&self, hold: HoldId, charge: Amount) -> Result<Settled, PoolError> {
        self.inner.settle(hold, charge).await
    }

    async fn release(&self, hold: HoldId) -> Result<(), PoolError> {
        self.inner.release(hold).await
    }
}

impl PoolStore for Gap {
    async fn define(&self, pool: &str, budget: PoolBudget) -> Result<(), PoolError> {
        let name = PoolName::new(pool)?;
        budget.validate()?;
        self.inner.define(pool, loose(budget)).await?;
        self.budgets.lock().unwrap_or_else(PoisonError::into_inner).insert(name, budget);
        Ok(())
    }

    async fn state(&self, pool: &str) -> Result<PoolState, PoolError> {
        let inner = self.inner.state(pool).await?;
        let budget = self.budget(&inner.name)?;
        let totals = WindowTotals::new(inner.settled, inner.reserved);
        Ok(PoolState::new(inner.name, budget, inner.window_start, inner.window_end, totals, inner.holds))
    }

    async fn windows(&self, pool: &str) -> Result<Vec<(u64, WindowTotals)>, PoolError> {
        self.inner.windows(pool).await
    }
}

/// The message of the panic that ended `task`, or why there was none.
async fn panic_message(task: tokio::task::JoinHandle<()>) -> String {
    match task.await {
        Ok(()) => "no panic".to_owned(),
        Err(error) if error.is_panic() => {
            let payload = error.into_panic();
            payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|text| (*text).to_owned()))
                .unwrap_or_else(|| "a panic without a message".to_owned())
        }
        Err(error) => format!("not a panic: {error}"),
    }
}

/// The figure after `side` (`left:` or `right:`) in an `assert_eq!`'s `message`.
fn figure(message: &str, side: &str) -> Option<u64> {
    message
        .lines()
        .find_map(|line| line.trim().strip_prefix(side))
        .and_then(|count| count.trim().parse().ok())
}

/// Asserts that the reservation race fails `store` on its first rule, granting more calls than
/// there was room for (in whichever round and pool it first did).
async fn caught_oversubscribing(store: Gap) {
    let message = panic_message(tokio::spawn(reservations::check(Arc::new(store)))).await;
    let first = format!("assertion `left == right` failed: {EXACTLY_THE_ROOM}");
    assert_eq!(message.lines().next(), Some(first.as_str()), "{message}");
    let (granted, room) = (figure(&message, "left:"), figure(&message, "right:"));
    assert!(granted > room && room.is_some(), "more grants than room: {message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_awaits_between_check_and_write_fails_the_reservation_race() {
    caught_oversubscribing(Gap::new(Wait::Timer(Duration::from_millis(2)))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_blocks_between_check_and_write_fails_the_reservation_race() {
    caught_oversubscribing(Gap::new(Wait::Thread(Duration::from_micros(200)))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_store_passes_the_reservation_race() {
    let message = panic_message(tokio::spawn(reservations::check(Arc::new(MemoryPools::new())))).await;
    assert_eq!(message, "no panic");
}
