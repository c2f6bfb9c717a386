//! A set of guarded tools, built once by the host and shared by every request.
//!
//! # Invariants
//!
//! - A set is assembled by value ([`ToolSet::builder`], then [`ToolSetBuilder::add`] for each
//!   tool) and is immutable once built; cloning it shares the same tools.
//! - A name identifies one tool (one implementation, one input type) within a set: a set with two
//!   tools of the same name is never built ([`ToolSetBuilder::build`] reports the first such
//!   name), so a signature can never be shared by two tools.
//! - Order of addition is kept: it is the order in which tool definitions reach the model.
//! - Calling a tool by name takes a scope, like every other path: the set holds no way around
//!   the guard.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

#[cfg(feature = "journal")]
use super::binding::BindError;
use super::call::finish;
use super::definition::GuardedTool;
#[cfg(feature = "journal")]
use super::effect::{EffectKind, Policy};
use super::error::ToolError;
use super::pipeline::{Admitted, BodyFuture, Definition, Refusal};
use crate::event::Subject;
use crate::scope::Scope;
use crate::transport::ToolDefinition;

/// The host's tools, defined once and shared, `Send + Sync`, by any number of concurrent
/// requests, each with its own [`Scope`].
///
/// ```
/// use loopbound::{Scope, ToolBuilder, ToolContext, ToolSet};
/// use schemars::JsonSchema;
/// use serde::{Deserialize, Serialize};
/// use std::sync::atomic::{AtomicU32, Ordering};
///
/// #[derive(Deserialize, Serialize, JsonSchema)]
/// struct Ticket {
///     input: i64,
/// }
///
/// /// One request's own state.
/// #[derive(Default)]
/// struct Request {
///     reads: AtomicU32,
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let read_ticket = ToolBuilder::new("read_ticket", "ticket.read").build(
///     |t: Ticket, call: ToolContext<Request>| async move {
///         call.state().reads.fetch_add(1, Ordering::SeqCst);
///         Ok::<_, String>(format!("ticket {}", t.input))
///     },
/// )?;
/// let tools = ToolSet::builder().add(&read_ticket).build()?;
///
/// for _request in 0..2 {
///     let scope = Scope::builder().grant("ticket.read").state(Request::default()).build()?;
///     assert_eq!(tools.invoke(&scope, "read_ticket", r#"{"input":42}"#).await?, "ticket 42");
///     assert_eq!(scope.state().reads.load(Ordering::SeqCst), 1);
/// }
/// # Ok(())
/// # }
/// ```
pub struct ToolSet<S = ()> {
    inner: Arc<Tools<S>>,
}

struct Tools<S> {
    by_name: BTreeMap<Arc<str>, Arc<dyn ErasedTool<S>>>,
    definitions: Vec<ToolDefinition>,
}

impl<S> Clone for ToolSet<S> {
    fn clone(&self) -> Self {
        Self { inner: Arc::clone(&self.inner) }
    }
}

impl<S> fmt::Debug for ToolSet<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolSet").field("tools", &self.inner.by_name.keys()).finish()
    }
}

impl<S: Send + Sync + 'static> Default for ToolSet<S> {
    /// A set without tools.
    fn default() -> Self {
        Self { inner: Arc::new(Tools { by_name: BTreeMap::new(), definitions: Vec::new() }) }
    }
}

impl<S: Send + Sync + 'static> ToolSet<S> {
    /// Starts building a set.
    pub fn builder() -> ToolSetBuilder<S> {
        ToolSetBuilder::default()
    }

    /// The definitions of the tools, in the order they were added, as a transport sends them.
    #[must_use]
    pub fn definitions(&self) -> &[ToolDefinition] {
        &self.inner.definitions
    }

    /// Whether the set has a tool named `name`.
    #[must_use]
    pub fn contains(&self, name: &str) -> bool {
        self.inner.by_name.contains_key(name)
    }

    /// Invokes the tool `name` in `scope` with JSON `arguments`, through its guard.
    ///
    /// # Errors
    ///
    /// [`ToolError::NotFound`] if no tool has this name (nothing is counted), else as
    /// [`GuardedTool::invoke_json`].
    pub async fn invoke(&self, scope: &Scope<S>, name: &str, arguments: &str) -> Result<String, ToolError> {
        let tool = self.get(name).ok_or_else(|| ToolError::not_found(name))?;
        let (body, count) = tool.start_json(scope, arguments)?;
        finish(scope.guard(), tool.name(), count, body).await
    }

    pub(crate) fn get(&self, name: &str) -> Option<&dyn ErasedTool<S>> {
        self.inner.by_name.get(name).map(AsRef::as_ref)
    }
}

