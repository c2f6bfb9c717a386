//! Streaming replies: chunks, tool-call deltas, and their assembly into one reply.
//!
//! # Invariants
//!
//! - Text deltas are concatenated in arrival order.
//! - Tool-call deltas are grouped by their index and the calls come out in index order, whatever
//!   order the indices first appear in; an index costs memory only when it appears, so a huge
//!   index cannot allocate a huge vector.
//! - Argument fragments of one call are concatenated in arrival order; the first id and name
//!   seen for an index are kept. A call without an id gets `call_<index>`.
//! - The last usage report wins: reports are the reply's counts so far, not increments.
//! - The assembler holds at most its [`ReplyBounds`]: a chunk that would open one call index
//!   too many, or bring the reply's bytes (text, ids, names, arguments, counted as received)
//!   past the bound, is refused whole with the bound's error, and so is every chunk after it.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_core::Stream;

use super::TransportError;
use super::bounds::ReplyBounds;
use super::message::{ModelReply, ToolCall, Usage};

/// One piece of a streamed reply.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReplyChunk {
    /// A text fragment.
    pub content: Option<String>,
    /// Tool-call fragments.
    pub tool_calls: Vec<ToolCallDelta>,
    /// The reply's token counts so far, usually on the last chunk. Each report replaces the
    /// one before: a provider that reports cumulative counts as it goes (Anthropic's
    /// `message_delta`) is read correctly, and one that reports once is too.
    pub usage: Option<Usage>,
}

impl ReplyChunk {
    /// A chunk of text.
    pub fn text(content: impl Into<String>) -> Self {
        Self { content: Some(content.into()), ..Self::default() }
    }

    /// A chunk of tool-call fragments.
    #[must_use]
    pub fn calls(tool_calls: Vec<ToolCallDelta>) -> Self {
        Self { tool_calls, ..Self::default() }
    }

    /// A chunk carrying only the reply's usage so far.
    #[must_use]
    pub fn usage(usage: Usage) -> Self {
        Self { usage: Some(usage), ..Self::default() }
    }

    /// This chunk with the reply's usage so far.
    #[must_use]
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }
}

/// A fragment of one tool call within a streamed reply.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolCallDelta {
    /// Which call of the reply this fragment belongs to.
    pub index: u32,
    /// The call's id (usually on the first fragment only).
    pub id: Option<String>,
    /// The tool's name (usually on the first fragment only).
    pub name: Option<String>,
    /// A fragment of the arguments' JSON text.
    pub arguments: Option<String>,
}

impl ToolCallDelta {
    /// A fragment of call `index` that carries nothing yet.
    #[must_use]
    pub fn new(index: u32) -> Self {
        Self { index, ..Self::default() }
    }

    /// This fragment with the call's id.
    #[must_use]
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// This fragment with the tool's name.
    #[must_use]
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// This fragment with a piece of the arguments' JSON text.
    #[must_use]
    pub fn with_arguments(mut self, arguments: impl Into<String>) -> Self {
        self.arguments = Some(arguments.into());
        self
    }
}

#[derive(Debug, Default)]
struct PartialCall {
    id: Option<String>,
    name: Option<String>,
    arguments: String,
}

/// Assembles streamed chunks into one [`ModelReply`], within [`ReplyBounds`].
///
/// ```
/// use loopbound::transport::{ReplyAssembler, ReplyBounds, ReplyChunk, ToolCallDelta, TransportError};
///
/// let mut reply = ReplyAssembler::default();
/// reply.push(ReplyChunk::calls(vec![
///     ToolCallDelta::new(0).with_id("c1").with_name("read_ticket").with_arguments("{\"in"),
/// ]))?;
/// reply.push(ReplyChunk::calls(vec![ToolCallDelta::new(0).with_arguments("put\":42}")]))?;
/// let reply = reply.finish();
/// assert_eq!(reply.tool_calls[0].arguments, r#"{"input":42}"#);
///
/// // One call index too many is refused.
/// let mut bounded = ReplyAssembler::new(ReplyBounds::new(1, 1024));
/// let call = |index| ReplyChunk::calls(vec![ToolCallDelta::new(index)]);
/// assert_eq!(bounded.push(call(0)), Ok(()));
/// assert_eq!(bounded.push(call(1)), Err(TransportError::too_many_calls(1)));
/// # Ok::<(), TransportError>(())
/// ```
#[derive(Debug, Default)]
pub struct ReplyAssembler {
    content: Option<String>,
    calls: BTreeMap<u32, PartialCall>,
    usage: Option<Usage>,
    bounds: ReplyBounds,
    /// Bytes received so far: text, ids, names and arguments.
    bytes: usize,
    /// The error that refused a chunk, repeated for every later chunk.
    refused: Option<TransportError>,
}

