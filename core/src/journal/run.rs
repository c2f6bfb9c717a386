//! A journaled run: take the run in the journal, restore what it recorded, drive the one loop
//! with the journaled course, then commit how the attempt ended.
//!
//! # Invariants
//!
//! - Starting and resuming are one call: a run the journal does not know starts from the host's
//!   conversation; a known one continues from the journal's (the host's is replaced).
//! - The scope must be fresh; the journal's counters and audit log become its own, so the
//!   logical run's budgets never reset on a resume, while the deadline is the new scope's.
//! - While the attempt runs, it asks the journal for a host's cancel request before each
//!   admission and every [`CANCEL_POLL`] ([`Journal::cancel_requested`]); a request cancels the
//!   scope as its caller would, and the attempt's last commit records a `Cancelled` event naming
//!   who asked and clears the request.
//! - Every store call of the attempt is bounded by its deadline and its caller's cancellation
//!   (`bound.rs`); when one is given up, the attempt ends with its end
//!   [`Unconfirmed`](crate::EndRecord::Unconfirmed) and its lease left to expire.
//! - Per attempt: one commit to take the run (it bumps the epoch that fences every later write),
//!   two per allowed effect, none of its own per read, one per model call under a spend budget
//!   or a pool (its reservation, before the request is sent), one at the end. A finished run is
//!   refused before anything runs.

use super::bound::{Canceller, Failed, Store};
use super::codec;
use super::definition::RunDefinition;
use super::driver::Journaled;
use super::error::JournalError;
use super::id::RunId;
use super::record::RunState;
use super::row::{Batch, Entry, Fence, RunRow};
use super::run_record::RunRecord;
use super::store::Journal;
use super::tail::{Tail, first_number, pump};
use crate::ended::Ended;
use crate::event::{ControlEvent, EventKind, HaltReason};
use crate::guard::Counters;
use crate::outcome::{EndRecord, Outcome, RunError, Status};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

use crate::runner::{End, Runner, conclude, finished};
use crate::scope::Scope;
use crate::transport::{Message, Transport};

