//! The result of a run: a status, the text when it is kept, and the ordered events.
//!
//! # Invariants
//!
//! - Text is kept only for [`Status::Completed`] and [`Status::Incomplete`]; every halt,
//!   `DeadlineExceeded`, `ProviderUnavailable`, `AwaitingApproval` and `Ambiguous` drop it. An [`Outcome`] can only be built by
//!   the runtime, so this holds for every outcome a caller sees.
//! - `Completed` means the host's completion condition held when the run ended; a model's
//!   sentence is never proof.
//! - The caller's cancellation and provider errors are errors ([`RunError`]), not statuses.

use std::fmt;
use std::sync::Arc;

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

use crate::event::{ControlEvent, HaltReason};
use crate::journal::JournalError;
use crate::transport::{TransportError, Usage};

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    /// The run ended and the host's completion condition holds.
    Completed,
    /// The run ended with text, but the completion condition does not hold.
    Incomplete,
    /// A tool was invoked without its capability.
    PermissionDenied,
    /// One signature exceeded its repetition limit.
    RepeatedCall,
    /// The tool-call budget was spent.
    ToolBudget,
    /// The model-call budget was spent.
    ModelBudget,
    /// The deadline passed first.
    DeadlineExceeded,
    /// The transport could not reach the provider.
    ProviderUnavailable,
    /// A model reply asked for more tool calls than the per-reply bound; none of them ran.
    TooManyCalls,
    /// A journaled run stopped on a proposal that waits for the host's decision; the
    /// outcome names the operation, and the run can be resumed once it is decided.
    AwaitingApproval,
    /// The host's policy or an approver refused a proposal: a halt.
    Denied,
    /// An effect's `started` record is committed and it has no result, and the attempt that
    /// started it no longer holds the run (it crashed, or stopped inside the body, and its lease
    /// is gone): the effect may or may not have happened. The outcome names the operation; the
    /// host finds out in the effect's own system, reconciles it, then resumes.
    ///
    /// The journal reports this only once that attempt's lease has expired or been released, so
    /// an attempt still running the body never leads to it. The host may conclude "it did not
    /// run" only when the effect's system shows no effect under the operation's id and will
    /// refuse one from that attempt from now on (it applies each operation id once, or refuses
    /// an epoch older than one it has seen: see [`Call::fencing_token`](crate::Call::fencing_token));
    /// a process paused inside the body may otherwise still apply the effect later.
    Ambiguous,
}

impl Status {
    /// Every status of this version, in the order of the statuses table. A slice: a later
    /// version may add statuses.
    pub const ALL: &'static [Self] = &[
        Self::Completed,
        Self::Incomplete,
        Self::PermissionDenied,
        Self::RepeatedCall,
        Self::ToolBudget,
        Self::ModelBudget,
        Self::DeadlineExceeded,
        Self::ProviderUnavailable,
        Self::TooManyCalls,
        Self::AwaitingApproval,
        Self::Denied,
        Self::Ambiguous,
    ];

    /// The status's name, e.g. `RepeatedCall`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "Completed",
            Self::Incomplete => "Incomplete",
            Self::PermissionDenied => "PermissionDenied",
            Self::RepeatedCall => "RepeatedCall",
            Self::ToolBudget => "ToolBudget",
            Self::ModelBudget => "ModelBudget",
            Self::DeadlineExceeded => "DeadlineExceeded",
            Self::ProviderUnavailable => "ProviderUnavailable",
            Self::TooManyCalls => "TooManyCalls",
            Self::AwaitingApproval => "AwaitingApproval",
            Self::Denied => "Denied",
            Self::Ambiguous => "Ambiguous",
        }
    }

    /// The status whose [`as_str`](Self::as_str) is `name`.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|status| status.as_str() == name)
    }

    /// Whether an outcome with this status keeps the model's text.
    #[must_use]
    pub const fn keeps_text(self) -> bool {
        matches!(self, Self::Completed | Self::Incomplete)
    }
}

