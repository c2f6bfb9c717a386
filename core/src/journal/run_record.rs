//! A run as the journal holds it, decoded from its rows and checked for consistency before
//! anything acts on it.
//!
//! # Invariants
//!
//! - [`RunRecord::decode`] never panics and accepts only consistent rows: replies numbered
//!   1, 2, … without a gap; every call result, proposal, decision, start and reconciliation
//!   referring to something that exists; starts only for allowed, non-`read` operations and
//!   numbered 1, 2, …; reconciliations only of starts; counters at least what the rows show.
//!   Anything else is [`Corrupt`](JournalError::Corrupt), and a run whose record is corrupt runs
//!   no effect.

use std::collections::BTreeMap;

use super::codec;
use super::definition::RunDefinition;
use super::error::JournalError;
use super::id::RunId;
use super::label::Labels;
use super::record::{
    CallResult, Decision, Operation, OperationStatus, Proposal, Reconciliation, RunState, Verdict,
};
use super::row::{Lease, StoredRun};
use crate::event::ControlEvent;
use crate::guard::Counters;
use crate::spend::{Account, Spend};
use crate::tool::EffectKind;
use crate::transport::{Message, ModelReply};

/// Everything a journal holds about one run, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunRecord {
    pub(crate) run: RunId,
    pub(crate) epoch: u64,
    pub(crate) attempts: u32,
    pub(crate) conversation: Vec<Message>,
    pub(crate) counters: Counters,
    pub(crate) state: RunState,
    pub(crate) lease: Option<Lease>,
    pub(crate) definition: Option<RunDefinition>,
    pub(crate) labels: Labels,
    pub(crate) replies: Vec<ModelReply>,
    pub(crate) calls: Calls,
    pub(crate) operations: BTreeMap<u32, Operation>,
    pub(crate) events: Vec<ControlEvent>,
}

/// Recorded call results by `(reply, index)`, with the operation of each admitted call.
pub(crate) type Calls = BTreeMap<(u32, u32), (Option<u32>, CallResult)>;

fn corrupt(what: &str) -> JournalError {
    JournalError::Corrupt(what.to_owned())
}

