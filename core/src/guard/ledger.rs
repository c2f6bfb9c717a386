//! The scope's mutable state and its one critical section: check, then reserve.
//!
//! Everything here is synchronous and free of clocks and tokens: the guard samples "has the
//! caller cancelled?" and "has the deadline passed?" into a [`Gate`] *after* taking the lock and
//! hands it in, so the loom models in `loom-tests/` can explore every interleaving of the
//! decisions and a call that waited for the lock is judged on what holds when it gets it.
//!
//! # Invariants
//!
//! - Checks run in this order and the first failing one decides: cancellation
//!   (caller, then an existing stop, then the deadline) → permission → tool budget →
//!   repetition → reserve.
//! - `model_calls <= limits.model_calls()`, `tool_calls <= limits.tool_calls()`, and every
//!   signature's count is `<= limits.repetitions()`: a reservation happens only after the
//!   matching check passed under the same lock.
//! - Reservations are never rolled back.
//! - `stop` goes from `None` to `Some` at most once (the first halt wins) and never back; a halt
//!   event is appended exactly when that happens, so the log has at most one halt event.
//! - Once `stop` is set, nothing more is admitted, observed or recorded (halts are sticky),
//!   except [`Ledger::append`]'s record of something that already happened.
//! - A tool call is admitted only with its [`Signature`]: [`Ledger::admit_tool`] takes one.
//!   [`Ledger::precheck_tool`] runs the checks before repetition for a caller that has not
//!   signed yet, and never admits.
//! - The n-th `ModelCall`, `ToolCall` and `Middleware` events carry count n.
//! - Events name tools with the scope's own copy of each name ([`Names`]), never with the tool
//!   set's shared `Arc`: tools are shared by every request on every thread, and a reference count
//!   bumped by each event would be one cache line that all of them write. Journal events may hold
//!   the shared name: they come with a durable commit anyway.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::stop::Stop;
use crate::canonical::Signature;
use crate::event::{ControlEvent, EventKind, HaltReason, Subject};
use crate::limits::Limits;

/// What held when the lock was taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Gate {
    /// The caller's cancellation token has fired.
    pub(crate) caller_cancelled: bool,
    /// The scope's deadline has passed.
    pub(crate) deadline_passed: bool,
}

/// Counters, repetition map, events and stop reason of one scope.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    model_calls: u32,
    tool_calls: u32,
    middleware: u32,
    repetitions: BTreeMap<String, u32>,
    events: Vec<ControlEvent>,
    names: Names,
    stop: Option<HaltReason>,
}

/// The scope's own copies of the tool names its events hold: one per tool the scope has seen,
/// looked up by content (a run sees a handful of tools, all from its set).
#[derive(Debug, Default)]
struct Names(Vec<Arc<str>>);

impl Names {
    /// The scope's copy of `name`, made on its first use.
    fn local(&mut self, name: &Arc<str>) -> Arc<str> {
        if let Some(held) = self.0.iter().find(|held| ***held == **name) {
            return Arc::clone(held);
        }
        let held: Arc<str> = Arc::from(&**name);
        self.0.push(Arc::clone(&held));
        held
    }
}

/// The counters of a logical run that a journal persists and restores: model calls, tool calls,
/// middleware observations, and admitted attempts per signature.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counters {
    pub(crate) model_calls: u32,
    pub(crate) tool_calls: u32,
    pub(crate) middleware: u32,
    pub(crate) repetitions: BTreeMap<String, u32>,
}

/// What a deadline expiry is charged to: the model call or the tool in flight.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Activity<'a> {
    Model,
    Tool(&'a Arc<str>),
}

impl Ledger {
    /// The cancellation check shared by every admission: the caller first, so that the caller's
    /// cancellation wins every race; then a recorded stop; then the deadline, which is recorded
    /// as a halt the first time it is seen.
    pub(crate) fn check(&mut self, gate: Gate, activity: Activity<'_>) -> Result<(), Stop> {
        if gate.caller_cancelled {
            return Err(Stop::Cancelled);
        }
        if let Some(reason) = self.stop {
            return Err(Stop::Halted(reason));
        }
        if gate.deadline_passed {
            return Err(self.halt_for(HaltReason::DeadlineExceeded, activity));
        }
        Ok(())
    }

    /// Records a halt charged to `activity` at its current count.
    fn halt_for(&mut self, reason: HaltReason, activity: Activity<'_>) -> Stop {
        match activity {
            Activity::Model => self.halt(reason, Subject::Model, self.model_calls),
            Activity::Tool(name) => {
                let subject = self.tool(name);
                self.halt(reason, subject, self.tool_calls)
            }
        }
    }

