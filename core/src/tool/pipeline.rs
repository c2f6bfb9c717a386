//! The one path from a model's arguments to a tool's body. Every way of calling a tool (the
//! loop, a call by name, a typed call, a reservation run later, a journaled call, an MCP
//! server's tool) goes through these steps, in this order, and through no other code:
//!
//! 1. **bind** the JSON arguments to the tool's input type ([`Definition::prepare_json`]), or
//!    take a typed input ([`Definition::prepare`]);
//! 2. run **the tool's own check** of the bound input, if it has one: both `prepare` functions
//!    do, and they are the only way to make a [`Prepared`] call;
//! 3. **sign** the input (tool name + canonical arguments), where the guard can need it;
//! 4. **admit** it in the scope's one critical section ([`Prepared::admit`],
//!    [`Prepared::admit_signed`], or [`Prepared::readmit`] for an admission an earlier attempt
//!    of a journaled run recorded): an [`Admitted`] call is the only thing that can start a body;
//! 5. **start** the body ([`Admitted::start`]), after checking the scope once more.
//!
//! # Invariants
//!
//! - The body and the check are fields of [`Definition`] that only this module reads: no code
//!   outside it can run a body, or make a [`Prepared`] call without running the check.
//! - Steps 1 and 2 touch nothing: a failure is a [`BindError`], with no counter moved, no
//!   reservation and no event.
//! - A signature is computed only when the guard can reach the repetition check (the call is
//!   granted and the scope can still admit a tool call), except for a journaled call, whose
//!   proposal records it.
//! - A parallel batch admits with [`Prepared::admit_deferring`] and
//!   [`Prepared::admit_signed_deferring`]: the same checks in the same critical section, except
//!   that a refusal's halt is handed back ([`Deferred`]) instead of recorded, so that the calls
//!   admitted before it can run first.
//! - Fail closed outside a journal: a tool whose [`Policy`] is not `Allow` is started only with
//!   an operation id, which only a journal gives once it has recorded the decision. On every
//!   other path its admitted call halts `Denied` instead of starting, and its reservation stays
//!   counted.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::binding::{BindError, bind};
use super::call::ToolContext;
use super::effect::{EffectKind, Policy};
use super::error::{BodyError, ToolError};
use crate::canonical::{Signature, signature};
use crate::event::{ControlEvent, EventKind, HaltReason, Subject};
use crate::guard::{Activity, Deferred, Guard, Refused};
use crate::scope::Scope;
use crate::transport::ToolDefinition;

/// A started body, boxed so that tools of different types share one runtime path.
pub(crate) type BodyFuture = Pin<Box<dyn Future<Output = Result<String, BodyError>> + Send>>;

/// A tool's body, with its input type and the request's state type.
pub(crate) type Body<T, S> = Box<dyn Fn(T, ToolContext<S>) -> BodyFuture + Send + Sync>;

/// A tool's check of its bound input.
pub(crate) type CheckFn<T> = Box<dyn Fn(&T) -> Result<(), String> + Send + Sync>;

/// What a guarded tool is made of. Built once, immutable, shared by every request.
pub(crate) struct Definition<T, S> {
    model_view: ToolDefinition,
    name: Arc<str>,
    capability: Box<str>,
    effect: EffectKind,
    policy: Policy,
    check: Option<CheckFn<T>>,
    body: Body<T, S>,
    input: PhantomData<fn(T)>,
}

/// The parts of a [`Definition`], as a builder hands them over.
pub(crate) struct Parts<T, S> {
    pub(crate) model_view: ToolDefinition,
    pub(crate) capability: String,
    pub(crate) effect: EffectKind,
    pub(crate) policy: Policy,
    pub(crate) check: Option<CheckFn<T>>,
    pub(crate) body: Body<T, S>,
}

impl<T, S> Definition<T, S> {
    pub(crate) fn new(parts: Parts<T, S>) -> Self {
        Self {
            name: Arc::from(parts.model_view.name.as_str()),
            model_view: parts.model_view,
            capability: parts.capability.into_boxed_str(),
            effect: parts.effect,
            policy: parts.policy,
            check: parts.check,
            body: parts.body,
            input: PhantomData,
        }
    }

    pub(crate) fn name(&self) -> &Arc<str> {
        &self.name
    }

    pub(crate) fn definition(&self) -> &ToolDefinition {
        &self.model_view
    }

