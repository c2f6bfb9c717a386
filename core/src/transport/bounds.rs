//! The bounds on one model reply: how many tool calls, and how many bytes, a provider may send.
//!
//! A transport learns them from the [`ChatRequest`](super::ChatRequest) (the scope's
//! [`Limits`](crate::Limits)); the [`ReplyAssembler`](super::ReplyAssembler) enforces them on
//! every streamed reply, and the model budget ([`Budgeted`](crate::Budgeted)) on every whole one,
//! so they hold whatever the transport does. A transport that reads bytes itself (over HTTP, say)
//! applies them while it reads, so that memory stays bounded by the figure, not by time.
//!
//! # Invariants
//!
//! - A reply with more than [`calls`](ReplyBounds::calls) tool calls is refused with
//!   [`TransportErrorKind::TooManyCalls`](super::TransportErrorKind::TooManyCalls), which the model budget turns into the `TooManyCalls` halt:
//!   no call of that reply is observed or runs, and nothing of it enters the conversation.
//! - A reply of more than [`bytes`](ReplyBounds::bytes) bytes is refused with
//!   [`TransportErrorKind::Malformed`](super::TransportErrorKind::Malformed). In memory, a reply counts its text and every call's id, name
//!   and arguments; a transport that reads a wire format counts the framing too.
//! - Refusing happens as soon as a bound is crossed: the piece that crosses it is not kept.

use super::TransportError;
use super::message::ModelReply;
use crate::limits::Limits;

/// How many tool calls and bytes one model reply may hold.
///
/// ```
/// use loopbound::Limits;
/// use loopbound::transport::{ModelReply, ReplyBounds, TransportError};
///
/// let bounds = Limits::default().with_calls_per_reply(1).reply_bounds();
/// assert_eq!(bounds.check(&ModelReply::call("c1", "read_ticket", "{}")), Ok(()));
/// let two = ModelReply::calls(vec![
///     loopbound::transport::ToolCall::new("c1", "read_ticket", "{}"),
///     loopbound::transport::ToolCall::new("c2", "read_ticket", "{}"),
/// ]);
/// assert_eq!(bounds.check(&two), Err(TransportError::too_many_calls(1)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReplyBounds {
    calls: u32,
    bytes: usize,
}

impl ReplyBounds {
    /// At most `calls` tool calls and `bytes` bytes in one reply.
    #[must_use]
    pub const fn new(calls: u32, bytes: usize) -> Self {
        Self { calls, bytes }
    }

    /// Tool calls one reply may hold.
    #[must_use]
    pub const fn calls(&self) -> u32 {
        self.calls
    }

    /// Bytes one reply may hold.
    #[must_use]
    pub const fn bytes(&self) -> usize {
        self.bytes
    }

    /// Whether a reply of `calls` distinct tool calls is over the bound.
    #[must_use]
    pub fn too_many(&self, calls: usize) -> bool {
        u32::try_from(calls).map_or(true, |calls| calls > self.calls)
    }

    /// The error for a reply with more tool calls than the bound.
    #[must_use]
    pub fn too_many_calls(&self) -> TransportError {
        TransportError::too_many_calls(self.calls)
    }

    /// The error for a reply longer than the bound.
    #[must_use]
    pub fn too_long(&self) -> TransportError {
        TransportError::malformed(format!("the reply is longer than {} bytes", self.bytes))
    }

    /// Checks a whole reply: its number of tool calls, then its size in memory (text, and every
    /// call's id, name and arguments).
    ///
    /// # Errors
    ///
    /// [`TransportErrorKind::TooManyCalls`](super::TransportErrorKind::TooManyCalls) or [`TransportErrorKind::Malformed`](super::TransportErrorKind::Malformed).
    pub fn check(&self, reply: &ModelReply) -> Result<(), TransportError> {
        if self.too_many(reply.tool_calls.len()) {
            return Err(self.too_many_calls());
        }
        let calls =
            reply.tool_calls.iter().map(|call| call.id.len() + call.name.len() + call.arguments.len());
        let size = calls.fold(reply.content.as_ref().map_or(0, String::len), usize::saturating_add);
        if size > self.bytes {
            return Err(self.too_long());
        }
        Ok(())
    }
}

impl Default for ReplyBounds {
    /// The bounds of [`Limits::default`]: 16 calls and 16 MiB.
    fn default() -> Self {
        Limits::default().reply_bounds()
    }
}

impl Limits {
    /// The bounds these limits set on one model reply.
    #[must_use]
    pub const fn reply_bounds(&self) -> ReplyBounds {
        ReplyBounds::new(self.calls_per_reply(), self.reply_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::ToolCall;

    #[test]
    fn a_whole_reply_is_measured_by_its_text_and_every_field_of_its_calls() {
        let bounds = ReplyBounds::new(2, 10);
        let reply = ModelReply {
            content: Some("abcd".into()),
            tool_calls: vec![ToolCall::new("i", "n", "{}"), ToolCall::new("j", "m", "")],
            usage: None,
        };
        assert_eq!(bounds.check(&reply), Ok(()));
        let mut longer = reply.clone();
        longer.tool_calls[1].arguments.push('x');
        assert_eq!(
            bounds.check(&longer),
            Err(TransportError::malformed("the reply is longer than 10 bytes"))
        );
        let mut more = reply;
        more.tool_calls.push(ToolCall::new("", "", ""));
        assert_eq!(bounds.check(&more), Err(TransportError::too_many_calls(2)));
    }
}
