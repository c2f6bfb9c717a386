//! A guarded tool's definition: name, capability, description, input type, JSON schema and
//! private body, built once and shared by every request.
//!
//! # Invariants
//!
//! - A definition is immutable once built; its JSON schema is computed once, at definition.
//! - The body is private: every invocation goes through [`admit`](Definition::admit) (bind
//!   first, then the scope's one check-and-reserve) and [`start`](Definition::start) (the
//!   scope is checked again immediately before the body's closure is called).
//! - Fail closed outside a journal: a tool whose [`Policy`] is not `Allow` is started only with
//!   an operation id, which only a journal gives once it has recorded the decision. On every other
//!   path its admitted call halts `Denied` instead of starting (no decision can be recorded, so
//!   none is made), and its reservation stays counted.
//! - The signature is the tool's name and the canonical JSON of the *bound* input; it is
//!   computed only when the guard can reach the repetition check.
//! - A tool's [check](ToolBuilder::validate), when it has one, runs after binding and before the
//!   guard on every path (JSON or typed): a refused input is a [`BindError`] of kind
//!   [`Invalid`](super::BindErrorKind::Invalid), and nothing is counted.
//! - The JSON schema the model sees is either derived from the input type once, at definition,
//!   or given at run time by the host ([`ToolBuilder::parameters`], e.g. a schema discovered from
//!   another process); either way it is fixed once the tool is built.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::binding::{BindError, bind};
use super::call::{Call, Reservation, finish};
use super::effect::{EffectKind, Policy};
use super::error::{BodyError, ToolError};
use super::set::{RegistrationError, ToolSetBuilder, valid_name};
use crate::canonical::signature;
use crate::event::{ControlEvent, EventKind, HaltReason};
use crate::guard::{Activity, Admission, Stop};
use crate::scope::Scope;
use crate::transport::ToolDefinition;

/// A started body, boxed so that tools of different types share one runtime path.
pub(crate) type BodyFuture = Pin<Box<dyn Future<Output = Result<String, BodyError>> + Send>>;

type Body<T, S> = Box<dyn Fn(T, Call<S>) -> BodyFuture + Send + Sync>;

/// A tool's check of its bound input, run before the guard.
type CheckFn<T> = Box<dyn Fn(&T) -> Result<(), String> + Send + Sync>;

/// What a tool checks in its bound input after binding and before the guard: nothing
/// ([`NoCheck`]), or a closure `Fn(&T) -> Result<(), String>` given to
/// [`ToolBuilder::validate`].
pub trait Check<T>: Send + Sync + 'static {
    /// The check as the definition keeps it, or `None` when there is nothing to check.
    #[doc(hidden)]
    fn into_check(self) -> Option<CheckFn<T>>;
}

/// No check beyond binding: the default of a [`ToolBuilder`].
#[derive(Clone, Copy, Debug, Default)]
pub struct NoCheck;

impl<T> Check<T> for NoCheck {
    fn into_check(self) -> Option<CheckFn<T>> {
        None
    }
}

impl<T, F> Check<T> for F
where
    F: Fn(&T) -> Result<(), String> + Send + Sync + 'static,
{
    fn into_check(self) -> Option<CheckFn<T>> {
        Some(Box::new(self))
    }
}

/// Defines a guarded tool. Obtained from [`ToolSetBuilder::tool`] (defined and added to that
/// set), or from [`ToolBuilder::new`] (defined alone, added to sets with [`ToolSetBuilder::add`]).
///
/// ```
/// use loopbound::{Scope, ToolError, ToolSet};
/// use schemars::JsonSchema;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Deserialize, Serialize, JsonSchema)]
/// struct Ticket {
///     input: i64,
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // Once, at start-up.
/// let mut tools = ToolSet::builder();
/// let read_ticket = tools
///     .tool("read_ticket", "ticket.read")
///     .description("Read one ticket by its id.")
///     .build(|ticket: Ticket, _call| async move { Ok::<_, String>(format!("ticket {}", ticket.input)) })?;
/// let _tools = tools.build();
///
/// // Per request.
/// let scope = Scope::builder().grant("ticket.read").build()?;
/// assert_eq!(read_ticket.invoke_json(&scope, r#"{"input": 42}"#).await?, "ticket 42");
/// // The same signature again: the repetition limit (1) halts the scope.
/// let again = read_ticket.invoke(&scope, Ticket { input: 42 }).await;
/// assert!(matches!(again, Err(ToolError::Stopped(_))));
/// # Ok(())
/// # }
/// ```
#[must_use]
pub struct ToolBuilder<'set, S, V = NoCheck> {
    set: Option<&'set mut ToolSetBuilder<S>>,
    name: String,
    capability: String,
    description: String,
    effect: EffectKind,
    policy: Policy,
    parameters: Option<serde_json::Value>,
    check: V,
}