    pub(crate) fn capability(&self) -> &str {
        &self.capability
    }

    pub(crate) fn effect(&self) -> EffectKind {
        self.effect
    }

    pub(crate) fn policy(&self) -> Policy {
        self.policy
    }
}

impl<T, S> Definition<T, S>
where
    T: DeserializeOwned + Serialize + Send + 'static,
    S: Send + Sync + 'static,
{
    /// Steps 1 and 2: binds JSON `arguments`, then runs the tool's check.
    pub(crate) fn prepare_json(&self, arguments: &str) -> Result<Prepared<'_, T, S>, BindError> {
        self.prepare(bind(&self.name, arguments)?)
    }

    /// Step 2 for a typed input: runs the tool's check.
    pub(crate) fn prepare(&self, input: T) -> Result<Prepared<'_, T, S>, BindError> {
        if let Some(check) = &self.check {
            check(&input).map_err(|message| BindError::invalid(&self.name, &message))?;
        }
        Ok(Prepared { tool: self, input })
    }

    fn sign(&self, input: &T) -> Result<Signature, BindError> {
        signature(&self.name, input).map_err(|error| BindError::unsignable(&self.name, &error))
    }
}

/// A call bound and checked (steps 1 and 2), not yet admitted. Nothing is counted.
pub(crate) struct Prepared<'t, T, S> {
    tool: &'t Definition<T, S>,
    input: T,
}

impl<'t, T, S> Prepared<'t, T, S>
where
    T: DeserializeOwned + Serialize + Send + 'static,
    S: Send + Sync + 'static,
{
    /// The bound and checked input, without admitting it.
    pub(crate) fn into_input(self) -> T {
        self.input
    }

    /// Steps 3 and 4: signs the input where the guard can need it, then admits it.
    pub(crate) fn admit(self, scope: &Scope<S>) -> Result<Admitted<'t, T, S>, ToolError> {
        self.admit_with(
            scope,
            |guard, tool, granted| guard.precheck_tool(tool, granted).map_err(ToolError::from),
            |guard, tool, granted, signature| {
                guard.admit_tool(tool, granted, signature).map_err(ToolError::from)
            },
        )
    }

    /// As [`admit`](Self::admit), with a refusal's halt handed back instead of recorded.
    pub(crate) fn admit_deferring(self, scope: &Scope<S>) -> Result<Admitted<'t, T, S>, Refusal> {
        self.admit_with(
            scope,
            |guard, tool, granted| guard.precheck_tool_deferring(tool, granted).map_err(Refusal::from),
            |guard, tool, granted, signature| {
                guard.admit_tool_deferring(tool, granted, signature).map_err(Refusal::from)
            },
        )
    }

    /// Steps 3 and 4 with the guard's `precheck` and `admit` decisions.
    fn admit_with<E: From<BindError>>(
        self,
        scope: &Scope<S>,
        precheck: impl FnOnce(&Guard, &Arc<str>, bool) -> Result<(), E>,
        admit: impl FnOnce(&Guard, &Arc<str>, bool, Signature) -> Result<u32, E>,
    ) -> Result<Admitted<'t, T, S>, E> {
        let guard = scope.guard();
        let tool = self.tool;
        let granted = guard.is_granted(&tool.capability);
        // The signature matters only if the guard can reach the repetition check: the call is
        // granted and the scope can still admit a tool call (both can only turn false).
        if !granted || guard.tools_closed() {
            precheck(guard, &tool.name, granted)?;
        }
        let signature = tool.sign(&self.input)?;
        let count = admit(guard, &tool.name, granted, signature)?;
        Ok(Admitted { tool, input: self.input, count })
    }

    /// Steps 3 and 4 for a journaled call: signs the input, then admits it, and returns the
    /// canonical arguments for the call's proposal.
    #[cfg(feature = "journal")]
    pub(crate) fn admit_signed(self, scope: &Scope<S>) -> Result<(Admitted<'t, T, S>, String), ToolError> {
        self.admit_signed_with(scope, |guard, tool, granted, signature| {
            guard.admit_tool(tool, granted, signature).map_err(ToolError::from)
        })
    }

    /// As [`admit_signed`](Self::admit_signed), with a refusal's halt handed back instead of
    /// recorded.
    #[cfg(feature = "journal")]
    pub(crate) fn admit_signed_deferring(
        self,
        scope: &Scope<S>,
    ) -> Result<(Admitted<'t, T, S>, String), Refusal> {
        self.admit_signed_with(scope, |guard, tool, granted, signature| {
            guard.admit_tool_deferring(tool, granted, signature).map_err(Refusal::from)
        })
    }

    #[cfg(feature = "journal")]
    fn admit_signed_with<E: From<BindError>>(
        self,
        scope: &Scope<S>,
        admit: impl FnOnce(&Guard, &Arc<str>, bool, Signature) -> Result<u32, E>,
    ) -> Result<(Admitted<'t, T, S>, String), E> {
        let guard = scope.guard();
        let tool = self.tool;
        let signature = tool.sign(&self.input)?;
        let arguments = signature.arguments().to_owned();
        let granted = guard.is_granted(&tool.capability);
        let count = admit(guard, &tool.name, granted, signature)?;
        Ok((Admitted { tool, input: self.input, count }, arguments))
    }

    /// Step 4 for a call that an earlier attempt of a journaled run admitted as `count`, with
    /// the proposal's `expected` signature: admitted again without being counted again (the
    /// logical run's counters hold it), if it signs the same. `None` if it does not.
    #[cfg(feature = "journal")]
    pub(crate) fn readmit(self, expected: &str, count: u32) -> Result<Option<Admitted<'t, T, S>>, BindError> {
        let signature = self.tool.sign(&self.input)?;
        Ok((signature.as_str() == expected).then_some(Admitted { tool: self.tool, input: self.input, count }))
    }
}

