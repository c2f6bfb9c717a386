//! The host's commands on a journal: look at a run, list runs, approve or deny a proposal,
//! reconcile an ambiguous effect, cancel a run, close a run. None needs a worker identity; each
//! write is one durable commit of the host's own, checked against what the journal holds.
//!
//! # Invariants
//!
//! - An approval or denial applies to one operation and presents the digest of the proposal it
//!   was shown: a digest of other arguments is refused ([`JournalError::SignatureMismatch`]), and
//!   nothing is written.
//! - An operation is decided at most once: a second decision is refused, even when two race (the
//!   journal's keys refuse the second write).
//! - Only an `effect` operation whose last start has neither result nor reconciliation is
//!   reconciled, each start at most once, and never while an attempt holds a live lease on its
//!   run: that attempt may be running the body. The check and the write are one transaction
//!   ([`Fence::Host`]), so no attempt takes the run in between.
//! - A decision or a reconciliation of the operation the run's state names sets the state back
//!   to `open` in the same commit: the run is ready to resume, and a listing says so.
//! - A command that changes the run's state changes it only from the state it read: its batch
//!   expects that state ([`Entry::ExpectState`]), so a command or an attempt that changed it
//!   meanwhile makes the write a conflict, and the command reads the run again (at most
//!   [`TRIES`] times). A closed run is never reopened by a decision that raced its closing.
//! - A finished run (closed by a host included) takes no decision, reconciliation, widening,
//!   cancel request or closing: each is refused with [`JournalError::Finished`], nothing
//!   written.

use std::sync::Arc;

use super::codec;
use super::definition::RunDefinition;
use super::error::JournalError;
use super::id::{Digest, OperationId, RunId};
use super::query::{RunPage, RunQuery, RunSummary};
use super::record::{
    Decider, Operation, OperationStatus, Proposal, Resolution, RunState, Verdict, valid_actor, valid_reason,
};
use super::row::{Batch, DecisionRow, Entry, ExpiryRow, Fence, Lease, ReconciliationRow};
use super::run_record::RunRecord;
use super::store::Journal;
use super::widening::Widening;
use crate::event::{ControlEvent, EventKind, Subject};
use crate::outcome::Status;
use crate::scope::ScopeBuilder;
use crate::tool::EffectKind;

/// How many times a command that changes a run's state reads the run again when its state
/// changed between the command's read and its write.
const TRIES: usize = 3;

/// The error of a command whose every try found the run's state changed before its write.
fn kept_changing() -> JournalError {
    JournalError::Conflict("the run's state, changed by another command or attempt at every try".to_owned())
}

/// Everything the journal holds about `run`, decoded and checked: its state, its epoch, its
/// lease (holder and expiry), its definition, its operations and its audit log.
///
/// # Errors
///
/// [`JournalError::UnknownRun`], a storage error, or [`JournalError::Corrupt`].
pub async fn inspect<J: Journal>(journal: &J, run: &RunId) -> Result<RunRecord, JournalError> {
    let stored = journal.load(run).await?.ok_or(JournalError::UnknownRun)?;
    RunRecord::decode(run, &stored)
}

/// One page of the runs in `query`'s filters, by id; the next page is
/// `query.after(page.next())`.
///
/// ```
/// use loopbound::journal::{self, MemoryJournal, RunQuery, StateFilter};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), loopbound::journal::JournalError> {
/// let journal = MemoryJournal::default();
/// let mut query = RunQuery::new().state(StateFilter::AwaitingApproval);
/// loop {
///     let page = journal::list(&journal, &query).await?;
///     for run in page.runs() {
///         println!("{} waits for a decision", run.run());
///     }
///     let Some(next) = page.next() else { break };
///     query = query.after(next.clone());
/// }
/// # Ok(())
/// # }
/// ```
///
/// # Errors
///
/// A storage error, or [`JournalError::Corrupt`] for a listed row that does not decode or a
/// backend that answered outside the query.
pub async fn list<J: Journal>(journal: &J, query: &RunQuery) -> Result<RunPage, JournalError> {
    let rows = journal.list_rows(query).await?;
    let size = usize::try_from(query.page_size()).unwrap_or(usize::MAX);
    if rows.len() > size {
        return Err(JournalError::Corrupt("a listing longer than its page".to_owned()));
    }
    let full = rows.len() == size;
    let runs = rows.into_iter().map(RunSummary::decode).collect::<Result<Vec<_>, _>>()?;
    let mut previous = query.cursor().map(RunId::as_str);
    for summary in &runs {
        let live = summary.lease().is_some_and(Lease::is_live);
        let labels = summary.labels().to_rows();
        if previous.is_some_and(|before| before >= summary.run().as_str())
            || !query.matches(summary.state(), live, &labels)
        {
            return Err(JournalError::Corrupt("a listing outside its query".to_owned()));
        }
        previous = Some(summary.run().as_str());
    }
    Ok(RunPage::new(runs, full))
}

