//! The ordered audit log of a run: what was admitted, observed and refused.
//!
//! # Invariants
//!
//! - An event carries a kind, a [`Subject`] (the model, the run, or one tool) and a count. It
//!   never carries arguments or signatures: those stay private inside the scope.
//! - A subject's name is `model`, `run` or the tool's name; no tool may be named `model` or
//!   `run` (a set refuses those names), so a name read back always means one subject.
//! - Counts of `ModelCall`, `Middleware` and `ToolCall` events are strictly increasing within
//!   their kind, starting at 1: the n-th admitted model call is recorded with count n.
//! - A log holds at most one halt event per attempt, and nothing is admitted after it. A
//!   journaled run's log spans its attempts (each resume adds a `Resumed` event), so an attempt
//!   that ended on its deadline may be followed by a resumed one.
//! - Durable events (`Proposed`, `Allowed`, `Denied`, `EffectStarted`, `EffectRecorded`,
//!   `Reconciled`, `AwaitingApproval`) name an operation id and, for decisions, who decided: never an argument.
//!   A `Closed` event names who closed the run and the reason the host gave, in the host's own
//!   words (what the host chose to write, never a tool's argument or result).
//!
//! # What a halt's count means
//!
//! A halt event carries the count it stopped at: `RepeatedCall` the admitted attempts of the
//! refused signature (so `RepeatedCall read_ticket 1` with the default limit); `PermissionDenied`
//! and `ToolBudget` the tool calls admitted so far; `ModelBudget` the model calls admitted so far;
//! `DeadlineExceeded` the model calls so far when it is charged to `model`, else the tool calls so
//! far when it is charged to the tool whose body was running; `TooManyCalls` (charged to `model`,
//! whose reply it was) the model calls so far, the refused reply's call included; `NoProgress`
//! for a cycle the tool calls admitted so far, for an error streak the streak's length (charged
//! to `model` when the last call named no known tool).

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
    /// The tool-call budget ([`Limits::tool_calls`](crate::Limits::tool_calls)) was spent: the
    /// model asked for one more tool call after the budget's number had been admitted.
    ///
    /// What it counts is the tool calls the guard *admits* in the run, all tools together (a
    /// limit of one tool is [`ToolLimit`](Self::ToolLimit)): a call counts once it has passed
    /// every check, before its body runs, so a body that then fails, times out or is cancelled
    /// has counted, and a call that is refused (no capability, a repetition, a limit), nudged
    /// instead, or that names no tool of the set has not. The calls admitted by sub-agents
    /// (child scopes) count too, and a journaled run's count goes on across its attempts.
    ///
    /// With a budget of `n`, the calls up to the `n`-th run; the next call the model asks for
    /// halts the run before anything of it runs (its event is `ToolBudget <tool> n`, the
    /// outcome's status [`Status::ToolBudget`](crate::Status::ToolBudget)). A run whose model
    /// asks for `n` calls or fewer never halts on it.
    ToolBudget,
    /// The model-call budget was spent.
    ModelBudget,
    /// The run's wall-clock deadline passed.
    DeadlineExceeded,
    /// A model reply asked for more tool calls than the per-reply bound; it was refused whole.
    TooManyCalls,
    /// The host's policy or an approver refused a proposal; the event names the
    /// operation and who decided.
    Denied,
    /// A model call's reservation did not fit a token budget, a settlement crossed one, or a
    /// stream passed its reservation.
    TokenBudget,
    /// A model call's or a priced tool's cost did not fit the cost budget, or a settlement
    /// crossed it.
    CostBudget,
    /// A tool reached its own per-run limit.
    ToolLimit,
    /// A progress check (SPEC §25) found a loop that makes no progress: a cycle of calls with
    /// no new result, or a streak of failed calls; the outcome's detail says which.
    NoProgress,
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
            Self::Denied => "Denied",
            Self::TokenBudget => "TokenBudget",
            Self::CostBudget => "CostBudget",
            Self::ToolLimit => "ToolLimit",
            Self::NoProgress => "NoProgress",
        }
    }
}

