//! Target `responses_parse`: the Responses API transport's pure decoders (the whole-response
//! parser and the stream decoder of its events) on arbitrary bytes, within arbitrary reply
//! bounds, with an arbitrary key to redact.
//!
//! Every check of [`stream_case`](super::stream_case) with the Responses protocol, and what is
//! this protocol's own: a call is handed on first by the event that adds it, so the first piece
//! of each call index carries the call's name.

use std::collections::BTreeSet;

use loopbound_openai::responses::events::ResponsesApi;
use loopbound_provider::events::decode_stream;

use super::stream_case::{self, StreamCase, split};

/// The input of `responses_parse`: a body and its cuts, the reply's bounds, a key echoed into it.
pub type ResponsesCase = StreamCase;

/// Runs the checks on one case; panics with the broken invariant's name.
pub fn check(case: &ResponsesCase) {
    stream_case::check::<ResponsesApi>(case);
    if let Ok(chunks) = decode_stream::<ResponsesApi>(split(&case.body, &case.cuts)) {
        let mut added = BTreeSet::new();
        for delta in chunks.iter().flat_map(|chunk| &chunk.tool_calls) {
            if added.insert(delta.index) {
                assert!(delta.name.is_some(), "a call's first piece does not name it");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use loopbound::transport::{ReplyBounds, ToolCall, TransportError, Usage};
    use loopbound_provider::events::assemble;

    use super::*;

    fn seed(name: &str) -> ResponsesCase {
        stream_case::seed("responses_parse", name)
    }

    #[test]
    fn the_text_and_calls_seed_is_a_whole_stream_with_cached_usage() {
        let case = seed("stream-text-calls");
        assert_eq!((case.cuts.len(), case.calls, case.bytes), (3, 16, u16::MAX));
        let chunks = decode_stream::<ResponsesApi>([&case.body[..]]).expect("a whole stream");
        let reply = assemble(chunks, ReplyBounds::default()).expect("within the bounds");
        assert_eq!(reply.content.as_deref(), Some("Réading ✓ "));
        assert_eq!(
            reply.tool_calls,
            [
                ToolCall::new("c1", "read_ticket", r#"{"input":42}"#),
                ToolCall::new("c2", "finish_review", r#"{"input":42}"#)
            ]
        );
        assert_eq!(reply.usage, Some(Usage::new(4025, 15).with_cached_input(3000)));
        check(&case);
    }

    #[test]
    fn the_error_failed_and_truncated_seeds_end_their_streams_with_one_error() {
        for (name, expected) in [
            ("stream-error-event", TransportError::unavailable("the provider reported an error: Slow down")),
            ("stream-failed", TransportError::unavailable("the provider reported an error: boom")),
            (
                "stream-truncated",
                TransportError::malformed(
                    "the stream ended before response.completed; the reply may be incomplete",
                ),
            ),
        ] {
            let case = seed(name);
            assert_eq!(decode_stream::<ResponsesApi>([&case.body[..]]), Err(expected), "{name}");
            check(&case);
        }
    }
}
