//! Guarded tools: typed input, private body, and the one guard every path goes through.
//!
//! # Invariants
//!
//! - The raw body is never exposed. [`GuardedTool::invoke`], [`GuardedTool::invoke_json`],
//!   [`GuardedTool::reserve`], [`Scope::invoke`] and the runtime all reach it through
//!   [`GuardedTool::reserve`]'s check-and-reserve, so a direct or concurrent call is bounded
//!   exactly like a call from the loop.
//! - Binding comes first and a binding failure touches nothing: no counter, no reservation, no
//!   event. Its message names the tool and the problem and is at most
//!   [`MAX_MESSAGE_LEN`](crate::MAX_MESSAGE_LEN) bytes long, whatever the size of the input.
//! - Arguments are bound from JSON text with serde_json's nesting limit (128 levels), so a deep
//!   input is a typed error, never a stack overflow.
//! - The signature is the tool's name and the canonical JSON of the *bound* input: fields `T`
//!   ignores do not make two calls differ, and `42` and `42.0` bound to an integer cannot both
//!   bind.
//! - After the body returns, the scope is checked again: a run stopped during the body does not
//!   hand the body's result on.

use std::any::TypeId;
use std::cell::RefCell;
use std::collections::HashMap;
use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::canonical::{SignatureError, signature};
use crate::ledger::Activity;
use crate::registry::{RegistrationError, valid_name};
use crate::scope::{Scope, Shared, lock_registry};
use crate::stop::Stop;
use crate::transport::ToolDefinition;

/// The error a tool body returns; its text goes back to the model.
pub type BodyError = Box<dyn StdError + Send + Sync>;

/// A started body, boxed so that tools of different types share one runtime path.
pub(crate) type BodyFuture = Pin<Box<dyn Future<Output = Result<String, BodyError>> + Send>>;

type Body<T> = Box<dyn Fn(T, CancellationToken) -> BodyFuture + Send + Sync>;

/// Longest message, in bytes, that a binding or body error hands to the model.
pub const MAX_MESSAGE_LEN: usize = 240;

/// Registers a guarded tool in a scope. Obtained from [`Scope::tool`].
///
/// ```
/// use loopbound::{Scope, ToolError};
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
/// let scope = Scope::builder().grant("ticket.read").build()?;
/// let read_ticket = scope
///     .tool("read_ticket", "ticket.read")
///     .description("Read one ticket by its id.")
///     .build(|ticket: Ticket, _cancel| async move {
///         Ok::<_, String>(format!("ticket {}", ticket.input))
///     })?;
///
/// assert_eq!(read_ticket.invoke_json(r#"{"input": 42}"#).await?, "ticket 42");
/// // The same signature again: the repetition limit (1) halts the scope.
/// let again = read_ticket.invoke(Ticket { input: 42 }).await;
/// assert!(matches!(again, Err(ToolError::Stopped(_))));
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
#[must_use]
pub struct ToolBuilder<'s> {
    scope: &'s Scope,
    name: String,
    capability: String,
    description: String,
}

impl<'s> ToolBuilder<'s> {
    pub(crate) fn new(scope: &'s Scope, name: String, capability: String) -> Self {
        Self { scope, name, capability, description: String::new() }
    }

    /// Sets the description sent to the model with the tool's definition.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// Registers the tool with its private `body` and returns the guarded handle.
    ///
    /// The body receives the bound input and a token that fires when the scope stops. Its `Ok`
    /// text is the tool result; its `Err` becomes an error result for the model (not a halt).
    ///
    /// # Errors
    ///
    /// [`RegistrationError::InvalidName`] for a name outside `[A-Za-z0-9_-]{1,64}`;
    /// [`RegistrationError::DuplicateName`] if the scope already has a tool of this name.
    pub fn build<T, F, Fut, R, E>(self, body: F) -> Result<GuardedTool<T>, RegistrationError>
    where
        T: DeserializeOwned + Serialize + JsonSchema + Send + 'static,
        F: Fn(T, CancellationToken) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, E>> + Send + 'static,
        R: Into<String>,
        E: Into<BodyError>,
    {
        if !valid_name(&self.name) {
            return Err(RegistrationError::InvalidName(self.name));
        }
        let shared = Arc::clone(&self.scope.shared);
        let granted = shared.is_granted(&self.capability);
        let body: Body<T> = Box::new(move |input, token| {
            let future = body(input, token);
            Box::pin(async move { future.await.map(Into::into).map_err(Into::into) })
        });
        let inner = Arc::new(ToolInner {
            shared,
            name: Arc::from(self.name),
            capability: self.capability.into_boxed_str(),
            granted,
            description: self.description,
            parameters: parameters_schema::<T>(),
            body,
            input: PhantomData,
        });
        lock_registry(self.scope.registry()).insert(Arc::clone(&inner) as Arc<dyn ErasedTool>)?;
        Ok(GuardedTool { inner })
    }
}

