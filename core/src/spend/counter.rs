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
//! - A request is counted incrementally ([`RequestCount`]): each call counts the messages added
//!   since the last one (a conversation whose earlier messages changed is counted again), and a
//!   reservation costs the new bytes, not the whole conversation.
//! - Calibrated by the provider: once a request's input tokens were reported, a later request
//!   that starts with that request's messages is counted as the report plus the counter's count
//!   of the messages appended since, still an upper bound of the provider's count.

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

/// The input of the requests of one run, counted as the conversation grows, and calibrated by
/// the provider's own counts.
///
/// Each message counted is kept as a digest and its count. A request whose earlier messages
/// are not the ones counted (a host edited or compacted the conversation) is counted again from
/// the start, and forgets its calibration: the count is an upper bound of the conversation as
/// it is, never of one it was.
///
/// Once a provider has reported the input tokens of a request ([`calibrate`](Self::calibrate)),
/// the next request whose first messages are that request's is counted as that report plus the
/// counter's count of the messages appended since: the provider's count of an unchanged prefix
/// is exact, and the counter bounds the rest from above, so the sum stays an upper bound of the
/// provider's count of the new request (the notice a request carries is counted in its report
/// and again in the next request's own, which only adds).
///
/// That holds for a provider whose count is consistent: its count of a request is at most its
/// earlier count of the request's first messages plus what was appended. A provider whose
/// report of a calibrated request comes back above the request's reserved input has shown it is
/// not: the count is [distrusted](Self::distrust) and counts every later request with the
/// counter alone, so one call at most is reserved short.
pub(crate) struct RequestCount {
    /// The digest of each message counted, in order.
    digests: Vec<u64>,
    /// The counter's count of each message counted.
    counts: Vec<u64>,
    /// Their sum.
    tokens: u64,
    /// The tool definitions' tokens, counted once.
    tools: Option<u64>,
    /// The last report: how many messages its request had, and its input tokens.
    calibration: Option<(usize, u64)>,
    /// Set once a report came back above a calibrated reservation: no report is used again.
    distrusted: bool,
}

impl fmt::Debug for RequestCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestCount")
            .field("messages", &self.counts.len())
            .field("tokens", &self.tokens)
            .field("tools", &self.tools)
            .field("calibration", &self.calibration)
            .field("distrusted", &self.distrusted)
            .finish_non_exhaustive()
    }
}

impl RequestCount {
    pub(crate) const fn new() -> Self {
        Self {
            digests: Vec::new(),
            counts: Vec::new(),
            tokens: 0,
            tools: None,
            calibration: None,
            distrusted: false,
        }
    }

    /// An upper bound of the input tokens of a request of `messages` and `tools`: the provider's
    /// count of the last reported request plus the counter's count of what was appended since,
    /// when the conversation still starts with that request's messages; the counter's count of
    /// the whole request otherwise. Only messages not counted before are counted.
    pub(crate) fn input(
        &mut self,
        counter: &dyn TokenCounter,
        messages: &[Message],
        tools: &[ToolDefinition],
    ) -> u64 {
        let kept = self.digests.len() <= messages.len()
            && self.digests.iter().zip(messages).all(|(digest, message)| *digest == message_digest(message));
        if !kept {
            *self = Self { tools: self.tools, distrusted: self.distrusted, ..Self::new() };
        }
        for message in &messages[self.counts.len()..] {
            let count = message_tokens(counter, message);
            self.digests.push(message_digest(message));
            self.counts.push(count);
            self.tokens = self.tokens.saturating_add(count);
        }
        let tools = *self.tools.get_or_insert_with(|| {
            tools.iter().fold(0_u64, |sum, tool| sum.saturating_add(definition_tokens(counter, tool)))
        });
        match self.calibration {
            Some((reported, input)) if reported <= messages.len() => {
                let appended =
                    self.counts[reported..].iter().fold(0_u64, |sum, count| sum.saturating_add(*count));
                input.saturating_add(appended)
            }
            _ => self.tokens.saturating_add(tools).saturating_add(counter.request_overhead()),
        }
    }

    /// The provider counted `input` tokens for a request of `messages` (a report of 0 is no
    /// report): the next request that starts with them is counted from that.
    pub(crate) fn calibrate(&mut self, messages: &[Message], input: u64) {
        let counted = self.digests.len() >= messages.len()
            && self.digests.iter().zip(messages).all(|(digest, message)| *digest == message_digest(message));
        if input > 0 && counted && !self.distrusted {
            self.calibration = Some((messages.len(), input));
        }
    }

    /// The provider counted a request above the input reserved for it from a calibration: its
    /// counts are not consistent, and no report calibrates this run's requests any more.
    pub(crate) fn distrust(&mut self) {
        self.distrusted = true;
        self.calibration = None;
    }