impl RunRecord {
    /// Decodes and checks `stored`, the rows of `run`.
    ///
    /// # Errors
    ///
    /// [`JournalError::Corrupt`] naming the first row or field that does not decode or does not
    /// fit with the others.
    pub fn decode(run: &RunId, stored: &StoredRun) -> Result<Self, JournalError> {
        let replies = stored
            .replies
            .iter()
            .zip(1u32..)
            .map(|(row, expected)| {
                if row.ordinal != expected {
                    return Err(corrupt("the replies are not numbered 1, 2, …"));
                }
                codec::decode_reply(&row.reply)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut operations = proposals(run, stored, &replies)?;
        decisions_and_starts(stored, &mut operations)?;
        let calls = calls(stored, &replies, &mut operations)?;

        let counters = codec::decode_counters(&stored.run.ledger)?;
        let highest = operations.keys().next_back().copied().unwrap_or(0);
        let replies_len = u32::try_from(replies.len()).map_err(|_| corrupt("too many replies"))?;
        if counters.tool_calls < highest || counters.model_calls < replies_len {
            return Err(corrupt("counters below what the rows show"));
        }
        let state = stored.run.state;
        if let RunState::AwaitingApproval(ordinal) | RunState::Ambiguous(ordinal) = state
            && !operations.contains_key(&ordinal)
        {
            return Err(corrupt("the run's state names an unknown operation"));
        }
        let events = stored.events.iter().map(codec::decode_event).collect::<Result<Vec<_>, _>>()?;
        if stored.run.attempts == 0 || stored.run.epoch == 0 {
            return Err(corrupt("the run's epoch or attempts"));
        }
        if stored.lease.as_ref().is_some_and(|lease| !super::record::valid_actor(&lease.holder)) {
            return Err(corrupt("the lease's holder"));
        }
        let labels = Labels::from_rows(&stored.run.labels)?;
        let definition = codec::decode_definition(&stored.run.definition, labels.clone())?;
        Ok(Self {
            run: run.clone(),
            epoch: stored.run.epoch,
            attempts: stored.run.attempts,
            conversation: codec::decode_conversation(&stored.run.conversation)?,
            counters,
            state,
            lease: stored.lease.clone(),
            definition,
            labels,
            replies,
            calls,
            operations,
            events,
        })
    }

    /// The run's id.
    #[must_use]
    pub fn run(&self) -> &RunId {
        &self.run
    }

    /// How many attempts took the run.
    #[must_use]
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The newest attempt's epoch: the fencing token of the attempt that holds, or last held,
    /// the run.
    #[must_use]
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Where the run stands, as stored.
    #[must_use]
    pub fn state(&self) -> RunState {
        self.state
    }

    /// The run's lease, unless its last attempt released it: who holds it, until when, and
    /// whether it was live when the record was read (an attempt may be running the run).
    #[must_use]
    pub fn lease(&self) -> Option<&Lease> {
        self.lease.as_ref()
    }

    /// Whether an attempt held a live lease on the run when the record was read.
    #[must_use]
    pub fn is_running(&self) -> bool {
        self.lease.as_ref().is_some_and(Lease::is_live)
    }

    /// What the run was started with (grants, limits, labels), or `None` for a run journaled
    /// before definitions were stored.
    #[must_use]
    pub fn definition(&self) -> Option<&RunDefinition> {
        self.definition.as_ref()
    }

    /// The host's labels.
    #[must_use]
    pub fn labels(&self) -> &Labels {
        &self.labels
    }

    /// The proposal the run stopped on, which waits for the host's decision, if any.
    #[must_use]
    pub fn pending(&self) -> Option<&Proposal> {
        let RunState::AwaitingApproval(ordinal) = self.state else { return None };
        let operation = self.operations.get(&ordinal)?;
        (operation.status() == OperationStatus::AwaitingDecision).then_some(&operation.proposal)
    }

    /// The operation with this ordinal.
    #[must_use]
    pub fn operation(&self, ordinal: u32) -> Option<&Operation> {
        self.operations.get(&ordinal)
    }

    /// Every operation, by ordinal.
    pub fn operations(&self) -> impl Iterator<Item = &Operation> {
        self.operations.values()
    }

    /// The audit log as committed.
    #[must_use]
    pub fn events(&self) -> &[ControlEvent] {
        &self.events
    }

    /// How many model replies are recorded.
    #[must_use]
    pub fn replies(&self) -> usize {
        self.replies.len()
    }

    /// Model calls counted for the logical run.
    #[must_use]
    pub fn model_calls(&self) -> u32 {
        self.counters.model_calls
    }

    /// Tool calls counted for the logical run.
    #[must_use]
    pub fn tool_calls(&self) -> u32 {
        self.counters.tool_calls
    }

    /// What the logical run spent as its last commit recorded it: settled tokens and money,
    /// and, in [`Spend::reserved`], the reservations of model calls that were in flight then.
    /// A run whose attempt died during a call shows that call's reservation here; the next
    /// attempt charges it whole (its provider may have billed it).
    #[must_use]
    pub fn spend(&self) -> Spend {
        let (settled, cost, reserved, over) = self.counters.spend;
        let unlimited = crate::limits::Limits::default();
        let limits = self.definition.as_ref().map_or(&unlimited, |definition| &definition.limits);
        Account::from_parts(settled, cost, reserved, over).report(limits)
    }

    /// Every call that succeeded in the logical run, in every attempt, by operation: the tool's
    /// name and its result's text. A call succeeded when its result was recorded without an
    /// error, or when the host reconciled it as run. This is what a completion condition reads
    /// so that a run resumed after its effect ran (in another process, where the body that set
    /// host memory never ran) is judged by what happened, not by what this process saw.
    ///
    /// ```
    /// # fn check(record: &loopbound::journal::RunRecord) -> bool {
    /// // "The refund was made": true in every attempt after the refund's result was recorded.
    /// record.succeeded().any(|(tool, _)| tool == "refund")
    /// # }
    /// ```
    pub fn succeeded(&self) -> impl Iterator<Item = (&str, &str)> {
        self.operations
            .values()
            .filter_map(|operation| Some((operation.proposal.tool(), operation.succeeded()?)))
    }

    /// The operation proposed for call `index` of reply `reply`, if any.
    pub(crate) fn operation_at(&self, reply: u32, index: u32) -> Option<&Operation> {
        self.operations.values().find(|o| o.proposal.reply == reply && o.proposal.index == index)
    }
}

/// The call of `replies` at `(reply, index)`, if it exists.
fn call_at(replies: &[ModelReply], reply: u32, index: u32) -> Option<&crate::transport::ToolCall> {
    let reply = usize::try_from(reply).ok()?.checked_sub(1)?;
    replies.get(reply)?.tool_calls.get(usize::try_from(index).ok()?)
}

/// The proposals, each on a call of a recorded reply, in the replies' order.
fn proposals(
    run: &RunId,
    stored: &StoredRun,
    replies: &[ModelReply],
) -> Result<BTreeMap<u32, Operation>, JournalError> {
    let mut operations = BTreeMap::new();
    for row in &stored.proposals {
        let call = call_at(replies, row.reply, row.index).ok_or_else(|| corrupt("a proposal's call"))?;
        if row.ordinal == 0 || call.name != row.tool {
            return Err(corrupt("a proposal's operation or tool"));
        }
        let proposal = Proposal {
            operation: run.operation(row.ordinal),
            reply: row.reply,
            index: row.index,
            tool: row.tool.clone(),
            capability: row.capability.clone(),
            effect: codec::decode_effect(&row.effect)?,
            arguments: row.arguments.clone(),
            expires: row.expires.and_then(codec::time_from_millis),
        };
        let operation =
            Operation { proposal, decision: None, starts: 0, reconciliations: Vec::new(), result: None };
        if operations.insert(row.ordinal, operation).is_some() {
            return Err(corrupt("two proposals for one operation"));
        }
    }
    let places: Vec<(u32, u32)> = operations.values().map(|o| (o.proposal.reply, o.proposal.index)).collect();
    if places.windows(2).any(|pair| pair[0] >= pair[1]) {
        return Err(corrupt("proposals out of the replies' order"));
    }
    Ok(operations)
}

/// The decisions, starts and reconciliations, each of an operation that allows it.
fn decisions_and_starts(
    stored: &StoredRun,
    operations: &mut BTreeMap<u32, Operation>,
) -> Result<(), JournalError> {
    for row in &stored.decisions {
        let operation = operations.get_mut(&row.ordinal).ok_or_else(|| corrupt("a decision's operation"))?;
        if operation.decision.is_some() {
            return Err(corrupt("two decisions for one operation"));
        }
        operation.decision = Some(Decision {
            verdict: codec::decode_verdict(&row.verdict)?,
            by: codec::decode_decider(&row.by)?,
        });
    }
    for row in &stored.started {
        let operation = operations.get_mut(&row.ordinal).ok_or_else(|| corrupt("a start's operation"))?;
        let allowed = operation.decision.as_ref().is_some_and(|d| d.verdict == Verdict::Allow);
        if !allowed || operation.proposal.effect == EffectKind::Read || row.start != operation.starts + 1 {
            return Err(corrupt("a start that was not allowed or not in order"));
        }
        operation.starts = row.start;
    }
    for row in &stored.reconciliations {
        let operation =
            operations.get_mut(&row.ordinal).ok_or_else(|| corrupt("a reconciliation's operation"))?;
        if row.start == 0 || row.start > operation.starts || operation.reconciled(row.start).is_some() {
            return Err(corrupt("a reconciliation of a start that does not exist"));
        }
        let resolution = codec::decode_resolution(&row.resolution, row.result.as_deref())?;
        operation.reconciliations.push(Reconciliation {
            start: row.start,
            resolution,
            by: codec::decode_actor(&row.by)?,
        });
    }
    Ok(())
}

/// The call results, each on a call of a recorded reply, and those of operations on theirs.
fn calls(
    stored: &StoredRun,
    replies: &[ModelReply],
    operations: &mut BTreeMap<u32, Operation>,
) -> Result<Calls, JournalError> {
    let mut calls = BTreeMap::new();
    for row in &stored.calls {
        call_at(replies, row.reply, row.index).ok_or_else(|| corrupt("a call result's call"))?;
        let result = CallResult { text: row.text.clone(), is_error: row.is_error };
        if let Some(ordinal) = row.operation {
            let operation =
                operations.get_mut(&ordinal).ok_or_else(|| corrupt("a call result's operation"))?;
            let same_call = (operation.proposal.reply, operation.proposal.index) == (row.reply, row.index);
            let allowed = operation.decision.as_ref().is_some_and(|d| d.verdict == Verdict::Allow);
            if !same_call || !allowed || operation.result.is_some() {
                return Err(corrupt("a call result that does not fit its operation"));
            }
            operation.result = Some(result.clone());
        }
        if calls.insert((row.reply, row.index), (row.operation, result)).is_some() {
            return Err(corrupt("two results for one call"));
        }
    }
    Ok(calls)
}
