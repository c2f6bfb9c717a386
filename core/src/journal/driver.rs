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
//! - Under a spend budget or a pool, a model call's reservation is committed after its
//!   admission and before its request is sent, with everything buffered before it (the reply
//!   before, read results): one commit per model call, none without a budget or a pool. A
//!   crash during the call leaves the reservation in the journal, and the resume charges it
//!   whole (its provider may have billed it). A reply is committed with the counters that
//!   settle it, so a replayed reply is never charged again. A commit that fails withdraws the
//!   call unsent.

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio::time::Instant;

use super::bound::{Canceller, Failed, Store};
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
use super::tail::Tail;
use crate::budgeted::Budgeted;
use crate::event::{ControlEvent, EventKind, HaltReason, Subject};
use crate::guard::{Guard, Stop};
use crate::outcome::Status;
use crate::runner::{Admission, Course, End, Pending, Runner, Turn, answer_of, error_message, failed};
use crate::scope::Scope;
use crate::tool::{AdmittedCall, BodyError, EffectKind, ErasedTool, Policy, Refusal, ToolError};
use crate::transport::{Message, ModelReply, ToolCall, ToolDefinition, Transport};

/// One attempt of a journaled run.
pub(crate) struct Journaled<'j, J> {
    store: Store<'j, J>,
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
    /// The `effect` operations whose bodies started in this attempt and have no result yet.
    in_flight: BTreeSet<u32>,
    /// When the last write that renewed the lease (the acquisition, a commit, a renewal)
    /// started.
    renewed: Instant,
    /// Effects' results buffered and not committed yet.
    unsettled: bool,
    /// The run's recorded stream, if it records one: its steps numbered as they happen, each
    /// committed with the attempt's next commit.
    tail: Option<Arc<Tail>>,
}

impl<'j, J: Journal> Journaled<'j, J> {
    pub(crate) fn new(
        store: Store<'j, J>,
        record: RunRecord,
        persisted: usize,
        acquired: Instant,
        tail: Option<Arc<Tail>>,
    ) -> Self {
        Self {
            store,
            run: record.run.clone(),
            epoch: record.epoch,
            stored: record.state,
            record,
            pending: Batch::default(),
            persisted,
            reply: 0,
            state: RunState::Open,
            in_flight: BTreeSet::new(),
            renewed: acquired,
            unsettled: false,
            tail,
        }
    }

    /// Runs `work` under the heartbeat ([`heartbeat::beating`]).
    async fn beating<F: std::future::Future>(&mut self, work: F) -> Result<F::Output, JournalError> {
        let mut renewed = self.renewed;
        let result = heartbeat::beating(&self.store, &self.run, self.epoch, &mut renewed, work).await;
        self.renewed = renewed;
        result
    }

    /// Commits everything buffered, with the scope's new events and counters and the run's
    /// state, under this attempt's epoch. With `end`, the commit records how the attempt ended
    /// and releases the run's lease: it is the attempt's last.
    pub(crate) async fn commit<S>(&mut self, scope: &Scope<S>, end: Option<RunState>) -> Result<(), Failed> {
        self.commit_guard(scope.guard(), end).await
    }

    /// Whether a write of this attempt was given up unconfirmed (see [`Store`]).
    pub(crate) fn is_unconfirmed(&self) -> bool {
        self.store.is_unconfirmed()
    }

