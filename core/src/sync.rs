//! The one place that names the synchronisation primitives.
//!
//! Under `--cfg loopbound_loom` the mutex and the atomic flag are loom's model-checked types;
//! otherwise the standard library's. Reference counts (`std::sync::Arc`) are not part of the model and are used
//! directly. Every other module goes through this shim, so that the scope's critical section
//! can be explored exhaustively by the loom models in `loom-tests/`.
//!
//! # Invariants
//!
//! - [`lock`] never panics: a poisoned mutex is recovered. The data behind our mutexes is
//!   updated in one step per critical section (no early return leaves it half-written), so a
//!   panic elsewhere while the lock was held cannot leave an inconsistent ledger behind.

#[cfg(loopbound_loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard, atomic::AtomicBool};

#[cfg(not(loopbound_loom))]
pub(crate) use std::sync::{Mutex, MutexGuard, atomic::AtomicBool};

pub(crate) use std::sync::atomic::Ordering;

/// Locks `mutex`, recovering the guard if a previous holder panicked.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}
