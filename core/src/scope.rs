//! One request: its grants, limits, caller cancellation, deadline, counters, events, and the
//! host's own state for that request.
//!
//! Tools are defined once and shared ([`ToolSet`](crate::ToolSet)); a scope is opened per request
//! and dropped after it. Every path to a tool's body takes a scope, so the guard of that request
//! decides every call.
//!
//! # Invariants
//!
//! - A scope's capabilities and limits are fixed when it is built: nothing a model or a tool
//!   returns can grant a capability or raise a limit.
//! - The deadline runs from [`ScopeBuilder::build`].
//! - The state `S` belongs to this request only: tool bodies reach it through the
//!   [`Call`](crate::Call) they are handed, the completion condition through
//!   [`Runtime::run`](crate::Runtime::run); nothing global is involved.
//! - Cloning a scope yields a handle to the same request, never a copy of its counters.

use std::collections::BTreeSet;
use std::fmt;
use std::future::Future;
use std::sync::Arc;

use tokio::time::Instant;

use crate::event::{ControlEvent, HaltReason};
use crate::guard::{Activity, Guard, Stop};
use crate::journal::Labels;
use crate::limits::{Limits, LimitsError};
use crate::sync::CancellationToken;

/// One bounded request, and the host's state `S` for it (`()` when there is none).
///
/// ```
/// use loopbound::{Limits, Scope};
///
/// let scope = Scope::builder()
///     .grant("ticket.read")
///     .limits(Limits::default().with_tool_calls(2))
///     .build()?;
/// assert!(scope.is_granted("ticket.read"));
/// assert!(!scope.is_granted("review.finish"));
/// assert_eq!(scope.admit_model(), Ok(1));
/// assert_eq!(scope.events()[0].to_string(), "ModelCall model 1");
/// # Ok::<(), loopbound::LimitsError>(())
/// ```
pub struct Scope<S = ()> {
    inner: Arc<Inner<S>>,
}

struct Inner<S> {
    guard: Guard,
    state: S,
    labels: Labels,
}

impl<S> Clone for Scope<S> {
    fn clone(&self) -> Self {
        Self { inner: Arc::clone(&self.inner) }
    }
}

/// Builds a [`Scope`]: grant capabilities, set limits, link the caller's cancellation, attach
/// the request's state.
#[must_use]
pub struct ScopeBuilder<S = ()> {
    capabilities: BTreeSet<Box<str>>,
    limits: Limits,
    caller: Option<CancellationToken>,
    state: S,
    labels: Labels,
}

impl Default for ScopeBuilder {
    fn default() -> Self {
        Self {
            capabilities: BTreeSet::new(),
            limits: Limits::default(),
            caller: None,
            state: (),
            labels: Labels::new(),
        }
    }
}

impl<S> fmt::Debug for ScopeBuilder<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScopeBuilder")
            .field("capabilities", &self.capabilities)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl<S> ScopeBuilder<S> {
    /// Grants one capability, e.g. `ticket.read`.
    pub fn grant(mut self, capability: impl Into<String>) -> Self {
        self.capabilities.insert(capability.into().into_boxed_str());
        self
    }

    /// Grants every capability of `capabilities`.
    pub fn grants<I, C>(mut self, capabilities: I) -> Self
    where
        I: IntoIterator<Item = C>,
        C: Into<String>,
    {
        self.capabilities.extend(capabilities.into_iter().map(|c| c.into().into_boxed_str()));
        self
    }

    /// Sets the run's limits (default: [`Limits::default`]).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets the host's labels of the request (a tenant, a user). A journaled run stores them with
    /// its definition when it is created, and a host lists its runs by them.
    pub fn labels(mut self, labels: Labels) -> Self {
        self.labels = labels;
        self
    }

    /// Links the caller's cancellation: when `token` fires, the run ends with
    /// [`Stop::Cancelled`], whatever else is happening.
    ///
    /// Pass the request's own token: a service that stops every request at shutdown hands each
    /// one `shutdown.child_token()`, so that cancelling one request leaves the others running.
    /// Sharing one token between requests is also safe and cheap: the scope makes its own child
    /// of `token` when it is built, and its admissions read that child, never the shared token
    /// (reading a [`CancellationToken`] locks it).
    ///
    /// ```
    /// use loopbound::{CancellationToken, Scope};
    ///
    /// let shutdown = CancellationToken::new();
    /// let request = shutdown.child_token();
    /// let scope = Scope::builder().caller(request.clone()).build()?;
    /// request.cancel();
    /// assert_eq!(scope.check(), Err(loopbound::Stop::Cancelled));
    /// assert!(!shutdown.is_cancelled(), "the other requests go on");
    /// # Ok::<(), loopbound::LimitsError>(())
    /// ```
    pub fn caller(mut self, token: CancellationToken) -> Self {
        self.caller = Some(token);
        self
    }

    /// Attaches the request's own state, which tool bodies read through
    /// [`Call::state`](crate::Call::state) and the completion condition receives.
    pub fn state<T>(self, state: T) -> ScopeBuilder<T> {
        ScopeBuilder {
            capabilities: self.capabilities,
            limits: self.limits,
            caller: self.caller,
            state,
            labels: self.labels,
        }
    }

    /// Validates the limits and starts the scope's clock: the deadline runs from now.
    ///
    /// # Errors
    ///
    /// Any [`LimitsError`]; nothing has run and nothing has been counted.
    pub fn build(self) -> Result<Scope<S>, LimitsError> {
        self.limits.validate()?;
        let deadline =
            Instant::now().checked_add(self.limits.deadline()).ok_or(LimitsError::DeadlineOutOfRange)?;
        let guard = Guard::new(self.limits, self.capabilities, self.caller.unwrap_or_default(), deadline);
        Ok(Scope { inner: Arc::new(Inner { guard, state: self.state, labels: self.labels }) })
    }
}