    /// A handle that asks this attempt's journal for cancel requests beside its course.
    pub(crate) fn canceller(&self) -> Canceller<'j, J> {
        self.store.canceller()
    }

    /// Asks the journal, bounded, who requested to cancel this run, if someone did.
    pub(crate) async fn cancel_requested(&self, guard: &Guard) -> Option<String> {
        self.store.cancel_requested(guard, &self.run).await
    }

    /// [`commit`](Self::commit), from the scope's guard.
    async fn commit_guard(&mut self, guard: &Guard, end: Option<RunState>) -> Result<(), Failed> {
        let (counters, events) = guard.counters_and_events(self.persisted);
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
        let lines = self.tail.as_ref().map(|tail| tail.uncommitted()).unwrap_or_default();
        let last_line = lines.last().map(|row| row.seq);
        self.pending.entries.extend(lines.into_iter().map(Entry::Update));
        if end.is_some() {
            self.pending.push(Entry::Release);
        }
        let batch = std::mem::take(&mut self.pending);
        let started = Instant::now();
        self.store.commit(guard, &self.run, Fence::Epoch(self.epoch), batch).await?;
        self.stored = self.state;
        self.renewed = started;
        if let (Some(tail), Some(last)) = (&self.tail, last_line) {
            tail.committed(last);
        }
        Ok(())
    }

    /// Records that this attempt ended on `by`'s cancel request: a `Cancelled` event naming
    /// them, and the request cleared, both in the attempt's last commit.
    pub(crate) fn honour_cancel<S>(&mut self, scope: &Scope<S>, by: &str) {
        let event =
            ControlEvent::new(EventKind::Cancelled, Subject::Run, self.record.attempts).by(Arc::from(by));
        scope.guard().append(event);
        self.pending.push(Entry::CancelHonoured);
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
    pub(crate) fn record(&self) -> &RunRecord {
        &self.record
    }

    /// How many events of `kind` about `operation` the journal already holds.
    fn emitted(&self, kind: EventKind, operation: &str) -> usize {
        self.record.events.iter().filter(|e| e.kind() == kind && e.operation() == Some(operation)).count()
    }

    /// A call the journal knows nothing about: middleware, observers, binding, the guard, the
    /// proposal, the decision by policy; an allowed call comes back to be run.
    fn live<'t, T, S>(
        &mut self,
        runtime: &'t Runner<T, S>,
        scope: &Scope<S>,
        index: u32,
        call: &ToolCall,
        deferring: bool,
    ) -> Admission<'t, S, Plan>
    where
        T: Transport,
        S: Send + Sync + 'static,
    {
        let Some(tool) = runtime.tools().get(&call.name) else {
            let answer = error_message(call, &ToolError::not_found(&call.name));
            self.record_answer(index, None, &answer);
            return Admission::Done(failed(scope, None, answer));
        };
        if let Err(stop) = runtime.observe_call(scope, tool.name(), call) {
            return Admission::Done(Turn::End(End::Stopped(stop)));
        }
        let (admitted, arguments) = match tool.admit_journaled(scope, &call.arguments, deferring) {
            Ok(admitted) => admitted,
            Err(Refusal::Deferred(deferred)) => return Admission::Refused(deferred),
            Err(Refusal::Tool(ToolError::Stopped(stop))) => {
                return Admission::Done(Turn::End(End::Stopped(stop)));
            }
            Err(Refusal::Tool(error)) => {
                let answer = error_message(call, &error);
                self.record_answer(index, None, &answer);
                if matches!(error, ToolError::Bind(_)) {
                    return Admission::Done(failed(scope, Some(tool.name()), answer));
                }
                return Admission::Done(Turn::Answer(answer));
            }
        };
        let ordinal = admitted.count();
        let operation = self.run.operation(ordinal);
        let expires = tool.policy().expiry().map(codec::expiry_from_now);
        let proposal = Proposal {
            operation: operation.clone(),
            reply: self.reply,
            index,
            tool: tool.name().to_string(),
            capability: tool.capability().to_owned(),
            effect: tool.effect(),
            arguments,
            expires: expires.and_then(codec::time_from_millis),
        };
        self.pending.push(Entry::Proposal(ProposalRow {
            ordinal,
            reply: self.reply,
            index,
            tool: proposal.tool.clone(),
            capability: proposal.capability.clone(),
            effect: proposal.effect.as_str().to_owned(),
            arguments: proposal.arguments.clone(),
            expires,
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
            return Admission::Done(Turn::End(End::Stopped(stop)));
        }
        match tool.policy() {
            Policy::Ask | Policy::AskWithin(_) => Admission::Done(awaiting(scope, tool.name(), proposal)),
            Policy::Deny => {
                Admission::Done(self.deny(scope, tool.name(), ordinal, &shared, &Decider::Policy, true))
            }
            Policy::Allow => {
                if let Err(stop) = self.allow(scope, tool.name(), ordinal, &shared, &Decider::Policy, true) {
                    return Admission::Done(Turn::End(End::Stopped(stop)));
                }
                run(tool, admitted, index, &operation, tool.effect(), 1)
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

    /// Halts the run instead of continuing operation `ordinal` of `tool`, because what allowed
    /// it no longer holds (`stale`): nothing of it runs, and the audit log says why.
    fn stale<S>(scope: &Scope<S>, tool: &Arc<str>, ordinal: u32, operation: &Arc<str>, stale: Stale) -> Turn {
        let (reason, by) = match stale {
            Stale::Grant => (HaltReason::PermissionDenied, "recheck: capability not granted"),
            Stale::Policy => (HaltReason::Denied, "recheck: policy deny"),
            Stale::InputCheck => (HaltReason::Denied, "recheck: input check"),
            Stale::Expired => (HaltReason::Denied, "recheck: approval expired"),
        };
        let event = ControlEvent::new(EventKind::Halt(reason), Subject::Tool(Arc::clone(tool)), ordinal)
            .on(Arc::clone(operation))
            .by(Arc::from(by));
        Turn::End(End::Stopped(scope.guard().halt_with(reason, event)))
    }

    /// Before allowed bodies start: each effect's `started` record and event, then one commit
    /// for all of them, with everything buffered before. Reads need none.
    async fn before<S>(&mut self, scope: &Scope<S>, plans: &[&Plan]) -> Result<(), End> {
        let mut durable = false;
        for plan in plans.iter().filter(|plan| plan.effect != EffectKind::Read) {
            durable = true;
            if plan.effect == EffectKind::Effect {
                self.in_flight.insert(plan.ordinal);
                if let Some(&first) = self.in_flight.first() {
                    self.state = RunState::Ambiguous(first);
                }
            }
            self.pending.push(Entry::Started(StartedRow { ordinal: plan.ordinal, start: plan.start }));
            if let Some(found) = self.record.operations.get_mut(&plan.ordinal) {
                found.starts = plan.start;
            }
            let started = ControlEvent::new(
                EventKind::EffectStarted,
                Subject::Tool(Arc::clone(&plan.tool)),
                plan.ordinal,
            )
            .on(Arc::clone(&plan.operation));
            scope.guard().record(started).map_err(End::Stopped)?;
        }
        if durable {
            self.commit(scope, None).await.map_err(ended)?;
        }
        Ok(())
    }

    /// The answer a body's output gives the model, buffered; an effect's result event too (its
    /// commit comes with [`settle`](Self::settle)).
    fn record_output<S>(
        &mut self,
        scope: &Scope<S>,
        call: &ToolCall,
        plan: Plan,
        output: Result<String, BodyError>,
    ) -> Message {
        let answer = answer_of(call, &plan.tool, output);
        self.record_answer(plan.index, Some(plan.ordinal), &answer);
        if plan.effect != EffectKind::Read {
            let recorded =
                ControlEvent::new(EventKind::EffectRecorded, Subject::Tool(plan.tool), plan.ordinal)
                    .on(plan.operation);
            // The result is committed whatever the scope says now: it happened.
            scope.guard().append(recorded);
            self.unsettled = true;
            self.in_flight.remove(&plan.ordinal);
            self.state =
                self.in_flight.first().map_or(RunState::Open, |&ordinal| RunState::Ambiguous(ordinal));
        }
        answer
    }

    /// Commits the effects' results buffered since the last commit.
    async fn settle_results<S>(&mut self, scope: &Scope<S>) -> Result<(), End> {
        if std::mem::take(&mut self.unsettled) {
            self.commit(scope, None).await.map_err(ended)?;
        }
        Ok(())
    }

    /// Asks the journal whether a host requested, from any process, to cancel this run; if so,
    /// the scope is cancelled as its caller would cancel it. A journal that cannot tell, or
    /// fails to, changes nothing.
    async fn steer(&self, guard: &Guard) {
        if self.store.is_requested(guard, &self.run).await {
            guard.cancel_as_caller();
        }
    }

    /// A call whose operation an earlier attempt proposed: continue it where the journal left it.
    fn resume_operation<'t, T, S>(
        &mut self,
        runtime: &'t Runner<T, S>,
        scope: &Scope<S>,
        index: u32,
        call: &ToolCall,
        operation: &Operation,
    ) -> Admission<'t, S, Plan>
    where
        T: Transport,
        S: Send + Sync + 'static,
    {
        let proposal = operation.proposal();
        let id = proposal.operation().clone();
        let ordinal = id.ordinal();
        let shared = id.shared();
        let journal = |error| Admission::Done(Turn::End(End::Journal(error)));
        let Some(tool) = runtime.tools().get(proposal.tool()) else {
            return journal(JournalError::ToolMismatch(format!("no tool {} for {id}", proposal.tool())));
        };
        let name = Arc::clone(tool.name());
        let status = operation.status();
        if let OperationStatus::Settled(result) = &status {
            return Admission::Done(self.settled(scope, index, call, &name, &id, result));
        }
        let readmitted = match tool.readmit(&call.arguments, &proposal.signature(), ordinal) {
            Ok(None) => return journal(JournalError::ToolMismatch(format!("{id} binds differently"))),
            Ok(Some(admitted)) => Some(admitted),
            Err(_) => None,
        };
        let decision_event = |verdict| match verdict {
            Verdict::Allow => EventKind::Allowed,
            Verdict::Deny => EventKind::Halt(HaltReason::Denied),
        };
        if let Some(decision) = operation.decision() {
            let seen = self.emitted(decision_event(decision.verdict()), &shared) > 0;
            if decision.verdict() == Verdict::Deny {
                return Admission::Done(self.deny(scope, &name, ordinal, &shared, decision.by(), false));
            }
            if !seen && let Err(stop) = self.allow(scope, &name, ordinal, &shared, decision.by(), false) {
                return Admission::Done(Turn::End(End::Stopped(stop)));
            }
        }
        // Checked again before anything of the operation runs or is asked: what was decided (an
        // approval, the policy's allow) stands only while the tool's input check, the scope's
        // grants and the tool's policy still allow it.
        let unstarted =
            matches!(status, OperationStatus::AwaitingDecision | OperationStatus::Ready { start: 1 });
        let stale = if !scope.is_granted(tool.capability()) {
            Some(Stale::Grant)
        } else if unstarted && proposal.is_expired() {
            Some(Stale::Expired)
        } else if operation.decision().is_some() && tool.policy() == Policy::Deny {
            Some(Stale::Policy)
        } else {
            None
        };
        let admitted = match (readmitted, stale) {
            (Some(admitted), None) => admitted,
            (None, _) => {
                return Admission::Done(Self::stale(scope, &name, ordinal, &shared, Stale::InputCheck));
            }
            (Some(_), Some(stale)) => {
                return Admission::Done(Self::stale(scope, &name, ordinal, &shared, stale));
            }
        };
        match status {
            OperationStatus::AwaitingDecision => match tool.policy() {
                Policy::Ask | Policy::AskWithin(_) => {
                    Admission::Done(awaiting(scope, &name, proposal.clone()))
                }
                Policy::Deny => {
                    Admission::Done(self.deny(scope, &name, ordinal, &shared, &Decider::Policy, true))
                }
                Policy::Allow => {
                    if let Err(stop) = self.allow(scope, &name, ordinal, &shared, &Decider::Policy, true) {
                        return Admission::Done(Turn::End(End::Stopped(stop)));
                    }
                    run(tool, admitted, index, &id, proposal.effect(), 1)
                }
            },
            OperationStatus::Ready { start } => {
                if start > 1
                    && let Err(stop) = self.reconciled(scope, &name, &id, operation, start - 1)
                {
                    return Admission::Done(Turn::End(End::Stopped(stop)));
                }
                run(tool, admitted, index, &id, proposal.effect(), start)
            }
            OperationStatus::Started { start } if proposal.effect() == EffectKind::Idempotent => {
                run(tool, admitted, index, &id, proposal.effect(), start + 1)
            }
            OperationStatus::Started { .. } => {
                Admission::Done(Turn::End(End::Suspended(Status::Ambiguous, shared)))
            }
            // Denied and settled operations were handled above.
            _ => journal(JournalError::Corrupt(format!("{id} cannot be continued"))),
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
        let answer = recorded_answer(call, result);
        self.record_answer(index, Some(id.ordinal()), &answer);
        Turn::Answer(answer)
    }
}

/// How a write that did not go through ends the loop: a journal's failure as itself, a write
/// given up at the deadline or the caller's cancellation as that stop.
fn ended(failed: Failed) -> End {
    match failed {
        Failed::Journal(error) => End::Journal(error),
        Failed::Unconfirmed(stop) => End::Stopped(stop),
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

/// What one allowed call of this attempt needs around its body: where its answer goes, and
/// what its `started` and result records say.
pub(crate) struct Plan {
    index: u32,
    ordinal: u32,
    tool: Arc<str>,
    operation: Arc<str>,
    effect: EffectKind,
    /// Which start of the operation this is (an `idempotent` one may be driven again).
    start: u32,
}

/// What no longer allows an operation that an earlier attempt proposed, when a later attempt
/// is about to continue it.
#[derive(Clone, Copy, Debug)]
enum Stale {
    /// The scope does not grant the tool's capability (a resume narrowed the grants).
    Grant,
    /// The tool's policy is now `Deny`.
    Policy,
    /// The tool's input check (or its input type) now refuses the recorded arguments.
    InputCheck,
    /// The proposal expired ([`Policy::AskWithin`]) before its effect started.
    Expired,
}

/// An allowed call, handed back to the loop to be run as start `start` of `operation`.
fn run<'t, S>(
    tool: &'t dyn ErasedTool<S>,
    admitted: Box<dyn AdmittedCall<S> + 't>,
    index: u32,
    operation: &OperationId,
    effect: EffectKind,
    start: u32,
) -> Admission<'t, S, Plan> {
    let plan = Plan {
        index,
        ordinal: operation.ordinal(),
        tool: Arc::clone(tool.name()),
        operation: operation.shared(),
        effect,
        start,
    };
    Admission::Body(Pending { name: tool.name(), admitted, plan })
}

/// The message a recorded result gives the model.
fn recorded_answer(call: &ToolCall, result: &CallResult) -> Message {
    if result.is_error() {
        Message::tool_error(call.id.clone(), result.text())
    } else {
        Message::tool_result(call.id.clone(), result.text())
    }
}

impl<J> Drop for Journaled<'_, J> {
    /// The attempt publishes nothing more to its stream: a follower in this process goes back
    /// to the journal for what was committed.
    fn drop(&mut self) {
        if let Some(tail) = &self.tail {
            tail.close();
        }
    }
}

impl<T, S, J> Course<T, S> for Journaled<'_, J>
where
    T: Transport,
    S: Send + Sync + 'static,
    J: Journal,
{
    type Plan = Plan;

    async fn reply(
        &mut self,
        runtime: &Runner<T, S>,
        model: &Budgeted<'_, T>,
        conversation: &[Message],
        tools: &[ToolDefinition],
    ) -> Result<ModelReply, End> {
        self.reply += 1;
        let recorded = usize::try_from(self.reply - 1).ok().and_then(|i| self.record.replies.get(i));
        if let Some(recorded) = recorded {
            return Ok(recorded.clone());
        }
        self.steer(model.guard()).await;
        let admitted = runtime.admit_model_call(model, conversation, tools).await?;
        if admitted.is_reserved() {
            // The reservation is durable before the request leaves: a crash during the call
            // leaves it in the journal, charged whole on resume.
            if let Err(failed) = self.commit_guard(model.guard(), None).await {
                admitted.withdraw(model).await;
                return Err(ended(failed));
            }
        }
        let call = runtime.send_model_call(model, admitted, conversation, tools);
        // Boxed: the heartbeat's layers hold a pointer, not copies of the call's future.
        let reply = self.beating(Box::pin(call)).await.map_err(End::Journal)??;
        self.pending.push(Entry::Reply(super::row::ReplyRow {
            ordinal: self.reply,
            reply: codec::encode_reply(&reply),
        }));
        Ok(reply)
    }

    async fn admit<'t>(
        &mut self,
        runtime: &'t Runner<T, S>,
        scope: &Scope<S>,
        index: usize,
        call: &ToolCall,
        deferring: bool,
    ) -> Admission<'t, S, Plan> {
        let Ok(index) = u32::try_from(index) else {
            let error = JournalError::Corrupt("a reply with too many calls".to_owned());
            return Admission::Done(Turn::End(End::Journal(error)));
        };
        if let Some((_, result)) = self.record.calls.get(&(self.reply, index)) {
            return Admission::Done(Turn::Answer(recorded_answer(call, result)));
        }
        if let Some(operation) = self.record.operation_at(self.reply, index).cloned() {
            return self.resume_operation(runtime, scope, index, call, &operation);
        }
        self.steer(scope.guard()).await;
        self.live(runtime, scope, index, call, deferring)
    }

    async fn before_bodies(&mut self, scope: &Scope<S>, plans: &[&Plan]) -> Result<(), End> {
        self.before(scope, plans).await
    }

    fn operation(plan: &Plan) -> Option<Arc<str>> {
        Some(Arc::clone(&plan.operation))
    }

    fn answer(
        &mut self,
        scope: &Scope<S>,
        call: &ToolCall,
        _name: &Arc<str>,
        plan: Plan,
        output: Result<String, BodyError>,
    ) -> Message {
        self.record_output(scope, call, plan, output)
    }

    async fn running<F>(&mut self, work: F) -> Result<F::Output, End>
    where
        F: std::future::Future + Send,
        F::Output: Send,
    {
        // Boxed: the heartbeat's layers hold a pointer, not copies of the body's future.
        self.beating(Box::pin(work)).await.map_err(End::Journal)
    }

    async fn settle(&mut self, scope: &Scope<S>) -> Result<(), End> {
        self.settle_results(scope).await
    }
}
