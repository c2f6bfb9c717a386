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

use std::collections::BTreeMap;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_core::Stream;

use super::TransportError;
use super::message::{ModelReply, ToolCall, Usage};

/// One piece of a streamed reply.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplyChunk {
    /// A text fragment.
    pub content: Option<String>,
    /// Tool-call fragments.
    pub tool_calls: Vec<ToolCallDelta>,
    /// Token counts, usually on the last chunk.
    pub usage: Option<Usage>,
}

/// A fragment of one tool call within a streamed reply.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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

#[derive(Debug, Default)]
struct PartialCall {
    id: Option<String>,
    name: Option<String>,
    arguments: String,
}

/// Assembles streamed chunks into one [`ModelReply`].
///
/// ```
/// use loopbound::transport::{ReplyAssembler, ReplyChunk, ToolCallDelta};
///
/// let mut reply = ReplyAssembler::default();
/// reply.push(ReplyChunk { tool_calls: vec![ToolCallDelta {
///     index: 0, id: Some("c1".into()), name: Some("read_ticket".into()), arguments: Some("{\"in".into()),
/// }], ..Default::default() });
/// reply.push(ReplyChunk { tool_calls: vec![ToolCallDelta {
///     index: 0, arguments: Some("put\":42}".into()), ..Default::default()
/// }], ..Default::default() });
/// let reply = reply.finish();
/// assert_eq!(reply.tool_calls[0].arguments, r#"{"input":42}"#);
/// ```
#[derive(Debug, Default)]
pub struct ReplyAssembler {
    content: Option<String>,
    calls: BTreeMap<u32, PartialCall>,
    usage: Option<Usage>,
}

impl ReplyAssembler {
    /// Adds one chunk.
    pub fn push(&mut self, chunk: ReplyChunk) {
        if let Some(text) = chunk.content {
            self.content.get_or_insert_with(String::new).push_str(&text);
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
                call.arguments.push_str(&fragment);
            }
        }
        if let Some(usage) = chunk.usage {
            *self.usage.get_or_insert_with(Usage::default) += usage;
        }
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
        assembler.push(ReplyChunk {
            content: Some("Let me ".into()),
            tool_calls: vec![delta(7, Some("b"), Some("second"), "{\"x\"")],
            usage: Some(Usage { prompt_tokens: 3, completion_tokens: 1 }),
        });
        assembler.push(ReplyChunk {
            content: Some("look.".into()),
            tool_calls: vec![delta(2, None, Some("first"), "{}"), delta(7, Some("ignored"), None, ":1}")],
            usage: Some(Usage { prompt_tokens: 0, completion_tokens: 4 }),
        });
        let reply = assembler.finish();
        assert_eq!(reply.content.as_deref(), Some("Let me look."));
        assert_eq!(
            reply.tool_calls,
            vec![ToolCall::new("call_2", "first", "{}"), ToolCall::new("b", "second", "{\"x\":1}")]
        );
        assert_eq!(reply.usage, Some(Usage { prompt_tokens: 3, completion_tokens: 5 }));
    }

    #[test]
    fn a_huge_index_costs_one_entry() {
        let mut assembler = ReplyAssembler::default();
        assembler.push(ReplyChunk {
            tool_calls: vec![ToolCallDelta { index: u32::MAX, ..ToolCallDelta::default() }],
            ..ReplyChunk::default()
        });
        let reply = assembler.finish();
        assert_eq!(reply.tool_calls, vec![ToolCall::new(format!("call_{}", u32::MAX), "", "")]);
    }
}
