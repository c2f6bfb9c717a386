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
//! - [`Mutex::lock`] never panics: a poisoned mutex is recovered. The data behind our mutexes is
//!   updated in one step per critical section (no early return leaves it half-written), so a
//!   panic elsewhere while the lock was held cannot leave an inconsistent ledger behind.
//! - The modelled token has the semantics the guard relies on from tokio-util's, and its cost
//!   too: cancelling is permanent, a child is cancelled when its parent is, `is_cancelled` sees
//!   a `cancel` that returned, and `is_cancelled` takes the token's own lock, as tokio-util's
//!   does, so the models see that lock taken inside the ledger's.

#[cfg(loopbound_loom)]
pub(crate) mod token;

#[cfg(loopbound_loom)]
use loom::sync as imp;
#[cfg(not(loopbound_loom))]
use std::sync as imp;

#[cfg(loopbound_loom)]
pub(crate) use loom::sync::atomic::AtomicBool;
#[cfg(loopbound_loom)]
pub use token::CancellationToken;

#[cfg(not(loopbound_loom))]
pub(crate) use std::sync::atomic::AtomicBool;
#[cfg(not(loopbound_loom))]
pub use tokio_util::sync::CancellationToken;

pub(crate) use std::sync::atomic::Ordering;

/// A mutex whose [`lock`](Self::lock) recovers from poisoning instead of returning an error.
pub(crate) struct Mutex<T>(imp::Mutex<T>);

impl<T> std::fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mutex").finish_non_exhaustive()
    }
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Self {
        Self::new(T::default())
    }
}

/// What [`Mutex::lock`] returns.
pub(crate) type MutexGuard<'a, T> = imp::MutexGuard<'a, T>;

impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Self(imp::Mutex::new(value))
    }

    /// Whether someone holds the lock now: for tests that check what runs outside it.
    #[cfg(all(test, not(loopbound_loom)))]
    pub(crate) fn is_locked(&self) -> bool {
        matches!(self.0.try_lock(), Err(std::sync::TryLockError::WouldBlock))
    }

    /// Locks the mutex, recovering the guard if a previous holder panicked.
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        match self.0.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}
