//! A reference model of the scope's admissions, written from the contract (SPEC §4, §6, §7)
//! rather than from core's ledger: what each admission must decide and record.
//!
//! # Invariants
//!
//! - Every admission first runs the cancellation check: the caller's cancellation, then a
//!   recorded halt, then the deadline (recorded as a `DeadlineExceeded` halt the first time).
//! - A tool admission then checks permission, the tool budget and the repetition limit, in this
//!   order; the first failing check is recorded as a halt and decides.
//! - Only the first halt is recorded; it is sticky.
//! - Events are kept as their display text (`ToolCall read_ticket 1`), so the model can be
//!   compared with `Scope::events()` without reading core's types.

use std::collections::BTreeMap;

use loopbound::{HaltReason, Stop};

/// What an admission is charged to.
#[derive(Clone, Copy, Debug)]
pub enum Charge<'a> {
    /// A model call (events name `model`).
    Model,
    /// A call of the named tool.
    Tool(&'a str),
}

/// The expected state of one scope.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GuardModel {
    /// Model-call limit.
    pub model_limit: u32,
    /// Tool-call limit.
    pub tool_limit: u32,
    /// Admitted attempts allowed per signature.
    pub repetitions: u32,
    /// The caller's token has fired.
    pub caller_cancelled: bool,
    /// The scope's deadline has passed.
    pub deadline_passed: bool,
    /// The first halt.
    pub stop: Option<HaltReason>,
    /// Admitted model calls.
    pub model_calls: u32,
    /// Admitted tool calls.
    pub tool_calls: u32,
    /// Middleware observations.
    pub middleware: u32,
    /// Admitted attempts per signature.
    pub per_signature: BTreeMap<String, u32>,
    /// The expected log, as display text.
    pub events: Vec<String>,
}

impl GuardModel {
    /// A fresh scope with these limits.
    pub fn new(model_limit: u32, tool_limit: u32, repetitions: u32) -> Self {
        Self { model_limit, tool_limit, repetitions, ..Self::default() }
    }

    fn count_of(&self, charge: Charge<'_>) -> (String, u32) {
        match charge {
            Charge::Model => ("model".to_owned(), self.model_calls),
            Charge::Tool(name) => (name.to_owned(), self.tool_calls),
        }
    }

    /// Records `reason` unless a halt is already recorded; returns the stop in force.
    pub fn halt(&mut self, reason: HaltReason, name: &str, count: u32) -> Stop {
        match self.stop {
            Some(first) => Stop::Halted(first),
            None => {
                self.stop = Some(reason);
                self.events.push(format!("{reason} {name} {count}"));
                Stop::Halted(reason)
            }
        }
    }

    /// The cancellation check every admission starts with.
    ///
    /// # Errors
    ///
    /// The stop in force.
    pub fn check(&mut self, charge: Charge<'_>) -> Result<(), Stop> {
        if self.caller_cancelled {
            return Err(Stop::Cancelled);
        }
        if let Some(reason) = self.stop {
            return Err(Stop::Halted(reason));
        }
        if self.deadline_passed {
            let (name, count) = self.count_of(charge);
            return Err(self.halt(HaltReason::DeadlineExceeded, &name, count));
        }
        Ok(())
    }

    /// The deadline fired while `charge` was waiting.
    pub fn expire(&mut self, charge: Charge<'_>) -> Stop {
        self.deadline_passed = true;
        if self.caller_cancelled {
            return Stop::Cancelled;
        }
        let (name, count) = self.count_of(charge);
        self.halt(HaltReason::DeadlineExceeded, &name, count)
    }

    /// A model call: cancellation, then the model budget.
    ///
    /// # Errors
    ///
    /// The stop that refuses the call.
    pub fn admit_model(&mut self) -> Result<u32, Stop> {
        self.check(Charge::Model)?;
        if self.model_calls >= self.model_limit {
            return Err(self.halt(HaltReason::ModelBudget, "model", self.model_calls));
        }
        self.model_calls += 1;
        self.events.push(format!("ModelCall model {}", self.model_calls));
        Ok(self.model_calls)
    }

    /// A reply that asked for more tool calls than the bound: the cancellation check, then the
    /// `TooManyCalls` halt charged to the model at its current count.
    pub fn refuse_reply(&mut self) -> Stop {
        if let Err(stop) = self.check(Charge::Model) {
            return stop;
        }
        self.halt(HaltReason::TooManyCalls, "model", self.model_calls)
    }

    /// The middleware sees a call of `tool`.
    ///
    /// # Errors
    ///
    /// The stop in force.
    pub fn observe_middleware(&mut self, tool: &str) -> Result<u32, Stop> {
        self.check(Charge::Tool(tool))?;
        self.middleware += 1;
        self.events.push(format!("Middleware {tool} {}", self.middleware));
        Ok(self.middleware)
    }

    /// The guard: cancellation → permission → tool budget → repetition → reserve.
    ///
    /// # Errors
    ///
    /// The stop that refuses the call.
    pub fn admit_tool(&mut self, tool: &str, granted: bool, signature: &str) -> Result<u32, Stop> {
        self.check(Charge::Tool(tool))?;
        if !granted {
            return Err(self.halt(HaltReason::PermissionDenied, tool, self.tool_calls));
        }
        if self.tool_calls >= self.tool_limit {
            return Err(self.halt(HaltReason::ToolBudget, tool, self.tool_calls));
        }
        let seen = self.per_signature.get(signature).copied().unwrap_or(0);
        if seen >= self.repetitions {
            return Err(self.halt(HaltReason::RepeatedCall, tool, seen));
        }
        self.per_signature.insert(signature.to_owned(), seen + 1);
        self.tool_calls += 1;
        self.events.push(format!("ToolCall {tool} {}", self.tool_calls));
        Ok(self.tool_calls)
    }

    /// Asserts that `scope` holds exactly this model's counters, stop and events.
    pub fn assert_matches<S>(&self, scope: &loopbound::Scope<S>, context: &str) {
        let events: Vec<String> = scope.events().iter().map(ToString::to_string).collect();
        assert_eq!(events, self.events, "events differ from the model after {context}");
        assert_eq!(scope.tool_calls(), self.tool_calls, "tool calls differ after {context}");
        assert_eq!(scope.model_calls(), self.model_calls, "model calls differ after {context}");
        assert_eq!(scope.stop_reason(), self.stop, "stop reason differs after {context}");
    }
}

/// Checks the log's own shape, whatever the model says: per kind, counts run 1, 2, 3…; at most
/// one halt event; nothing is admitted or observed after it. Returns the number of `ToolCall`
/// events.
pub fn assert_log_shape(events: &[loopbound::ControlEvent]) -> u32 {
    use loopbound::EventKind;
    let (mut model, mut middleware, mut tools, mut halts) = (0, 0, 0, 0);
    for event in events {
        assert_eq!(halts, 0, "an event follows the halt: {event}");
        let counter = match event.kind() {
            EventKind::ModelCall => &mut model,
            EventKind::Middleware => &mut middleware,
            EventKind::ToolCall => &mut tools,
            EventKind::Halt(_) => {
                halts += 1;
                continue;
            }
            other => panic!("an event kind the model does not know: {other}"),
        };
        *counter += 1;
        assert_eq!(event.count(), *counter, "counts of {} must run 1, 2, 3…", event.kind());
    }
    tools
}
