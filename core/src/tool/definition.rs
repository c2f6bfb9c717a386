//! Defining a guarded tool: the builder (name, capability, description, effect, policy, the
//! tool's own check, the JSON schema shown to the model, the private body) and the public handle,
//! [`GuardedTool`], whose every method goes through the [pipeline](super::pipeline).
//!
//! # Invariants
//!
//! - A definition is immutable once built; its JSON schema is computed once, at definition:
//!   derived from the input type ([`Derived`], the default) or given at run time by the host
//!   ([`ToolBuilder::parameters`], e.g. a schema discovered from another process; the input type
//!   then needs no `JsonSchema`).
//! - A definition is made one way: [`ToolBuilder::new`], then [`ToolBuilder::build`], which
//!   checks the name. It belongs to no set; sets take it by reference
//!   ([`ToolSetBuilder::add`](super::ToolSetBuilder::add)), so one definition may serve several.
//! - What stands between binding and the guard is nothing or the host's closure (the sealed
//!   [`Check`]).
//! - Tool names are `[A-Za-z0-9_-]{1,64}` and neither `model` nor `run`, the names of the other
//!   subjects of events.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::binding::BindError;
use super::builder::{Check, CheckWith, Derived, Given, NoCheck, Parameters};
use super::call::{Reservation, ToolContext, finish};
use super::effect::{EffectKind, Policy};
use super::error::{BodyError, ToolError};
use super::pipeline::{Body, Definition, Parts};
use super::set::RegistrationError;
use crate::scope::Scope;
use crate::transport::ToolDefinition;

/// A tool's body: an async function of the bound input and the [`ToolContext`], returning the result
/// text for the model or an error for it. Implemented by every closure or function of that
/// shape, for [`ToolBuilder::build`].
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a tool body for input `{T}` and state `{S}`",
    label = "expected `Fn({T}, ToolContext<{S}>) -> impl Future<Output = Result<impl Into<String>, impl Into<BodyError>>>`",
    note = "a body takes the bound input and the `ToolContext`, and is `Send + Sync + 'static`, as is its future: `|input: {T}, call: ToolContext<{S}>| async move {{ Ok::<_, String>(\"result\") }}`"
)]
pub trait ToolBody<T, S>: Send + Sync + 'static {
    /// The body, boxed.
    #[doc(hidden)]
    fn into_body(self) -> Body<T, S>;
}

impl<T, S, F, Fut, R, E> ToolBody<T, S> for F
where
    F: Fn(T, ToolContext<S>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, E>> + Send + 'static,
    R: Into<String>,
    E: Into<BodyError>,
{
    fn into_body(self) -> Body<T, S> {
        Box::new(move |input, call| {
            let future = self(input, call);
            Box::pin(async move { future.await.map(Into::into).map_err(Into::into) })
        })
    }
}

/// Defines a guarded tool: [`new`](Self::new), then the optional settings, then
/// [`build`](Self::build) with the body. The tool is then added to sets with
/// [`ToolSetBuilder::add`](super::ToolSetBuilder::add), or invoked on its own.
///
/// ```
/// use loopbound::{Scope, ToolBuilder, ToolError, ToolSet};
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
/// let read_ticket = ToolBuilder::new("read_ticket", "ticket.read")
///     .description("Read one ticket by its id.")
///     .build(|ticket: Ticket, _call| async move { Ok::<_, String>(format!("ticket {}", ticket.input)) })?;
/// let _tools = ToolSet::builder().add(&read_ticket).build()?;
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
///
/// # A body that uses the request's state
///
/// A tool is built by value, before any scope: the body's closure is type-checked where it is
/// written, so a body that reads or writes the state through [`ToolContext::state`] names the
/// state's type there, as `cx: ToolContext<State>` (or `ToolBuilder::<State>::new(..)`). Without
/// it the compiler asks for a type annotation (E0282), even when the scope the tool runs in fixes
/// the type later. A body that does not touch the state needs no type: the context is inferred.
///
/// ```
/// use std::sync::Mutex;
///
/// use loopbound::{Scope, ToolBuilder, ToolContext};
/// use schemars::JsonSchema;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Deserialize, Serialize, JsonSchema)]
/// struct Note {
///     text: String,
/// }
///
/// /// One request's state: the notes its run has taken.
/// #[derive(Default)]
/// struct Notebook {
///     notes: Mutex<Vec<String>>,
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let take_note = ToolBuilder::new("take_note", "notes.write")
///     .build(|note: Note, cx: ToolContext<Notebook>| async move {
///         let mut notes = cx.state().notes.lock().map_err(|_| "the notebook is poisoned".to_owned())?;
///         notes.push(note.text);
///         Ok::<_, String>(format!("{} note(s)", notes.len()))
///     })?;
///
/// let scope = Scope::builder().grant("notes.write").state(Notebook::default()).build()?;
/// assert_eq!(take_note.invoke_json(&scope, r#"{"text":"call back"}"#).await?, "1 note(s)");
/// assert_eq!(take_note.invoke_json(&scope, r#"{"text":"refund"}"#).await?, "2 note(s)");
/// assert_eq!(*scope.state().notes.lock().map_err(|_| "poisoned")?, ["call back", "refund"]);
/// # Ok(())
/// # }
/// ```
#[must_use]
pub struct ToolBuilder<S = (), V = NoCheck, P = Derived> {
    name: String,
    capability: String,
    description: String,
    effect: EffectKind,
    policy: Policy,
    parameters: P,
    check: V,
    /// The state of the requests the tool will serve, which its body receives.
    state: PhantomData<fn() -> S>,
}

impl<S, V, P> fmt::Debug for ToolBuilder<S, V, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolBuilder")
            .field("name", &self.name)
            .field("capability", &self.capability)
            .finish_non_exhaustive()
    }
}