/// A scope builder with the definition `run` was started with (grants, limits, per-tool limits,
/// prices, pools, labels), for resuming it in any process that has nothing but its id: add the
/// request's state and the caller's token, narrow the grants or set another deadline if need
/// be. A run that draws from shared pools needs their store handle too
#[cfg_attr(
    feature = "pools",
    doc = " ([`ScopeBuilder::pool_store`]); the builder refuses to build without it, so a resume cannot"
)]
#[cfg_attr(
    not(feature = "pools"),
    doc = " (`ScopeBuilder::pool_store`); the builder refuses to build without it, so a resume cannot"
)]
/// spend outside the run's pools by a forgotten line.
///
/// ```
/// use loopbound::journal::{self, JournalError, MemoryJournal, RunId};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let journal = MemoryJournal::default();
/// let run = RunId::new("refund-42").unwrap();
/// // let scope = journal::scope_of(&journal, &run).await?.state(my_state).build()?;
/// assert!(matches!(journal::scope_of(&journal, &run).await, Err(JournalError::UnknownRun)));
/// # }
/// ```
///
/// # Errors
///
/// [`JournalError::UnknownRun`]; [`JournalError::NoDefinition`] for a run journaled before
/// definitions were stored; a storage error or [`JournalError::Corrupt`].
pub async fn scope_of<J: Journal>(journal: &J, run: &RunId) -> Result<ScopeBuilder, JournalError> {
    let record = inspect(journal, run).await?;
    record.definition().map(RunDefinition::scope_builder).ok_or(JournalError::NoDefinition)
}

/// Widens `run`'s definition by `widening`, as `by`: grants its capabilities too, and replaces
/// the limits, sets or drops each per-tool limit, replaces the price table and drops the pools
/// that it says.
/// The run's audit log records a `Widened` event naming `by`; the next attempt may then use the
/// wider scope ([`scope_of`] builds it). Returns the new definition.
///
/// # Errors
///
/// [`JournalError::UnknownRun`]; [`JournalError::NoDefinition`]; [`JournalError::InvalidLimits`]
/// (invalid limits, or a per-tool limit on an invalid tool name);
/// [`JournalError::InvalidCapability`]; [`JournalError::InvalidActor`];
/// [`JournalError::Finished`] for a run that ended; [`JournalError::LeaseHeld`] while an attempt
/// holds the run; a storage error. Nothing is written on an error.
pub async fn widen<J: Journal>(
    journal: &J,
    run: &RunId,
    widening: &Widening,
    by: &str,
) -> Result<RunDefinition, JournalError> {
    if !valid_actor(by) {
        return Err(JournalError::InvalidActor);
    }
    if let Some(limits) = &widening.limits {
        limits.validate().map_err(JournalError::InvalidLimits)?;
    }
    if widening.tool_limits.keys().any(|tool| crate::tool::check_name(tool).is_err()) {
        return Err(JournalError::InvalidLimits(crate::limits::LimitsError::InvalidToolLimit));
    }
    if widening.grants.iter().any(|grant| grant.is_empty() || grant.chars().any(char::is_control)) {
        return Err(JournalError::InvalidCapability);
    }
    let record = inspect(journal, run).await?;
    if let RunState::Finished(status) = record.state() {
        return Err(JournalError::Finished(status));
    }
    idle(&record)?;
    let mut definition = record.definition().cloned().ok_or(JournalError::NoDefinition)?;
    definition.grants.extend(widening.grants.iter().cloned());
    if let Some(limits) = &widening.limits {
        definition.limits.clone_from(limits);
    }
    for (tool, limit) in &widening.tool_limits {
        definition.limits = match limit {
            Some(limit) => definition.limits.with_tool_calls_of(tool.clone(), *limit),
            None => definition.limits.without_tool_calls_of(tool),
        };
    }
    if let Some(prices) = &widening.prices {
        definition.prices = Some(Arc::clone(prices));
    }
    #[cfg(feature = "pools")]
    if widening.drop_pools {
        definition.pools = None;
    }
    let widenings = record.events().iter().filter(|event| event.kind() == EventKind::Widened).count();
    let count =
        u32::try_from(widenings + 1).map_err(|_| JournalError::Corrupt("too many widenings".to_owned()))?;
    let event = ControlEvent::new(EventKind::Widened, Subject::Run, count).by(Arc::from(by));
    let batch = Batch {
        entries: vec![
            Entry::Definition(codec::encode_definition(&definition)),
            Entry::Event(codec::encode_event(&event)),
        ],
    };
    journal.commit(run, Fence::Host, batch).await?;
    Ok(definition)
}

