//! Runs by id, so that any task of the process can cancel one: the request that started a run
//! registers its scope, another request (`DELETE /runs/{id}`, an admin's button) cancels it.
//!
//! # Invariants
//!
//! - One live registration per run id: registering an id that is registered already is refused,
//!   so a cancel by id always means one run.
//! - Cancelling by id cancels the run as its caller would ([`Scope::cancel`]): the run ends with
//!   [`RunError::Cancelled`](crate::RunError::Cancelled), and the caller's own token (which may
//!   be shared by other requests) is not touched.
//! - A registration ends when its [`Registration`] is dropped; it removes its own entry only,
//!   never a later registration of the same id.
//! - The registry's lock is held for one map operation, never across an `.await` and never
//!   while a scope's lock is held.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::RunId;
use crate::scope::Scope;
use crate::sync::{CancellationToken, Mutex};

/// The runs of a process by id: a host creates one at start-up and hands clones of it to every
/// request (cloning shares the same registry).
///
/// ```
/// use loopbound::{RunId, RunRegistry, Scope};
///
/// let runs = RunRegistry::new();
/// let scope = Scope::builder().build()?;
/// let id = RunId::new("review-42")?;
/// let registration = runs.register(id.clone(), &scope)?;
/// // From any task: a cancel by id.
/// assert!(runs.cancel(&id));
/// assert!(scope.is_cancelled());
/// drop(registration);
/// assert!(!runs.cancel(&id), "no run is registered under this id any more");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Default)]
pub struct RunRegistry {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    runs: Mutex<Runs>,
}

#[derive(Default)]
struct Runs {
    by_id: BTreeMap<RunId, Entry>,
    next: u64,
}

struct Entry {
    serial: u64,
    cancel: CancellationToken,
}

impl fmt::Debug for RunRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunRegistry").field("runs", &self.len()).finish()
    }
}

impl RunRegistry {
    /// An empty registry.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `scope`'s run under `id` until the returned [`Registration`] is dropped.
    ///
    /// # Errors
    ///
    /// [`AlreadyRegistered`] if a live registration holds `id`; nothing is registered then.
    pub fn register<S>(&self, id: RunId, scope: &Scope<S>) -> Result<Registration, AlreadyRegistered> {
        let mut runs = self.inner.runs.lock();
        if runs.by_id.contains_key(&id) {
            return Err(AlreadyRegistered(id));
        }
        runs.next += 1;
        let serial = runs.next;
        runs.by_id.insert(id.clone(), Entry { serial, cancel: scope.guard().caller_handle() });
        Ok(Registration { registry: Arc::clone(&self.inner), id, serial })
    }

    /// Cancels the run registered under `id`, as its caller would. Returns whether one was.
    #[allow(clippy::must_use_candidate, reason = "cancelling is the point; whether a run was found is extra")]
    pub fn cancel(&self, id: &RunId) -> bool {
        let cancel = self.inner.runs.lock().by_id.get(id).map(|entry| entry.cancel.clone());
        match cancel {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// Whether a run is registered under `id`.
    #[must_use]
    pub fn contains(&self, id: &RunId) -> bool {
        self.inner.runs.lock().by_id.contains_key(id)
    }

    /// The ids registered now, in order.
    #[must_use]
    pub fn ids(&self) -> Vec<RunId> {
        self.inner.runs.lock().by_id.keys().cloned().collect()
    }

    /// How many runs are registered.
    #[must_use]
    pub fn len(&self) -> usize {
        self.inner.runs.lock().by_id.len()
    }

    /// Whether no run is registered.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A run's place in a [`RunRegistry`]; dropping it removes the run from the registry.
#[must_use = "the run leaves the registry when this is dropped"]
pub struct Registration {
    registry: Arc<Inner>,
    id: RunId,
    serial: u64,
}

impl Registration {
    /// The id the run is registered under.
    #[must_use]
    pub fn id(&self) -> &RunId {
        &self.id
    }
}

impl fmt::Debug for Registration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registration").field("id", &self.id).finish_non_exhaustive()
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut runs = self.registry.runs.lock();
        if runs.by_id.get(&self.id).is_some_and(|entry| entry.serial == self.serial) {
            runs.by_id.remove(&self.id);
        }
    }
}

/// A run id that a live registration already holds.
///
/// It may come to say more: only [`RunRegistry::register`] makes one, and a host reads the id
/// from its field.
///
/// ```compile_fail
/// let made_by_a_host = loopbound::AlreadyRegistered(loopbound::RunId::new("run-1").unwrap());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AlreadyRegistered(pub RunId);

impl fmt::Display for AlreadyRegistered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a run is already registered under the id {}", self.0.as_str())
    }
}

impl std::error::Error for AlreadyRegistered {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_held_by_one_registration_and_freed_by_its_drop() {
        let runs = RunRegistry::new();
        let (first, second) = (Scope::builder().build().unwrap(), Scope::builder().build().unwrap());
        let id = RunId::new("r-1").unwrap();
        let held = runs.register(id.clone(), &first).unwrap();
        assert_eq!(runs.register(id.clone(), &second).err(), Some(AlreadyRegistered(id.clone())));
        drop(held);
        let again = runs.register(id.clone(), &second).unwrap();
        assert_eq!(runs.ids(), std::slice::from_ref(&id));
        assert!(runs.cancel(&id));
        assert!(second.is_cancelled() && !first.is_cancelled());
        assert_eq!(again.id(), &id);
    }
}
