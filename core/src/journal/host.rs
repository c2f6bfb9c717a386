//! The host's commands on a journal: look at a run, approve or deny a proposal, reconcile an
//! ambiguous effect. Each is one durable commit of the host's own, checked against what the
//! journal holds.
//!
//! # Invariants
//!
//! - An approval or denial applies to one operation and presents the digest of the proposal it
//!   was shown: a digest of other arguments is refused ([`JournalError::SignatureMismatch`]), and
//!   nothing is written.
//! - An operation is decided at most once: a second decision is refused, even when two race (the
//!   journal's keys refuse the second write).
//! - Only an `effect` operation that a resume found ambiguous (its run stopped `Ambiguous` on it)
//!   is reconciled, and each start at most once.

use super::codec;
use super::error::JournalError;
use super::id::{Digest, OperationId, RunId};
use super::record::{Decider, OperationStatus, Proposal, Resolution, RunState, Verdict, valid_actor};
use super::row::{Batch, DecisionRow, Entry, Fence, ReconciliationRow};
use super::run_record::RunRecord;
use super::store::Journal;
use crate::tool::EffectKind;

/// Everything the journal holds about `run`, decoded and checked.
///
/// # Errors
///
/// [`JournalError::UnknownRun`], a storage error, or [`JournalError::Corrupt`].
pub async fn inspect<J: Journal>(journal: &J, run: &RunId) -> Result<RunRecord, JournalError> {
    let stored = journal.load(run).await?.ok_or(JournalError::UnknownRun)?;
    RunRecord::decode(run, &stored)
}

/// Approves `operation` as `approver`, who was shown the proposal whose digest is `digest`.
/// Returns the proposal approved. The run continues when it is resumed.
///
/// ```
/// use loopbound::journal::{self, Digest, JournalError, MemoryJournal, OperationId};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let journal = MemoryJournal::default();
/// let operation = OperationId::parse("refund-42/op/1").unwrap();
/// let result = journal::approve(&journal, &operation, &Digest::of("refund:{}"), "alice").await;
/// assert_eq!(result.err(), Some(JournalError::UnknownRun));
/// # }
/// ```
///
/// # Errors
///
/// [`JournalError::UnknownRun`] or [`JournalError::UnknownOperation`];
/// [`JournalError::SignatureMismatch`] if `digest` is not the proposal's;
/// [`JournalError::AlreadyDecided`]; [`JournalError::InvalidActor`] for an empty name, one over
/// 64 bytes or with a control character; a storage error.
pub async fn approve<J: Journal>(
    journal: &J,
    operation: &OperationId,
    digest: &Digest,
    approver: &str,
) -> Result<Proposal, JournalError> {
    decide(journal, operation, digest, approver, Verdict::Allow).await
}

/// Denies `operation` as `approver` (see [`approve`]); the run halts with `Denied` when it is
/// resumed.
///
/// # Errors
///
/// As [`approve`].
pub async fn deny<J: Journal>(
    journal: &J,
    operation: &OperationId,
    digest: &Digest,
    approver: &str,
) -> Result<Proposal, JournalError> {
    decide(journal, operation, digest, approver, Verdict::Deny).await
}

async fn decide<J: Journal>(
    journal: &J,
    operation: &OperationId,
    digest: &Digest,
    approver: &str,
    verdict: Verdict,
) -> Result<Proposal, JournalError> {
    if !valid_actor(approver) {
        return Err(JournalError::InvalidActor);
    }
    let record = inspect(journal, operation.run()).await?;
    let found = record.operation(operation.ordinal()).ok_or(JournalError::UnknownOperation)?;
    if found.proposal().digest() != *digest {
        return Err(JournalError::SignatureMismatch);
    }
    if found.decision().is_some() {
        return Err(JournalError::AlreadyDecided);
    }
    let row = DecisionRow {
        ordinal: operation.ordinal(),
        verdict: verdict.as_str().to_owned(),
        by: codec::encode_decider(&Decider::Approver(approver.to_owned())),
    };
    let batch = Batch { entries: vec![Entry::Decision(row)] };
    match journal.commit(operation.run(), Fence::Host, batch).await {
        Err(JournalError::Conflict(_)) => Err(JournalError::AlreadyDecided),
        Err(error) => Err(error),
        Ok(()) => Ok(found.proposal().clone()),
    }
}

/// Settles the ambiguous effect `operation` as `reconciler`: it ran, with this result, or it did
/// not run (the resume then starts it again, as it was decided).
///
/// # Errors
///
/// [`JournalError::UnknownRun`] or [`JournalError::UnknownOperation`];
/// [`JournalError::NotAnEffect`] for a `read` or `idempotent` operation;
/// [`JournalError::NotAmbiguous`] unless the run stopped `Ambiguous` on this operation and its
/// last start has neither result nor reconciliation; [`JournalError::InvalidActor`]; a storage
/// error.
pub async fn reconcile<J: Journal>(
    journal: &J,
    operation: &OperationId,
    resolution: Resolution,
    reconciler: &str,
) -> Result<(), JournalError> {
    if !valid_actor(reconciler) {
        return Err(JournalError::InvalidActor);
    }
    let record = inspect(journal, operation.run()).await?;
    let found = record.operation(operation.ordinal()).ok_or(JournalError::UnknownOperation)?;
    if found.proposal().effect() != EffectKind::Effect {
        return Err(JournalError::NotAnEffect);
    }
    let OperationStatus::Started { start } = found.status() else {
        return Err(JournalError::NotAmbiguous);
    };
    if record.state() != RunState::Ambiguous(operation.ordinal()) {
        return Err(JournalError::NotAmbiguous);
    }
    let (name, result) = codec::encode_resolution(&resolution);
    let row = ReconciliationRow {
        ordinal: operation.ordinal(),
        start,
        resolution: name.to_owned(),
        result,
        by: reconciler.to_owned(),
    };
    let batch = Batch { entries: vec![Entry::Reconciliation(row)] };
    match journal.commit(operation.run(), Fence::Host, batch).await {
        Err(JournalError::Conflict(_)) => Err(JournalError::NotAmbiguous),
        other => other,
    }
}