/// Collects tools into a [`ToolSet`], by value: `ToolSet::builder().add(&a).add(&b).build()?`.
///
/// ```
/// use loopbound::{RegistrationError, ToolBuilder, ToolSet};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let read = ToolBuilder::new("read", "notes.read").build(|_: String, _| async { Ok::<_, String>("a note") })?;
/// let write = ToolBuilder::new("write", "notes.write").build(|_: String, _| async { Ok::<_, String>("written") })?;
///
/// let tools: ToolSet = ToolSet::builder().add(&read).add(&write).build()?;
/// assert_eq!(tools.definitions().len(), 2);
///
/// let twice = ToolSet::builder().add(&read).add(&write).add(&read).build();
/// assert_eq!(twice.unwrap_err(), RegistrationError::DuplicateName("read".into()));
/// # Ok(())
/// # }
/// ```
#[must_use]
pub struct ToolSetBuilder<S = ()> {
    tools: Vec<Arc<dyn ErasedTool<S>>>,
    /// The first name added twice, reported by `build`.
    duplicate: Option<String>,
}

impl<S> Default for ToolSetBuilder<S> {
    fn default() -> Self {
        Self { tools: Vec::new(), duplicate: None }
    }
}

impl<S> fmt::Debug for ToolSetBuilder<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.tools.iter().map(|tool| &**tool.name()).collect();
        f.debug_struct("ToolSetBuilder").field("tools", &names).field("duplicate", &self.duplicate).finish()
    }
}

impl<S: Send + Sync + 'static> ToolSetBuilder<S> {
    /// Adds a tool (the same definition may belong to several sets), after those already
    /// added.
    ///
    /// A name already in the set is not added again; the first such name is kept for
    /// [`build`](Self::build) to report.
    #[allow(
        clippy::should_implement_trait,
        reason = "a step of a by-value builder chain, not arithmetic on sets"
    )]
    pub fn add<T>(mut self, tool: &GuardedTool<T, S>) -> Self
    where
        T: DeserializeOwned + Serialize + Send + 'static,
    {
        if self.tools.iter().any(|known| **known.name() == *tool.name()) {
            self.duplicate.get_or_insert_with(|| tool.name().to_owned());
        } else {
            self.tools.push(tool.erased());
        }
        self
    }

    /// The immutable set, its tools in the order they were added.
    ///
    /// # Errors
    ///
    /// [`RegistrationError::DuplicateName`] with the first name that was added twice.
    pub fn build(self) -> Result<ToolSet<S>, RegistrationError> {
        if let Some(name) = self.duplicate {
            return Err(RegistrationError::DuplicateName(name));
        }
        let definitions = self.tools.iter().map(|tool| tool.definition().clone()).collect();
        let by_name = self.tools.into_iter().map(|tool| (Arc::clone(tool.name()), tool)).collect();
        Ok(ToolSet { inner: Arc::new(Tools { by_name, definitions }) })
    }
}

/// A guarded tool with its input type erased, as a set and the runtime hold it. Each method is
/// one route through the [pipeline](super::pipeline).
pub(crate) trait ErasedTool<S>: Send + Sync {
    fn name(&self) -> &Arc<str>;
    fn definition(&self) -> &ToolDefinition;
    fn capability(&self) -> &str;
    #[cfg(feature = "journal")]
    fn effect(&self) -> EffectKind;
    #[cfg(feature = "journal")]
    fn policy(&self) -> Policy;
    /// Binds, checks, admits and starts the body; the caller runs it with [`finish`]. Returns
    /// the body and the tool-call count it was admitted as.
    fn start_json(&self, scope: &Scope<S>, arguments: &str) -> Result<(BodyFuture, u32), ToolError>;
    /// Binds, checks and admits a call of the loop, without starting it; `deferring` hands a
    /// refusal's halt back instead of recording it (a parallel batch).
    fn admit_json<'a>(
        &'a self,
        scope: &Scope<S>,
        arguments: &str,
        deferring: bool,
    ) -> Result<Box<dyn AdmittedCall<S> + 'a>, Refusal>;
    /// Binds, checks, signs and admits a journaled call; returns it with its canonical arguments,
    /// for its proposal. `deferring` as for [`admit_json`](Self::admit_json).
    #[cfg(feature = "journal")]
    fn admit_journaled<'a>(
        &'a self,
        scope: &Scope<S>,
        arguments: &str,
        deferring: bool,
    ) -> Result<(Box<dyn AdmittedCall<S> + 'a>, String), Refusal>;
    /// Binds and checks a call that an earlier attempt admitted as `count` with the signature
    /// `expected`; `None` if it now signs differently. Nothing is counted.
    #[cfg(feature = "journal")]
    fn readmit<'a>(
        &'a self,
        arguments: &str,
        expected: &str,
        count: u32,
    ) -> Result<Option<Box<dyn AdmittedCall<S> + 'a>>, BindError>;
}