    /// The subject for `name`, with the scope's own copy of it.
    fn tool(&mut self, name: &Arc<str>) -> Subject {
        Subject::Tool(self.names.local(name))
    }

    /// Records `reason` unless a stop is already recorded; returns the stop in force.
    fn halt(&mut self, reason: HaltReason, subject: Subject, count: u32) -> Stop {
        if let Some(first) = self.stop {
            return Stop::Halted(first);
        }
        self.stop = Some(reason);
        self.events.push(ControlEvent::new(EventKind::Halt(reason), subject, count));
        Stop::Halted(reason)
    }

    /// Admits one model call, or halts with `ModelBudget`. Returns the new model-call count.
    pub(crate) fn admit_model(&mut self, gate: Gate, limits: &Limits) -> Result<u32, Stop> {
        self.check(gate, Activity::Model)?;
        if self.model_calls >= limits.model_calls() {
            return Err(self.halt(HaltReason::ModelBudget, Subject::Model, self.model_calls));
        }
        self.model_calls += 1;
        self.events.push(ControlEvent::new(EventKind::ModelCall, Subject::Model, self.model_calls));
        Ok(self.model_calls)
    }

    /// Records one middleware observation of a call to `tool`. Returns the observation count.
    pub(crate) fn observe_middleware(&mut self, gate: Gate, tool: &Arc<str>) -> Result<u32, Stop> {
        self.check(gate, Activity::Tool(tool))?;
        self.middleware += 1;
        let subject = self.tool(tool);
        self.events.push(ControlEvent::new(EventKind::Middleware, subject, self.middleware));
        Ok(self.middleware)
    }

    /// The checks of a tool call before repetition: cancellation → permission → tool budget.
    /// Nothing is recorded when they pass.
    pub(crate) fn precheck_tool(
        &mut self,
        gate: Gate,
        limits: &Limits,
        tool: &Arc<str>,
        granted: bool,
    ) -> Result<(), Stop> {
        self.check(gate, Activity::Tool(tool))?;
        if !granted {
            let subject = self.tool(tool);
            return Err(self.halt(HaltReason::PermissionDenied, subject, self.tool_calls));
        }
        if self.tool_calls >= limits.tool_calls() {
            let subject = self.tool(tool);
            return Err(self.halt(HaltReason::ToolBudget, subject, self.tool_calls));
        }
        Ok(())
    }

    /// The guard: cancellation → permission → tool budget → repetition → reserve. Returns the
    /// new tool-call count.
    pub(crate) fn admit_tool(
        &mut self,
        gate: Gate,
        limits: &Limits,
        tool: &Arc<str>,
        granted: bool,
        signature: Signature,
    ) -> Result<u32, Stop> {
        self.precheck_tool(gate, limits, tool, granted)?;
        let seen = self.repetitions.get(signature.as_str()).copied().unwrap_or(0);
        if seen >= limits.repetitions() {
            let subject = self.tool(tool);
            return Err(self.halt(HaltReason::RepeatedCall, subject, seen));
        }
        *self.repetitions.entry(signature.into_string()).or_insert(0) += 1;
        self.tool_calls += 1;
        let subject = self.tool(tool);
        self.events.push(ControlEvent::new(EventKind::ToolCall, subject, self.tool_calls));
        Ok(self.tool_calls)
    }

    /// Refuses a model reply with too many tool calls: the cancellation check, then the
    /// `TooManyCalls` halt charged to the model at its current count.
    pub(crate) fn refuse_reply(&mut self, gate: Gate) -> Stop {
        if let Err(stop) = self.check(gate, Activity::Model) {
            return stop;
        }
        self.halt(HaltReason::TooManyCalls, Subject::Model, self.model_calls)
    }

    /// Records the deadline as the stop reason if nothing stopped the run first (the caller's
    /// cancellation does).
    pub(crate) fn expire(&mut self, gate: Gate, activity: Activity<'_>) -> Stop {
        if gate.caller_cancelled {
            return Stop::Cancelled;
        }
        self.halt_for(HaltReason::DeadlineExceeded, activity)
    }

    /// The stop in force when the scope's token fired: the caller first, then the recorded halt.
    pub(crate) fn stop_now(&self, gate: Gate) -> Stop {
        if gate.caller_cancelled {
            return Stop::Cancelled;
        }
        // The token fires only after the caller cancels or a halt is recorded.
        self.stop.map_or(Stop::Cancelled, Stop::Halted)
    }

    pub(crate) fn stop(&self) -> Option<HaltReason> {
        self.stop
    }

    pub(crate) fn model_calls(&self) -> u32 {
        self.model_calls
    }

    pub(crate) fn tool_calls(&self) -> u32 {
        self.tool_calls
    }