/// The JSON schema of `T`, with sub-schemas inlined and without a `$schema` key, as tool-calling
/// APIs expect for a function's parameters.
///
/// A type's schema depends on the type alone, so each thread generates it once and keeps it: a
/// scope built per request does not pay schemars again, and threads that build scopes in
/// parallel share no lock and no reference count. The cache holds one schema per input type and
/// thread.
fn parameters_schema<T: JsonSchema + 'static>() -> Arc<serde_json::Value> {
    thread_local! {
        static SCHEMAS: RefCell<HashMap<TypeId, Arc<serde_json::Value>>> = RefCell::default();
    }
    if let Some(schema) = SCHEMAS.with(|schemas| schemas.borrow().get(&TypeId::of::<T>()).cloned()) {
        return schema;
    }
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|settings| settings.inline_subschemas = true)
        .into_generator();
    let mut schema = serde_json::Value::from(generator.into_root_schema_for::<T>());
    if let Some(object) = schema.as_object_mut() {
        object.remove("$schema");
    }
    let schema = Arc::new(schema);
    SCHEMAS.with(|schemas| schemas.borrow_mut().insert(TypeId::of::<T>(), Arc::clone(&schema)));
    schema
}

/// A tool whose every invocation goes through the scope's guard.
///
/// Cloning is cheap and yields a handle to the same tool.
pub struct GuardedTool<T> {
    inner: Arc<ToolInner<T>>,
}

impl<T> Clone for GuardedTool<T> {
    fn clone(&self) -> Self {
        Self { inner: Arc::clone(&self.inner) }
    }
}

impl<T> fmt::Debug for GuardedTool<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuardedTool")
            .field("name", &self.inner.name)
            .field("capability", &self.inner.capability)
            .finish_non_exhaustive()
    }
}

struct ToolInner<T> {
    shared: Arc<Shared>,
    name: Arc<str>,
    capability: Box<str>,
    /// Capabilities never change after the scope is built, so permission is known up front.
    granted: bool,
    description: String,
    parameters: Arc<serde_json::Value>,
    body: Body<T>,
    input: PhantomData<fn(T)>,
}

impl<T> GuardedTool<T>
where
    T: DeserializeOwned + Serialize + Send + 'static,
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

    /// The definition a transport sends to the model: name, description, JSON schema of `T`.
    #[must_use]
    pub fn definition(&self) -> ToolDefinition {
        self.inner.definition()
    }

    /// Binds JSON `arguments` to `T`. Nothing is counted.
    ///
    /// Arguments must be a JSON object; empty or blank text is read as `{}`, as some providers
    /// send it for tools without parameters.
    ///
    /// # Errors
    ///
    /// A [`BindError`] naming the tool and the problem.
    pub fn bind(&self, arguments: &str) -> Result<T, BindError> {
        bind(&self.inner.name, arguments)
    }

    /// Checks and reserves one attempt for `input`, synchronously and without running the body:
    /// cancellation → permission → tool budget → repetition → reserve. The reservation is kept
    /// even if it is never run.
    ///
    /// # Errors
    ///
    /// [`ToolError::Stopped`] when a check fails (the failing check is recorded as a halt), or
    /// [`ToolError::Bind`] if `input` cannot be written as canonical JSON.
    pub fn reserve(&self, input: T) -> Result<Reservation<'_, T>, ToolError> {
        let count = self.inner.admit(&input)?;
        Ok(Reservation { tool: self, input, count })
    }

    /// Invokes the tool with a typed input, through the guard.
    ///
    /// # Errors
    ///
    /// [`ToolError::Stopped`] if the guard refused or the scope stopped during the body;
    /// [`ToolError::Failed`] if the body returned an error.
    pub async fn invoke(&self, input: T) -> Result<String, ToolError> {
        self.reserve(input)?.run().await
    }

    /// Binds JSON `arguments`, then invokes the tool through the guard.
    ///
    /// # Errors
    ///
    /// [`ToolError::Bind`] if the arguments do not bind (nothing counted), else as
    /// [`invoke`](Self::invoke).
    pub async fn invoke_json(&self, arguments: &str) -> Result<String, ToolError> {
        let body = self.inner.bind_and_admit(arguments)?;
        run_body(&self.inner.shared, &self.inner.name, body).await
    }
}

/// One admitted attempt, counted and not yet run. Dropping it does not give the attempt back.
#[must_use = "the attempt is counted whether or not it runs"]
///
/// It borrows its tool rather than holding a clone, so that admitting a call touches no shared
/// reference count.
pub struct Reservation<'t, T> {
    tool: &'t GuardedTool<T>,
    input: T,
    count: u32,
}