impl<T: Transport, S: Send + Sync + 'static> Runner<T, S> {
    /// Runs, or resumes, the logical run `run` recorded in `journal`.
    ///
    /// A new run starts from `conversation`. A run the journal knows continues from its
    /// journal: `conversation` is replaced by the recorded one, recorded model replies and tool
    /// results are replayed (not asked for, not run, not counted again), the counters (model
    /// calls, tool calls, repetitions per signature) are the logical run's, and the deadline is
    /// `scope`'s own. Every tool call the loop admits is proposed, decided by the tool's
    /// [`Policy`](crate::tool::Policy) or an approver, and run per its
    /// [`EffectKind`](crate::tool::EffectKind): an `effect` at most once, an `idempotent` one at
    /// least once with one key ([`ToolContext::idempotency_key`](crate::ToolContext::idempotency_key)).
    ///
    /// One attempt at a time: the attempt takes the run's lease first (refused with
    /// [`JournalError::LeaseHeld`] while another attempt, in any process, holds it), renews it
    /// with every commit and, while a model call or a body runs, with a heartbeat, and releases
    /// it with its last commit. A new run stores `scope`'s grants, limits and labels as its
    /// definition; a resume's scope may be narrower, never wider
    /// ([`JournalError::Widened`]; [`scope_of`](super::scope_of) rebuilds the stored one).
    ///
    /// It ends like [`run`](Self::run), and also with `AwaitingApproval` (a proposal waits:
    /// [`Outcome::pending`] hands it out for [`approve`](super::approve) or
    /// [`deny`](super::deny)), `Denied`, or `Ambiguous` (an effect started by an attempt that
    /// no longer holds the run has no result: [`reconcile`](super::reconcile) it); each names
    /// the operation ([`Outcome::operation`]). Run it again with the same id to resume.
    ///
    /// An ended run is `Completed` when `is_complete` says so. It gets the run as it ends
    /// ([`Ended`]): the request's state and the logical run's record of every call in every
    /// attempt. A resume replays recorded results without running their bodies, so host memory
    /// holds only what this attempt ran; a condition that must hold after a resume in another
    /// process reads the record ([`Ended::has_succeeded`]).
    ///
    /// ```
    /// # use loopbound::journal::{MemoryJournal, RunId};
    /// # use loopbound::{Runner, Scope, Status, ToolSet};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tools = ToolSet::default();
    /// # let model = loopbound::scripted::sequence(vec![loopbound::scripted::Step::Reply(
    /// #     loopbound::transport::ModelReply::text("Done."),
    /// # )]);
    /// # let runtime = Runner::new(&tools, model);
    /// # let journal = MemoryJournal::default();
    /// # let run = RunId::new("refund-42")?;
    /// # let scope = Scope::builder().build()?;
    /// # let mut conversation = vec![loopbound::Message::user("Refund order 42.")];
    /// // Completed once the refund succeeded, in this attempt or an earlier one.
    /// let outcome =
    ///     runtime.run_journaled(&journal, &run, &scope, &mut conversation, |ended| ended.has_succeeded("refund")).await?;
    /// assert_eq!(outcome.status(), Status::Incomplete, "no refund was asked for");
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`run`](Self::run), and [`RunError::Journal`] if the journal failed or refused (a
    /// finished run, a scope already used or wider than the run's definition, another attempt's
    /// live lease ([`JournalError::LeaseHeld`]: nothing started), a lease this attempt lost
    /// ([`JournalError::LeaseLost`]: nothing further ran)): what could not be recorded did not
    /// run. An attempt that ends on a journal error leaves its lease to expire.
    ///
    /// The deadline and the caller's cancellation bound the store as they bound the provider
    /// and the tools: a store call in flight when either comes gets
    /// [`STORE_GRACE`](crate::STORE_GRACE) more, then is given up, and the attempt returns.
    /// [`Outcome::end_record`] says whether its end is in the journal; a caller's cancellation
    /// whose end could not be recorded is [`RunError::CancelledUnrecorded`].
    pub async fn run_journaled<J: Journal>(
        &self,
        journal: &J,
        run: &RunId,
        scope: &Scope<S>,
        conversation: &mut Vec<Message>,
        is_complete: impl FnOnce(Ended<'_, S>) -> bool,
    ) -> Result<Outcome, RunError> {
        let span = self.agent_span(Some(run));
        let result =
            self.attempt(journal, run, scope, conversation, is_complete).instrument(span.clone()).await;
        finished(scope, &span, &result);
        result
    }

    /// One attempt: take the run, drive the loop while asking the journal for cancel requests,
    /// then commit how the attempt ended.
    async fn attempt<J: Journal>(
        &self,
        journal: &J,
        run: &RunId,
        scope: &Scope<S>,
        conversation: &mut Vec<Message>,
        is_complete: impl FnOnce(Ended<'_, S>) -> bool,
    ) -> Result<Outcome, RunError> {
        self.check_configuration(scope)?;
        let mut course = match begin(journal, run, scope, conversation).await {
            Ok(course) => course,
            Err(Failed::Journal(error)) => return Err(RunError::Journal(error)),
            // Taking the run was given up at the deadline or the caller's cancellation: nothing
            // ran, and whether this attempt holds the run's lease is unknown.
            Err(Failed::Unconfirmed(stop)) => {
                let result = conclude(scope, End::Stopped(stop), None, |_| false);
                return with_end(result, EndRecord::Unconfirmed);
            }
        };
        let mut usage = None;
        let canceller = course.canceller();
        // Boxed: the loop's future, with the journal's heartbeat in it, is large, and a host
        // awaits many runs at once.
        let drive = Box::pin(self.drive(scope, conversation, &mut usage, &mut course));
        let end = tokio::select! {
            biased;
            end = drive => end,
            never = watch_cancel_requests(canceller, run, scope) => match never {},
        };
        let record = course.record();
        let result = conclude(scope, end, usage, |state| is_complete(Ended::new(state, record)))
            .map(|outcome| name_denial(scope, outcome));
        let state = match &result {
            Err(RunError::Journal(_)) => return result,
            Ok(outcome) => state_after(outcome),
            Err(_) => RunState::Open,
        };
        if matches!(result, Err(RunError::Cancelled))
            && !course.is_unconfirmed()
            && let Some(by) = course.cancel_requested(scope.guard()).await
        {
            course.honour_cancel(scope, &by);
        }
        // The recorded stream's last lines, as the watcher will get them once the end is
        // recorded: they are in the journal only if it is.
        if let Some(tap) = scope.guard().tap() {
            tap.finish(&with_end(result.clone(), EndRecord::Recorded));
        }
        let end = match course.commit(scope, Some(state)).await {
            Ok(()) => EndRecord::Recorded,
            Err(Failed::Journal(error)) => return Err(RunError::Journal(error)),
            Err(Failed::Unconfirmed(_)) => EndRecord::Unconfirmed,
        };
        with_end(result, end)
    }
}

/// How often an attempt asks its journal for cancel requests while it waits (it also asks
/// before each admission).
/// Half a second, so that a request is honoured within a second whatever the storage's latency.
pub const CANCEL_POLL: Duration = Duration::from_millis(500);

/// Asks the journal every [`CANCEL_POLL`] whether a host requested to cancel `run` (through the
/// handle's shared [`CancelWatch`](super::backend::CancelWatch) when it keeps one: one query per period
/// for all its waiting runs), and cancels the scope as its caller would when one did. Never
/// returns: the attempt's loop ends first.
async fn watch_cancel_requests<J: Journal, S>(
    canceller: Canceller<'_, J>,
    run: &RunId,
    scope: &Scope<S>,
) -> Infallible {
    if let Some(watch) = canceller.watch() {
        let guard = scope.guard();
        watch.until_requested(run, |runs| async move { canceller.cancel_requests(guard, &runs).await }).await;
        scope.cancel();
        return std::future::pending().await;
    }
    loop {
        tokio::time::sleep(CANCEL_POLL).await;
        if canceller.cancel_requested(scope.guard(), run).await.is_some() {
            scope.cancel();
        }
    }
}

/// An attempt's result, saying whether its end was recorded: on its outcome, or, for a caller's
/// cancellation whose end went unconfirmed, as [`RunError::CancelledUnrecorded`].
fn with_end(result: Result<Outcome, RunError>, end: EndRecord) -> Result<Outcome, RunError> {
    match result {
        Ok(outcome) => Ok(outcome.recorded(end)),
        Err(RunError::Cancelled) if end == EndRecord::Unconfirmed => Err(RunError::CancelledUnrecorded),
        other => other,
    }
}

/// Takes the run, checks what it recorded, restores the scope's counters and log, and sets the
/// conversation.
async fn begin<'j, J: Journal, S>(
    journal: &'j J,
    run: &RunId,
    scope: &Scope<S>,
    conversation: &mut Vec<Message>,
) -> Result<Journaled<'j, J>, Failed> {
    if scope.model_calls() > 0 || scope.tool_calls() > 0 || !scope.events().is_empty() {
        return Err(Failed::Journal(JournalError::ScopeInUse));
    }
    let fresh = RunRow {
        epoch: 1,
        attempts: 1,
        conversation: codec::encode_conversation(conversation),
        ledger: codec::encode_counters(&Counters::default()),
        state: RunState::Open,
        definition: codec::encode_definition(&RunDefinition::of(scope)),
        labels: scope.labels().to_rows(),
    };
    let mut store = Store::new(journal);
    let acquiring = tokio::time::Instant::now();
    let stored = store.acquire(scope.guard(), run, fresh).await?;
    let record = RunRecord::decode(run, &stored).map_err(Failed::Journal)?;
    if let RunState::Finished(status) = record.state {
        return Err(Failed::Journal(JournalError::Finished(status)));
    }
    if let Some(definition) = &record.definition
        && !definition.covers(scope)
    {
        // Nothing ran: end the attempt at once so that another may take the run.
        let end = Batch { entries: vec![Entry::Release] };
        store.commit(scope.guard(), run, Fence::Epoch(record.epoch), end).await?;
        return Err(Failed::Journal(JournalError::Widened));
    }
    if !scope.guard().restore(record.counters.clone(), record.events.clone()) {
        return Err(Failed::Journal(JournalError::ScopeInUse));
    }
    // A run that records its stream (its definition says so, or a new run's scope) takes its
    // steps from here, numbered after the lines of the earlier attempts; a follower in this
    // process sees them as they come.
    let records = record.definition.as_ref().map_or(scope.records_stream(), RunDefinition::records_stream);
    let tail = if records {
        let (tap, steps) = crate::watch::channel();
        if !scope.guard().set_tap(tap) {
            return Err(Failed::Journal(JournalError::ScopeInUse));
        }
        let last =
            if record.attempts > 1 { store.line(scope.guard(), run, stored.stream).await } else { None };
        let tail = Tail::new(steps, first_number(record.attempts > 1, stored.stream, last.as_deref()));
        if let (Some(live), Ok(runtime)) = (journal.live_streams(), tokio::runtime::Handle::try_current()) {
            live.register(run, &tail);
            runtime.spawn(pump(Arc::clone(&tail)));
        }
        Some(tail)
    } else {
        None
    };
    scope.guard().set_epoch(record.epoch);
    conversation.clone_from(&record.conversation);
    let persisted = record.events.len();
    if record.attempts > 1 {
        let resumed = ControlEvent::new(EventKind::Resumed, crate::event::Subject::Run, record.attempts);
        scope.guard().append(resumed);
    }
    Ok(Journaled::new(store, record, persisted, acquiring, tail))
}

