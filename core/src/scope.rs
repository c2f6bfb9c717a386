//! The per-request scope: capabilities, limits, the ledger, and the cancellation that links the
//! caller, the deadline and the scope's own halts.
//!
//! # Invariants
//!
//! - The ledger's mutex is the only lock on the admission path; it is held for one synchronous
//!   check-and-reserve and never across an `.await`.
//! - Lock order: the ledger lock and the tool registry lock are never held together. Cancelling
//!   the scope's token happens after the ledger lock is released; stickiness does not depend on
//!   the token, because every check reads the stop reason under the lock first.
//! - The scope's token is a child of the caller's token: it fires when the caller cancels, when a
//!   halt is recorded, and when a bounded wait sees the deadline pass.
//! - Capabilities and limits never change after the scope is built: nothing a model or a tool
//!   returns can grant a capability or raise a limit.

use std::collections::BTreeSet;
use std::fmt;
use std::future::Future;
use std::sync::Arc;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::event::{ControlEvent, HaltReason};
use crate::ledger::{Activity, Gate, Ledger};
use crate::limits::{Limits, LimitsError};
use crate::registry::Registry;
use crate::stop::Stop;
use crate::sync::{AtomicBool, Mutex, Ordering, lock};
use crate::tool::ToolBuilder;
use crate::transport::ToolDefinition;

/// The state of one bounded request, shared by its tools, its budgeted transport and its runtime.
///
/// Cloning a `Scope` is cheap and yields a handle to the same state.
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
#[derive(Clone)]
pub struct Scope {
    pub(crate) shared: Arc<Shared>,
    registry: Arc<std::sync::Mutex<Registry>>,
}

/// What the tools, the budgeted transport and the runtime share.
pub(crate) struct Shared {
    limits: Limits,
    capabilities: BTreeSet<Box<str>>,
    ledger: Mutex<Ledger>,
    /// Set, under the ledger's lock, once no tool call can be admitted any more (a stop is
    /// recorded or the tool budget is spent). Both conditions are permanent, so the flag never
    /// goes back; it lets a tool skip its signature when the guard cannot reach the repetition
    /// check. Decisions are still taken under the lock only.
    tools_closed: AtomicBool,
    caller: CancellationToken,
    token: CancellationToken,
    deadline: Instant,
    model: Arc<str>,
}

/// Builds a [`Scope`]: grant capabilities, set limits, link the caller's cancellation.
#[derive(Debug, Default)]
#[must_use]
pub struct ScopeBuilder {
    capabilities: BTreeSet<Box<str>>,
    limits: Limits,
    caller: Option<CancellationToken>,
}

impl ScopeBuilder {
    /// Grants one capability, e.g. `ticket.read`.
    pub fn grant(mut self, capability: impl Into<String>) -> Self {
        self.capabilities.insert(capability.into().into_boxed_str());
        self
    }

    /// Grants every capability of `capabilities`.
    pub fn grants<I, S>(mut self, capabilities: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.capabilities.extend(capabilities.into_iter().map(|c| c.into().into_boxed_str()));
        self
    }

    /// Sets the run's limits (default: [`Limits::default`]).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Links the caller's cancellation: when `token` fires, the run ends with
    /// [`Stop::Cancelled`], whatever else is happening.
    pub fn caller(mut self, token: CancellationToken) -> Self {
        self.caller = Some(token);
        self
    }

    /// Validates the limits and starts the scope's clock: the deadline runs from now.
    ///
    /// # Errors
    ///
    /// Any [`LimitsError`]; nothing has run and nothing has been counted.
    pub fn build(self) -> Result<Scope, LimitsError> {
        self.limits.validate()?;
        let deadline =
            Instant::now().checked_add(self.limits.deadline()).ok_or(LimitsError::DeadlineOutOfRange)?;
        let caller = self.caller.unwrap_or_default();
        let token = caller.child_token();
        Ok(Scope {
            shared: Arc::new(Shared {
                limits: self.limits,
                capabilities: self.capabilities,
                ledger: Mutex::new(Ledger::default()),
                tools_closed: AtomicBool::new(self.limits.tool_calls() == 0),
                caller,
                token,
                deadline,
                model: Arc::from("model"),
            }),
            registry: Arc::default(),
        })
    }
}

