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
//! - Journaled ([`SubAgent::run_journaled`]), it is its own logical run in the parent's
//!   journal, under an id derived from the call's operation: every attempt of the parent that
//!   drives the call finds the same child run and resumes it, and what the child's journal
//!   holds of earlier attempts is charged to its ancestors once more (their journals hold none
//!   of it: a parent commits nothing while its bodies run).

use std::fmt;
use std::sync::Arc;
#[cfg(feature = "journal")]
use std::time::Duration;

use super::Runner;
use crate::ended::Ended;
#[cfg(feature = "journal")]
use crate::journal::{Journal, JournalError, OperationId, RunId};
use crate::limits::LimitsError;
use crate::outcome::{RunError, Status};
use crate::scope::ScopeBuilder;
use crate::tool::ToolContext;
use crate::transport::{Message, Transport};

/// A runtime that runs as a sub-agent inside tools' bodies; cloning shares it.
///
/// ```
/// use loopbound::scripted::{Step, sequence};
/// use loopbound::transport::ModelReply;
/// use loopbound::{Limits, Message, Runner, Scope, Status, SubAgent, ToolBuilder, ToolContext, ToolSet};
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
/// let researcher = SubAgent::new(Runner::new(&ToolSet::default(), sequence(vec![
///     Step::Reply(ModelReply::text("The answer is 42.")),
/// ])));
/// // The parent's tool that asks it.
/// let research = ToolBuilder::new("research", "agents.research").build(move |question: Question, call: ToolContext| {
///     let researcher = researcher.clone();
///     async move {
///         let start = vec![Message::user(question.text)];
///         researcher.run(&call, |child| child.limits(Limits::default().with_model_calls(2)), start, |_| true).await
///     }
/// })?;
/// let parent = Runner::new(&ToolSet::builder().add(&research).build()?, sequence(vec![
///     Step::Reply(ModelReply::call("c1", "research", r#"{"text":"What is the answer?"}"#)),
///     Step::Reply(ModelReply::text("It is 42.")),
/// ]));
/// let scope = Scope::builder().grant("agents.research").build()?;
/// let outcome = parent.run(&scope, &mut vec![Message::user("Ask.")], |_| true).await?;
/// assert_eq!(outcome.status(), Status::Completed);
/// // The sub-agent's model call was admitted in the parent's scope too.
/// assert_eq!(scope.model_calls(), 2);
/// # Ok(())
/// # }
/// ```
pub struct SubAgent<T, C = ()> {
    runtime: Arc<Runner<T, C>>,
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
    pub fn new(runtime: Runner<T, C>) -> Self {
        Self { runtime: Arc::new(runtime) }
    }