/// Asks, as `by`, that `run` be cancelled from whatever process runs it: the attempt running it
/// ends as a caller cancellation ([`RunError::Cancelled`](crate::RunError::Cancelled)) at its next
/// admission or within [`CANCEL_POLL`](super::CANCEL_POLL), and its journal records a `Cancelled`
/// event naming `by`. If no attempt runs it, the next one to take it ends so at once, having run
/// nothing. The run stays resumable: an attempt that honours the request clears it.
///
/// ```
/// use loopbound::journal::{self, JournalError, MemoryJournal, RunId};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let journal = MemoryJournal::default();
/// let run = RunId::new("review-42").unwrap();
/// assert_eq!(journal::cancel(&journal, &run, "alice").await, Err(JournalError::UnknownRun));
/// # }
/// ```
///
/// # Errors
///
/// [`JournalError::InvalidActor`]; [`JournalError::UnknownRun`]; [`JournalError::Finished`] for a
/// run that ended; [`JournalError::CancelUnsupported`] for a backend without cancel requests; a
/// storage error.
pub async fn cancel<J: Journal>(journal: &J, run: &RunId, by: &str) -> Result<(), JournalError> {
    if !valid_actor(by) {
        return Err(JournalError::InvalidActor);
    }
    let record = inspect(journal, run).await?;
    if let RunState::Finished(status) = record.state() {
        return Err(JournalError::Finished(status));
    }
    journal.request_cancel(run, by).await
}

/// Closes `run` as `by`, for `reason`: the run ends for good where it stands, with the status
/// [`Status::Closed`] (a listing shows it finished), and its audit log records a `Closed` event
/// naming `by` and `reason`. No attempt takes it again: a later
/// [`run_journaled`](crate::Runner::run_journaled) is refused with
/// [`JournalError::Finished`] and runs nothing. A run waiting for approval can be closed: its
/// pending proposal never runs, and approving or denying it is refused from then on. An
/// ambiguous run can be closed too: its effect stays unreconciled in the record, as the host
/// found it (find out in the effect's own system whether it happened; the journal will not
/// run it again). A pending cancel request is cleared. One durable commit, which changes the run
/// only from the state read before it.
///
/// ```
/// use loopbound::journal::{self, JournalError, MemoryJournal, RunId};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let journal = MemoryJournal::default();
/// let run = RunId::new("refund-42").unwrap();
/// let closed = journal::close(&journal, &run, "the customer withdrew the request", "alice").await;
/// assert_eq!(closed, Err(JournalError::UnknownRun));
/// # }
/// ```
///
/// # Errors
///
/// [`JournalError::InvalidActor`]; [`JournalError::InvalidReason`] for an empty reason, one over
/// 256 bytes or with a control character; [`JournalError::UnknownRun`];
/// [`JournalError::Finished`] for a run that ended (closed included);
/// [`JournalError::LeaseHeld`] while an attempt holds the run (cancel it first
/// ([`cancel`]), or retry once it stops); a storage error. Nothing is written on an error.
pub async fn close<J: Journal>(journal: &J, run: &RunId, reason: &str, by: &str) -> Result<(), JournalError> {
    if !valid_actor(by) {
        return Err(JournalError::InvalidActor);
    }
    if !valid_reason(reason) {
        return Err(JournalError::InvalidReason);
    }
    for _ in 0..TRIES {
        let record = inspect(journal, run).await?;
        if let RunState::Finished(status) = record.state() {
            return Err(JournalError::Finished(status));
        }
        idle(&record)?;
        let event = ControlEvent::new(EventKind::Closed, Subject::Run, record.attempts())
            .by(Arc::from(by))
            .because(Arc::from(reason));
        let batch = Batch {
            entries: vec![
                Entry::ExpectState(record.state()),
                Entry::State(RunState::Finished(Status::Closed)),
                Entry::Event(codec::encode_event(&event)),
                Entry::CancelHonoured,
            ],
        };
        match journal.commit(run, Fence::Host, batch).await {
            Err(JournalError::Conflict(_)) => {}
            other => return other,
        }
    }
    Err(kept_changing())
}

