//! A runtime used as a sub-agent: run inside a tool's body, in a child of the call's scope.
//!
//! # Invariants
//!
//! - The sub-agent's scope is a child of the calling tool's scope ([`Scope::child`]): every
//!   admission it makes is one in each ancestor too, its grants are among its parent's, its
//!   deadline is within its parent's, and a stop of the parent stops it at once.
//! - Its own halt ends it only: the parent's tool gets an error that names the status, and the
//!   parent's model gets that as an error result, unless the sub-agent's admission exhausted a
//!   budget of the parent, which halts the parent too.

use std::fmt;
use std::sync::Arc;

use super::Runtime;
use crate::limits::LimitsError;
use crate::outcome::{RunError, Status};
use crate::scope::ScopeBuilder;
use crate::tool::Call;
use crate::transport::{Message, Transport};

/// A runtime that runs as a sub-agent inside tools' bodies; cloning shares it.
///
/// ```
/// use loopbound::scripted::{Step, sequence};
/// use loopbound::transport::ModelReply;
/// use loopbound::{Call, Limits, Message, Runtime, Scope, Status, SubAgent, ToolSet};
/// use schemars::JsonSchema;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Deserialize, Serialize, JsonSchema)]
/// struct Question {
///     text: String,
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // The sub-agent: its own tools and model.
/// let researcher = SubAgent::new(Runtime::harness(&ToolSet::default(), sequence(vec![
///     Step::Reply(ModelReply::text("The answer is 42.")),
/// ])));
/// // The parent's tool that asks it.
/// let mut tools = ToolSet::builder();
/// tools.tool("research", "agents.research").build(move |question: Question, call: Call| {
///     let researcher = researcher.clone();
///     async move {
///         let start = vec![Message::user(question.text)];
///         researcher.run(&call, |child| child.limits(Limits::default().with_model_calls(2)), start, |()| true).await
///     }
/// })?;
/// let parent = Runtime::harness(&tools.build(), sequence(vec![
///     Step::Reply(ModelReply::call("c1", "research", r#"{"text":"What is the answer?"}"#)),
///     Step::Reply(ModelReply::text("It is 42.")),
/// ]));
/// let scope = Scope::builder().grant("agents.research").build()?;
/// let outcome = parent.run(&scope, &mut vec![Message::user("Ask.")], |()| true).await?;
/// assert_eq!(outcome.status(), Status::Completed);
/// // The sub-agent's model call was admitted in the parent's scope too.
/// assert_eq!(scope.model_calls(), 2);
/// # Ok(())
/// # }
/// ```
pub struct SubAgent<T, C = ()> {
    runtime: Arc<Runtime<T, C>>,
}

impl<T, C> Clone for SubAgent<T, C> {
    fn clone(&self) -> Self {
        Self { runtime: Arc::clone(&self.runtime) }
    }
}

impl<T: fmt::Debug, C> fmt::Debug for SubAgent<T, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SubAgent").field("runtime", &self.runtime).finish()
    }
}

impl<T: Transport, C: Send + Sync + 'static> SubAgent<T, C> {
    /// `runtime`, as a sub-agent.
    pub fn new(runtime: Runtime<T, C>) -> Self {
        Self { runtime: Arc::new(runtime) }
    }

    /// Runs the sub-agent in a child of `call`'s scope, built by `child` from the child's
    /// builder (its grants, limits and state), from `conversation`; returns its text when it
    /// completes.
    ///
    /// # Errors
    ///
    /// A [`SubAgentError`]: the child could not be opened, it stopped (its status), it ended
    /// without completing, or its run failed. Returned from a tool's body, it is an error
    /// result for the parent's model (not a halt of the parent).
    pub async fn run<S: Send + Sync + 'static>(
        &self,
        call: &Call<S>,
        child: impl FnOnce(ScopeBuilder) -> ScopeBuilder<C>,
        mut conversation: Vec<Message>,
        is_complete: impl FnOnce(&C) -> bool,
    ) -> Result<String, SubAgentError> {
        let scope = child(call.child()).build().map_err(SubAgentError::Open)?;
        let outcome =
            self.runtime.run(&scope, &mut conversation, is_complete).await.map_err(SubAgentError::Run)?;
        match outcome.status() {
            Status::Completed => Ok(outcome.text().unwrap_or_default().to_owned()),
            status => Err(SubAgentError::Stopped(status)),
        }
    }
}

/// Why a sub-agent returned no answer.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SubAgentError {
    /// Its child scope was refused (grants beyond the parent's, invalid limits).
    Open(LimitsError),
    /// It ended with this status: a halt, or `Incomplete`.
    Stopped(Status),
    /// Its run produced no outcome (the caller cancelled, the provider failed).
    Run(RunError),
}

impl fmt::Display for SubAgentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Open(_) => f.write_str("the sub-agent's scope could not be opened"),
            Self::Stopped(status) => write!(f, "the sub-agent ended with {status}"),
            Self::Run(_) => f.write_str("the sub-agent's run failed"),
        }
    }
}

impl std::error::Error for SubAgentError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Open(error) => Some(error),
            Self::Run(error) => Some(error),
            Self::Stopped(_) => None,
        }
    }
}
