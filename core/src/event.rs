//! The ordered audit log of a run: what was admitted, observed and refused.
//!
//! # Invariants
//!
//! - An event carries a kind, a name (a tool's name, or `model`) and a count. It never carries
//!   arguments or signatures: those stay private inside the scope.
//! - Counts of `ModelCall`, `Middleware` and `ToolCall` events are strictly increasing within
//!   their kind, starting at 1: the n-th admitted model call is recorded with count n.
//! - A log holds at most one halt event, and nothing is admitted after it.
//!
//! # What a halt's count means
//!
//! A halt event carries the count it stopped at: `RepeatedCall` the admitted attempts of the
//! refused signature (so `RepeatedCall read_ticket 1` with the default limit); `PermissionDenied`
//! and `ToolBudget` the tool calls admitted so far; `ModelBudget` the model calls admitted so far;
//! `DeadlineExceeded` the model calls so far when it is charged to `model`, else the tool calls so
//! far when it is charged to the tool whose body was running; `TooManyCalls` (charged to `model`,
//! whose reply it was) the model calls so far, the refused reply's call included.

use std::fmt;
use std::sync::Arc;

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

/// Why the scope halted a run. A halt is sticky and the first one wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[non_exhaustive]
pub enum HaltReason {
    /// A tool was invoked without its capability being granted.
    PermissionDenied,
    /// A signature (tool name + canonical arguments) reached its repetition limit.
    RepeatedCall,
    /// The tool-call budget was spent.
    ToolBudget,
    /// The model-call budget was spent.
    ModelBudget,
    /// The run's wall-clock deadline passed.
    DeadlineExceeded,
    /// A model reply asked for more tool calls than the per-reply bound; it was refused whole.
    TooManyCalls,
}

impl HaltReason {
    /// The reason's name as it appears in events and outcomes, e.g. `RepeatedCall`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::PermissionDenied => "PermissionDenied",
            Self::RepeatedCall => "RepeatedCall",
            Self::ToolBudget => "ToolBudget",
            Self::ModelBudget => "ModelBudget",
            Self::DeadlineExceeded => "DeadlineExceeded",
            Self::TooManyCalls => "TooManyCalls",
        }
    }
}

impl fmt::Display for HaltReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an event records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventKind {
    /// A transport attempt was admitted; the count is the number of model calls so far.
    ModelCall,
    /// The function-invocation middleware saw a tool call; the count is its observations so far.
    Middleware,
    /// A tool attempt was admitted; the count is the number of tool calls so far.
    ToolCall,
    /// The run was halted.
    Halt(HaltReason),
}

impl EventKind {
    /// The kind's name: `ModelCall`, `Middleware`, `ToolCall` or the halt reason's name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::ModelCall => "ModelCall",
            Self::Middleware => "Middleware",
            Self::ToolCall => "ToolCall",
            Self::Halt(reason) => reason.as_str(),
        }
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for EventKind {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// One entry of the audit log: `{kind, name, count}`.
///
/// Serialises as `{"kind":"ToolCall","name":"read_ticket","count":1}`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ControlEvent {
    kind: EventKind,
    name: Arc<str>,
    count: u32,
}

impl ControlEvent {
    pub(crate) fn new(kind: EventKind, name: Arc<str>, count: u32) -> Self {
        Self { kind, name, count }
    }

    /// What happened.
    #[must_use]
    pub fn kind(&self) -> EventKind {
        self.kind
    }

    /// The tool's name, or `model` for model calls and model-budget halts.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The count at the time of the event (see [`EventKind`]).
    #[must_use]
    pub fn count(&self) -> u32 {
        self.count
    }
}

impl fmt::Display for ControlEvent {
    /// Formats as `ToolCall read_ticket 1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.kind, self.name, self.count)
    }
}

impl Serialize for ControlEvent {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut event = serializer.serialize_struct("ControlEvent", 3)?;
        event.serialize_field("kind", &self.kind)?;
        event.serialize_field("name", &*self.name)?;
        event.serialize_field("count", &self.count)?;
        event.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_serialises_as_kind_name_count() {
        let event = ControlEvent::new(EventKind::Halt(HaltReason::RepeatedCall), "read_ticket".into(), 1);
        assert_eq!(
            serde_json::to_string(&event).unwrap_or_default(),
            r#"{"kind":"RepeatedCall","name":"read_ticket","count":1}"#
        );
        assert_eq!(event.to_string(), "RepeatedCall read_ticket 1");
    }
}
