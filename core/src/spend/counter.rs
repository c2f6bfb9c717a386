//! Token counters: how many tokens a request's input is (at most) before it is sent, and how
//! many a streamed reply is (at least) as it arrives.
//!
//! # Invariants
//!
//! - The default counter ([`ByteCounter`]) needs no model file and over-counts input: no token
//!   of a byte-level BPE vocabulary (OpenAI's, Llama's, …) and no byte-fallback token is shorter
//!   than one byte, so a text of `n` UTF-8 bytes is at most `n` tokens. Framing adds a fixed
//!   overhead per request, per message, per tool call and per tool definition (the chat
//!   template's role markers and separators), documented on each constant.
//! - For a reply as it streams, the counter bounds its tokens from below, so that an honest
//!   reply is never cut before it reaches its cap: a text of `n` bytes is at least
//!   `⌈n / max_token_bytes⌉` tokens ([`TokenCounter::max_token_bytes`]; 128 by default, since no
//!   token of the OpenAI encodings, nor of the vocabularies built like them, is longer).
//! - A request is counted incrementally ([`RequestCount`]): the conversation only grows during
//!   a run, so each call counts the messages added since the last one, and a reservation costs
//!   the new bytes, not the whole conversation.

use std::fmt;

use crate::transport::{Message, ToolDefinition};

/// Counts tokens for spend reservations. Implement it for an exact tokenizer of the model at
/// hand; [`ByteCounter`] is the default.
pub trait TokenCounter: Send + Sync {
    /// An upper bound of the tokens of `text` as the model reads it.
    fn count(&self, text: &str) -> u64;

    /// Bytes of the longest token the model can write: a streamed reply of `n` bytes is at least
    /// `⌈n / max_token_bytes⌉` tokens.
    fn max_token_bytes(&self) -> u64 {
        ByteCounter::MAX_TOKEN_BYTES
    }

    /// Tokens a request adds on top of its messages and tools.
    fn request_overhead(&self) -> u64 {
        ByteCounter::REQUEST_OVERHEAD
    }

    /// Tokens one message adds on top of its text (role markers, separators).
    fn message_overhead(&self) -> u64 {
        ByteCounter::MESSAGE_OVERHEAD
    }
}

/// The default counter: UTF-8 bytes, an upper bound of any byte-level tokenizer's count, plus
/// a fixed overhead per request, message, call and tool definition.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ByteCounter;

impl ByteCounter {
    /// Tokens a request adds: the chat template's opening and the reply's priming.
    pub const REQUEST_OVERHEAD: u64 = 16;
    /// Tokens a message adds: its role markers and separators (`ChatML` spends 4).
    pub const MESSAGE_OVERHEAD: u64 = 8;
    /// Bytes of the longest token of the OpenAI encodings (cl100k, o200k): the divisor of the
    /// lower bound.
    pub const MAX_TOKEN_BYTES: u64 = 128;
}

impl TokenCounter for ByteCounter {
    fn count(&self, text: &str) -> u64 {
        text.len() as u64
    }
}

/// The input of the requests of one run, counted as the conversation grows.
pub(crate) struct RequestCount {
    /// Messages already counted, and their tokens.
    messages: usize,
    tokens: u64,
    /// The tool definitions' tokens, counted once.
    tools: Option<u64>,
}

impl fmt::Debug for RequestCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestCount")
            .field("messages", &self.messages)
            .field("tokens", &self.tokens)
            .field("tools", &self.tools)
            .finish()
    }
}

impl RequestCount {
    pub(crate) const fn new() -> Self {
        Self { messages: 0, tokens: 0, tools: None }
    }

    /// An upper bound of the input tokens of a request of `messages` and `tools`, counting only
    /// what was not counted before. A conversation shorter than what was counted (a host that
    /// hands another one) is counted again from the start.
    pub(crate) fn input(
        &mut self,
        counter: &dyn TokenCounter,
        messages: &[Message],
        tools: &[ToolDefinition],
    ) -> u64 {
        if messages.len() < self.messages {
            self.messages = 0;
            self.tokens = 0;
        }
        for message in &messages[self.messages..] {
            self.tokens = self.tokens.saturating_add(message_tokens(counter, message));
        }
        self.messages = messages.len();
        let tools = *self.tools.get_or_insert_with(|| {
            tools.iter().fold(0_u64, |sum, tool| sum.saturating_add(definition_tokens(counter, tool)))
        });
        self.tokens.saturating_add(tools).saturating_add(counter.request_overhead())
    }
}

/// An upper bound of one message's tokens.
pub(crate) fn message_tokens(counter: &dyn TokenCounter, message: &Message) -> u64 {
    let overhead = counter.message_overhead();
    let text = match message {
        Message::System { content, .. } | Message::User { content, .. } => counter.count(content),
        Message::Assistant { content, tool_calls, .. } => {
            let calls = tool_calls.iter().fold(0_u64, |sum, call| {
                sum.saturating_add(overhead)
                    .saturating_add(counter.count(&call.id))
                    .saturating_add(counter.count(&call.name))
                    .saturating_add(counter.count(&call.arguments))
            });
            content.as_deref().map_or(0, |text| counter.count(text)).saturating_add(calls)
        }
        Message::Tool { call_id, content, .. } => {
            counter.count(call_id).saturating_add(counter.count(content))
        }
    };
    text.saturating_add(overhead)
}

/// An upper bound of one tool definition's tokens: its name, description and JSON schema as
/// loopbound sends them.
fn definition_tokens(counter: &dyn TokenCounter, tool: &ToolDefinition) -> u64 {
    let schema = serde_json::to_string(&tool.parameters).unwrap_or_default();
    counter
        .message_overhead()
        .saturating_add(counter.count(&tool.name))
        .saturating_add(counter.count(&tool.description))
        .saturating_add(counter.count(&schema))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_bound_the_input_from_above() {
        assert_eq!(ByteCounter.count("héllo"), 6);
        assert_eq!(ByteCounter.max_token_bytes(), 128);
    }

    #[test]
    fn a_request_counts_only_the_messages_added_since_the_last() {
        let mut count = RequestCount::new();
        let mut conversation = vec![Message::user("abcd")];
        let first = count.input(&ByteCounter, &conversation, &[]);
        assert_eq!(first, 4 + ByteCounter::MESSAGE_OVERHEAD + ByteCounter::REQUEST_OVERHEAD);
        conversation.push(Message::tool_result("c1", "xyz"));
        let second = count.input(&ByteCounter, &conversation, &[]);
        assert_eq!(second, first + 2 + 3 + ByteCounter::MESSAGE_OVERHEAD);
        // Another, shorter conversation is counted from the start.
        assert_eq!(count.input(&ByteCounter, &conversation[..1], &[]), first);
    }
}