/// A host's batch that writes `entry` (a decision, a reconciliation) and, when the run stopped
/// on what it settles (`stopped`), sets the run open again, from that state only.
fn settling(record: &RunRecord, stopped: RunState, entry: Entry) -> Batch {
    let entries = if record.state() == stopped {
        vec![Entry::ExpectState(stopped), entry, Entry::State(RunState::Open)]
    } else {
        vec![entry]
    };
    Batch { entries }
}

/// The operation `ordinal` of `record`, if its proposal is the one presented with `digest` and
/// waits for a decision in a run that has not ended: what approving, denying and asking again
/// need alike.
fn undecided<'r>(
    record: &'r RunRecord,
    ordinal: u32,
    digest: &Digest,
) -> Result<&'r Operation, JournalError> {
    let found = record.operation(ordinal).ok_or(JournalError::UnknownOperation)?;
    if found.proposal().digest() != *digest {
        return Err(JournalError::SignatureMismatch);
    }
    if found.decision().is_some() {
        return Err(JournalError::AlreadyDecided);
    }
    if let RunState::Finished(status) = record.state() {
        return Err(JournalError::Finished(status));
    }
    Ok(found)
}

/// Refuses a command on a run that an attempt holds now.
fn idle(record: &RunRecord) -> Result<(), JournalError> {
    match record.lease() {
        Some(lease) if lease.is_live() => {
            Err(JournalError::LeaseHeld { holder: lease.holder.clone(), remaining: lease.remaining })
        }
        _ => Ok(()),
    }
}

/// What an approver was shown and decides on: one operation, and the digest of the proposal
/// presented for it. An [`AwaitingApproval`](crate::Status::AwaitingApproval) outcome's
/// [`pending`](crate::Outcome::pending) proposal converts into one as it is; a host that showed
/// the proposal elsewhere (a web page) builds one from the operation id and digest it gets back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProposalKey {
    operation: OperationId,
    digest: Digest,
}

impl ProposalKey {
    /// `operation`, presented with the digest `digest`.
    #[must_use]
    pub fn new(operation: &OperationId, digest: &Digest) -> Self {
        Self { operation: operation.clone(), digest: digest.clone() }
    }

    /// The operation id and the digest as texts, e.g. from a form.
    ///
    /// # Errors
    ///
    /// [`JournalError::InvalidOperationId`] or [`JournalError::InvalidDigest`].
    pub fn parse(operation: &str, digest: &str) -> Result<Self, JournalError> {
        Ok(Self { operation: OperationId::parse(operation)?, digest: Digest::parse(digest)? })
    }

    /// The operation.
    #[must_use]
    pub fn operation(&self) -> &OperationId {
        &self.operation
    }

    /// The digest shown.
    #[must_use]
    pub fn digest(&self) -> &Digest {
        &self.digest
    }
}

impl From<&Proposal> for ProposalKey {
    fn from(proposal: &Proposal) -> Self {
        Self { operation: proposal.operation().clone(), digest: proposal.digest() }
    }
}