    /// Whether the next request of `messages` would be counted from a report.
    pub(crate) fn is_calibrated(&self, messages: &[Message]) -> bool {
        matches!(self.calibration, Some((reported, _)) if reported <= messages.len())
            && self.digests.len() <= messages.len()
    }
}

/// A digest of `message` as a request sends it: what tells a message counted before from one a
/// host put in its place. Collisions only make a count reuse another message's (64 bits, keys
/// fixed, never chosen by a peer).
fn message_digest(message: &Message) -> u64 {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut hasher = DefaultHasher::new();
    match message {
        Message::System { content, .. } => (0_u8, content).hash(&mut hasher),
        Message::User { content, .. } => (1_u8, content).hash(&mut hasher),
        Message::Assistant { content, tool_calls, .. } => {
            (2_u8, content).hash(&mut hasher);
            for call in tool_calls {
                (&call.id, &call.name, &call.arguments).hash(&mut hasher);
            }
        }
        Message::Tool { call_id, content, .. } => (3_u8, call_id, content).hash(&mut hasher),
    }
    hasher.finish()
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

    #[test]
    fn a_reported_request_counts_the_next_from_the_report_plus_what_was_appended() {
        let mut count = RequestCount::new();
        let mut conversation = vec![Message::system("be brief"), Message::user("what is ticket 7 about?")];
        let estimate = count.input(&ByteCounter, &conversation, &[]);
        assert_eq!(estimate, 8 + 23 + 2 * ByteCounter::MESSAGE_OVERHEAD + ByteCounter::REQUEST_OVERHEAD);
        count.calibrate(&conversation, 20);
        conversation.push(Message::assistant(&crate::transport::ModelReply::text("an invoice")));
        let appended = 10 + ByteCounter::MESSAGE_OVERHEAD;
        assert_eq!(count.input(&ByteCounter, &conversation, &[]), 20 + appended);
        // A shorter conversation is another one: counted from the start, without the report.
        assert_eq!(count.input(&ByteCounter, &conversation[..2], &[]), estimate);
        count.calibrate(&conversation[..2], 20);
        assert_eq!(count.input(&ByteCounter, &conversation, &[]), 20 + appended);
        // A report of nothing is no report; a report of a request not counted is ignored.
        count.calibrate(&conversation, 0);
        count.calibrate(&[Message::user("another conversation")], 5);
        assert_eq!(count.input(&ByteCounter, &conversation, &[]), 20 + appended);
    }

    #[test]
    fn an_edited_conversation_is_counted_again_and_forgets_its_calibration() {
        let mut count = RequestCount::new();
        let mut conversation =
            vec![Message::user("short"), Message::assistant(&crate::transport::ModelReply::text("ok"))];
        count.input(&ByteCounter, &conversation, &[]);
        count.calibrate(&conversation, 3);
        // The host replaced the first message with a longer one, keeping the length.
        conversation[0] = Message::user("a much longer first message");
        let counted = count.input(&ByteCounter, &conversation, &[]);
        assert_eq!(counted, 27 + 2 + 2 * ByteCounter::MESSAGE_OVERHEAD + ByteCounter::REQUEST_OVERHEAD);
        conversation.push(Message::user("more"));
        assert_eq!(
            count.input(&ByteCounter, &conversation, &[]),
            counted + 4 + ByteCounter::MESSAGE_OVERHEAD,
            "no calibration of the old conversation applies"
        );
    }

    /// A provider's honest count: at most the bytes, the same for the same first messages.
    fn honest(messages: &[Message]) -> u64 {
        let text = |message: &Message| match message {
            Message::User { content, .. } => content.len() as u64,
            _ => 0,
        };
        3 + messages.iter().map(|message| text(message).div_ceil(3) + 2).sum::<u64>()
    }

    #[test]
    fn over_random_conversations_and_edits_a_calibrated_count_is_never_below_the_providers() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = |below: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % below
        };
        for _ in 0..200 {
            let mut count = RequestCount::new();
            let mut conversation: Vec<Message> = Vec::new();
            for _ in 0..30 {
                match next(10) {
                    // The host edits an earlier message.
                    0 if !conversation.is_empty() => {
                        let at = usize::try_from(next(conversation.len() as u64)).unwrap();
                        conversation[at] = Message::user("x".repeat(usize::try_from(next(400)).unwrap()));
                    }
                    // The host drops the last messages.
                    1 if conversation.len() > 2 => conversation.truncate(conversation.len() / 2),
                    _ => conversation.push(Message::user("y".repeat(usize::try_from(next(300)).unwrap()))),
                }
                let counted = count.input(&ByteCounter, &conversation, &[]);
                let truth = honest(&conversation);
                assert!(counted >= truth, "{counted} < {truth} for {} messages", conversation.len());
                // Sometimes the provider reports (an honest count), sometimes not.
                if next(3) > 0 {
                    count.calibrate(&conversation, truth);
                }
            }
        }
    }
}