impl<S: Send + Sync + 'static> ToolBuilder<S> {
    /// Starts defining a tool named `name` that needs `capability`. The name is checked by
    /// [`build`](Self::build).
    pub fn new(name: impl Into<String>, capability: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            capability: capability.into(),
            description: String::new(),
            effect: EffectKind::default(),
            policy: Policy::default(),
            parameters: Derived,
            check: NoCheck,
            state: PhantomData,
        }
    }
}

impl<S: Send + Sync + 'static, P> ToolBuilder<S, NoCheck, P> {
    /// Adds a check of the bound input, run after binding and before the guard on every path
    /// (the loop, a journaled run, [`GuardedTool::invoke_json`], [`GuardedTool::invoke`],
    /// [`GuardedTool::reserve`], [`ToolSet::invoke`](super::ToolSet::invoke)).
    ///
    /// An `Err(message)` refuses the call as a [`BindError`] of kind
    /// [`Invalid`](super::BindErrorKind::Invalid): nothing is counted, the body does not run,
    /// and the model receives the message. The message should name where the input is wrong and
    /// what was expected (`at /a: expected a number`), and must never quote the input's values:
    /// it reaches the model and may reach logs. It is truncated to
    /// [`MAX_MESSAGE_LEN`](super::MAX_MESSAGE_LEN) bytes.
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
    pub fn validate<T, F>(self, check: F) -> ToolBuilder<S, CheckWith<F>, P>
    where
        F: Fn(&T) -> Result<(), String> + Send + Sync + 'static,
    {
        ToolBuilder {
            name: self.name,
            capability: self.capability,
            description: self.description,
            effect: self.effect,
            policy: self.policy,
            parameters: self.parameters,
            check: CheckWith::new(check),
            state: PhantomData,
        }
    }
}

impl<S: Send + Sync + 'static, V> ToolBuilder<S, V, Derived> {
    /// Sets the JSON schema of the tool's parameters sent to the model, instead of the one
    /// derived from the input type with `schemars` (the input type then needs no
    /// `JsonSchema`).
    ///
    /// For tools whose schema is known only at run time (a tool discovered from another
    /// process, such as an MCP server's): the schema is passed to the model as given, and
    /// nothing checks it against the input type. Pair it with [`validate`](Self::validate) so
    /// that what the schema promises is enforced before the guard.
    pub fn parameters(self, schema: serde_json::Value) -> ToolBuilder<S, V, Given> {
        ToolBuilder {
            name: self.name,
            capability: self.capability,
            description: self.description,
            effect: self.effect,
            policy: self.policy,
            parameters: Given::new(schema),
            check: self.check,
            state: PhantomData,
        }
    }
}

