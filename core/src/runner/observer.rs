//! Middleware: observers of the tool calls the model asks for, before the guard decides.
//!
//! # Invariants
//!
//! - Every tool call the loop handles is first checked against the scope's cancellation and
//!   counted as an observation; the observers run after that, in the order they were added, and
//!   only when the check let the call through.
//! - The built-in function-invocation middleware ([`Middleware`]) is an observer like the
//!   host's: attached, it records one `Middleware` event per call it sees (tool name,
//!   observations so far); not attached, a run has no `Middleware` event. Attached first, its
//!   event is recorded under the same lock of the scope's ledger as the observation's count
//!   (one lock per call, not two), with the same events in the same order; after a host's
//!   observer, it runs as an observer, so that the host's sees the scope without its event.
//! - Observers see names and counts, never arguments, and cannot change the guard's decision:
//!   they return nothing, and the guard decides afterwards on what the scope holds.

use std::fmt;
use std::sync::Arc;

use crate::scope::Scope;

/// One tool call the model asked for, seen before the guard.
pub struct Observation<'a, S = ()> {
    pub(crate) tool: &'a Arc<str>,
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

    /// The number of tool calls observed in this request so far, this one included.
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
    /// Sees one tool call after the cancellation checks and before the guard.
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

/// The built-in function-invocation middleware (SPEC §7): an observer that records a
/// `Middleware` event (the tool's name, the observations so far) for each tool call it sees,
/// before the guard decides. A host attaches it with [`Runner::observe`](crate::Runner::observe);
/// a run without it has no `Middleware` event.
///
/// ```
/// use loopbound::scripted::Scripted;
/// use loopbound::{Message, Middleware, Runner, Scope, ToolBuilder, ToolSet};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let lookup = ToolBuilder::new("lookup", "orders.read")
///     .build(|_: serde_json::Value, _| async move { Ok::<_, String>("found") })?;
/// let tools = ToolSet::<()>::builder().add(&lookup).build()?;
/// let model = Scripted::sequence([Scripted::call("lookup", "{}"), Scripted::reply("Done.")]);
/// let runner = Runner::new(&tools, model).observe(Middleware);
/// let scope = Scope::builder().grant("orders.read").build()?;
/// let outcome = runner.run(&scope, &mut vec![Message::user("Look it up.")], |_| true).await?;
/// let events: Vec<String> = outcome.events().iter().map(ToString::to_string).collect();
/// assert_eq!(events, ["ModelCall model 1", "Middleware lookup 1", "ToolCall lookup 1", "ModelCall model 2"]);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Middleware;

impl<S> Observer<S> for Middleware {
    fn observe(&self, call: &Observation<'_, S>) {
        // A stop recorded since the check keeps the event out; the guard then refuses the call.
        let _ = call.scope.guard().record_middleware(call.tool, call.count);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::scripted::sequence;
    use crate::transport::ToolCall;
    use crate::{Runner, ToolSet};

    /// The ledger locks one observation of a call to `lookup` takes, and the run's events after.
    fn observed(runner: &Runner<impl crate::transport::Transport, ()>) -> (usize, Vec<String>) {
        let scope = Scope::builder().build().unwrap();
        let tool: Arc<str> = Arc::from("lookup");
        let call = ToolCall::new("call-1", "lookup", "{}");
        let before = scope.guard().decisions.load(Ordering::Relaxed);
        runner.observe_call(&scope, &tool, &call).unwrap();
        let locks = scope.guard().decisions.load(Ordering::Relaxed) - before;
        (locks, scope.events().iter().map(ToString::to_string).collect())
    }

    #[test]
    fn the_middleware_first_records_its_event_under_the_observations_lock() {
        let tools = ToolSet::<()>::default();
        let runner = Runner::new(&tools, sequence(Vec::new())).observe(Middleware);
        assert_eq!(observed(&runner), (1, vec!["Middleware lookup 1".to_owned()]));
        // Without it: one lock, no event.
        let plain = Runner::new(&tools, sequence(Vec::new()));
        assert_eq!(observed(&plain), (1, Vec::new()));
    }

    #[test]
    fn the_middleware_after_a_hosts_observer_runs_after_it_as_an_observer() {
        let tools = ToolSet::<()>::default();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let host = Arc::clone(&seen);
        let runner = Runner::new(&tools, sequence(Vec::new()))
            .observe(move |call: &Observation<'_>| host.lock().unwrap().push(call.scope().events().len()))
            .observe(Middleware);
        assert_eq!(observed(&runner), (2, vec!["Middleware lookup 1".to_owned()]));
        assert_eq!(*seen.lock().unwrap(), [0], "the host's observer saw the scope before the event");
        // First, then a host's observer: the host's sees the event already recorded.
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let host = Arc::clone(&seen);
        let runner = Runner::new(&tools, sequence(Vec::new()))
            .observe(Middleware)
            .observe(move |call: &Observation<'_>| host.lock().unwrap().push(call.scope().events().len()));
        assert_eq!(observed(&runner), (1, vec!["Middleware lookup 1".to_owned()]));
        assert_eq!(*seen.lock().unwrap(), [1]);
    }
}