/// Approves the presented operation as `approver`, bound to the digest presented. Returns the
/// proposal approved. The run continues when it is resumed (its state becomes `open`).
///
/// ```
/// use loopbound::journal::{self, JournalError, MemoryJournal, ProposalKey};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let journal = MemoryJournal::default();
/// // After `let outcome = runtime.run_journaled(...)` stopped `AwaitingApproval`:
/// // `journal::approve(&journal, outcome.pending().unwrap(), "alice")`.
/// let presented = ProposalKey::parse("refund-42/op/1", &"0".repeat(64)).unwrap();
/// let result = journal::approve(&journal, presented, "alice").await;
/// assert_eq!(result.err(), Some(JournalError::UnknownRun));
/// # }
/// ```
///
/// # Errors
///
/// [`JournalError::UnknownRun`] or [`JournalError::UnknownOperation`];
/// [`JournalError::SignatureMismatch`] if the digest is not the proposal's;
/// [`JournalError::AlreadyDecided`]; [`JournalError::Finished`] for a run that ended undecided
/// (a host closed it); [`JournalError::InvalidActor`] for an empty name, one over
/// 64 bytes or with a control character; [`JournalError::LeaseHeld`] while an attempt holds the
/// run (retry once it stops); a storage error.
pub async fn approve<J: Journal>(
    journal: &J,
    presented: impl Into<ProposalKey>,
    approver: &str,
) -> Result<Proposal, JournalError> {
    let presented = presented.into();
    decide(journal, &presented.operation, &presented.digest, approver, Verdict::Allow).await
}

/// Denies the presented operation as `approver` (see [`approve`]); the run halts with `Denied`
/// when it is resumed.
///
/// # Errors
///
/// As [`approve`].
pub async fn deny<J: Journal>(
    journal: &J,
    presented: impl Into<ProposalKey>,
    approver: &str,
) -> Result<Proposal, JournalError> {
    let presented = presented.into();
    decide(journal, &presented.operation, &presented.digest, approver, Verdict::Deny).await
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
    for _ in 0..TRIES {
        let record = inspect(journal, operation.run()).await?;
        let found = undecided(&record, operation.ordinal(), digest)?;
        if verdict == Verdict::Allow && found.proposal().is_expired() {
            return Err(JournalError::ApprovalExpired);
        }
        idle(&record)?;
        let row = DecisionRow {
            ordinal: operation.ordinal(),
            verdict: verdict.as_str().to_owned(),
            by: codec::encode_decider(&Decider::Approver(approver.to_owned())),
        };
        let batch = settling(&record, RunState::AwaitingApproval(operation.ordinal()), Entry::Decision(row));
        // A conflict is a decision or a state written meanwhile: the next read tells which.
        match journal.commit(operation.run(), Fence::Host, batch).await {
            Err(JournalError::Conflict(_)) => {}
            Err(error) => return Err(error),
            Ok(()) => return Ok(found.proposal().clone()),
        }
    }
    Err(kept_changing())
}

/// Asks again for a decision on the presented proposal, as `by`: the proposal, undecided and
/// waited on, expires `within` from now instead (an expired one can be approved again until
/// then), and the audit log records an `AskedAgain` event naming the operation and `by`. What a
/// host does when an approval window passed unused, when it wants the run to go on rather than
/// end `Denied` on its next resume. One durable commit, from the state it read only.
///
/// ```
/// # use loopbound::journal::{self, MemoryJournal};
/// # use std::time::Duration;
/// # async fn demo(journal: MemoryJournal, outcome: loopbound::Outcome) -> Result<(), loopbound::journal::JournalError> {
/// let pending = outcome.pending().expect("a proposal waits");
/// if pending.is_expired() {
///     let renewed = journal::ask_again(&journal, pending, Duration::from_secs(3600), "ops-bot").await?;
///     assert!(!renewed.is_expired());
/// }
/// # Ok(())
/// # }
/// ```
///
/// # Errors
///
/// [`JournalError::InvalidActor`] for a bad name; [`JournalError::InvalidExpiry`] for a zero
/// window or one past the clock's range; [`JournalError::SignatureMismatch`] if the digest is
/// not the proposal's; [`JournalError::AlreadyDecided`]; [`JournalError::Finished`];
/// [`JournalError::LeaseHeld`] while an attempt holds the run; [`JournalError::Conflict`] unless
/// the run waits on this proposal; unknown run or operation; storage errors. Nothing is written
/// on any error.
pub async fn ask_again<J: Journal>(
    journal: &J,
    presented: impl Into<ProposalKey>,
    within: std::time::Duration,
    by: &str,
) -> Result<Proposal, JournalError> {
    let presented = presented.into();
    let operation = &presented.operation;
    if !valid_actor(by) {
        return Err(JournalError::InvalidActor);
    }
    let expires = codec::expiry_from_now(within);
    if within.is_zero() || expires == u64::MAX || codec::time_from_millis(expires).is_none() {
        return Err(JournalError::InvalidExpiry);
    }
    let ordinal = operation.ordinal();
    for _ in 0..TRIES {
        let record = inspect(journal, operation.run()).await?;
        let found = undecided(&record, ordinal, &presented.digest)?;
        if record.state() != RunState::AwaitingApproval(ordinal) {
            return Err(JournalError::Conflict("the run does not wait on this proposal".to_owned()));
        }
        idle(&record)?;
        let subject = crate::event::Subject::Tool(Arc::from(found.proposal().tool()));
        let event = ControlEvent::new(EventKind::AskedAgain, subject, ordinal)
            .on(operation.shared())
            .by(Arc::from(by));
        let batch = Batch {
            entries: vec![
                Entry::ExpectState(RunState::AwaitingApproval(ordinal)),
                Entry::Expiry(ExpiryRow { ordinal, expires }),
                Entry::Event(codec::encode_event(&event)),
            ],
        };
        match journal.commit(operation.run(), Fence::Host, batch).await {
            Err(JournalError::Conflict(_)) => {}
            Err(error) => return Err(error),
            Ok(()) => {
                let mut proposal = found.proposal().clone();
                proposal.expires = codec::time_from_millis(expires);
                return Ok(proposal);
            }
        }
    }
    Err(kept_changing())
}