    /// Runs the sub-agent in a child of `call`'s scope, built by `child` from the child's
    /// builder (its grants, limits and state), from `conversation`; returns its text when it
    /// completes (`is_complete` decides, from the child's run as it ends: [`Ended`]).
    ///
    /// # Errors
    ///
    /// A [`SubAgentError`]: the child could not be opened, it stopped (its status), it ended
    /// without completing, or its run failed. Returned from a tool's body, it is an error
    /// result for the parent's model (not a halt of the parent).
    pub async fn run<S: Send + Sync + 'static>(
        &self,
        call: &ToolContext<S>,
        child: impl FnOnce(ScopeBuilder) -> ScopeBuilder<C>,
        mut conversation: Vec<Message>,
        is_complete: impl FnOnce(Ended<'_, C>) -> bool,
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

#[cfg(feature = "journal")]
impl<T: Transport, C: Send + Sync + 'static> SubAgent<T, C> {
    /// As [`run`](Self::run), as its own journaled run in `journal`, complete by a condition
    /// over its state and its record ([`Ended`], as for `run_journaled`), for a tool of a journaled
    /// parent run: the child's run id derives from the call's operation
    /// ([`OperationId::child_run`]: `<parent run>:op:<ordinal>`), so a resumed parent that runs
    /// the body again resumes the child where its journal left it. Its recorded replies and
    /// results are replayed, so an effect inside it stays at most once; a child that had
    /// finished hands back its recorded answer without running. Declare the parent's tool
    /// `idempotent`: driving it again after a crash is what resumes the child.
    ///
    /// What the child's journal holds of earlier attempts (its calls and spend) is charged to
    /// every ancestor again when it resumes: a parent commits nothing while its bodies run, so
    /// after a crash its own journal holds none of it. A parent attempt that ended by itself
    /// while the child ran (its deadline, a cancellation) recorded what the child had charged
    /// it by then, and the resume charges that part twice: never less than was spent. A child
    /// attempt that finds its run still held by an
    /// attempt that died (its process was killed with the parent) waits for that lease to
    /// expire, within the parent's deadline.
    ///
    /// # Errors
    ///
    /// As [`run`](Self::run); [`SubAgentError::NotJournaled`] for a call outside a journaled
    /// run; [`SubAgentError::Run`] with the journal's error when it failed or refused.
    pub async fn run_journaled<S: Send + Sync + 'static, J: Journal>(
        &self,
        journal: &J,
        call: &ToolContext<S>,
        child: impl FnOnce(ScopeBuilder) -> ScopeBuilder<C>,
        mut conversation: Vec<Message>,
        is_complete: impl FnOnce(Ended<'_, C>) -> bool,
    ) -> Result<String, SubAgentError> {
        let operation = call.operation().ok_or(SubAgentError::NotJournaled)?;
        let journaled = |error| SubAgentError::Run(RunError::Journal(error));
        let run =
            OperationId::parse(operation).and_then(|operation| operation.child_run()).map_err(journaled)?;
        let scope = child(call.child()).build().map_err(SubAgentError::Open)?;
        let mut is_complete = Some(is_complete);
        loop {
            let complete = &mut is_complete;
            let attempt = self.runtime.run_journaled(journal, &run, &scope, &mut conversation, |ended| {
                complete.take().is_some_and(|is_complete| is_complete(ended))
            });
            match attempt.await {
                Ok(outcome) if outcome.status() == Status::Completed => {
                    return Ok(outcome.text().unwrap_or_default().to_owned());
                }
                Ok(outcome) => return Err(SubAgentError::Stopped(outcome.status())),
                Err(RunError::Journal(JournalError::LeaseHeld { remaining, .. })) => {
                    // Nothing started: the scope is still fresh for the next try.
                    let wait = remaining + LEASE_MARGIN;
                    tokio::select! {
                        () = tokio::time::sleep(wait) => {}
                        () = call.cancellation().cancelled() => return Err(SubAgentError::Run(RunError::Cancelled)),
                    }
                }
                Err(RunError::Journal(JournalError::Finished(status))) => {
                    return finished(journal, &run, call, status).await;
                }
                Err(error) => return Err(SubAgentError::Run(error)),
            }
        }
    }
}

/// How long past a held lease's remaining time a child attempt tries again.
#[cfg(feature = "journal")]
const LEASE_MARGIN: Duration = Duration::from_millis(50);

/// A child run that finished in an earlier attempt of its parent: its calls and spend are
/// charged to the parent's chain, and its recorded answer handed back.
#[cfg(feature = "journal")]
async fn finished<J: Journal, S>(
    journal: &J,
    run: &RunId,
    call: &ToolContext<S>,
    status: Status,
) -> Result<String, SubAgentError> {
    let record =
        crate::journal::inspect(journal, run).await.map_err(|e| SubAgentError::Run(RunError::Journal(e)))?;
    call.scope().guard().absorb(&record.counters.charged_above());
    if status != Status::Completed {
        return Err(SubAgentError::Stopped(status));
    }
    Ok(record.replies.last().and_then(|reply| reply.content.clone()).unwrap_or_default())
}

/// Why a sub-agent returned no answer.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SubAgentError {
    /// Its child scope was refused (grants beyond the parent's, invalid limits).
    Open(LimitsError),
    /// It ended with this status: a halt, or `Incomplete`.
    Stopped(Status),
    /// Its run produced no outcome (the caller cancelled, the provider failed, its journal
    /// failed or refused).
    Run(RunError),
    /// A journaled sub-agent was asked for outside a journaled run: its call has no operation
    /// to derive the child's run id from.
    #[cfg(feature = "journal")]
    NotJournaled,
}

impl fmt::Display for SubAgentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Open(_) => f.write_str("the sub-agent's scope could not be opened"),
            Self::Stopped(status) => write!(f, "the sub-agent ended with {status}"),
            Self::Run(_) => f.write_str("the sub-agent's run failed"),
            #[cfg(feature = "journal")]
            Self::NotJournaled => f.write_str("a journaled sub-agent runs only inside a journaled run"),
        }
    }
}

impl std::error::Error for SubAgentError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Open(error) => Some(error),
            Self::Run(error) => Some(error),
            Self::Stopped(_) => None,
            #[cfg(feature = "journal")]
            Self::NotJournaled => None,
        }
    }
}