impl From<HaltReason> for Status {
    fn from(reason: HaltReason) -> Self {
        match reason {
            HaltReason::PermissionDenied => Self::PermissionDenied,
            HaltReason::RepeatedCall => Self::RepeatedCall,
            HaltReason::ToolBudget => Self::ToolBudget,
            HaltReason::ModelBudget => Self::ModelBudget,
            HaltReason::DeadlineExceeded => Self::DeadlineExceeded,
            HaltReason::TooManyCalls => Self::TooManyCalls,
            HaltReason::Denied => Self::Denied,
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Status {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// What a run returns: `{status, text, events}`, plus usage and a provider message when known.
///
/// Serialises as `{"status":…,"text":…,"events":[…]}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    status: Status,
    text: Option<String>,
    events: Vec<ControlEvent>,
    usage: Option<Usage>,
    detail: Option<String>,
    operation: Option<Arc<str>>,
    pending: Option<Box<crate::journal::Proposal>>,
}

impl Outcome {
    /// An ended run: `Completed` or `Incomplete` by the host's condition, text kept.
    pub(crate) fn ended(
        completed: bool,
        text: Option<String>,
        events: Vec<ControlEvent>,
        usage: Option<Usage>,
    ) -> Self {
        let status = if completed { Status::Completed } else { Status::Incomplete };
        Self { status, text, events, usage, detail: None, operation: None, pending: None }
    }

    /// A stopped run: no text.
    pub(crate) fn stopped(
        status: Status,
        events: Vec<ControlEvent>,
        usage: Option<Usage>,
        detail: Option<String>,
    ) -> Self {
        debug_assert!(!status.keeps_text(), "a stop keeps no text");
        Self { status, text: None, events, usage, detail, operation: None, pending: None }
    }

    /// This outcome, naming the operation it stopped on (`AwaitingApproval`, `Denied`,
    /// `Ambiguous`).
    pub(crate) fn on(mut self, operation: Option<Arc<str>>) -> Self {
        self.operation = operation;
        self
    }

    /// This outcome, handing out the proposal it stopped on.
    pub(crate) fn awaiting(mut self, proposal: Box<crate::journal::Proposal>) -> Self {
        self.pending = Some(proposal);
        self
    }

    /// How the run ended.
    #[must_use]
    pub fn status(&self) -> Status {
        self.status
    }

    /// The model's last text: present only for `Completed` and `Incomplete`. Under
    /// `Incomplete` it is not a completed task and must not be shown as one.
    #[must_use]
    pub fn text(&self) -> Option<&str> {
        self.text.as_deref()
    }

    /// The ordered audit log.
    #[must_use]
    pub fn events(&self) -> &[ControlEvent] {
        &self.events
    }

    /// Token counts summed over the calls whose provider reported them.
    #[must_use]
    pub fn usage(&self) -> Option<Usage> {
        self.usage
    }

    /// For `ProviderUnavailable`, what the transport reported (e.g. a retry-after delay).
    #[must_use]
    pub fn detail(&self) -> Option<&str> {
        self.detail.as_deref()
    }

    /// For `AwaitingApproval`, `Denied` and `Ambiguous` in a journaled run, the operation id the
    /// host acts on (e.g. `refund-42/op/1`).
    #[must_use]
    pub fn operation(&self) -> Option<&str> {
        self.operation.as_deref()
    }

    /// For `AwaitingApproval`, the proposal that waits for the host's decision: its operation
    /// id, tool, capability, canonical arguments (a stored value, for the host's own display to
    /// an approver) and digest. Hand it to [`journal::approve`](crate::journal::approve) or
    /// [`journal::deny`](crate::journal::deny) as it is.
    #[must_use]
    pub fn pending(&self) -> Option<&crate::journal::Proposal> {
        self.pending.as_deref()
    }
}

impl Serialize for Outcome {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let fields = 3 + usize::from(self.operation.is_some());
        let mut outcome = serializer.serialize_struct("Outcome", fields)?;
        outcome.serialize_field("status", &self.status)?;
        outcome.serialize_field("text", &self.text)?;
        outcome.serialize_field("events", &self.events)?;
        if let Some(operation) = &self.operation {
            outcome.serialize_field("operation", &**operation)?;
        }
        outcome.end()
    }
}

/// A run that produced no outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunError {
    /// The caller cancelled. This wins every race with a halt or the deadline.
    Cancelled,
    /// The provider answered, but not usably (authentication refused, malformed or truncated
    /// reply, its own cancellation).
    Provider(TransportError),
    /// A journaled run's journal refused or failed: it fails closed, so nothing that
    /// could not be recorded ran.
    Journal(JournalError),
}

impl fmt::Display for RunError {
    /// Writes the inner error's words: a `RunError` is transparent over the transport's and the
    /// journal's errors, and its [`source`](std::error::Error::source) is theirs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cancelled => f.write_str("the run was cancelled by its caller"),
            Self::Provider(error) => error.fmt(f),
            Self::Journal(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for RunError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Cancelled => None,
            Self::Provider(error) => error.source(),
            Self::Journal(error) => error.source(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_completed_and_incomplete_keep_text() {
        let keeping: Vec<_> = Status::ALL.iter().copied().filter(|s| s.keeps_text()).collect();
        assert_eq!(keeping, [Status::Completed, Status::Incomplete]);
    }
}