impl<S, V> fmt::Debug for ToolBuilder<'_, S, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolBuilder")
            .field("name", &self.name)
            .field("capability", &self.capability)
            .finish_non_exhaustive()
    }
}

impl<S: Send + Sync + 'static> ToolBuilder<'static, S> {
    /// Starts defining a tool named `name` that needs `capability`, outside any set.
    pub fn new(name: impl Into<String>, capability: impl Into<String>) -> Self {
        Self {
            set: None,
            name: name.into(),
            capability: capability.into(),
            description: String::new(),
            effect: EffectKind::default(),
            policy: Policy::default(),
            parameters: None,
            check: NoCheck,
        }
    }
}

impl<'set, S: Send + Sync + 'static> ToolBuilder<'set, S> {
    pub(crate) fn in_set(set: &'set mut ToolSetBuilder<S>, name: String, capability: String) -> Self {
        Self {
            set: Some(set),
            name,
            capability,
            description: String::new(),
            effect: EffectKind::default(),
            policy: Policy::default(),
            parameters: None,
            check: NoCheck,
        }
    }

    /// Adds a check of the bound input, run after binding and before the guard on every path
    /// (the loop, [`GuardedTool::invoke_json`], [`GuardedTool::invoke`], [`GuardedTool::reserve`]).
    ///
    /// An `Err(message)` refuses the call as a [`BindError`] of kind
    /// [`Invalid`](super::BindErrorKind::Invalid): nothing is counted, the body does not run,
    /// and the model receives the message. The message should name where the input is wrong and
    /// what was expected (`at /a: expected a number`), and must never quote the input's values
    /// (SPEC §10); it is truncated to [`MAX_MESSAGE_LEN`](super::MAX_MESSAGE_LEN) bytes.
    ///
    /// ```
    /// use loopbound::tool::{BindErrorKind, ToolBuilder};
    /// use loopbound::{Scope, ToolError};
    /// use schemars::JsonSchema;
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Deserialize, Serialize, JsonSchema)]
    /// struct Page {
    ///     size: u32,
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let list = ToolBuilder::new("list", "items.read")
    ///     .validate(|page: &Page| if page.size <= 100 { Ok(()) } else { Err("at /size: expected at most 100".into()) })
    ///     .build(|page: Page, _call| async move { Ok::<_, String>(format!("{} items", page.size)) })?;
    ///
    /// let scope = Scope::builder().grant("items.read").build()?;
    /// let Err(ToolError::Bind(refused)) = list.invoke_json(&scope, r#"{"size": 5000}"#).await else {
    ///     panic!("a page of 5000 is refused before the guard");
    /// };
    /// assert_eq!(refused.kind(), BindErrorKind::Invalid);
    /// assert_eq!(refused.message(), "at /size: expected at most 100");
    /// assert_eq!(scope.tool_calls(), 0);
    /// assert_eq!(list.invoke_json(&scope, r#"{"size": 10}"#).await?, "10 items");
    /// # Ok(())
    /// # }
    /// ```
    pub fn validate<T, F>(self, check: F) -> ToolBuilder<'set, S, F>
    where
        F: Fn(&T) -> Result<(), String> + Send + Sync + 'static,
    {
        ToolBuilder {
            set: self.set,
            name: self.name,
            capability: self.capability,
            description: self.description,
            effect: self.effect,
            policy: self.policy,
            parameters: self.parameters,
            check,
        }
    }
}

