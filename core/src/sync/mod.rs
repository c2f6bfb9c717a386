//! The one place that names the synchronisation primitives.
//!
//! Under `--cfg loopbound_loom` the mutex, the atomic flag and the cancellation token are loom's
//! model-checked types (the token is a small modelled one, [`token`], since loom does not model
//! tokio-util's); otherwise the standard library's and tokio-util's. Reference counts
//! (`std::sync::Arc`) are not part of the model and are used directly. Every other module goes
//! through this shim, so that the state the guard reads, under its lock (the ledger, the
//! caller's token) and outside it (the "no tool can be admitted" hint, the token a body-start
//! check reads), can be explored exhaustively by the loom models in `loom-tests/`.
//!
//! # Invariants
//!
//! - [`lock`] never panics: a poisoned mutex is recovered. The data behind our mutexes is
//!   updated in one step per critical section (no early return leaves it half-written), so a
//!   panic elsewhere while the lock was held cannot leave an inconsistent ledger behind.
//! - The modelled token has the semantics the guard relies on from tokio-util's: cancelling is
//!   permanent, a child is cancelled when its parent is, and `is_cancelled` sees a `cancel` that
//!   returned (sequentially consistent).

#[cfg(loopbound_loom)]
pub(crate) mod token;

#[cfg(loopbound_loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard, atomic::AtomicBool};
#[cfg(loopbound_loom)]
pub use token::CancellationToken;

#[cfg(not(loopbound_loom))]
pub(crate) use std::sync::{Mutex, MutexGuard, atomic::AtomicBool};
#[cfg(not(loopbound_loom))]
pub(crate) use tokio_util::sync::CancellationToken;

pub(crate) use std::sync::atomic::Ordering;

/// Locks `mutex`, recovering the guard if a previous holder panicked.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}
