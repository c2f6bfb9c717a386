//! The journaled course of a run: each step is replayed from the journal when it is recorded,
//! else taken live and recorded.
//!
//! # Invariants
//!
//! - A recorded model reply is replayed, never asked for again, and counts nothing again (the
//!   restored counters hold it). A recorded call result is replayed; its body does not run.
//! - Every admitted call of the loop gets a proposal before anything is decided or run; its
//!   operation id is `<run>/op/<tool count at admission>`.
//! - An `effect` or `idempotent` body starts only after its `started` record is committed, in the
//!   same commit as everything buffered before it (the replies, the read results, its proposal
//!   and decision); its result is committed right after it returns. If a commit fails, nothing
//!   more runs (fail closed).
//! - A `read` adds no commit of its own: its proposal, decision and result ride on the next one,
//!   and a read lost in a crash runs again.
//! - On resume, an `effect` started without a result and not reconciled is never run again: the
//!   run stops `Ambiguous` on it. An `idempotent` one is started again with the same key.

use std::sync::Arc;

use tokio::time::Instant;

use super::codec;
use super::error::JournalError;
use super::heartbeat;
use super::id::{OperationId, RunId};
use super::record::{
    CallResult, Decider, Decision, Operation, OperationStatus, Proposal, Resolution, RunState, Verdict,
};
use super::row::{Batch, CallRow, DecisionRow, Entry, Fence, ProposalRow, StartedRow};
use super::run_record::RunRecord;
use super::store::Journal;
use crate::event::{ControlEvent, EventKind, HaltReason, Subject};
use crate::guard::{Activity, Stop};
use crate::outcome::Status;
use crate::runtime::{Course, End, Runtime, Turn, error_message};
use crate::scope::Scope;
use crate::tool::{AdmittedCall, EffectKind, ErasedTool, Policy, ToolError};
use crate::transport::{Budgeted, Message, ModelReply, ToolCall, ToolDefinition, Transport};

/// One attempt of a journaled run.
pub(crate) struct Journaled<'j, J> {
    journal: &'j J,
    run: RunId,
    epoch: u64,
    record: RunRecord,
    pending: Batch,
    /// Events of the scope's log already in the journal.
    persisted: usize,
    /// The current reply's ordinal in the logical run.
    reply: u32,
    /// The run's state as the journal holds it.
    stored: RunState,
    /// The state the next commit records: `open`, or `ambiguous` on an effect whose body may
    /// be running, so that a crash leaves the run listed as ambiguous on it.
    state: RunState,
    /// When the last write that renewed the lease (the acquisition, a commit, a renewal)
    /// started.
    renewed: Instant,
}

impl<'j, J: Journal> Journaled<'j, J> {
    pub(crate) fn new(journal: &'j J, record: RunRecord, persisted: usize, acquired: Instant) -> Self {
        Self {
            journal,
            run: record.run.clone(),
            epoch: record.epoch,
            stored: record.state,
            record,
            pending: Batch::default(),
            persisted,
            reply: 0,
            state: RunState::Open,
            renewed: acquired,
        }
    }

    /// Runs `work` under the heartbeat ([`heartbeat::beating`]).
    async fn beating<F: std::future::Future>(&mut self, work: F) -> Result<F::Output, JournalError> {
        let mut renewed = self.renewed;
        let result = heartbeat::beating(self.journal, &self.run, self.epoch, &mut renewed, work).await;
        self.renewed = renewed;
        result
    }

    /// Commits everything buffered, with the scope's new events and counters and the run's
    /// state, under this attempt's epoch. With `end`, the commit records how the attempt ended
    /// and releases the run's lease: it is the attempt's last.
    pub(crate) async fn commit<S>(
        &mut self,
        scope: &Scope<S>,
        end: Option<RunState>,
    ) -> Result<(), JournalError> {
        let (counters, events) = scope.guard().counters_and_events(self.persisted);
        self.persisted += events.len();
        for event in &events {
            self.pending.push(Entry::Event(codec::encode_event(event)));
        }
        self.pending.push(Entry::Ledger(codec::encode_counters(&counters)));
        self.state = match (end, self.state) {
            // An attempt that stops without settling an effect it started leaves it ambiguous.
            (Some(RunState::Open), RunState::Ambiguous(ordinal)) => RunState::Ambiguous(ordinal),
            (Some(end), _) => end,
            (None, state) => state,
        };
        if self.state != self.stored {
            self.pending.push(Entry::State(self.state));
        }
        if end.is_some() {
            self.pending.push(Entry::Release);
        }
        let batch = std::mem::take(&mut self.pending);
        let started = Instant::now();
        self.journal.commit(&self.run, Fence::Epoch(self.epoch), batch).await?;
        self.stored = self.state;
        self.renewed = started;
        Ok(())
    }

