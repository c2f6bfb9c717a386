//! Everything this service asks of the journal: open an attempt's scope, run or resume an
//! attempt, find the proposal a run waits on, and record a person's decision on it.
//!
//! Kept in one module because the journal's host API is moving: only this file should have to
//! follow it.
//!
//! # Invariants
//!
//! - A decision presents the digest of the proposal the approver was shown; the journal refuses
//!   any other (`SignatureMismatch`) and records nothing.
//! - Only a run's first attempt builds its scope from the request; every later attempt, in this
//!   process or another, rebuilds it from the journal alone ([`journal::scope_of`]), plus this
//!   process's live-stream feed. A resume never widens what the request was granted, and no
//!   process needs to have seen the request.
//! - What decides a run's completion (its [`Task`]) is stored with the run, as the label
//!   [`TASK_LABEL`], so any process can judge the run's end.
//! - Nothing here writes to the journal but the journal's own host commands and `run_journaled`.

use std::fmt;
use std::sync::Arc;

use loopbound::journal::{
    self, Digest, Journal, JournalError, Labels, OperationId, Proposal, ProposalKey, RunId, RunRecord,
};
use loopbound::transport::{Message, Transport};
use loopbound::{Limits, LimitsError, Outcome, RunError, Runner, Scope};
use serde::Serialize;
use serde::ser::SerializeStruct;

use super::task::Task;
use super::tenants::{TENANT_LABEL, Tenants};

/// The label that stores a run's task in its journal.
pub const TASK_LABEL: &str = "task";

/// Where an attempt's scope comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Opening {
    /// A new run: the request's task and grants, under the service's limits. The journal stores
    /// them as the run's definition.
    First {
        /// The task, stored as the label [`TASK_LABEL`].
        task: Task,
        /// The capabilities granted to the request.
        grants: Vec<String>,
        /// The tenant whose pool the run draws from, stored as the label [`TENANT_LABEL`].
        tenant: Option<String>,
    },
    /// A later attempt: the run's definition as the journal holds it.
    Resume,
}

/// Why an attempt's scope could not be opened.
#[derive(Debug)]
pub enum ScopeError {
    /// The service's limits do not validate.
    Limits(LimitsError),
    /// The journal could not give the run's definition.
    Journal(JournalError),
    /// The request's tenant is not configured here.
    Tenant,
}

impl fmt::Display for ScopeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Limits(error) => write!(f, "invalid limits: {error}"),
            Self::Journal(error) => write!(f, "the run's definition: {error}"),
            Self::Tenant => f.write_str("the tenant is not configured in this service"),
        }
    }
}

impl std::error::Error for ScopeError {}

/// A fresh scope for one attempt of `run`: from the request for the first attempt (with
/// `limits`, drawing from its tenant's pool), from the journal for every later one (drawing
/// from the pools its definition names, in `tenants`' store).
///
/// # Errors
///
/// [`ScopeError`]: limits that do not validate, a tenant not configured, or a run whose
/// definition the journal cannot give (unknown, stored before definitions were, a storage
/// error), or that draws from pools when this service has no pool store.
pub async fn scope<J: Journal>(
    journal: &J,
    run: &RunId,
    opening: Opening,
    limits: Limits,
    tenants: &Tenants,
) -> Result<Scope, ScopeError> {
    let builder = match opening {
        Opening::First { task, grants, tenant } => {
            let mut labels = Labels::new().with(TASK_LABEL, task.as_str()).map_err(ScopeError::Journal)?;
            let builder = Scope::builder().grants(grants).limits(limits).record_stream();
            match tenant {
                Some(tenant) => {
                    let (store, pool) = tenants.draw(&tenant).ok_or(ScopeError::Tenant)?;
                    labels = labels.with(TENANT_LABEL, &tenant).map_err(ScopeError::Journal)?;
                    builder.pools(Arc::clone(store), [pool]).labels(labels)
                }
                None => builder.labels(labels),
            }
        }
        Opening::Resume => {
            let builder = journal::scope_of(journal, run).await.map_err(ScopeError::Journal)?;
            match tenants.store() {
                Some(store) => builder.pool_store(Arc::clone(store)),
                None => builder,
            }
        }
    };
    builder.build().map_err(ScopeError::Limits)
}

/// The task a journaled run was started for, from its record; `None` for a run this service
/// did not start (no [`TASK_LABEL`], or an unknown task).
#[must_use]
pub fn task_of(record: &RunRecord) -> Option<Task> {
    record.labels().get(TASK_LABEL).and_then(Task::from_label)
}

/// Runs a new run from `conversation`, or resumes a known one from its journal (then
/// `conversation` is replaced by the recorded one).
///
/// # Errors
///
/// As [`Runner::run_journaled`].
pub async fn attempt<T: Transport, J: Journal>(
    runtime: &Runner<T>,
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

impl From<&Proposal> for Pending {
    fn from(proposal: &Proposal) -> Self {
        Self {
            operation: proposal.operation().clone(),
            tool: proposal.tool().to_owned(),
            capability: proposal.capability().to_owned(),
            arguments: proposal.arguments().to_owned(),
            digest: proposal.digest(),
        }
    }
}

/// The proposal `outcome` stopped on, if it awaits approval: the outcome carries it
/// ([`Outcome::pending`]), so the journal is not read again.
#[must_use]
pub fn pending(outcome: &Outcome) -> Option<Pending> {
    outcome.pending().map(Pending::from)
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
            journal::approve(journal, ProposalKey::new(&pending.operation, &digest), approver).await
        }
        Verdict::Deny => {
            journal::deny(journal, ProposalKey::new(&pending.operation, &digest), approver).await
        }
    };
    decided.map(|_proposal| ())
}