/// A `Denied` outcome (or a `PermissionDenied` one, for a proposal whose capability a resume no
/// longer grants) names the operation its halt event names.
fn name_denial<S>(scope: &Scope<S>, outcome: Outcome) -> Outcome {
    let reason = match outcome.status() {
        Status::Denied => HaltReason::Denied,
        // A proposal whose capability a resume no longer grants.
        Status::PermissionDenied => HaltReason::PermissionDenied,
        _ => return outcome,
    };
    let operation = scope
        .events()
        .iter()
        .rev()
        .find(|e| e.kind() == EventKind::Halt(reason))
        .and_then(|e| e.operation().map(std::sync::Arc::from));
    match operation {
        Some(operation) => outcome.on(Some(operation)),
        None => outcome,
    }
}

/// Where the run stands after an attempt that ended with `outcome`.
fn state_after(outcome: &Outcome) -> RunState {
    let ordinal = || {
        outcome.operation().and_then(|id| super::id::OperationId::parse(id).ok()).map_or(0, |id| id.ordinal())
    };
    match outcome.status() {
        Status::AwaitingApproval => RunState::AwaitingApproval(ordinal()),
        Status::Ambiguous => RunState::Ambiguous(ordinal()),
        Status::DeadlineExceeded | Status::ProviderUnavailable => RunState::Open,
        Status::Completed
        | Status::Incomplete
        | Status::PermissionDenied
        | Status::RepeatedCall
        | Status::ToolBudget
        | Status::ModelBudget
        | Status::TooManyCalls
        | Status::Denied
        | Status::TokenBudget
        | Status::CostBudget
        | Status::ToolLimit
        | Status::NoProgress
        | Status::Closed => RunState::Finished(outcome.status()),
    }
}