/// Why an admission admitted nothing: the tool's error (a binding failure, a stop in force),
/// or, for a deferring admission, a refusal whose halt is decided but not recorded yet.
#[derive(Debug)]
pub(crate) enum Refusal {
    Tool(ToolError),
    Deferred(Deferred),
}

impl From<ToolError> for Refusal {
    fn from(error: ToolError) -> Self {
        Self::Tool(error)
    }
}

impl From<BindError> for Refusal {
    fn from(error: BindError) -> Self {
        Self::Tool(error.into())
    }
}

impl From<Refused> for Refusal {
    fn from(refused: Refused) -> Self {
        match refused {
            Refused::Stop(stop) => Self::Tool(stop.into()),
            Refused::Deferred(deferred) => Self::Deferred(deferred),
            Refused::Nudge(nudge) => Self::Tool(ToolError::Nudged(nudge)),
        }
    }
}

/// An admitted call (steps 1 to 4): counted, its body not started. Dropping it does not give
/// the attempt back.
pub(crate) struct Admitted<'t, T, S> {
    tool: &'t Definition<T, S>,
    input: T,
    count: u32,
}

impl<'t, T, S> Admitted<'t, T, S> {
    /// The scope's tool-call count at this admission (1 for the first).
    pub(crate) fn count(&self) -> u32 {
        self.count
    }

    pub(crate) fn tool(&self) -> &'t Definition<T, S> {
        self.tool
    }
}

impl<T, S> Admitted<'_, T, S>
where
    T: DeserializeOwned + Serialize + Send + 'static,
    S: Send + Sync + 'static,
{
    /// Step 5: checks the scope once more, immediately before the body's closure is called, so
    /// that a call whose run stopped in between never starts. Without an `operation` (no journal
    /// recorded a decision) a tool whose policy is not `Allow` halts `Denied` instead.
    pub(crate) fn start(
        self,
        scope: &Scope<S>,
        operation: Option<Arc<str>>,
    ) -> Result<BodyFuture, ToolError> {
        let tool = self.tool;
        let guard = scope.guard();
        guard.check(Activity::Tool(&tool.name))?;
        if operation.is_none() && tool.policy != Policy::Allow {
            let by = match tool.policy {
                Policy::Ask | Policy::AskWithin(_) => "policy ask, no journal",
                _ => "policy",
            };
            let event = ControlEvent::new(
                EventKind::Halt(HaltReason::Denied),
                Subject::Tool(Arc::clone(&tool.name)),
                self.count,
            )
            .by(Arc::from(by));
            return Err(ToolError::Stopped(guard.halt_with(HaltReason::Denied, event)));
        }
        Ok((tool.body)(self.input, ToolContext::new(scope.clone(), self.count, operation)))
    }
}