impl<S: Send + Sync + 'static, V> ToolBuilder<'_, S, V> {
    /// Sets the JSON schema of the tool's parameters sent to the model, instead of the one
    /// derived from the input type with `schemars`.
    ///
    /// For tools whose schema is known only at run time (a tool discovered from another
    /// process, such as an MCP server's): the schema is passed to the model as given, and
    /// nothing checks it against the input type. Pair it with [`validate`](Self::validate) so
    /// that what the schema promises is enforced before the guard.
    pub fn parameters(mut self, schema: serde_json::Value) -> Self {
        self.parameters = Some(schema);
        self
    }

    /// Sets the description sent to the model with the tool's definition.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// Declares what the body does to the world (default [`EffectKind::Effect`]).
    pub fn effect(mut self, effect: EffectKind) -> Self {
        self.effect = effect;
        self
    }

    /// Sets the host's standing decision for this tool's proposals (default [`Policy::Allow`]).
    ///
    /// A journal reads it ([`Runtime::run_journaled`](crate::Runtime::run_journaled)). Outside a
    /// journal no decision can be recorded, so the policy fails closed: a call to a tool under
    /// [`Policy::Deny`] or [`Policy::Ask`] is admitted and counted by the guard, then halts the
    /// scope `Denied` instead of running its body, on every path.
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// Defines the tool with its private `body`, adds it to the set it came from (if any), and
    /// returns the guarded handle.
    ///
    /// The body receives the bound input and the [`Call`]: the request's scope and state, and
    /// the cancellation that fires when the request stops. Its `Ok` text is the tool result; its
    /// `Err` becomes an error result for the model (not a halt).
    ///
    /// # Errors
    ///
    /// [`RegistrationError::InvalidName`] for a name outside `[A-Za-z0-9_-]{1,64}`;
    /// [`RegistrationError::DuplicateName`] if the set already has a tool of this name.
    pub fn build<T, F, Fut, R, E>(self, body: F) -> Result<GuardedTool<T, S>, RegistrationError>
    where
        T: DeserializeOwned + Serialize + JsonSchema + Send + 'static,
        V: Check<T>,
        F: Fn(T, Call<S>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, E>> + Send + 'static,
        R: Into<String>,
        E: Into<BodyError>,
    {
        if !valid_name(&self.name) {
            return Err(RegistrationError::InvalidName(self.name));
        }
        let body: Body<T, S> = Box::new(move |input, call| {
            let future = body(input, call);
            Box::pin(async move { future.await.map(Into::into).map_err(Into::into) })
        });
        let tool = GuardedTool {
            inner: Arc::new(Definition {
                model_view: ToolDefinition {
                    name: self.name.clone(),
                    description: self.description,
                    parameters: self.parameters.unwrap_or_else(parameters_schema::<T>),
                },
                name: Arc::from(self.name),
                capability: self.capability.into_boxed_str(),
                effect: self.effect,
                policy: self.policy,
                check: self.check.into_check(),
                body,
                input: PhantomData,
            }),
        };
        if let Some(set) = self.set {
            set.add(&tool)?;
        }
        Ok(tool)
    }
}

/// The JSON schema of `T`, with sub-schemas inlined and without a `$schema` key, as tool-calling
/// APIs expect for a function's parameters. Called once per definition.
fn parameters_schema<T: JsonSchema>() -> serde_json::Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|settings| settings.inline_subschemas = true)
        .into_generator();
    let mut schema = serde_json::Value::from(generator.into_root_schema_for::<T>());
    if let Some(object) = schema.as_object_mut() {
        object.remove("$schema");
    }
    schema
}

/// A tool defined once, whose every invocation goes through the guard of the request's
/// [`Scope`].
///
/// Cloning is cheap and yields a handle to the same definition; it is `Send + Sync`, so one
/// definition serves any number of concurrent requests.
pub struct GuardedTool<T, S = ()> {
    inner: Arc<Definition<T, S>>,
}

impl<T, S> Clone for GuardedTool<T, S> {
    fn clone(&self) -> Self {
        Self { inner: Arc::clone(&self.inner) }
    }
}

impl<T, S> fmt::Debug for GuardedTool<T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuardedTool")
            .field("name", &self.inner.name)
            .field("capability", &self.inner.capability)
            .finish_non_exhaustive()
    }
}