impl Scope {
    /// Starts building a scope with no capability and the default limits.
    pub fn builder() -> ScopeBuilder {
        ScopeBuilder::default()
    }

    /// The scope's limits.
    #[must_use]
    pub fn limits(&self) -> Limits {
        self.shared.limits
    }

    /// Whether `capability` was granted.
    #[must_use]
    pub fn is_granted(&self, capability: &str) -> bool {
        self.shared.capabilities.contains(capability)
    }

    /// The granted capabilities, in code-point order.
    pub fn capabilities(&self) -> impl Iterator<Item = &str> {
        self.shared.capabilities.iter().map(AsRef::as_ref)
    }

    /// When the run's deadline passes.
    #[must_use]
    pub fn deadline(&self) -> Instant {
        self.shared.deadline
    }

    /// A token that fires when the scope stops: the caller cancels, a halt is recorded, or a
    /// bounded wait sees the deadline pass. Tool bodies receive a clone of it.
    #[must_use]
    pub fn token(&self) -> &CancellationToken {
        &self.shared.token
    }

    /// The caller's token, as passed to [`ScopeBuilder::caller`].
    #[must_use]
    pub fn caller_token(&self) -> &CancellationToken {
        &self.shared.caller
    }

    /// Starts registering a guarded tool named `name` that needs `capability`.
    ///
    /// See [`ToolBuilder`] for an example.
    pub fn tool(&self, name: impl Into<String>, capability: impl Into<String>) -> ToolBuilder<'_> {
        ToolBuilder::new(self, name.into(), capability.into())
    }

    /// The definitions of the registered tools, in registration order, as a transport sends them.
    #[must_use]
    pub fn tool_definitions(&self) -> Vec<ToolDefinition> {
        lock_registry(&self.registry).definitions()
    }

    /// Counts one model call before it is sent, under the scope's lock: cancellation check, then
    /// the model budget. Returns the new count.
    ///
    /// # Errors
    ///
    /// The [`Stop`] that ends the run: the caller cancelled, the scope already halted, the
    /// deadline passed, or this call would exceed the budget (halt `ModelBudget`).
    pub fn admit_model(&self) -> Result<u32, Stop> {
        self.shared.admit_model()
    }

    /// Checks, without counting anything, whether the run may go on.
    ///
    /// # Errors
    ///
    /// The [`Stop`] in force: caller cancellation first, then a recorded halt, then the deadline
    /// (recorded as a `DeadlineExceeded` halt charged to the model the first time it is seen).
    pub fn check(&self) -> Result<(), Stop> {
        self.shared.check(Activity::Model(&self.shared.model))
    }

    /// Runs `future` until it completes or the scope stops, whichever comes first. A future that
    /// never looks at its cancellation is dropped at its next await point when the deadline
    /// passes, the scope halts or the caller cancels.
    ///
    /// # Errors
    ///
    /// The [`Stop`] that interrupted the future. A future that completes is not re-checked here.
    pub async fn bounded<F: Future>(&self, future: F) -> Result<F::Output, Stop> {
        self.shared.bounded(Activity::Model(&self.shared.model), future).await
    }

    /// The ordered audit log so far.
    #[must_use]
    pub fn events(&self) -> Vec<ControlEvent> {
        lock(&self.shared.ledger).events().to_vec()
    }

    /// The first halt recorded, if any.
    #[must_use]
    pub fn stop_reason(&self) -> Option<HaltReason> {
        lock(&self.shared.ledger).stop()
    }

    /// Model calls admitted so far.
    #[must_use]
    pub fn model_calls(&self) -> u32 {
        lock(&self.shared.ledger).model_calls()
    }

    /// Tool calls admitted so far.
    #[must_use]
    pub fn tool_calls(&self) -> u32 {
        lock(&self.shared.ledger).tool_calls()
    }

    pub(crate) fn registry(&self) -> &std::sync::Mutex<Registry> {
        &self.registry
    }
}

