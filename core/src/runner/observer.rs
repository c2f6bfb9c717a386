//! Middleware: observers of the tool calls the model asks for, before the guard decides.
//!
//! # Invariants
//!
//! - The built-in function-invocation middleware runs first for every tool call the loop
//!   handles: it checks the scope's cancellation and records a `Middleware` event (tool name,
//!   observations so far). The host's observers run after it, in the order they were added, and
//!   only when it let the call through.
//! - Observers see names and counts, never arguments, and cannot change the guard's decision:
//!   they return nothing, and the guard decides afterwards on what the scope holds.

use std::fmt;

use crate::scope::Scope;

/// One tool call the model asked for, seen before the guard.
pub struct Observation<'a, S = ()> {
    pub(crate) tool: &'a str,
    pub(crate) call_id: &'a str,
    pub(crate) count: u32,
    pub(crate) scope: &'a Scope<S>,
}

impl<S> Observation<'_, S> {
    /// The tool's name.
    #[must_use]
    pub fn tool(&self) -> &str {
        self.tool
    }

    /// The provider's id for the call.
    #[must_use]
    pub fn call_id(&self) -> &str {
        self.call_id
    }

    /// The number of middleware observations in this request so far, this one included.
    #[must_use]
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The request's scope: its counters, events and state, as they are before the guard runs.
    #[must_use]
    pub fn scope(&self) -> &Scope<S> {
        self.scope
    }
}

impl<S> fmt::Debug for Observation<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Observation")
            .field("tool", &self.tool)
            .field("call_id", &self.call_id)
            .field("count", &self.count)
            .finish_non_exhaustive()
    }
}

/// A host's observer of tool calls (logging, metrics, a prompt shown to a person), called by the
/// runtime before the guard. Closures `Fn(&Observation<'_, S>)` are observers.
///
/// ```
/// use loopbound::{Observation, Observer};
/// use std::sync::atomic::{AtomicU32, Ordering};
///
/// #[derive(Default)]
/// struct Count(AtomicU32);
///
/// impl Observer for Count {
///     fn observe(&self, _call: &Observation<'_>) {
///         self.0.fetch_add(1, Ordering::Relaxed);
///     }
/// }
/// ```
pub trait Observer<S = ()>: Send + Sync {
    /// Sees one tool call after the built-in middleware recorded it and before the guard.
    fn observe(&self, call: &Observation<'_, S>);
}

impl<S, F> Observer<S> for F
where
    F: Fn(&Observation<'_, S>) + Send + Sync,
{
    fn observe(&self, call: &Observation<'_, S>) {
        self(call);
    }
}
