//! What a watcher receives: one [`Update`] per step of the run, in the order it happened.
//!
//! # Invariants
//!
//! - No update carries a tool call's arguments unless the host asked for them
//!   ([`Feed::with_arguments`](super::Feed::with_arguments)), and even then `Debug` never prints
//!   them: an update may end up in a log line.
//! - An [`Update::Event`] is the audit event exactly as the scope recorded it: the same value
//!   that the outcome's [`events`](crate::Outcome::events) holds.
//! - Every payload is its own `#[non_exhaustive]` struct read through accessors, so a field
//!   (a place in a tree of agents, say) can be added without breaking a host.

use std::fmt;
use std::sync::Arc;

use crate::event::ControlEvent;
use crate::outcome::{Outcome, RunError, Status};

/// One step of a watched run, as it happened.
///
/// Serialises with a `type` tag, e.g. `{"type":"event","kind":"ModelCall","name":"model","count":1}`
/// or `{"type":"text","reply":1,"text":"Review"}`: the form a Server-Sent-Events endpoint sends,
/// and the form a journaled run's recorded stream stores and serves back. That form is a
/// contract of its own, written by hand and pinned, not this type's shape: see the table in
/// the [`watch`](super) module's docs, "The JSON of an update".
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Update {
    /// An audit event, as the scope recorded it. Never dropped.
    Event(ControlEvent),
    /// The model's text: a piece as it arrives over a streaming transport, the whole text of a
    /// reply otherwise. Pieces of one reply that the watcher has not read yet are merged into one.
    Text(Text),
    /// The loop takes a tool call up, before the middleware and the guard see it.
    ToolStarted(ToolStarted),
    /// The answer a tool call gives the model: its result, or its error.
    ToolResult(ToolResult),
    /// A journaled run stopped on an operation that waits for the host (`AwaitingApproval`, or
    /// `Ambiguous`); the outcome follows.
    Suspended(Suspension),
    /// The run's outcome: the last update.
    Outcome(Outcome),
    /// The run ended without an outcome (the caller cancelled, the provider or the journal
    /// failed): the last update.
    Error(RunError),
}

impl Update {
    /// Whether this is the run's last update (an outcome or an error).
    #[must_use]
    pub fn is_final(&self) -> bool {
        matches!(self, Self::Outcome(_) | Self::Error(_))
    }
}

/// Text of one model reply.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Text {
    pub(crate) reply: u32,
    pub(crate) text: String,
}

impl Text {
    /// The reply it belongs to: 1 for the loop's first reply in this attempt, 2 for the next.
    #[must_use]
    pub fn reply(&self) -> u32 {
        self.reply
    }

    /// The text: a piece, several merged pieces, or the reply's whole text.
    #[must_use]
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// A tool call the loop takes up.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolStarted {
    pub(crate) reply: u32,
    pub(crate) index: u32,
    pub(crate) call_id: String,
    pub(crate) name: String,
    pub(crate) arguments: Option<String>,
}

impl ToolStarted {
    /// The reply that asked for it (as [`Text::reply`]).
    #[must_use]
    pub fn reply(&self) -> u32 {
        self.reply
    }

    /// Its position in the reply: 0 for the first call.
    #[must_use]
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The provider's id for the call.
    #[must_use]
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The tool's name, as the model wrote it.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The arguments' JSON text as the model sent it, only when the host opted in with
    /// [`Feed::with_arguments`](super::Feed::with_arguments); `None` otherwise.
    #[must_use]
    pub fn arguments(&self) -> Option<&str> {
        self.arguments.as_deref()
    }
}

impl fmt::Debug for ToolStarted {
    /// Never prints the arguments, only their length.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolStarted")
            .field("reply", &self.reply)
            .field("index", &self.index)
            .field("call_id", &self.call_id)
            .field("name", &self.name)
            .field("arguments_len", &self.arguments.as_ref().map(String::len))
            .finish()
    }
}

/// The answer one tool call gives the model.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolResult {
    pub(crate) reply: u32,
    pub(crate) index: u32,
    pub(crate) call_id: String,
    pub(crate) text: String,
    pub(crate) is_error: bool,
}

impl ToolResult {
    /// The reply that asked for the call.
    #[must_use]
    pub fn reply(&self) -> u32 {
        self.reply
    }

    /// The call's position in the reply.
    #[must_use]
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The provider's id for the call.
    #[must_use]
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// What the model gets: the body's result, or the error message.
    #[must_use]
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether the call failed (unknown tool, binding error, body error).
    #[must_use]
    pub fn is_error(&self) -> bool {
        self.is_error
    }
}

/// A run stopped on an operation that waits for the host.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Suspension {
    pub(crate) status: Status,
    pub(crate) operation: Option<Arc<str>>,
    /// For `AwaitingApproval`, the proposal that waits, as the outcome hands it out.
    pub(crate) pending: Option<Box<crate::outcome::Pending>>,
}

impl Suspension {
    /// `AwaitingApproval` or `Ambiguous`.
    #[must_use]
    pub fn status(&self) -> Status {
        self.status
    }

    /// The operation the host acts on (e.g. `refund-42/op/2`).
    #[must_use]
    pub fn operation(&self) -> Option<&str> {
        self.operation.as_deref()
    }

    /// For `AwaitingApproval`, the proposal that waits for the host's decision (see
    /// [`Outcome::pending`](crate::Outcome::pending)).
    #[cfg(feature = "journal")]
    #[must_use]
    pub fn pending(&self) -> Option<&crate::journal::Proposal> {
        self.pending.as_deref()
    }
}