impl Scope {
    /// Starts building a scope with no capability, the default limits and no state.
    pub fn builder() -> ScopeBuilder {
        ScopeBuilder::default()
    }
}

impl<S> Scope<S> {
    /// The host's state for this request.
    #[must_use]
    pub fn state(&self) -> &S {
        &self.inner.state
    }

    /// The scope's limits.
    #[must_use]
    pub fn limits(&self) -> Limits {
        self.inner.guard.limits()
    }

    /// The host's labels of the request.
    #[must_use]
    pub fn labels(&self) -> &Labels {
        &self.inner.labels
    }

    /// Whether `capability` was granted.
    #[must_use]
    pub fn is_granted(&self, capability: &str) -> bool {
        self.inner.guard.is_granted(capability)
    }

    /// The granted capabilities, in code-point order.
    pub fn capabilities(&self) -> impl Iterator<Item = &str> {
        self.inner.guard.capabilities()
    }

    /// When the run's deadline passes.
    #[must_use]
    pub fn deadline(&self) -> Instant {
        self.inner.guard.deadline()
    }

    /// A token that fires when the scope stops: the caller cancels, a halt is recorded, or a
    /// bounded wait sees the deadline pass. Tool bodies receive it through their
    /// [`Call`](crate::Call).
    #[must_use]
    pub fn token(&self) -> &CancellationToken {
        self.inner.guard.token()
    }

    /// The caller's token, as passed to [`ScopeBuilder::caller`].
    #[must_use]
    pub fn caller_token(&self) -> &CancellationToken {
        self.inner.guard.caller()
    }

    /// Counts one model call before it is sent, under the scope's lock: cancellation check, then
    /// the model budget. Returns the new count.
    ///
    /// # Errors
    ///
    /// The [`Stop`] that ends the run: the caller cancelled, the scope already halted, the
    /// deadline passed, or this call would exceed the budget (halt `ModelBudget`).
    pub fn admit_model(&self) -> Result<u32, Stop> {
        self.inner.guard.admit_model()
    }

    /// Checks, without counting anything, whether the run may go on.
    ///
    /// # Errors
    ///
    /// The [`Stop`] in force: caller cancellation first, then a recorded halt, then the deadline
    /// (recorded as a `DeadlineExceeded` halt charged to the model the first time it is seen).
    pub fn check(&self) -> Result<(), Stop> {
        self.inner.guard.check(Activity::Model)
    }

    /// Runs `future` until it completes or the scope stops, whichever comes first. A future that
    /// never looks at its cancellation is dropped at its next await point when the deadline
    /// passes, the scope halts or the caller cancels.
    ///
    /// # Errors
    ///
    /// The [`Stop`] that interrupted the future. A future that completes is not re-checked here.
    pub async fn bounded<F: Future>(&self, future: F) -> Result<F::Output, Stop> {
        self.inner.guard.bounded(Activity::Model, future).await
    }

    /// The ordered audit log so far.
    #[must_use]
    pub fn events(&self) -> Vec<ControlEvent> {
        self.inner.guard.events()
    }

    /// The first halt recorded, if any.
    #[must_use]
    pub fn stop_reason(&self) -> Option<HaltReason> {
        self.inner.guard.stop_reason()
    }

    /// Model calls admitted so far.
    #[must_use]
    pub fn model_calls(&self) -> u32 {
        self.inner.guard.model_calls()
    }

    /// Tool calls admitted so far.
    #[must_use]
    pub fn tool_calls(&self) -> u32 {
        self.inner.guard.tool_calls()
    }

    /// The request's guard, for the tools, the model budget and the runtime.
    pub(crate) fn guard(&self) -> &Guard {
        &self.inner.guard
    }
}

impl<S> fmt::Debug for Scope<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scope")
            .field("limits", &self.limits())
            .field("capabilities", &self.capabilities().collect::<Vec<_>>())
            .field("stop_reason", &self.stop_reason())
            .finish_non_exhaustive()
    }
}