pub(crate) fn lock_registry(registry: &std::sync::Mutex<Registry>) -> std::sync::MutexGuard<'_, Registry> {
    match registry.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

impl fmt::Debug for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scope")
            .field("limits", &self.shared.limits)
            .field("capabilities", &self.shared.capabilities)
            .field("stop_reason", &self.stop_reason())
            .finish_non_exhaustive()
    }
}

impl Shared {
    pub(crate) fn is_granted(&self, capability: &str) -> bool {
        self.capabilities.contains(capability)
    }

    pub(crate) fn model_name(&self) -> &Arc<str> {
        &self.model
    }

    pub(crate) fn token(&self) -> &CancellationToken {
        &self.token
    }

    fn gate(&self) -> Gate {
        Gate {
            caller_cancelled: self.caller.is_cancelled(),
            deadline_passed: Instant::now() >= self.deadline,
        }
    }

    /// Runs one critical section, then cancels the scope's token if it recorded a halt.
    fn decide<T>(&self, section: impl FnOnce(&mut Ledger, Gate) -> Result<T, Stop>) -> Result<T, Stop> {
        let gate = self.gate();
        let decision = {
            let mut ledger = lock(&self.ledger);
            let decision = section(&mut ledger, gate);
            if ledger.stop().is_some() || ledger.tool_calls() >= self.limits.tool_calls() {
                self.tools_closed.store(true, Ordering::Relaxed);
            }
            decision
        };
        if let Err(Stop::Halted(_)) = decision {
            self.token.cancel();
        }
        decision
    }

    pub(crate) fn check(&self, activity: Activity<'_>) -> Result<(), Stop> {
        self.decide(|ledger, gate| ledger.check(gate, activity))
    }

    pub(crate) fn admit_model(&self) -> Result<u32, Stop> {
        self.decide(|ledger, gate| ledger.admit_model(gate, &self.limits, &self.model))
    }

    pub(crate) fn observe_middleware(&self, tool: &Arc<str>) -> Result<u32, Stop> {
        self.decide(|ledger, gate| ledger.observe_middleware(gate, tool))
    }

    /// Whether no tool call can be admitted any more: a stop is recorded or the tool budget is
    /// spent. A hint read without the lock; `true` is final.
    pub(crate) fn tools_closed(&self) -> bool {
        self.tools_closed.load(Ordering::Relaxed)
    }

    pub(crate) fn admit_tool(&self, tool: &Arc<str>, granted: bool, signature: String) -> Result<u32, Stop> {
        self.decide(|ledger, gate| ledger.admit_tool(gate, &self.limits, tool, granted, signature))
    }

    /// The stop in force when the token fired: the caller first, then the recorded halt.
    fn stop_now(&self) -> Stop {
        if self.caller.is_cancelled() {
            return Stop::Cancelled;
        }
        // The token fires only after the caller cancels or a halt is recorded.
        lock(&self.ledger).stop().map_or(Stop::Cancelled, Stop::Halted)
    }

    /// Records the deadline (unless something stopped first) and cancels the token.
    fn expire(&self, activity: Activity<'_>) -> Stop {
        if self.caller.is_cancelled() {
            return Stop::Cancelled;
        }
        let stop = lock(&self.ledger).expire(activity);
        self.token.cancel();
        stop
    }

    /// Races `future` against the scope's token and deadline. The future is polled first, so a
    /// ready future costs no timer registration; callers re-check the scope afterwards.
    pub(crate) async fn bounded<F: Future>(
        &self,
        activity: Activity<'_>,
        future: F,
    ) -> Result<F::Output, Stop> {
        tokio::select! {
            biased;
            output = future => Ok(output),
            () = self.token.cancelled() => Err(self.stop_now()),
            () = tokio::time::sleep_until(self.deadline) => Err(self.expire(activity)),
        }
    }
}