/// What a guarded tool is made of.
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

impl<T, S> GuardedTool<T, S>
where
    T: DeserializeOwned + Serialize + Send + 'static,
    S: Send + Sync + 'static,
{
    /// The tool's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The capability the tool needs.
    #[must_use]
    pub fn capability(&self) -> &str {
        &self.inner.capability
    }

    /// What the body does to the world, as declared.
    #[must_use]
    pub fn effect(&self) -> EffectKind {
        self.inner.effect
    }

    /// The host's standing decision for this tool's proposals.
    #[must_use]
    pub fn policy(&self) -> Policy {
        self.inner.policy
    }

    /// The definition a transport sends to the model: name, description, JSON schema of `T`.
    #[must_use]
    pub fn definition(&self) -> &ToolDefinition {
        &self.inner.model_view
    }

    /// Binds JSON `arguments` to `T`, then runs the tool's check if it has one. Nothing is
    /// counted.
    ///
    /// # Errors
    ///
    /// A [`BindError`] naming the tool and the problem.
    pub fn bind(&self, arguments: &str) -> Result<T, BindError> {
        self.inner.bind_checked(arguments)
    }

    /// Checks and reserves one attempt for `input` in `scope`, synchronously and without running
    /// the body: cancellation → permission → tool budget → repetition → reserve. The reservation
    /// is kept even if it is never run.
    ///
    /// # Errors
    ///
    /// [`ToolError::Stopped`] when a check fails (the failing check is recorded as a halt), or
    /// [`ToolError::Bind`] if the tool's own check refuses `input` or `input` cannot be written
    /// as canonical JSON (nothing counted).
    pub fn reserve<'a>(&'a self, scope: &'a Scope<S>, input: T) -> Result<Reservation<'a, T, S>, ToolError> {
        self.inner.check(&input)?;
        let count = self.inner.admit(scope, &input)?;
        Ok(Reservation::new(&self.inner, scope, input, count))
    }

    /// Invokes the tool in `scope` with a typed input, through the guard.
    ///
    /// # Errors
    ///
    /// [`ToolError::Stopped`] if the guard refused or the scope stopped before or during the
    /// body; [`ToolError::Failed`] if the body returned an error.
    pub async fn invoke(&self, scope: &Scope<S>, input: T) -> Result<String, ToolError> {
        self.reserve(scope, input)?.run().await
    }

    /// Binds JSON `arguments`, then invokes the tool in `scope` through the guard.
    ///
    /// # Errors
    ///
    /// [`ToolError::Bind`] if the arguments do not bind (nothing counted), else as
    /// [`invoke`](Self::invoke).
    pub async fn invoke_json(&self, scope: &Scope<S>, arguments: &str) -> Result<String, ToolError> {
        let body = self.inner.start_json(scope, arguments)?;
        finish(scope.guard(), &self.inner.name, body).await
    }

    pub(crate) fn erased(&self) -> Arc<Definition<T, S>> {
        Arc::clone(&self.inner)
    }
}