impl ReplyAssembler {
    /// An assembler that refuses a reply past `bounds`.
    #[must_use]
    pub fn new(bounds: ReplyBounds) -> Self {
        Self { bounds, ..Self::default() }
    }

    /// Adds one chunk, unless it crosses the bounds.
    ///
    /// # Errors
    ///
    /// [`TransportErrorKind::TooManyCalls`](super::TransportErrorKind::TooManyCalls) when the chunk opens one call index too many;
    /// [`TransportErrorKind::Malformed`](super::TransportErrorKind::Malformed) when it brings the reply past its byte bound. Nothing of a
    /// refused chunk is kept, and every later chunk gets the same error.
    pub fn push(&mut self, chunk: ReplyChunk) -> Result<(), TransportError> {
        if let Some(error) = &self.refused {
            return Err(error.clone());
        }
        if let Err(error) = self.admit(&chunk) {
            self.refused = Some(error.clone());
            return Err(error);
        }
        if let Some(text) = chunk.content {
            append(self.content.get_or_insert_with(String::new), text);
        }
        for delta in chunk.tool_calls {
            let call = self.calls.entry(delta.index).or_default();
            if call.id.is_none() {
                call.id = delta.id.filter(|id| !id.is_empty());
            }
            if call.name.is_none() {
                call.name = delta.name.filter(|name| !name.is_empty());
            }
            if let Some(fragment) = delta.arguments {
                append(&mut call.arguments, fragment);
            }
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage);
        }
        Ok(())
    }

    /// Counts `chunk` against the bounds, before anything of it is kept.
    fn admit(&mut self, chunk: &ReplyChunk) -> Result<(), TransportError> {
        let field = |text: &Option<String>| text.as_ref().map_or(0, String::len);
        let mut bytes = field(&chunk.content);
        let mut opened = 0_usize;
        for (n, delta) in chunk.tool_calls.iter().enumerate() {
            bytes = bytes
                .saturating_add(field(&delta.id))
                .saturating_add(field(&delta.name))
                .saturating_add(field(&delta.arguments));
            let seen_before = chunk.tool_calls[..n].iter().any(|earlier| earlier.index == delta.index);
            if !seen_before && !self.calls.contains_key(&delta.index) {
                opened += 1;
            }
        }
        if self.bounds.too_many(self.calls.len().saturating_add(opened)) {
            return Err(self.bounds.too_many_calls());
        }
        let total = self.bytes.saturating_add(bytes);
        if total > self.bounds.bytes() {
            return Err(self.bounds.too_long());
        }
        self.bytes = total;
        Ok(())
    }

    /// The assembled reply.
    #[must_use]
    pub fn finish(self) -> ModelReply {
        let tool_calls = self
            .calls
            .into_iter()
            .map(|(index, call)| ToolCall {
                id: call.id.unwrap_or_else(|| format!("call_{index}")),
                name: call.name.unwrap_or_default(),
                arguments: call.arguments,
            })
            .collect();
        ModelReply { content: self.content, tool_calls, usage: self.usage }
    }
}

/// Appends `piece` to `text`; the first piece is moved in, not copied.
fn append(text: &mut String, piece: String) {
    if text.is_empty() {
        *text = piece;
    } else {
        text.push_str(&piece);
    }
}

/// A stream over chunks already in memory, for transports that do not stream natively.
#[derive(Debug)]
pub struct ChunkStream {
    chunks: std::vec::IntoIter<Result<ReplyChunk, TransportError>>,
}

impl ChunkStream {
    /// A stream yielding `chunks` in order.
    #[must_use]
    pub fn new(chunks: Vec<Result<ReplyChunk, TransportError>>) -> Self {
        Self { chunks: chunks.into_iter() }
    }

    /// A stream of one chunk holding the whole `reply`.
    #[must_use]
    pub fn whole(reply: ModelReply) -> Self {
        let tool_calls = reply
            .tool_calls
            .into_iter()
            .zip(0u32..)
            .map(|(call, index)| ToolCallDelta {
                index,
                id: Some(call.id),
                name: Some(call.name),
                arguments: Some(call.arguments),
            })
            .collect();
        Self::new(vec![Ok(ReplyChunk { content: reply.content, tool_calls, usage: reply.usage })])
    }
}

impl Stream for ChunkStream {
    type Item = Result<ReplyChunk, TransportError>;