    /// Buffers the answer to call `index` of the current reply.
    fn record_answer(&mut self, index: u32, operation: Option<u32>, answer: &Message) {
        if let Message::Tool { content, is_error, .. } = answer {
            self.pending.push(Entry::Call(CallRow {
                reply: self.reply,
                index,
                operation,
                is_error: *is_error,
                text: content.clone(),
            }));
            let result = CallResult { text: content.clone(), is_error: *is_error };
            if let Some(found) = operation.and_then(|ordinal| self.record.operations.get_mut(&ordinal)) {
                found.result = Some(result.clone());
            }
            self.record.calls.insert((self.reply, index), (operation, result));
        }
    }

    /// The logical run's record as this attempt knows it: the journal's, with this attempt's
    /// proposals, decisions, starts and results, committed or not yet.
    #[allow(
        dead_code,
        reason = "the completion condition's input, once `run_journaled` hands the record to it"
    )]
    pub(crate) fn record(&self) -> &RunRecord {
        &self.record
    }

    /// How many events of `kind` about `operation` the journal already holds.
    fn emitted(&self, kind: EventKind, operation: &str) -> usize {
        self.record.events.iter().filter(|e| e.kind() == kind && e.operation() == Some(operation)).count()
    }

    /// A call the journal knows nothing about: middleware, observers, binding, the guard, the
    /// proposal, the decision by policy, then the body.
    async fn live<T, S>(
        &mut self,
        runtime: &Runtime<T, S>,
        scope: &Scope<S>,
        index: u32,
        call: &ToolCall,
    ) -> Turn
    where
        T: Transport,
        S: Send + Sync + 'static,
    {
        let Some(tool) = runtime.tools().get(&call.name) else {
            let answer = error_message(call, &ToolError::not_found(&call.name));
            self.record_answer(index, None, &answer);
            return Turn::Answer(answer);
        };
        if let Err(stop) = runtime.observe_call(scope, tool.name(), call) {
            return Turn::End(End::Stopped(stop));
        }
        let (admitted, arguments) = match tool.admit_journaled(scope, &call.arguments) {
            Ok(admitted) => admitted,
            Err(ToolError::Stopped(stop)) => return Turn::End(End::Stopped(stop)),
            Err(error) => {
                let answer = error_message(call, &error);
                self.record_answer(index, None, &answer);
                return Turn::Answer(answer);
            }
        };
        let ordinal = admitted.count();
        let operation = self.run.operation(ordinal);
        let proposal = Proposal {
            operation: operation.clone(),
            reply: self.reply,
            index,
            tool: tool.name().to_string(),
            capability: tool.capability().to_owned(),
            effect: tool.effect(),
            arguments,
        };
        self.pending.push(Entry::Proposal(ProposalRow {
            ordinal,
            reply: self.reply,
            index,
            tool: proposal.tool.clone(),
            capability: proposal.capability.clone(),
            effect: proposal.effect.as_str().to_owned(),
            arguments: proposal.arguments.clone(),
        }));
        let known = Operation {
            proposal: proposal.clone(),
            decision: None,
            starts: 0,
            reconciliations: Vec::new(),
            result: None,
        };
        self.record.operations.insert(ordinal, known);
        let shared = operation.shared();
        let proposed =
            ControlEvent::new(EventKind::Proposed, Subject::Tool(Arc::clone(tool.name())), ordinal)
                .on(Arc::clone(&shared));
        if let Err(stop) = scope.guard().record(proposed) {
            return Turn::End(End::Stopped(stop));
        }
        match tool.policy() {
            Policy::Ask => awaiting(scope, tool.name(), proposal),
            Policy::Deny => self.deny(scope, tool.name(), ordinal, &shared, &Decider::Policy, true),
            Policy::Allow => {
                if let Err(stop) = self.allow(scope, tool.name(), ordinal, &shared, &Decider::Policy, true) {
                    return Turn::End(End::Stopped(stop));
                }
                self.execute(scope, tool, admitted, call, index, &operation, tool.effect(), 1).await
            }
        }
    }

    /// Notes a decision of this attempt in its record.
    fn decided(&mut self, ordinal: u32, verdict: Verdict, by: &Decider) {
        if let Some(found) = self.record.operations.get_mut(&ordinal) {
            found.decision = Some(Decision { verdict, by: by.clone() });
        }
    }

    /// Records an allowing decision (when `write`, its row too) and its event.
    fn allow<S>(
        &mut self,
        scope: &Scope<S>,
        tool: &Arc<str>,
        ordinal: u32,
        operation: &Arc<str>,
        by: &Decider,
        write: bool,
    ) -> Result<(), Stop> {
        if write {
            self.pending.push(Entry::Decision(DecisionRow {
                ordinal,
                verdict: Verdict::Allow.as_str().to_owned(),
                by: codec::encode_decider(by),
            }));
            self.decided(ordinal, Verdict::Allow, by);
        }
        let event = ControlEvent::new(EventKind::Allowed, Subject::Tool(Arc::clone(tool)), ordinal)
            .on(Arc::clone(operation))
            .by(Arc::from(by.describe()));
        scope.guard().record(event)
    }

    /// Records a denial (when `write`, its row too) as the run's halt.
    fn deny<S>(
        &mut self,
        scope: &Scope<S>,
        tool: &Arc<str>,
        ordinal: u32,
        operation: &Arc<str>,
        by: &Decider,
        write: bool,
    ) -> Turn {
        if write {
            self.pending.push(Entry::Decision(DecisionRow {
                ordinal,
                verdict: Verdict::Deny.as_str().to_owned(),
                by: codec::encode_decider(by),
            }));
            self.decided(ordinal, Verdict::Deny, by);
        }
        let event =
            ControlEvent::new(EventKind::Halt(HaltReason::Denied), Subject::Tool(Arc::clone(tool)), ordinal)
                .on(Arc::clone(operation))
                .by(Arc::from(by.describe()));
        Turn::End(End::Stopped(scope.guard().halt_with(HaltReason::Denied, event)))
    }

    /// Runs an allowed call's body as start number `start`: a read directly, an effect between
    /// its two commits.
    #[allow(clippy::too_many_arguments, reason = "one step of the protocol, with what it acts on")]
    async fn execute<S>(
        &mut self,
        scope: &Scope<S>,
        tool: &dyn ErasedTool<S>,
        admitted: Box<dyn AdmittedCall<S> + '_>,
        call: &ToolCall,
        index: u32,
        operation: &OperationId,
        effect: EffectKind,
        start: u32,
    ) -> Turn
    where
        S: Send + Sync + 'static,
    {
        let ordinal = operation.ordinal();
        let shared = operation.shared();
        let name = tool.name();
        let durable = effect != EffectKind::Read;
        if durable {
            if effect == EffectKind::Effect {
                self.state = RunState::Ambiguous(ordinal);
            }
            self.pending.push(Entry::Started(StartedRow { ordinal, start }));
            if let Some(found) = self.record.operations.get_mut(&ordinal) {
                found.starts = start;
            }
            let started =
                ControlEvent::new(EventKind::EffectStarted, Subject::Tool(Arc::clone(name)), ordinal)
                    .on(Arc::clone(&shared));
            if let Err(stop) = scope.guard().record(started) {
                return Turn::End(End::Stopped(stop));
            }
            if let Err(error) = self.commit(scope, None).await {
                return Turn::End(End::Journal(error));
            }
        }
        let body = match admitted.start(scope, Arc::clone(&shared)) {
            Ok(body) => body,
            Err(ToolError::Stopped(stop)) => return Turn::End(End::Stopped(stop)),
            Err(error) => return Turn::Answer(error_message(call, &error)),
        };
        let guard = scope.guard();
        let output = match guard.bounded(Activity::Tool(name), self.beating(body)).await {
            Ok(Ok(output)) => output,
            Ok(Err(lost)) => return Turn::End(End::Journal(lost)),
            Err(stop) => return Turn::End(End::Stopped(stop)),
        };
        let answer = match output {
            Ok(text) => Message::tool_result(call.id.clone(), text),
            Err(source) => error_message(call, &ToolError::Failed { tool: Arc::clone(name), source }),
        };
        self.record_answer(index, Some(ordinal), &answer);
        if durable {
            let recorded =
                ControlEvent::new(EventKind::EffectRecorded, Subject::Tool(Arc::clone(name)), ordinal)
                    .on(shared);
            // The result is committed whatever the scope says now: it happened.
            guard.append(recorded);
            self.state = RunState::Open;
            if let Err(error) = self.commit(scope, None).await {
                return Turn::End(End::Journal(error));
            }
        }
        match guard.check(Activity::Tool(name)) {
            Ok(()) => Turn::Answer(answer),
            Err(stop) => Turn::End(End::Stopped(stop)),
        }
    }

    /// A call whose operation an earlier attempt proposed: continue it where the journal left it.
    async fn resume_operation<T, S>(
        &mut self,
        runtime: &Runtime<T, S>,
        scope: &Scope<S>,
        index: u32,
        call: &ToolCall,
        operation: Operation,
    ) -> Turn
    where
        T: Transport,
        S: Send + Sync + 'static,
    {
        let proposal = operation.proposal();
        let id = proposal.operation().clone();
        let ordinal = id.ordinal();
        let shared = id.shared();
        let Some(tool) = runtime.tools().get(proposal.tool()) else {
            return Turn::End(End::Journal(JournalError::ToolMismatch(format!(
                "no tool {} for {id}",
                proposal.tool()
            ))));
        };
        let name = Arc::clone(tool.name());
        let status = operation.status();
        if let OperationStatus::Settled(result) = &status {
            return self.settled(scope, index, call, &name, &id, result);
        }
        let Ok(Some(admitted)) = tool.readmit(&call.arguments, &proposal.signature(), ordinal) else {
            return Turn::End(End::Journal(JournalError::ToolMismatch(format!("{id} binds differently"))));
        };
        let decision_event = |verdict| match verdict {
            Verdict::Allow => EventKind::Allowed,
            Verdict::Deny => EventKind::Halt(HaltReason::Denied),
        };
        if let Some(decision) = operation.decision() {
            let seen = self.emitted(decision_event(decision.verdict()), &shared) > 0;
            if decision.verdict() == Verdict::Deny {
                return self.deny(scope, &name, ordinal, &shared, decision.by(), false);
            }
            if !seen && let Err(stop) = self.allow(scope, &name, ordinal, &shared, decision.by(), false) {
                return Turn::End(End::Stopped(stop));
            }
        }
        match status {
            OperationStatus::AwaitingDecision => match tool.policy() {
                Policy::Ask => awaiting(scope, &name, proposal.clone()),
                Policy::Deny => self.deny(scope, &name, ordinal, &shared, &Decider::Policy, true),
                Policy::Allow => {
                    if let Err(stop) = self.allow(scope, &name, ordinal, &shared, &Decider::Policy, true) {
                        return Turn::End(End::Stopped(stop));
                    }
                    self.execute(scope, tool, admitted, call, index, &id, proposal.effect(), 1).await
                }
            },
            OperationStatus::Ready { start } => {
                if start > 1
                    && let Err(stop) = self.reconciled(scope, &name, &id, &operation, start - 1)
                {
                    return Turn::End(End::Stopped(stop));
                }
                self.execute(scope, tool, admitted, call, index, &id, proposal.effect(), start).await
            }
            OperationStatus::Started { start } if proposal.effect() == EffectKind::Idempotent => {
                self.execute(scope, tool, admitted, call, index, &id, proposal.effect(), start + 1).await
            }
            OperationStatus::Started { .. } => Turn::End(End::Suspended(Status::Ambiguous, shared)),
            // Denied and settled operations were handled above.
            _ => Turn::End(End::Journal(JournalError::Corrupt(format!("{id} cannot be continued")))),
        }
    }

    /// Records, once, the event of the host's reconciliation of start `start`.
    fn reconciled<S>(
        &self,
        scope: &Scope<S>,
        name: &Arc<str>,
        id: &OperationId,
        operation: &Operation,
        start: u32,
    ) -> Result<(), Stop> {
        let shared = id.shared();
        let position = operation.reconciliations().iter().position(|r| r.start() == start).unwrap_or(0);
        if self.emitted(EventKind::Reconciled, &shared) > position {
            return Ok(());
        }
        let by = operation.reconciled(start).map_or("host", |r| r.by());
        let event = ControlEvent::new(EventKind::Reconciled, Subject::Tool(Arc::clone(name)), id.ordinal())
            .on(shared)
            .by(Arc::from(by));
        scope.guard().record(event)
    }

    /// An operation whose result is known (reconciled as run): the model gets it, nothing runs.
    fn settled<S>(
        &mut self,
        scope: &Scope<S>,
        index: u32,
        call: &ToolCall,
        name: &Arc<str>,
        id: &OperationId,
        result: &CallResult,
    ) -> Turn {
        let operation = self.record.operation(id.ordinal()).cloned();
        if let Some(operation) = operation
            && let Some(last) = operation.reconciliations().last()
            && matches!(last.resolution(), Resolution::Ran { .. })
            && let Err(stop) = self.reconciled(scope, name, id, &operation, last.start())
        {
            return Turn::End(End::Stopped(stop));
        }
        let answer = answer_of(call, result);
        self.record_answer(index, Some(id.ordinal()), &answer);
        Turn::Answer(answer)
    }
}