    pub(crate) fn events(&self) -> &[ControlEvent] {
        &self.events
    }

    /// The counters a journal persists for the logical run.
    pub(crate) fn counters(&self) -> Counters {
        Counters {
            model_calls: self.model_calls,
            tool_calls: self.tool_calls,
            middleware: self.middleware,
            repetitions: self.repetitions.clone(),
        }
    }

    /// Whether nothing was counted, observed or recorded yet.
    pub(crate) fn is_fresh(&self) -> bool {
        self.model_calls == 0 && self.tool_calls == 0 && self.middleware == 0 && self.events.is_empty()
    }

    /// Continues a logical run: its persisted counters and audit log become this ledger's. No
    /// stop is restored: a journaled run that halted is finished and never resumed, and a
    /// deadline belongs to one attempt.
    pub(crate) fn restore(&mut self, counters: Counters, events: Vec<ControlEvent>) {
        self.model_calls = counters.model_calls;
        self.tool_calls = counters.tool_calls;
        self.middleware = counters.middleware;
        self.repetitions = counters.repetitions;
        self.events = events;
        self.stop = None;
    }

    /// Appends a journal's event (a proposal, a decision, an effect's start or result, a resume,
    /// a reconciliation), unless the run is stopped (the caller first, then a halt).
    pub(crate) fn record(&mut self, gate: Gate, event: ControlEvent) -> Result<(), Stop> {
        if gate.caller_cancelled {
            return Err(Stop::Cancelled);
        }
        if let Some(reason) = self.stop {
            return Err(Stop::Halted(reason));
        }
        self.events.push(event);
        Ok(())
    }

    /// Appends a journal's event even after a stop: it records something that happened (an
    /// effect's result, committed).
    pub(crate) fn append(&mut self, event: ControlEvent) {
        self.events.push(event);
    }

    /// Records `event` as the halt for `reason` unless the caller cancelled or a stop is
    /// already recorded; returns the stop in force.
    pub(crate) fn halt_with(&mut self, gate: Gate, reason: HaltReason, event: ControlEvent) -> Stop {
        if gate.caller_cancelled {
            return Stop::Cancelled;
        }
        if let Some(first) = self.stop {
            return Stop::Halted(first);
        }
        self.stop = Some(reason);
        self.events.push(event);
        Stop::Halted(reason)
    }

