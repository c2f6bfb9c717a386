//! A pool store a host can hold as `dyn`: [`DynPoolStore`], what every run keeps of its store
//! and what a host holds to pick memory, SQLite or PostgreSQL at run time.
//!
//! # Which style, and why
//!
//! [`PoolStore`] and [`PoolBackend`], the traits a store implements, write their futures as
//! `impl Future` in the trait, as [`Journal`](crate::journal::Journal) does: a store writes
//! plain `async` code, and a call through a concrete store allocates nothing. Such a trait
//! cannot be a `dyn` object, yet a run holds its store without knowing its type. So, as
//! [`DynJournal`](crate::journal::DynJournal) is to `Journal`, [`DynPoolStore`] is both traits
//! with each future boxed ([`PoolFuture`]), implemented for every `PoolStore`; and `dyn
//! DynPoolStore` implements `PoolStore` and `PoolBackend` in turn (and so do
//! `Arc<dyn DynPoolStore>`, `Box<dyn DynPoolStore>` and references to them), so every function
//! that takes a store takes the boxed one too. A store implements `PoolStore` and
//! `PoolBackend` only; a run holds `Arc<dyn DynPoolStore>`, and
//! [`ScopeBuilder::pools`](crate::ScopeBuilder::pools) takes an `Arc` of any store, coerced.
//!
//! # Invariants
//!
//! - Every method of `dyn DynPoolStore` forwards to the same method of the store inside it, so
//!   a store held as `dyn` behaves exactly as the store itself.
//! - The boxed futures are `Send`, as the traits' are.

use std::fmt;
use std::time::Duration;

use super::backend::{Grant, HoldId, PoolAsk, PoolBackend, PoolRefusal, Settled};
use super::{Amount, PoolBudget, PoolError, PoolFuture, PoolState, PoolStore, WindowTotals};

/// A [`PoolStore`] that can be held as `dyn` (`Arc<dyn DynPoolStore>`), with its futures boxed.
///
/// Every `PoolStore` is one; hold a store a host picks at run time as `Arc<dyn DynPoolStore>`
/// and pass it wherever a store goes: `dyn DynPoolStore` implements `PoolStore` and
/// [`PoolBackend`]. Its methods are those traits' (see there for their contracts), called
/// through the box.
///
/// A host calls them with `PoolStore` in scope, as on any store: one box per call. With
/// `DynPoolStore` in scope instead, a method named on the `Arc` itself is the `Arc`'s (an `Arc`
/// of a store is a store too) and boxes twice; with both in scope, the call is ambiguous.
///
#[cfg_attr(feature = "pools", doc = "```")]
#[cfg_attr(not(feature = "pools"), doc = "```ignore")]
/// use std::sync::Arc;
/// use loopbound::pool::{self, MemoryPools, PoolBudget, PoolStore};
/// use loopbound::Scope;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // Chosen at run time: SQLite, PostgreSQL, or memory for a test.
/// let pools: Arc<dyn pool::DynPoolStore> = Arc::new(MemoryPools::new());
/// pools.define("tenant:acme", PoolBudget::default().with_tokens(1_000)).await?;
/// let scope = Scope::builder().pools(pools.clone(), ["tenant:acme"]).build()?;
/// assert_eq!(scope.pools().map(|draw| draw.names().len()), Some(1));
/// assert_eq!(pools.state("tenant:acme").await?.budget.tokens(), Some(1_000));
/// # Ok(())
/// # }
/// ```
pub trait DynPoolStore: Send + Sync + fmt::Debug {
    /// [`PoolStore::define`].
    fn define<'a>(&'a self, pool: &'a str, budget: PoolBudget) -> PoolFuture<'a, ()>;

    /// [`PoolStore::state`].
    fn state<'a>(&'a self, pool: &'a str) -> PoolFuture<'a, PoolState>;

    /// [`PoolStore::windows`].
    fn windows<'a>(&'a self, pool: &'a str) -> PoolFuture<'a, Vec<(u64, WindowTotals)>>;

    /// [`PoolBackend::reserve`].
    fn reserve(&self, ask: PoolAsk) -> PoolFuture<'_, Result<Grant, PoolRefusal>>;

    /// [`PoolBackend::renew`].
    fn renew(&self, hold: HoldId, lease: Duration) -> PoolFuture<'_, bool>;

    /// [`PoolBackend::settle`].
    fn settle(&self, hold: HoldId, charge: Amount) -> PoolFuture<'_, Settled>;

    /// [`PoolBackend::release`].
    fn release(&self, hold: HoldId) -> PoolFuture<'_, ()>;
}

impl<S: PoolStore> DynPoolStore for S {
    fn define<'a>(&'a self, pool: &'a str, budget: PoolBudget) -> PoolFuture<'a, ()> {
        Box::pin(PoolStore::define(self, pool, budget))
    }

    fn state<'a>(&'a self, pool: &'a str) -> PoolFuture<'a, PoolState> {
        Box::pin(PoolStore::state(self, pool))
    }

    fn windows<'a>(&'a self, pool: &'a str) -> PoolFuture<'a, Vec<(u64, WindowTotals)>> {
        Box::pin(PoolStore::windows(self, pool))
    }

    fn reserve(&self, ask: PoolAsk) -> PoolFuture<'_, Result<Grant, PoolRefusal>> {
        Box::pin(PoolBackend::reserve(self, ask))
    }

    fn renew(&self, hold: HoldId, lease: Duration) -> PoolFuture<'_, bool> {
        Box::pin(PoolBackend::renew(self, hold, lease))
    }

    fn settle(&self, hold: HoldId, charge: Amount) -> PoolFuture<'_, Settled> {
        Box::pin(PoolBackend::settle(self, hold, charge))
    }

    fn release(&self, hold: HoldId) -> PoolFuture<'_, ()> {
        Box::pin(PoolBackend::release(self, hold))
    }
}

// The methods are `async fn`s so that each future captures the call's lifetimes as the
// traits' `impl Future` does, rather than one lifetime shorter than both.
impl PoolStore for dyn DynPoolStore {
    async fn define(&self, pool: &str, budget: PoolBudget) -> Result<(), PoolError> {
        DynPoolStore::define(self, pool, budget).await
    }

    async fn state(&self, pool: &str) -> Result<PoolState, PoolError> {
        DynPoolStore::state(self, pool).await
    }

    async fn windows(&self, pool: &str) -> Result<Vec<(u64, WindowTotals)>, PoolError> {
        DynPoolStore::windows(self, pool).await
    }
}

impl PoolBackend for dyn DynPoolStore {
    async fn reserve(&self, ask: PoolAsk) -> Result<Result<Grant, PoolRefusal>, PoolError> {
        DynPoolStore::reserve(self, ask).await
    }

    async fn renew(&self, hold: HoldId, lease: Duration) -> Result<bool, PoolError> {
        DynPoolStore::renew(self, hold, lease).await
    }

    async fn settle(&self, hold: HoldId, charge: Amount) -> Result<Settled, PoolError> {
        DynPoolStore::settle(self, hold, charge).await
    }

    async fn release(&self, hold: HoldId) -> Result<(), PoolError> {
        DynPoolStore::release(self, hold).await
    }
}