/// The run stops on `proposal`, which waits for the host's decision: its `AwaitingApproval`
/// event, then the end that hands the proposal out.
fn awaiting<S>(scope: &Scope<S>, tool: &Arc<str>, proposal: Proposal) -> Turn {
    let event = ControlEvent::new(
        EventKind::AwaitingApproval,
        Subject::Tool(Arc::clone(tool)),
        proposal.operation.ordinal(),
    )
    .on(proposal.operation.shared());
    match scope.guard().record(event) {
        Ok(()) => Turn::End(End::Awaiting(Box::new(proposal))),
        Err(stop) => Turn::End(End::Stopped(stop)),
    }
}

/// The message a recorded result gives the model.
fn answer_of(call: &ToolCall, result: &CallResult) -> Message {
    if result.is_error() {
        Message::tool_error(call.id.clone(), result.text())
    } else {
        Message::tool_result(call.id.clone(), result.text())
    }
}

impl<T, S, J> Course<T, S> for Journaled<'_, J>
where
    T: Transport,
    S: Send + Sync + 'static,
    J: Journal,
{
    async fn reply(
        &mut self,
        runtime: &Runtime<T, S>,
        model: &Budgeted<'_, T>,
        conversation: &[Message],
        tools: &[ToolDefinition],
    ) -> Result<ModelReply, End> {
        self.reply += 1;
        let recorded = usize::try_from(self.reply - 1).ok().and_then(|i| self.record.replies.get(i));
        if let Some(recorded) = recorded {
            return Ok(recorded.clone());
        }
        let call = runtime.call_model(model, conversation, tools);
        let reply = self.beating(call).await.map_err(End::Journal)??;
        self.pending.push(Entry::Reply(super::row::ReplyRow {
            ordinal: self.reply,
            reply: codec::encode_reply(&reply),
        }));
        Ok(reply)
    }

    async fn tool(
        &mut self,
        runtime: &Runtime<T, S>,
        scope: &Scope<S>,
        index: usize,
        call: &ToolCall,
    ) -> Turn {
        let Ok(index) = u32::try_from(index) else {
            return Turn::End(End::Journal(JournalError::Corrupt("a reply with too many calls".to_owned())));
        };
        if let Some((_, result)) = self.record.calls.get(&(self.reply, index)) {
            return Turn::Answer(answer_of(call, result));
        }
        if let Some(operation) = self.record.operation_at(self.reply, index).cloned() {
            return self.resume_operation(runtime, scope, index, call, operation).await;
        }
        self.live(runtime, scope, index, call).await
    }
}
