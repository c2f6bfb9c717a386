//! What a pool store implements for the runtime, apart from what a host calls.
//!
//! A host defines pools and reads them through [`PoolStore`](super::PoolStore) (`define`,
//! `state`, `windows`). For each model call of a run that draws from pools, the runtime
//! reserves, renews, settles and releases holds through [`PoolBackend`], the supertrait every
//! store implements beside it, with the arithmetic of [`rules`] (the same in every store) and
//! the types of this module. `loopbound-test`'s pool conformance suite checks a store against
//! both traits.
//!
//! # Invariants
//!
//! - A host never needs `backend`: defining pools, drawing from them
//!   ([`PoolDraw`](super::PoolDraw)) and reading their state take the types of
//!   [`pool`](super) only.
//! - A reservation is all or nothing across the pools of its ask, in one transaction of the
//!   store; each hold is settled or released at most once.
//! - A hold is expired from the instant its lease ends, by the store's clock: `now >= expires`,
//!   `expires` being when it was reserved or last renewed plus the lease.
//! - A hold belongs to the window of each pool it was made in: its settlement, release and
//!   expiry change those windows' figures, whichever window is current by then.

pub mod rules;

use std::future::Future;
use std::time::Duration;

use serde::Serialize;

use super::{Amount, PoolError};

pub use rules::{PoolAsk, PoolLimit, PoolRefusal};

/// One reservation in a store, across the pools of its ask.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct HoldId(u64);

impl HoldId {
    /// The hold a store numbered `id`.
    #[must_use]
    pub const fn new(id: u64) -> Self {
        Self(id)
    }

    /// The store's number for it.
    #[must_use]
    pub const fn get(self) -> u64 {
        self.0
    }
}

/// A reservation a store granted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Grant {
    /// The hold, to settle, release or renew.
    pub hold: HoldId,
    /// The output granted: the request goes out with this cap (`u64::MAX`: no pool bounds spend
    /// and the call had no cap).
    pub output: u64,
    /// What it holds in each pool.
    pub amount: Amount,
}

impl Grant {
    /// A grant of `hold`, sending the call with `output` as its cap and holding `amount` in each
    /// pool.
    #[must_use]
    pub const fn new(hold: HoldId, output: u64, amount: Amount) -> Self {
        Self { hold, output, amount }
    }
}

/// What a settlement did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Settled {
    /// The hold was open: its amount left the reserved figures and the charge was settled.
    /// `over` says whether the charge exceeded the hold.
    InTime {
        /// The charge exceeded the hold.
        over: bool,
    },
    /// The hold had expired and was charged whole: only what the charge adds beyond it was
    /// settled.
    Late,
}

/// What the runtime calls on a pool store for each model call: one transaction per operation.
///
/// Every [`PoolStore`](super::PoolStore) implements it (it is `PoolStore`'s supertrait). Its
/// futures are `impl Future` in the trait, as `PoolStore`'s; a run holds its store as
/// `Arc<dyn` [`DynPoolStore`](super::DynPoolStore)`>`, the boxed form of both traits, which
/// implements this one in turn.
///
/// # Leases and windows
///
/// A hold is **expired from the instant its lease ends**: at `now >= expires` (by the store's
/// clock, `expires` being when the hold was reserved or last renewed plus its lease) it is no
/// longer renewed and is charged whole, before the operation that found it so goes on. A hold
/// records the window of each of its pools it was made in; its settlement, release and expiry
/// change those windows' figures, even once a later window is current.
///
/// Each method is one transaction of the store. `docs/pools.md` ("Writing a pool store") lists
/// what a store writes itself and what [`rules`] decides for it; `loopbound-test`'s
/// `pool::conformance::check_all` checks a store against both traits.
pub trait PoolBackend: Send + Sync {
    /// Reserves one call in every pool of `ask`, all or nothing (after charging the holds of
    /// those pools whose lease expired): a [`Grant`], or the pool that had no room.
    ///
    /// # Errors
    ///
    /// [`PoolError::UnknownPool`] when a pool of the ask was never defined; a storage error.
    fn reserve(
        &self,
        ask: PoolAsk,
    ) -> impl Future<Output = Result<Result<Grant, PoolRefusal>, PoolError>> + Send;

    /// Extends an open hold's lease to `lease` from now; `false` when the hold is no longer open
    /// (it expired, was settled or released).
    ///
    /// # Errors
    ///
    /// A storage error.
    fn renew(&self, hold: HoldId, lease: Duration) -> impl Future<Output = Result<bool, PoolError>> + Send;

    /// Settles a hold with `charge` (the provider's usage, priced), releasing the rest; a hold
    /// that expired gets only what `charge` adds beyond it ([`rules::settlement`]). Both land in
    /// the windows the hold was made in, not the current ones: a call reserved on one UTC day
    /// and settled on the next is charged to the first.
    ///
    /// # Errors
    ///
    /// [`PoolError::UnknownHold`] for a hold settled or released already, or unknown; a
    /// storage error.
    fn settle(&self, hold: HoldId, charge: Amount)
    -> impl Future<Output = Result<Settled, PoolError>> + Send;

    /// Releases an open hold whose call was never sent, charging nothing (its amount leaves the
    /// reserved figures of the windows it was made in); a hold that expired stays charged
    /// (nothing says the call was not sent).
    ///
    /// # Errors
    ///
    /// [`PoolError::UnknownHold`]; a storage error.
    fn release(&self, hold: HoldId) -> impl Future<Output = Result<(), PoolError>> + Send;
}

/// The trait's methods delegated to `**self`.
macro_rules! delegate {
    () => {
        fn reserve(
            &self,
            ask: PoolAsk,
        ) -> impl Future<Output = Result<Result<Grant, PoolRefusal>, PoolError>> + Send {
            (**self).reserve(ask)
        }

        fn renew(
            &self,
            hold: HoldId,
            lease: Duration,
        ) -> impl Future<Output = Result<bool, PoolError>> + Send {
            (**self).renew(hold, lease)
        }

        fn settle(
            &self,
            hold: HoldId,
            charge: Amount,
        ) -> impl Future<Output = Result<Settled, PoolError>> + Send {
            (**self).settle(hold, charge)
        }

        fn release(&self, hold: HoldId) -> impl Future<Output = Result<(), PoolError>> + Send {
            (**self).release(hold)
        }
    };
}

impl<B: PoolBackend + ?Sized> PoolBackend for &B {
    delegate!();
}

impl<B: PoolBackend + ?Sized> PoolBackend for std::sync::Arc<B> {
    delegate!();
}

impl<B: PoolBackend + ?Sized> PoolBackend for Box<B> {
    delegate!();
}

/// A lease as milliseconds, saturating.
#[must_use]
pub fn lease_millis(lease: Duration) -> u64 {
    u64::try_from(lease.as_millis()).unwrap_or(u64::MAX)
}