impl HaltReason {
    /// Whether the halt is a limit's (a budget, the repetition limit, a tool's own limit): the
    /// stops a wrap-up may follow.
    #[must_use]
    pub const fn is_limit(self) -> bool {
        matches!(
            self,
            Self::RepeatedCall
                | Self::ToolBudget
                | Self::ModelBudget
                | Self::TokenBudget
                | Self::CostBudget
                | Self::ToolLimit
                | Self::NoProgress
        )
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
    /// The built-in function-invocation middleware ([`Middleware`](crate::Middleware)), when the
    /// host attached it, saw a tool call; the count is the observations so far.
    Middleware,
    /// A tool attempt was admitted; the count is the number of tool calls so far.
    ToolCall,
    /// The run was halted.
    Halt(HaltReason),
    /// A journaled call's proposal was made: the count is the operation's ordinal,
    /// and the event names the operation.
    Proposed,
    /// A proposal was allowed, by the tool's policy or by an approver (named by the event).
    Allowed,
    /// An effect's `started` record was committed; its body runs next.
    EffectStarted,
    /// An effect's result was committed.
    EffectRecorded,
    /// A journaled run was resumed; the name is `run` and the count the attempt's number (2 for
    /// the first resume).
    Resumed,
    /// The host settled an ambiguous operation (it ran, with a result, or it did not run).
    Reconciled,
    /// A journaled run stopped on a proposal that waits for the host's decision: the count is
    /// the operation's ordinal, and the event names the operation.
    AwaitingApproval,
    /// The host widened a journaled run's definition (grants or limits); the name is `run`, the
    /// count the widening's number (1 for the first), and the event names who widened it.
    Widened,
    /// A host's cancel request through the journal ended a journaled run's attempt (it ends as a
    /// caller cancellation): the name is `run`, the count the attempt's number (1 for the
    /// first), and the event names who asked.
    Cancelled,
    /// The one model call a wrap-up kept aside was admitted after a limit stopped the run; the
    /// name is `model` and the count the model calls so far, this one included.
    WrapUp,
    #[cfg_attr(
        feature = "journal",
        doc = " A host closed a journaled run ([`journal::close`](crate::journal::close)): the name is"
    )]
    #[cfg_attr(
        not(feature = "journal"),
        doc = " A host closed a journaled run (`journal::close`): the name is"
    )]
    /// `run`, the count the number of attempts that took it, and the event names who closed it
    /// and why ([`ControlEvent::reason`]).
    Closed,
    /// A host asked again for a decision on a waiting proposal, with a new expiry
    #[cfg_attr(
        feature = "journal",
        doc = " ([`journal::ask_again`](crate::journal::ask_again)): the name is the tool's, the count"
    )]
    #[cfg_attr(not(feature = "journal"), doc = " (`journal::ask_again`): the name is the tool's, the count")]
    /// the operation's ordinal, and the event names the operation and who asked.
    AskedAgain,
    /// The progress policy answered a repetition or a cycle with its one nudge instead of a
    /// halt: the name is the refused call's tool, the count 1. The call's body did not run and
    /// nothing was reserved.
    Nudged,
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
            Self::Proposed => "Proposed",
            Self::Allowed => "Allowed",
            Self::EffectStarted => "EffectStarted",
            Self::EffectRecorded => "EffectRecorded",
            Self::Resumed => "Resumed",
            Self::Reconciled => "Reconciled",
            Self::AwaitingApproval => "AwaitingApproval",
            Self::Widened => "Widened",
            Self::Cancelled => "Cancelled",
            Self::WrapUp => "WrapUp",
            Self::Closed => "Closed",
            Self::AskedAgain => "AskedAgain",
            Self::Nudged => "Nudged",
        }
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl HaltReason {
    /// Every halt reason of this version.
    #[cfg(feature = "journal")]
    pub(crate) const ALL: [Self; 11] = [
        Self::PermissionDenied,
        Self::RepeatedCall,
        Self::ToolBudget,
        Self::ModelBudget,
        Self::DeadlineExceeded,
        Self::TooManyCalls,
        Self::Denied,
        Self::TokenBudget,
        Self::CostBudget,
        Self::ToolLimit,
        Self::NoProgress,
    ];
}