impl<T> fmt::Debug for Reservation<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reservation")
            .field("tool", &self.tool.inner.name)
            .field("count", &self.count)
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static> Reservation<'_, T> {
    /// The scope's tool-call count after this reservation (1 for the first admitted call).
    #[must_use]
    pub fn tool_count(&self) -> u32 {
        self.count
    }

    /// Runs the body, bounded by the scope, then checks the scope again.
    ///
    /// # Errors
    ///
    /// [`ToolError::Stopped`] if the scope stopped during or right after the body;
    /// [`ToolError::Failed`] if the body returned an error.
    pub async fn run(self) -> Result<String, ToolError> {
        let inner = &self.tool.inner;
        let body = (inner.body)(self.input, inner.shared.token().clone());
        run_body(&inner.shared, &inner.name, body).await
    }
}

/// Runs an admitted body under the scope's bounds, then re-checks the scope.
pub(crate) async fn run_body(
    shared: &Shared,
    name: &Arc<str>,
    body: BodyFuture,
) -> Result<String, ToolError> {
    let output = shared.bounded(Activity::Tool(name), body).await.map_err(ToolError::Stopped)?;
    shared.check(Activity::Tool(name)).map_err(ToolError::Stopped)?;
    output.map_err(|source| ToolError::Failed { tool: Arc::clone(name), source })
}

impl<T: Serialize> ToolInner<T> {
    /// The guard: signature outside the lock (only when it can matter), then one critical
    /// section. Returns the new tool-call count.
    fn admit(&self, input: &T) -> Result<u32, ToolError> {
        // The signature matters only if the guard can reach the repetition check: the call is
        // granted and the scope can still admit a tool call (both can only turn false).
        let key = if self.granted && !self.shared.tools_closed() {
            signature(&self.name, input).map_err(|error| BindError::unsignable(&self.name, &error))?
        } else {
            String::new()
        };
        self.shared.admit_tool(&self.name, self.granted, key).map_err(ToolError::Stopped)
    }
}

impl<T> ToolInner<T>
where
    T: DeserializeOwned + Serialize + Send + 'static,
{
    fn bind_and_admit(&self, arguments: &str) -> Result<BodyFuture, ToolError> {
        let input = bind(&self.name, arguments)?;
        self.admit(&input)?;
        Ok((self.body)(input, self.shared.token().clone()))
    }
}

/// A guarded tool with its input type erased, as the registry and the runtime hold it.
pub(crate) trait ErasedTool: Send + Sync {
    fn name(&self) -> &Arc<str>;
    fn definition(&self) -> ToolDefinition;
    /// Binds, guards and starts the body; the caller runs it with [`run_body`].
    fn start_json(&self, arguments: &str) -> Result<BodyFuture, ToolError>;
}

impl<T> ErasedTool for ToolInner<T>
where
    T: DeserializeOwned + Serialize + Send + 'static,
{
    fn name(&self) -> &Arc<str> {
        &self.name
    }

    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.name.to_string(),
            description: self.description.clone(),
            parameters: serde_json::Value::clone(&self.parameters),
        }
    }

    fn start_json(&self, arguments: &str) -> Result<BodyFuture, ToolError> {
        self.bind_and_admit(arguments)
    }
}

impl Scope {
    /// Invokes the registered tool `name` with JSON `arguments`, through its guard.
    ///
    /// # Errors
    ///
    /// [`ToolError::NotFound`] if no tool has this name (nothing is counted), else as
    /// [`GuardedTool::invoke_json`].
    pub async fn invoke(&self, name: &str, arguments: &str) -> Result<String, ToolError> {
        let tool = lock_registry(self.registry())
            .get(name)
            .ok_or_else(|| ToolError::NotFound { name: truncate(name, MAX_MESSAGE_LEN).to_owned() })?;
        let body = tool.start_json(arguments)?;
        run_body(&self.shared, tool.name(), body).await
    }

    pub(crate) fn find_tool(&self, name: &str) -> Option<Arc<dyn ErasedTool>> {
        lock_registry(self.registry()).get(name)
    }
}

/// Binds JSON text to `T`.
fn bind<T: DeserializeOwned>(tool: &Arc<str>, arguments: &str) -> Result<T, BindError> {
    let trimmed = arguments.trim_matches([' ', '\t', '\n', '\r']);
    let text = if trimmed.is_empty() { "{}" } else { arguments };
    if !text.trim_start_matches([' ', '\t', '\n', '\r']).starts_with('{') {
        return Err(BindError::new(tool, BindErrorKind::NotAnObject, "arguments must be a JSON object"));
    }
    serde_json::from_str(text).map_err(|error| {
        let message = error.to_string();
        let kind = match error.classify() {
            serde_json::error::Category::Data => BindErrorKind::Mismatch,
            // serde_json files these under syntax, but the text is valid JSON.
            _ if message.starts_with("number out of range") => BindErrorKind::Mismatch,
            _ if message.starts_with("recursion limit exceeded") => BindErrorKind::TooDeep,
            _ => BindErrorKind::InvalidJson,
        };
        BindError::new(tool, kind, &message)
    })
}

