//! Budgets shared by many runs, in many processes: a tenant's daily tokens and money, reserved
//! before every model call, never merely checked.
//!
//! A **pool** is a named budget ([`PoolBudget`]: model calls, tokens, money) with an optional
//! fixed UTC window (a day, a month), kept in a [`PoolStore`]: [`MemoryPools`] for one process,
//! `loopbound-sqlite`'s for the processes of one machine, `loopbound-postgres`'s for many
//! machines. A scope draws from any number of pools of one store, named when it is built
//! ([`ScopeBuilder::pools`](crate::ScopeBuilder::pools)): tenant, user, feature.
//!
#![cfg_attr(feature = "pools", doc = "```")]
#![cfg_attr(not(feature = "pools"), doc = "```ignore")]
//! use std::sync::Arc;
//! use loopbound::pool::{MemoryPools, PoolBudget, PoolStore, Window};
//! use loopbound::Scope;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let pools = Arc::new(MemoryPools::new());
//! // One line per tenant: 1,000 tokens a day.
//! pools.define("tenant:acme", PoolBudget::default().with_tokens(1_000).per(Window::Day)).await?;
//! // Per request: the scope draws from the tenant's pool and the user's.
//! pools.define("user:7", PoolBudget::default().with_calls(50).per(Window::Day)).await?;
//! let scope = Scope::builder().pools(pools.clone(), ["tenant:acme", "user:7"]).build()?;
//! assert_eq!(scope.pools().map(|draw| draw.names().len()), Some(2));
//! assert_eq!(pools.state("tenant:acme").await?.settled.tokens, 0, "nothing is held before a call");
//! # Ok(())
//! # }
//! ```
//!
//! `docs/pools.md` runs requests against a pool until it is spent.
//!
//! # A host's trait and a backend's
//!
//! A host calls [`PoolStore`]'s `define`, `state` and `windows`, naming pools by their text, and
//! hands the store and the names to its scopes ([`ScopeBuilder::pools`](crate::ScopeBuilder::pools)). What the runtime calls for each model call (reserve, renew,
//! settle, release) is [`PoolBackend`](backend::PoolBackend), `PoolStore`'s supertrait, in
//! [`backend`] with the holds, grants and the arithmetic every store shares: a store implements
//! both, and a host never needs `backend`.
//!
//! # One async style
//!
//! Both traits write their futures as `impl Future` in the trait, as the journal's
#![cfg_attr(
    feature = "journal",
    doc = "[`Journal`](crate::journal::Journal) does: a store writes plain `async` code, and a call"
)]
#![cfg_attr(not(feature = "journal"), doc = "`Journal` does: a store writes plain `async` code, and a call")]
//! through a concrete store allocates nothing. Every run holds its store as
//! `Arc<dyn` [`DynPoolStore`]`>`, their boxed twin, which every store is
//! and which implements both traits in turn; a host holds it too to pick a store at run time.
//!
//! # How a call is admitted
//!
//! 1. The run's own checks are looked at first, without holding anything (cancellation, the
//!    model-call budget, its own spend budgets): a call they would refuse never reaches a pool.
//! 2. **Every pool** the scope draws from reserves the call, all or nothing, in one transaction
//!    of the store: one model call, the request's input and an output that fits (the smallest
//!    of the call's cap, the scope's [`pool_output_cap`](crate::ScopeBuilder::pool_output_cap), what the run's budgets
//!    leave, and what each pool leaves), and their cost. A pool without room refuses: the run
//!    halts `TokenBudget`, `CostBudget` or `ModelBudget` (for calls), the outcome's
//!    [`detail`](crate::Outcome::detail) names the pool, and the call is not sent.
//! 3. The run's own admission holds its reservation; if it refuses (another call of the run took
//!    the room meanwhile), the pools' hold is released, nothing charged.
//! 4. The request goes out with its output cap set to what was granted. While it is in flight
//!    the hold's lease is renewed (every third of the lease).
//! 5. When the reply is in, the pools are charged the provider's reported usage (or the whole
//!    hold without a report, a failed call, a stop during the call, a stream cut past its
//!    reservation) and the rest is released.
//!
//! # What a pool guarantees when a worker dies
//!
//! A hold whose holder stops renewing it (its process was killed, its machine lost, its future
//! dropped) is **charged whole** once its lease expires, never refunded without a settlement:
//! the provider may have billed the call. A settlement that arrives after the expiry adds only
//! what its report exceeds the hold by, so nothing is counted twice. Until the lease expires,
//! the dead call's hold still counts against the pool, so the pool's settled spend never
//! exceeds its budget, whatever the number of workers and their crashes, provided the providers
//! honour the output cap; with one that does not, a settlement may exceed its hold, and the
//! overshoot is at most one call's excess per concurrent holder.
//!
//! # Invariants
//!
//! - A pool's settled + reserved figures never exceed any bound it sets, in any window, except
//!   by settlements reporting more than their hold (a provider past its cap).
//! - A reservation is all or nothing across the pools of one ask: a store writes a hold in every
//!   pool or in none, in one transaction.
//! - A settled unit is never lost: a window's settled figures only grow, by each settlement's
//!   charge (or an expired hold's whole amount, and what a late settlement adds beyond it).
//! - Each hold is settled or released at most once ([`PoolError::UnknownHold`] after); an expired
//!   hold can still be settled once, late.
//! - A store judges leases and windows by one clock: [`MemoryPools`]' (injectable: [`Clock`]),
//!   the SQLite store's process clock, PostgreSQL's server clock.
//! - Priced tools are not drawn from pools: a scope that draws from pools and has tool prices is
//!   refused when it is built (fail closed) rather than spend money its pools never saw.