impl EventKind {
    /// Every kind that is not a halt.
    #[cfg(feature = "journal")]
    const PLAIN: [Self; 16] = [
        Self::ModelCall,
        Self::Middleware,
        Self::ToolCall,
        Self::Proposed,
        Self::Allowed,
        Self::EffectStarted,
        Self::EffectRecorded,
        Self::Resumed,
        Self::Reconciled,
        Self::AwaitingApproval,
        Self::Widened,
        Self::Cancelled,
        Self::WrapUp,
        Self::Closed,
        Self::AskedAgain,
        Self::Nudged,
    ];

    /// The kind whose [`as_str`](Self::as_str) is `name`, as a journal stores it.
    #[cfg(feature = "journal")]
    pub(crate) fn from_name(name: &str) -> Option<Self> {
        Self::PLAIN
            .into_iter()
            .chain(HaltReason::ALL.into_iter().map(Self::Halt))
            .find(|kind| kind.as_str() == name)
    }
}

impl Serialize for EventKind {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// What an event is about.
///
/// Its [`name`](Self::name) is how events print and serialise it: `model`, `run`, or the tool's
/// own name. Tool names `model` and `run` are refused when a tool is defined, so the name alone
/// tells which subject it is ([`Subject::from_name`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Subject {
    /// The model: model calls, and the halts charged to one (`ModelBudget`, `TooManyCalls`, a
    /// deadline that passed while waiting for a reply).
    Model,
    /// The logical run as a whole (`Resumed`).
    Run,
    /// One tool, by name.
    Tool(Arc<str>),
}

impl Subject {
    /// The name of the model subject.
    pub const MODEL: &'static str = "model";
    /// The name of the run subject.
    pub const RUN: &'static str = "run";

    /// `model`, `run`, or the tool's name.
    #[must_use]
    pub fn name(&self) -> &str {
        match self {
            Self::Model => Self::MODEL,
            Self::Run => Self::RUN,
            Self::Tool(name) => name,
        }
    }

    /// The subject an event's name stands for: `model`, `run`, else the tool of that name.
    #[must_use]
    pub fn from_name(name: &str) -> Self {
        match name {
            Self::MODEL => Self::Model,
            Self::RUN => Self::Run,
            tool => Self::Tool(Arc::from(tool)),
        }
    }

    /// Whether `name` is a subject's own (`model` or `run`), which no tool may take.
    #[must_use]
    pub fn is_reserved(name: &str) -> bool {
        name == Self::MODEL || name == Self::RUN
    }

    /// Whether `name` has a tool name's form: 1 to 64 characters of `A-Z a-z 0-9 _ -`.
    pub(crate) fn is_well_formed(name: &str) -> bool {
        (1..=64).contains(&name.len())
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    }

    /// Whether `name` may name a tool: well formed ([`is_well_formed`](Self::is_well_formed))
    /// and not a subject's own ([`is_reserved`](Self::is_reserved)).
    pub(crate) fn is_tool_name(name: &str) -> bool {
        Self::is_well_formed(name) && !Self::is_reserved(name)
    }

    /// The tool's name, for a tool subject.
    #[must_use]
    pub fn tool(&self) -> Option<&str> {
        match self {
            Self::Tool(name) => Some(name),
            Self::Model | Self::Run => None,
        }
    }
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One entry of the audit log: `{kind, name, count}`, and for the durable events of a
/// journaled run the operation and who decided.
///
/// Serialises as `{"kind":"ToolCall","name":"read_ticket","count":1}`; `operation`, `by` and
/// `reason` are added only when present.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ControlEvent {
    kind: EventKind,
    subject: Subject,
    count: u32,
    operation: Option<Arc<str>>,
    by: Option<Arc<str>>,
    reason: Option<Arc<str>>,
}

impl ControlEvent {
    pub(crate) fn new(kind: EventKind, subject: Subject, count: u32) -> Self {
        Self { kind, subject, count, operation: None, by: None, reason: None }
    }

    /// This event, giving the host's reason (a `Closed` event's).
    #[cfg(feature = "journal")]
    pub(crate) fn because(mut self, reason: Arc<str>) -> Self {
        self.reason = Some(reason);
        self
    }

    /// This event, naming `operation`.
    #[cfg(feature = "journal")]
    pub(crate) fn on(mut self, operation: Arc<str>) -> Self {
        self.operation = Some(operation);
        self
    }

    /// This event, naming who decided (`policy`, or `approver <name>`).
    pub(crate) fn by(mut self, by: Arc<str>) -> Self {
        self.by = Some(by);
        self
    }