/// What kind of binding problem occurred.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BindErrorKind {
    /// The arguments are valid JSON but not an object.
    NotAnObject,
    /// The arguments are not valid JSON (including truncated text).
    InvalidJson,
    /// The JSON does not fit the input type: wrong type, missing field, unknown variant.
    Mismatch,
    /// The arguments nest deeper than serde_json's limit of 128 levels.
    TooDeep,
    /// The bound input could not be written as canonical JSON (a custom `Serialize` failed, or
    /// a map key is not a string).
    Unsignable,
}

/// Arguments that could not be bound to a tool's input type. Nothing was counted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindError {
    tool: Arc<str>,
    kind: BindErrorKind,
    message: String,
}

impl BindError {
    fn new(tool: &Arc<str>, kind: BindErrorKind, message: &str) -> Self {
        Self { tool: Arc::clone(tool), kind, message: truncate(message, MAX_MESSAGE_LEN).to_owned() }
    }

    fn unsignable(tool: &Arc<str>, error: &SignatureError) -> Self {
        Self::new(tool, BindErrorKind::Unsignable, &error.to_string())
    }

    /// The tool whose arguments failed to bind.
    #[must_use]
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// What went wrong.
    #[must_use]
    pub fn kind(&self) -> BindErrorKind {
        self.kind
    }

    /// The binding problem, at most [`MAX_MESSAGE_LEN`] bytes.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for BindError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid arguments for tool {}: {}", self.tool, self.message)
    }
}

impl StdError for BindError {}

/// Why an invocation did not produce a result.
#[derive(Debug)]
#[non_exhaustive]
pub enum ToolError {
    /// No tool of this name is registered (only from [`Scope::invoke`]). Nothing was counted.
    NotFound {
        /// The requested name, truncated to [`MAX_MESSAGE_LEN`] bytes.
        name: String,
    },
    /// The arguments did not bind. Nothing was counted.
    Bind(BindError),
    /// The body ran and returned an error. The attempt stays counted; this is not a halt.
    Failed {
        /// The tool's name.
        tool: Arc<str>,
        /// The body's error.
        source: BodyError,
    },
    /// The run must end: the guard refused, or the scope stopped during the body.
    Stopped(Stop),
}

impl ToolError {
    /// The error result to hand to the model, or `None` when the run must end instead.
    #[must_use]
    pub fn model_message(&self) -> Option<String> {
        match self {
            Self::NotFound { name } => Some(format!("Error: tool {name} not found.")),
            Self::Bind(error) => Some(format!("Error: {error}.")),
            Self::Failed { tool, source } => {
                let text = source.to_string();
                Some(format!("Error: tool {tool} failed: {}", truncate(&text, MAX_MESSAGE_LEN)))
            }
            Self::Stopped(_) => None,
        }
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotFound { name } => write!(f, "tool {name} not found"),
            Self::Bind(error) => error.fmt(f),
            Self::Failed { tool, source } => write!(f, "tool {tool} failed: {source}"),
            Self::Stopped(stop) => stop.fmt(f),
        }
    }
}

impl StdError for ToolError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            Self::Failed { source, .. } => Some(source.as_ref()),
            Self::Bind(error) => Some(error),
            Self::Stopped(stop) => Some(stop),
            Self::NotFound { .. } => None,
        }
    }
}

impl From<BindError> for ToolError {
    fn from(error: BindError) -> Self {
        Self::Bind(error)
    }
}

/// The longest prefix of `text` of at most `max` bytes that ends on a char boundary.
pub(crate) fn truncate(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Serialize, JsonSchema)]
    struct First {
        input: i64,
    }

    #[derive(serde::Deserialize, Serialize, JsonSchema)]
    struct Second {
        name: String,
    }

    #[test]
    fn a_types_schema_is_generated_once_per_thread_and_shared() {
        let (a, b) = (parameters_schema::<First>(), parameters_schema::<First>());
        assert!(Arc::ptr_eq(&a, &b));
        let other = parameters_schema::<Second>();
        assert!(!Arc::ptr_eq(&a, &other));
        assert_eq!(a["properties"]["input"]["type"], "integer");
        assert_eq!(other["properties"]["name"]["type"], "string");
        assert!(a.get("$schema").is_none());
    }
}