/// Settles the ambiguous effect `operation` as `reconciler`: it ran, with this result, or it did
/// not run (the resume then starts it again, as it was decided).
///
/// An effect is ambiguous once its `started` record is committed without a result and the
/// attempt that started it holds the run no more (it stopped `Ambiguous`, or its process died
/// and its lease expired, or its store did not confirm a write before its deadline or its
/// caller's cancellation ([`EndRecord::Unconfirmed`](crate::EndRecord::Unconfirmed)) and its
/// lease expired, whether or not a later attempt took the run since). While that
/// attempt's lease is live, the body may be running: the command is refused with
/// [`JournalError::LeaseHeld`].
///
/// **When the host may say it did not run.** The journal knows only that the attempt's lease is
/// gone; a process paused inside the body (SIGSTOP, a long pause of its machine) may still apply
/// the effect later. Reconcile [`Resolution::NotRun`] only when the effect's own system shows
/// no effect under this operation's id and will refuse one from this attempt from now on: it
/// applies each operation id once (the body's idempotency key) or refuses a write whose epoch
/// ([`ToolContext::epoch`](crate::ToolContext)) is older than one it has seen. Without such a system, say it did
/// not run only once the attempt's process is known to be gone for good.
///
/// # Errors
///
/// [`JournalError::UnknownRun`] or [`JournalError::UnknownOperation`];
/// [`JournalError::NotAnEffect`] for a `read` or `idempotent` operation;
/// [`JournalError::NotAmbiguous`] unless its last start has neither result nor reconciliation;
/// [`JournalError::Finished`] for a run that ended (a host closed it);
/// [`JournalError::LeaseHeld`] while an attempt holds the run; [`JournalError::InvalidActor`]; a
/// storage error.
pub async fn reconcile<J: Journal>(
    journal: &J,
    operation: &OperationId,
    resolution: Resolution,
    reconciler: &str,
) -> Result<(), JournalError> {
    if !valid_actor(reconciler) {
        return Err(JournalError::InvalidActor);
    }
    for _ in 0..TRIES {
        let record = inspect(journal, operation.run()).await?;
        let found = record.operation(operation.ordinal()).ok_or(JournalError::UnknownOperation)?;
        if found.proposal().effect() != EffectKind::Effect {
            return Err(JournalError::NotAnEffect);
        }
        let OperationStatus::Started { start } = found.status() else {
            return Err(JournalError::NotAmbiguous);
        };
        if let RunState::Finished(status) = record.state() {
            return Err(JournalError::Finished(status));
        }
        idle(&record)?;
        let (name, result) = codec::encode_resolution(&resolution);
        let row = ReconciliationRow {
            ordinal: operation.ordinal(),
            start,
            resolution: name.to_owned(),
            result,
            by: reconciler.to_owned(),
        };
        let batch = settling(&record, RunState::Ambiguous(operation.ordinal()), Entry::Reconciliation(row));
        // A conflict is a reconciliation or a state written meanwhile: the next read tells which.
        match journal.commit(operation.run(), Fence::Host, batch).await {
            Err(JournalError::Conflict(_)) => {}
            other => return other,
        }
    }
    Err(kept_changing())
}