pub mod backend;
mod boxed;
mod budget;
mod draw;
mod error;
#[cfg(feature = "pools")]
mod memory;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
#[cfg(feature = "pools")]
use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(feature = "pools")]
use std::time::{Duration, SystemTime};

use serde::Serialize;

pub use backend::rules::WindowTotals;
pub use boxed::DynPoolStore;
pub use budget::{Amount, MAX_POOL_NAME_LEN, PoolBudget, PoolName, Window};
pub(crate) use draw::PoolSettings;
pub use draw::{DEFAULT_LEASE, DEFAULT_OUTPUT_CAP, PoolDraw, PoolTerms};
pub use error::PoolError;
#[cfg(feature = "pools")]
pub use memory::MemoryPools;

/// A boxed future of a pool store held as `dyn` ([`DynPoolStore`]): `Send`, so a run that
/// awaits it can be spawned.
pub type PoolFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, PoolError>> + Send + 'a>>;

/// A pool's state, as a host reads it: its budget and its current window's figures.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct PoolState {
    /// The pool.
    pub name: PoolName,
    /// Its budget.
    pub budget: PoolBudget,
    /// When its current window started (milliseconds since 1970-01-01 UTC; 0 for a whole
    /// budget).
    pub window_start: u64,
    /// When its current window ends (`None`: never).
    pub window_end: Option<u64>,
    /// Settled in the current window (expired holds included).
    pub settled: Amount,
    /// Held by calls in flight in the current window.
    pub reserved: Amount,
    /// How many holds are open in the current window.
    pub holds: u64,
}

impl PoolState {
    /// `name`'s state under `budget`: its current window (from `window_start`, until
    /// `window_end` if it ends), that window's figures `line` and its open holds.
    #[must_use]
    pub const fn new(
        name: PoolName,
        budget: PoolBudget,
        window_start: u64,
        window_end: Option<u64>,
        line: WindowTotals,
        holds: u64,
    ) -> Self {
        Self { name, budget, window_start, window_end, settled: line.settled, reserved: line.reserved, holds }
    }
}

