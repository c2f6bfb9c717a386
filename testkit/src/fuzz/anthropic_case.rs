//! Target `anthropic_parse`: the Anthropic Messages API transport's pure decoders (the whole-reply
//! parser and the stream decoder of `message_start`, `content_block_*`, `message_delta`,
//! `message_stop`, `ping` and `error` events) on arbitrary bytes, within arbitrary reply bounds,
//! with an arbitrary key to redact.
//!
//! Every check of [`stream_case`](super::stream_case) with the Messages API protocol, and the
//! usage a stream reports: each report is the reply's whole usage so far, so its input count is
//! never below its cache reads and writes together.

use loopbound_anthropic::events::MessagesApi;
use loopbound_provider::events::decode_stream;

use super::stream_case::{self, StreamCase, split};

/// The input of `anthropic_parse`: a body and its cuts, the reply's bounds, a key echoed into it.
pub type AnthropicCase = StreamCase;

/// Runs the checks on one case; panics with the broken invariant's name.
pub fn check(case: &AnthropicCase) {
    stream_case::check::<MessagesApi>(case);
    if let Ok(chunks) = decode_stream::<MessagesApi>(split(&case.body, &case.cuts)) {
        for usage in chunks.iter().filter_map(|chunk| chunk.usage) {
            let cached = usage.cached_input_tokens.saturating_add(usage.cache_write_tokens);
            assert!(
                usage.input_tokens >= cached,
                "a usage report counts fewer inputs than its cache reads and writes"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use loopbound::transport::{ReplyBounds, Usage};
    use loopbound_provider::events::assemble;

    use super::*;

    fn seed(name: &str) -> AnthropicCase {
        stream_case::seed("anthropic_parse", name)
    }

    #[test]
    fn the_tool_use_seed_is_a_whole_stream_of_text_two_calls_and_cached_usage() {
        let case = seed("stream-tool-use");
        assert_eq!((case.cuts.len(), case.calls, case.bytes), (3, 16, u16::MAX));
        let chunks = decode_stream::<MessagesApi>([&case.body[..]]).expect("a whole stream");
        let reply = assemble(chunks, ReplyBounds::default()).expect("within the bounds");
        assert_eq!(reply.content.as_deref(), Some("Réading ✓ "));
        assert_eq!(reply.tool_calls.len(), 2);
        assert_eq!(reply.usage, Some(Usage::new(4025, 15).with_cached_input(3000).with_cache_write(1000)));
        check(&case);
    }

    #[test]
    fn the_error_and_truncated_seeds_end_their_streams_with_one_error() {
        for name in ["stream-error-event", "stream-truncated", "stream-blocks-out-of-order"] {
            let case = seed(name);
            assert!(decode_stream::<MessagesApi>([&case.body[..]]).is_err(), "{name}");
        }
    }
}