impl<S: Send + Sync + 'static, V, P> ToolBuilder<S, V, P> {
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

    /// Declares the body a read: no external effect, so running it again is harmless
    /// ([`EffectKind::Read`]).
    pub fn read_only(self) -> Self {
        self.effect(EffectKind::Read)
    }

    /// Declares the body an effect keyed by an idempotency key: it receives the operation id as
    /// its key and may be driven again with it ([`EffectKind::Idempotent`]).
    pub fn idempotent(self) -> Self {
        self.effect(EffectKind::Idempotent)
    }

    /// Asks a person (or another host process) before each call runs ([`Policy::Ask`]); outside
    /// a journal the call halts `Denied` (see [`policy`](Self::policy)).
    pub fn ask_first(self) -> Self {
        self.policy(Policy::Ask)
    }

    /// Sets the host's standing decision for this tool's proposals (default [`Policy::Allow`]).
    ///
    #[cfg_attr(
        feature = "journal",
        doc = " A journal reads it ([`Runner::run_journaled`](crate::Runner::run_journaled)). Outside a"
    )]
    #[cfg_attr(not(feature = "journal"), doc = " A journal reads it (`Runner::run_journaled`). Outside a")]
    /// journal no decision can be recorded, so the policy fails closed: a call to a tool under
    /// [`Policy::Deny`] or [`Policy::Ask`] is admitted and counted by the guard, then halts the
    /// scope `Denied` instead of running its body, on every path.
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// Defines the tool with its private `body` and returns the guarded handle, ready to be
    /// added to sets ([`ToolSetBuilder::add`](super::ToolSetBuilder::add)) or invoked alone.
    ///
    /// The body receives the bound input and the [`ToolContext`]: the request's scope and state, and
    /// the cancellation that fires when the request stops. Its `Ok` text is the tool result; its
    /// `Err` becomes an error result for the model (not a halt).
    ///
    /// # Errors
    ///
    /// [`RegistrationError::InvalidName`] for a name outside `[A-Za-z0-9_-]{1,64}`;
    /// [`RegistrationError::ReservedName`] for `model` or `run`, which name other subjects of
    /// events. (A duplicate name is a property of a set, reported by
    /// [`ToolSetBuilder::build`](super::ToolSetBuilder::build).)
    pub fn build<T, F, Fut, R, E>(self, body: F) -> Result<GuardedTool<T, S>, RegistrationError>
    where
        T: DeserializeOwned + Serialize + Send + 'static,
        V: Check<T>,
        P: Parameters<T>,
        // The `Fn` bound itself, not only `ToolBody`, so that a closure's `ToolContext` parameter
        // is inferred (`|input: T, cx| ...` may call `cx.state()` without naming the type).
        F: Fn(T, ToolContext<S>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, E>> + Send + 'static,
        R: Into<String>,
        E: Into<BodyError>,
    {
        super::set::check_name(&self.name)?;
        Ok(GuardedTool {
            inner: Arc::new(Definition::new(Parts {
                model_view: ToolDefinition::new(self.name, self.description, self.parameters.into_schema()),
                capability: self.capability,
                effect: self.effect,
                policy: self.policy,
                check: self.check.into_check(),
                body: body.into_body(),
            })),
        })
    }
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
        f.debug_struct("GuardedTool").field("name", &self.inner.definition().name).finish_non_exhaustive()
    }
}

impl<T, S> GuardedTool<T, S>
where
    T: DeserializeOwned + Serialize + Send + 'static,
    S: Send + Sync + 'static,
{
    /// The tool's name.
    #[must_use]
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// The capability the tool needs.
    #[must_use]
    pub fn capability(&self) -> &str {
        self.inner.capability()
    }

    /// What the body does to the world, as declared.
    #[must_use]
    pub fn effect(&self) -> EffectKind {
        self.inner.effect()
    }

    /// The host's standing decision for this tool's proposals.
    #[must_use]
    pub fn policy(&self) -> Policy {
        self.inner.policy()
    }

    /// The definition a transport sends to the model: name, description, JSON schema of `T`.
    #[must_use]
    pub fn definition(&self) -> &ToolDefinition {
        self.inner.definition()
    }

    /// Binds JSON `arguments` to `T`, then runs the tool's check if it has one. Nothing is
    /// counted.
    ///
    /// # Errors
    ///
    /// A [`BindError`] naming the tool and the problem.
    pub fn bind(&self, arguments: &str) -> Result<T, BindError> {
        self.inner.prepare_json(arguments).map(super::pipeline::Prepared::into_input)
    }

    /// Checks and reserves one attempt for `input` in `scope`, synchronously and without running
    /// the body: the tool's check, then cancellation → permission → tool budget → repetition →
    /// reserve. The reservation is kept even if it is never run.
    ///
    /// # Errors
    ///
    /// [`ToolError::Stopped`] when a check fails (the failing check is recorded as a halt), or
    /// [`ToolError::Bind`] if the tool's own check refuses `input` or `input` cannot be written
    /// as canonical JSON (nothing counted).
    pub fn reserve<'a>(&'a self, scope: &'a Scope<S>, input: T) -> Result<Reservation<'a, T, S>, ToolError> {
        let admitted = self.inner.prepare(input)?.admit(scope)?;
        Ok(Reservation::new(admitted, scope))
    }

    /// Invokes the tool in `scope` with a typed input, through the guard.
    ///
    /// # Errors
    ///
    /// [`ToolError::Stopped`] if the guard refused or the scope stopped before or during the
    /// body; [`ToolError::Bind`] if the tool's check refused the input (nothing counted);
    /// [`ToolError::Failed`] if the body returned an error.
    pub async fn invoke(&self, scope: &Scope<S>, input: T) -> Result<String, ToolError> {
        self.reserve(scope, input)?.run().await
    }

    /// Binds JSON `arguments`, then invokes the tool in `scope` through the guard.
    ///
    /// # Errors
    ///
    /// [`ToolError::Bind`] if the arguments do not bind or the tool's check refuses them
    /// (nothing counted), else as [`invoke`](Self::invoke).
    pub async fn invoke_json(&self, scope: &Scope<S>, arguments: &str) -> Result<String, ToolError> {
        let admitted = self.inner.prepare_json(arguments)?.admit(scope)?;
        let count = admitted.count();
        let body = admitted.start(scope, None)?;
        finish(scope.guard(), self.inner.name(), count, body).await
    }

    pub(crate) fn erased(&self) -> Arc<Definition<T, S>> {
        Arc::clone(&self.inner)
    }
}
