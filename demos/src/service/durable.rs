//! Everything this service asks of the journal: run or resume an attempt, find the proposal an
//! `AwaitingApproval` run waits on, and record a person's decision on it.
//!
//! Kept in one module because the journal's host API is moving (an outcome that hands out its
//! pending proposal, decisions that take it, a run's definition kept in the journal): only this
//! file should have to follow it.
//!
//! # Invariants
//!
//! - A decision presents the digest of the proposal the approver was shown; the journal refuses
//!   any other (`SignatureMismatch`) and records nothing.
//! - An attempt's scope is fresh and carries the run's own grants, the same on every attempt:
//!   a resume never widens what the request was granted.
//! - Nothing here writes to the journal but the journal's own host commands and `run_journaled`.

use loopbound::journal::{self, Digest, Journal, JournalError, OperationId, Presented, RunId};
use loopbound::transport::{Message, Transport};
use loopbound::watch::Feed;
use loopbound::{Limits, LimitsError, Outcome, RunError, Runtime, Scope};
use serde::Serialize;
use serde::ser::SerializeStruct;

use super::task::Task;

/// What a run was asked to do, under which grants: what each attempt's scope is rebuilt from.
///
/// Kept by the service in memory, beside the journal, which does not hold a run's grants: a run
/// that waits for approval cannot be resumed by another process or after a restart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Definition {
    /// The task, which decides the completion condition.
    pub task: Task,
    /// The capabilities granted to this request.
    pub grants: Vec<String>,
}

impl Definition {
    /// A fresh scope for one attempt of this run.
    ///
    /// # Errors
    ///
    /// [`LimitsError`] if `limits` are invalid.
    pub fn scope(&self, limits: Limits, feed: Feed) -> Result<Scope, LimitsError> {
        Scope::builder().grants(self.grants.iter().cloned()).limits(limits).watch(feed).build()
    }
}

/// Runs a new run from `conversation`, or resumes a known one from its journal (then
/// `conversation` is replaced by the recorded one).
///
/// # Errors
///
/// As [`Runtime::run_journaled`].
pub async fn attempt<T: Transport, J: Journal>(
    runtime: &Runtime<T>,
    journal: &J,
    run: &RunId,
    scope: &Scope,
    mut conversation: Vec<Message>,
    task: Task,
) -> Result<Outcome, RunError> {
    runtime.run_journaled(journal, run, scope, &mut conversation, move |ended| task.is_done(ended)).await
}

/// The proposal an `AwaitingApproval` run waits on: what an approver is shown.
#[derive(Clone, PartialEq, Eq)]
pub struct Pending {
    operation: OperationId,
    tool: String,
    capability: String,
    arguments: String,
    digest: Digest,
}

impl Pending {
    /// The operation to decide, e.g. `run-…/op/1`.
    #[must_use]
    pub fn operation(&self) -> &OperationId {
        &self.operation
    }

    /// The digest an approval must present.
    #[must_use]
    pub fn digest(&self) -> &Digest {
        &self.digest
    }
}

impl std::fmt::Debug for Pending {
    /// Without the arguments: a `Debug` may reach a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("operation", &self.operation.to_string())
            .field("tool", &self.tool)
            .finish_non_exhaustive()
    }
}

impl Serialize for Pending {
    /// `{operation, tool, capability, arguments, digest}`: the approver's view, arguments
    /// included (the approver decides on them). Sent to the client that asked for the run, never
    /// logged.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut pending = serializer.serialize_struct("Pending", 5)?;
        pending.serialize_field("operation", &self.operation.to_string())?;
        pending.serialize_field("tool", &self.tool)?;
        pending.serialize_field("capability", &self.capability)?;
        pending.serialize_field("arguments", &self.arguments)?;
        pending.serialize_field("digest", self.digest.as_str())?;
        pending.end()
    }
}

/// The proposal `outcome` stopped on, if it awaits approval: the outcome carries it
/// ([`Outcome::pending`]), so the journal is not read again.
#[must_use]
pub fn pending(outcome: &Outcome) -> Option<Pending> {
    outcome.pending().map(|proposal| Pending {
        operation: proposal.operation().clone(),
        tool: proposal.tool().to_owned(),
        capability: proposal.capability().to_owned(),
        arguments: proposal.arguments().to_owned(),
        digest: proposal.digest(),
    })
}

/// A person's decision on a pending proposal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The call may run.
    Approve,
    /// The call must not run: the run halts `Denied` when resumed.
    Deny,
}

/// Records `approver`'s `verdict` on `pending`, presenting `digest` (the hex text the approver
/// was shown). The run continues when it is resumed.
///
/// # Errors
///
/// [`JournalError::InvalidDigest`], [`JournalError::SignatureMismatch`],
/// [`JournalError::AlreadyDecided`], [`JournalError::InvalidActor`], a storage error.
pub async fn decide<J: Journal>(
    journal: &J,
    pending: &Pending,
    digest: &str,
    approver: &str,
    verdict: Verdict,
) -> Result<(), JournalError> {
    let digest = Digest::parse(digest)?;
    let decided = match verdict {
        Verdict::Approve => {
            journal::approve(journal, Presented::new(&pending.operation, &digest), approver).await
        }
        Verdict::Deny => journal::deny(journal, Presented::new(&pending.operation, &digest), approver).await,
    };
    decided.map(|_proposal| ())
}