/// Where pools live, as a host uses them: define a pool, read its state and its windows.
///
/// A store is shared by every run of a process (`Arc<dyn` [`DynPoolStore`]`>`). Each operation is
/// atomic: it happens whole, or not at all with an error. What the runtime calls on a store for
/// each model call (reserve, renew, settle, release) is its supertrait,
/// [`PoolBackend`](backend::PoolBackend), which a store implements too and a host never calls.
///
/// A pool is named by its text (`"tenant:acme"`): 1 to [`MAX_POOL_NAME_LEN`] bytes of
/// `A-Z a-z 0-9 . _ : -`, checked by the store ([`PoolName::new`]) before anything else.
///
#[cfg_attr(
    feature = "journal",
    doc = " Its futures are `impl Future` in the trait, as [`Journal`](crate::journal::Journal)'s: a"
)]
#[cfg_attr(
    not(feature = "journal"),
    doc = " Its futures are `impl Future` in the trait, as `journal::Journal`'s: a"
)]
/// store writes plain `async` code. Such a trait is not `dyn`-compatible; every run holds its
/// store as `Arc<dyn` [`DynPoolStore`]`>` ([`PoolDraw`]), the boxed form, which implements
/// `PoolStore` in turn.
pub trait PoolStore: backend::PoolBackend + fmt::Debug {
    /// Creates `pool` with `budget`, or sets an existing pool's bounds to `budget`'s (a host
    /// raising or lowering a limit): the current window's figures are kept, holds in flight stay
    /// held, and a bound lowered below what is used refuses the next calls.
    ///
    /// # Errors
    ///
    /// [`PoolError::InvalidName`]; [`PoolError::InvalidBudget`] for a budget that does not
    /// validate or changes an existing pool's window; a storage error.
    fn define(&self, pool: &str, budget: PoolBudget) -> impl Future<Output = Result<(), PoolError>> + Send;

    /// The pool's state (holds whose lease expired are charged first).
    ///
    /// # Errors
    ///
    /// [`PoolError::InvalidName`]; [`PoolError::UnknownPool`]; a storage error.
    fn state(&self, pool: &str) -> impl Future<Output = Result<PoolState, PoolError>> + Send;

    /// Every window of the pool that has figures, oldest first: its start and its figures (for
    /// a host's billing; holds whose lease expired are charged first). A window is listed once a
    /// hold was made in it, even when its figures are all back to zero (its holds released); a
    /// window no call reserved in is not.
    ///
    /// # Errors
    ///
    /// [`PoolError::InvalidName`]; [`PoolError::UnknownPool`]; a storage error.
    fn windows(&self, pool: &str)
    -> impl Future<Output = Result<Vec<(u64, WindowTotals)>, PoolError>> + Send;
}

/// The trait's methods delegated to `**self`.
macro_rules! delegate {
    () => {
        fn define(
            &self,
            pool: &str,
            budget: PoolBudget,
        ) -> impl Future<Output = Result<(), PoolError>> + Send {
            (**self).define(pool, budget)
        }

        fn state(&self, pool: &str) -> impl Future<Output = Result<PoolState, PoolError>> + Send {
            (**self).state(pool)
        }

        fn windows(
            &self,
            pool: &str,
        ) -> impl Future<Output = Result<Vec<(u64, WindowTotals)>, PoolError>> + Send {
            (**self).windows(pool)
        }
    };
}

impl<S: PoolStore + ?Sized> PoolStore for &S {
    delegate!();
}

impl<S: PoolStore + ?Sized> PoolStore for Arc<S> {
    delegate!();
}

impl<S: PoolStore + ?Sized> PoolStore for Box<S> {
    delegate!();
}

/// The clock a store judges leases and windows by, in milliseconds since 1970-01-01 UTC.
#[cfg(feature = "pools")]
pub trait Clock: Send + Sync + fmt::Debug {
    /// Now.
    fn now(&self) -> u64;
}

/// The system's clock.
#[cfg(feature = "pools")]
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

#[cfg(feature = "pools")]
impl Clock for SystemClock {
    fn now(&self) -> u64 {
        let since = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
        u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
    }
}

/// A clock that moves only when told: for tests of leases and windows.
#[cfg(feature = "pools")]
#[derive(Clone, Debug, Default)]
pub struct ManualClock(Arc<AtomicU64>);

#[cfg(feature = "pools")]
impl ManualClock {
    /// A clock at `now`.
    #[must_use]
    pub fn at(now: u64) -> Self {
        Self(Arc::new(AtomicU64::new(now)))
    }

    /// Moves the clock `by` forward.
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        self.0.fetch_add(by, Ordering::SeqCst);
    }

    /// Sets the clock to `now`.
    pub fn set(&self, now: u64) {
        self.0.store(now, Ordering::SeqCst);
    }
}

#[cfg(feature = "pools")]
impl Clock for ManualClock {
    fn now(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}