    /// What happened.
    #[must_use]
    pub fn kind(&self) -> EventKind {
        self.kind
    }

    /// What the event is about.
    #[must_use]
    pub fn subject(&self) -> &Subject {
        &self.subject
    }

    /// The subject's name: the tool's, or `model`, or `run` (see [`Subject::name`]).
    #[must_use]
    pub fn name(&self) -> &str {
        self.subject.name()
    }

    /// The count at the time of the event (see [`EventKind`]).
    #[must_use]
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The operation a durable event is about (e.g. `refund-42/op/1`), if any.
    #[must_use]
    pub fn operation(&self) -> Option<&str> {
        self.operation.as_deref()
    }

    /// Who decided, for `Allowed` and `Denied` (`policy`, or `approver <name>`), who settled a
    /// `Reconciled` operation, and who widened, cancelled or closed a run.
    #[must_use]
    pub fn decided_by(&self) -> Option<&str> {
        self.by.as_deref()
    }

    /// The host's reason, for a `Closed` event: its own words, stored as they were given.
    #[must_use]
    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }
}

impl fmt::Display for ControlEvent {
    /// Formats as `ToolCall read_ticket 1`, a durable event as
    /// `Allowed refund 1 refund-42/op/1 by policy`, and a closed run's as
    /// `Closed run 2 by alice: the customer withdrew`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.kind, self.subject, self.count)?;
        if let Some(operation) = &self.operation {
            write!(f, " {operation}")?;
        }
        if let Some(by) = &self.by {
            write!(f, " by {by}")?;
        }
        if let Some(reason) = &self.reason {
            write!(f, ": {reason}")?;
        }
        Ok(())
    }
}

impl Serialize for ControlEvent {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let fields = 3
            + usize::from(self.operation.is_some())
            + usize::from(self.by.is_some())
            + usize::from(self.reason.is_some());
        let mut event = serializer.serialize_struct("ControlEvent", fields)?;
        event.serialize_field("kind", &self.kind)?;
        event.serialize_field("name", self.subject.name())?;
        event.serialize_field("count", &self.count)?;
        if let Some(operation) = &self.operation {
            event.serialize_field("operation", &**operation)?;
        }
        if let Some(by) = &self.by {
            event.serialize_field("by", &**by)?;
        }
        if let Some(reason) = &self.reason {
            event.serialize_field("reason", &**reason)?;
        }
        event.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_serialises_as_kind_name_count() {
        let event = ControlEvent::new(
            EventKind::Halt(HaltReason::RepeatedCall),
            Subject::Tool("read_ticket".into()),
            1,
        );
        assert_eq!(
            serde_json::to_string(&event).unwrap_or_default(),
            r#"{"kind":"RepeatedCall","name":"read_ticket","count":1}"#
        );
        assert_eq!(event.to_string(), "RepeatedCall read_ticket 1");
    }

    #[cfg(feature = "journal")]
    #[test]
    fn a_durable_event_names_its_operation_and_who_decided() {
        let event = ControlEvent::new(EventKind::Allowed, Subject::Tool("refund".into()), 1)
            .on("r-1/op/1".into())
            .by("approver alice".into());
        assert_eq!(event.to_string(), "Allowed refund 1 r-1/op/1 by approver alice");
        assert_eq!(
            serde_json::to_string(&event).unwrap_or_default(),
            r#"{"kind":"Allowed","name":"refund","count":1,"operation":"r-1/op/1","by":"approver alice"}"#
        );
    }

    #[test]
    fn a_subject_is_read_back_from_its_name() {
        for subject in [Subject::Model, Subject::Run, Subject::Tool("read_ticket".into())] {
            assert_eq!(Subject::from_name(subject.name()), subject);
        }
        assert!(Subject::is_reserved("model") && Subject::is_reserved("run"));
        assert!(!Subject::is_reserved("Model"));
    }

    #[cfg(feature = "journal")]
    #[test]
    fn every_kind_is_found_by_its_name() {
        for kind in EventKind::PLAIN.into_iter().chain(HaltReason::ALL.into_iter().map(EventKind::Halt)) {
            assert_eq!(EventKind::from_name(kind.as_str()), Some(kind));
        }
        assert_eq!(EventKind::from_name("toolcall"), None);
    }
}