/// An admitted call with its input type erased, as the loop and the journal's driver start it.
pub(crate) trait AdmittedCall<S>: Send {
    /// The tool-call count it was admitted as: the operation's ordinal.
    fn count(&self) -> u32;
    /// Starts the body, as operation `operation` in a journaled run.
    fn start(self: Box<Self>, scope: &Scope<S>, operation: Option<Arc<str>>)
    -> Result<BodyFuture, ToolError>;
}

impl<T, S> AdmittedCall<S> for Admitted<'_, T, S>
where
    T: DeserializeOwned + Serialize + Send + 'static,
    S: Send + Sync + 'static,
{
    fn count(&self) -> u32 {
        Admitted::count(self)
    }

    fn start(
        self: Box<Self>,
        scope: &Scope<S>,
        operation: Option<Arc<str>>,
    ) -> Result<BodyFuture, ToolError> {
        Admitted::start(*self, scope, operation)
    }
}

impl<T, S> ErasedTool<S> for Definition<T, S>
where
    T: DeserializeOwned + Serialize + Send + 'static,
    S: Send + Sync + 'static,
{
    fn name(&self) -> &Arc<str> {
        Definition::name(self)
    }

    fn definition(&self) -> &ToolDefinition {
        Definition::definition(self)
    }

    fn capability(&self) -> &str {
        Definition::capability(self)
    }

    #[cfg(feature = "journal")]
    fn effect(&self) -> EffectKind {
        Definition::effect(self)
    }

    #[cfg(feature = "journal")]
    fn policy(&self) -> Policy {
        Definition::policy(self)
    }

    fn start_json(&self, scope: &Scope<S>, arguments: &str) -> Result<(BodyFuture, u32), ToolError> {
        let admitted = self.prepare_json(arguments)?.admit(scope)?;
        let count = admitted.count();
        Ok((admitted.start(scope, None)?, count))
    }

    fn admit_json<'a>(
        &'a self,
        scope: &Scope<S>,
        arguments: &str,
        deferring: bool,
    ) -> Result<Box<dyn AdmittedCall<S> + 'a>, Refusal> {
        let prepared = self.prepare_json(arguments)?;
        let admitted = if deferring { prepared.admit_deferring(scope)? } else { prepared.admit(scope)? };
        Ok(Box::new(admitted))
    }

    #[cfg(feature = "journal")]
    fn admit_journaled<'a>(
        &'a self,
        scope: &Scope<S>,
        arguments: &str,
        deferring: bool,
    ) -> Result<(Box<dyn AdmittedCall<S> + 'a>, String), Refusal> {
        let prepared = self.prepare_json(arguments)?;
        let (admitted, arguments) =
            if deferring { prepared.admit_signed_deferring(scope)? } else { prepared.admit_signed(scope)? };
        Ok((Box::new(admitted), arguments))
    }

    #[cfg(feature = "journal")]
    fn readmit<'a>(
        &'a self,
        arguments: &str,
        expected: &str,
        count: u32,
    ) -> Result<Option<Box<dyn AdmittedCall<S> + 'a>>, BindError> {
        let admitted = self.prepare_json(arguments)?.readmit(expected, count)?;
        Ok(admitted.map(|admitted| Box::new(admitted) as Box<dyn AdmittedCall<S> + 'a>))
    }
}

/// Why a tool could not be defined or added to a set.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegistrationError {
    /// Two tools of the set have this name.
    DuplicateName(String),
    /// Tool names are 1 to 64 characters of `A-Z a-z 0-9 _ -`, as tool-calling APIs require.
    InvalidName(String),
    /// `model` and `run` name the other subjects of events ([`Subject`]); no tool may take them.
    ReservedName(String),
}

impl fmt::Display for RegistrationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DuplicateName(name) => write!(f, "a tool named {name:?} was added to this set twice"),
            Self::InvalidName(name) => write!(
                f,
                "invalid tool name {name:?}: use 1 to 64 characters among A-Z, a-z, 0-9, '_' and '-'"
            ),
            Self::ReservedName(name) => {
                write!(f, "the tool name {name:?} is reserved: events use it for the {name} itself")
            }
        }
    }
}

impl std::error::Error for RegistrationError {}

/// Checks that `name` may name a tool: 1 to 64 characters of `A-Z a-z 0-9 _ -`, and neither
/// `model` nor `run`.
pub(crate) fn check_name(name: &str) -> Result<(), RegistrationError> {
    if !Subject::is_well_formed(name) {
        return Err(RegistrationError::InvalidName(name.to_owned()));
    }
    if Subject::is_reserved(name) {
        return Err(RegistrationError::ReservedName(name.to_owned()));
    }
    Ok(())
}