    fn poll_next(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Poll::Ready(self.chunks.next())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_come_out_in_index_order_with_fragments_joined() {
        let mut assembler = ReplyAssembler::default();
        let delta = |index, id: Option<&str>, name: Option<&str>, arguments: &str| ToolCallDelta {
            index,
            id: id.map(Into::into),
            name: name.map(Into::into),
            arguments: Some(arguments.into()),
        };
        assembler
            .push(ReplyChunk {
                content: Some("Let me ".into()),
                tool_calls: vec![delta(7, Some("b"), Some("second"), "{\"x\"")],
                usage: Some(Usage::new(3, 1)),
            })
            .unwrap();
        assembler
            .push(ReplyChunk {
                content: Some("look.".into()),
                tool_calls: vec![delta(2, None, Some("first"), "{}"), delta(7, Some("ignored"), None, ":1}")],
                usage: Some(Usage::new(3, 5)),
            })
            .unwrap();
        let reply = assembler.finish();
        assert_eq!(reply.content.as_deref(), Some("Let me look."));
        assert_eq!(
            reply.tool_calls,
            vec![ToolCall::new("call_2", "first", "{}"), ToolCall::new("b", "second", "{\"x\":1}")]
        );
        assert_eq!(reply.usage, Some(Usage::new(3, 5)), "the last report wins");
    }

    #[test]
    fn a_huge_index_costs_one_entry() {
        let mut assembler = ReplyAssembler::default();
        assembler
            .push(ReplyChunk {
                tool_calls: vec![ToolCallDelta { index: u32::MAX, ..ToolCallDelta::default() }],
                ..ReplyChunk::default()
            })
            .unwrap();
        let reply = assembler.finish();
        assert_eq!(reply.tool_calls, vec![ToolCall::new(format!("call_{}", u32::MAX), "", "")]);
    }
}

#[cfg(test)]
mod bounds_tests {
    use super::*;

    fn text(text: &str) -> ReplyChunk {
        ReplyChunk { content: Some(text.into()), ..ReplyChunk::default() }
    }

    fn calls(indices: &[u32], arguments: &str) -> ReplyChunk {
        let tool_calls = indices
            .iter()
            .map(|&index| ToolCallDelta {
                index,
                arguments: Some(arguments.into()),
                ..ToolCallDelta::default()
            })
            .collect();
        ReplyChunk { tool_calls, ..ReplyChunk::default() }
    }

    #[test]
    fn one_call_index_too_many_refuses_the_chunk_and_every_later_one() {
        let mut assembler = ReplyAssembler::new(ReplyBounds::new(2, 1024));
        assert_eq!(assembler.push(calls(&[5, 5, 9], "{}")), Ok(()), "two distinct indices");
        assert_eq!(assembler.push(calls(&[9, 5], "")), Ok(()), "known indices open nothing");
        assert_eq!(assembler.push(calls(&[5, 1], "")), Err(TransportError::too_many_calls(2)));
        assert_eq!(assembler.push(text("a")), Err(TransportError::too_many_calls(2)));
        assert_eq!(assembler.finish().tool_calls.len(), 2, "nothing of the refused chunks was kept");
    }

    #[test]
    fn the_byte_bound_counts_text_and_every_field_as_received() {
        let mut assembler = ReplyAssembler::new(ReplyBounds::new(16, 10));
        assert_eq!(assembler.push(text("abcd")), Ok(()));
        let call = ToolCallDelta {
            index: 0,
            id: Some("i".into()),
            name: Some("nm".into()),
            arguments: Some("{}".into()),
        };
        assert_eq!(
            assembler.push(ReplyChunk { tool_calls: vec![call.clone()], ..ReplyChunk::default() }),
            Ok(())
        );
        // The id and name of a second fragment are dropped, but they were received: they count.
        let again = ToolCallDelta { arguments: None, ..call };
        let refused = assembler.push(ReplyChunk { tool_calls: vec![again], ..ReplyChunk::default() });
        assert_eq!(refused, Err(TransportError::malformed("the reply is longer than 10 bytes")));
        let reply = assembler.finish();
        assert_eq!(reply.content.as_deref(), Some("abcd"));
        assert_eq!(reply.tool_calls, vec![ToolCall::new("i", "nm", "{}")]);
    }

    #[test]
    fn a_reply_of_exactly_the_bounds_is_accepted() {
        let mut assembler = ReplyAssembler::new(ReplyBounds::new(1, 6));
        assert_eq!(assembler.push(text("abc")), Ok(()));
        assert_eq!(assembler.push(calls(&[3], "{}")), Ok(()));
        assert_eq!(assembler.push(text("d")), Ok(()));
        assert_eq!(assembler.push(text("")), Ok(()));
        assert_eq!(
            assembler.push(text("e")),
            Err(TransportError::malformed("the reply is longer than 6 bytes"))
        );
    }
}