    /// Admitted attempts of `signature` so far.
    #[cfg(test)]
    pub(crate) fn repetitions_of(&self, signature: &str) -> u32 {
        self.repetitions.get(signature).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool() -> Arc<str> {
        Arc::from("read_ticket")
    }

    fn signed(arguments: &str) -> Signature {
        Signature::from_parts(format!("read_ticket:{arguments}"), "read_ticket".len())
    }

    fn kinds(ledger: &Ledger) -> Vec<String> {
        ledger.events().iter().map(ToString::to_string).collect()
    }

    const OPEN: Gate = Gate { caller_cancelled: false, deadline_passed: false };

    #[test]
    fn cancellation_is_checked_before_permission() {
        let tool = tool();
        let mut ledger = Ledger::default();
        let caller = Gate { caller_cancelled: true, deadline_passed: true };
        assert_eq!(ledger.precheck_tool(caller, &Limits::default(), &tool, false), Err(Stop::Cancelled));
        assert!(ledger.events().is_empty());
        let late = Gate { caller_cancelled: false, deadline_passed: true };
        assert_eq!(
            ledger.precheck_tool(late, &Limits::default(), &tool, false),
            Err(Stop::Halted(HaltReason::DeadlineExceeded))
        );
        assert_eq!(kinds(&ledger), ["DeadlineExceeded read_ticket 0"]);
    }

    #[test]
    fn permission_is_checked_before_the_budget() {
        let tool = tool();
        let mut ledger = Ledger::default();
        let limits = Limits::default().with_tool_calls(0);
        assert_eq!(
            ledger.admit_tool(OPEN, &limits, &tool, false, signed("{}")),
            Err(Stop::Halted(HaltReason::PermissionDenied))
        );
        assert_eq!(kinds(&ledger), ["PermissionDenied read_ticket 0"]);
    }

    #[test]
    fn the_budget_is_checked_before_repetition() {
        let tool = tool();
        let mut ledger = Ledger::default();
        let limits = Limits::default().with_tool_calls(1);
        assert_eq!(ledger.admit_tool(OPEN, &limits, &tool, true, signed("{}")), Ok(1));
        assert_eq!(
            ledger.admit_tool(OPEN, &limits, &tool, true, signed("{}")),
            Err(Stop::Halted(HaltReason::ToolBudget))
        );
        assert_eq!(kinds(&ledger), ["ToolCall read_ticket 1", "ToolBudget read_ticket 1"]);
    }

    #[test]
    fn repetition_counts_per_signature_and_reports_the_signature_count() {
        let tool = tool();
        let mut ledger = Ledger::default();
        let limits = Limits::default().with_repetitions(2);
        assert_eq!(ledger.admit_tool(OPEN, &limits, &tool, true, signed("a")), Ok(1));
        assert_eq!(ledger.admit_tool(OPEN, &limits, &tool, true, signed("b")), Ok(2));
        assert_eq!(ledger.admit_tool(OPEN, &limits, &tool, true, signed("a")), Ok(3));
        assert_eq!(
            ledger.admit_tool(OPEN, &limits, &tool, true, signed("a")),
            Err(Stop::Halted(HaltReason::RepeatedCall))
        );
        assert_eq!(ledger.repetitions_of("read_ticket:a"), 2);
        assert_eq!(ledger.repetitions_of("read_ticket:b"), 1);
        assert_eq!(kinds(&ledger).last().map(String::as_str), Some("RepeatedCall read_ticket 2"));
    }

    #[test]
    fn the_first_halt_wins_and_is_sticky() {
        let tool = tool();
        let mut ledger = Ledger::default();
        let limits = Limits::default().with_model_calls(1);
        assert_eq!(ledger.admit_model(OPEN, &limits), Ok(1));
        assert_eq!(ledger.admit_model(OPEN, &limits), Err(Stop::Halted(HaltReason::ModelBudget)));
        assert_eq!(
            ledger.admit_tool(OPEN, &limits, &tool, false, signed("{}")),
            Err(Stop::Halted(HaltReason::ModelBudget))
        );
        assert_eq!(ledger.observe_middleware(OPEN, &tool), Err(Stop::Halted(HaltReason::ModelBudget)));
        assert_eq!(ledger.expire(OPEN, Activity::Model), Stop::Halted(HaltReason::ModelBudget));
        assert_eq!(ledger.stop(), Some(HaltReason::ModelBudget));
        assert_eq!(kinds(&ledger), ["ModelCall model 1", "ModelBudget model 1"]);
    }

    #[test]
    fn a_precheck_that_passes_records_nothing() {
        let tool = tool();
        let mut ledger = Ledger::default();
        let limits = Limits::default();
        assert_eq!(ledger.precheck_tool(OPEN, &limits, &tool, true), Ok(()));
        assert_eq!(ledger.tool_calls(), 0);
        assert!(ledger.events().is_empty());
        assert_eq!(ledger.admit_tool(OPEN, &limits, &tool, true, signed("{}")), Ok(1));
    }

    #[test]
    fn a_refused_reply_halts_charged_to_the_model_unless_a_stop_came_first() {
        let mut ledger = Ledger::default();
        assert_eq!(ledger.admit_model(OPEN, &Limits::default()), Ok(1));
        let cancelled = Gate { caller_cancelled: true, deadline_passed: false };
        assert_eq!(ledger.refuse_reply(cancelled), Stop::Cancelled);
        assert_eq!(ledger.refuse_reply(OPEN), Stop::Halted(HaltReason::TooManyCalls));
        assert_eq!(ledger.refuse_reply(OPEN), Stop::Halted(HaltReason::TooManyCalls));
        assert_eq!(kinds(&ledger), ["ModelCall model 1", "TooManyCalls model 1"]);
    }

    #[test]
    fn a_tool_budget_of_zero_refuses_the_first_call() {
        let tool = tool();
        let mut ledger = Ledger::default();
        let limits = Limits::default().with_tool_calls(0);
        assert_eq!(
            ledger.admit_tool(OPEN, &limits, &tool, true, signed("{}")),
            Err(Stop::Halted(HaltReason::ToolBudget))
        );
        assert_eq!(ledger.tool_calls(), 0);
    }

    #[test]
    fn events_share_the_scopes_one_copy_of_each_name() {
        let shared = tool();
        let mut ledger = Ledger::default();
        let limits = Limits::default().with_repetitions(2);
        ledger.observe_middleware(OPEN, &shared).ok();
        ledger.admit_tool(OPEN, &limits, &shared, true, signed("{}")).ok();
        let names: Vec<&Arc<str>> = ledger
            .events()
            .iter()
            .filter_map(|event| match event.subject() {
                Subject::Tool(name) => Some(name),
                Subject::Model | Subject::Run => None,
            })
            .collect();
        assert_eq!(names.len(), 2);
        assert!(Arc::ptr_eq(names[0], names[1]), "one copy for the scope");
        assert!(!Arc::ptr_eq(names[0], &shared), "never the tool set's own");
    }
}