impl<T, S> Definition<T, S>
where
    T: DeserializeOwned + Serialize + Send + 'static,
    S: Send + Sync + 'static,
{
    pub(crate) fn name(&self) -> &Arc<str> {
        &self.name
    }

    pub(crate) fn definition(&self) -> &ToolDefinition {
        &self.model_view
    }

    /// The guard: the signature outside the lock (only when it can matter), then one critical
    /// section. Returns the new tool-call count.
    pub(crate) fn admit(&self, scope: &Scope<S>, input: &T) -> Result<u32, ToolError> {
        let guard = scope.guard();
        let granted = guard.is_granted(&self.capability);
        // The signature matters only if the guard can reach the repetition check: the call is
        // granted and the scope can still admit a tool call (both can only turn false).
        let mut key = if granted && !guard.tools_closed() { Some(self.sign(input)?) } else { None };
        loop {
            match guard.admit_tool(&self.name, granted, key.take())? {
                Admission::Admitted(count) => return Ok(count),
                Admission::NeedsSignature => key = Some(self.sign(input)?),
            }
        }
    }

    fn sign(&self, input: &T) -> Result<String, BindError> {
        signature(&self.name, input).map_err(|error| BindError::unsignable(&self.name, &error))
    }

    /// Starts an admitted body: checks the scope once more, immediately before the body's
    /// closure is called, so that a call whose run stopped in between never starts. Without an
    /// `operation` (no journal recorded a decision) a tool whose policy is not `Allow` halts
    /// `Denied` instead.
    pub(crate) fn start(
        &self,
        scope: &Scope<S>,
        input: T,
        count: u32,
        operation: Option<Arc<str>>,
    ) -> Result<BodyFuture, ToolError> {
        let guard = scope.guard();
        guard.check(Activity::Tool(&self.name))?;
        if operation.is_none() && self.policy != Policy::Allow {
            let by = match self.policy {
                Policy::Ask => "policy ask, no journal",
                _ => "policy",
            };
            let event = ControlEvent::new(EventKind::Halt(HaltReason::Denied), Arc::clone(&self.name), count)
                .by(Arc::from(by));
            return Err(ToolError::Stopped(guard.halt_with(HaltReason::Denied, event)));
        }
        Ok((self.body)(input, Call::new(scope.clone(), count, operation)))
    }

    /// Runs the tool's check of a bound input, if it has one.
    fn check(&self, input: &T) -> Result<(), BindError> {
        match &self.check {
            Some(check) => check(input).map_err(|message| BindError::invalid(&self.name, &message)),
            None => Ok(()),
        }
    }

    /// Binds JSON `arguments`, then runs the tool's check.
    fn bind_checked(&self, arguments: &str) -> Result<T, BindError> {
        let input = bind(&self.name, arguments)?;
        self.check(&input)?;
        Ok(input)
    }

    /// Binds, checks, admits and starts the body; the caller runs it with [`finish`].
    pub(crate) fn start_json(&self, scope: &Scope<S>, arguments: &str) -> Result<BodyFuture, ToolError> {
        let input = self.bind_checked(arguments)?;
        let count = self.admit(scope, &input)?;
        self.start(scope, input, count, None)
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

    /// Binds JSON `arguments` and signs the input, for a journaled call that records its
    /// proposal; nothing is counted.
    pub(crate) fn bind_signed(&self, arguments: &str) -> Result<Bound<'_, T, S>, BindError> {
        let input = bind(&self.name, arguments)?;
        let signature = self.sign(&input)?;
        Ok(Bound { tool: self, input, signature })
    }
}

/// A bound and signed input of a journaled call, not yet admitted.
pub(crate) struct Bound<'a, T, S> {
    tool: &'a Definition<T, S>,
    input: T,
    signature: String,
}

/// A bound call with its input type erased, as the journal's driver handles it.
pub(crate) trait BoundCall<S>: Send {
    /// The signature: tool name, `:`, canonical arguments.
    fn signature(&self) -> &str;
    /// The guard's one check-and-reserve, with the signature computed already.
    fn admit(&self, scope: &Scope<S>) -> Result<u32, Stop>;
    /// Starts the body of the call admitted as `count`, as operation `operation`.
    fn start(
        self: Box<Self>,
        scope: &Scope<S>,
        count: u32,
        operation: Arc<str>,
    ) -> Result<BodyFuture, ToolError>;
}

impl<T, S> BoundCall<S> for Bound<'_, T, S>
where
    T: DeserializeOwned + Serialize + Send + 'static,
    S: Send + Sync + 'static,
{
    fn signature(&self) -> &str {
        &self.signature
    }

    fn admit(&self, scope: &Scope<S>) -> Result<u32, Stop> {
        let guard = scope.guard();
        let granted = guard.is_granted(&self.tool.capability);
        match guard.admit_tool(&self.tool.name, granted, Some(self.signature.clone()))? {
            Admission::Admitted(count) => Ok(count),
            // Unreachable with a signature given; refusing is the safe answer.
            Admission::NeedsSignature => Err(Stop::Cancelled),
        }
    }

    fn start(
        self: Box<Self>,
        scope: &Scope<S>,
        count: u32,
        operation: Arc<str>,
    ) -> Result<BodyFuture, ToolError> {
        self.tool.start(scope, self.input, count, Some(operation))
    }
}
