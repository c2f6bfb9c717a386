//! From event-stream bytes to reply chunks: what each chat-completions event means.
//!
//! The byte and call bounds, the first error, stream redaction and incremental decoding are the
//! shared [`StreamDecoder`]'s (see `loopbound_provider::events`); this module says what each
//! event means.
//!
//! # Invariants
//!
//! - A stream is complete only when `data: [DONE]` arrives (also without its closing blank line,
//!   when the server closes right after it); input after it is ignored, and an end of input
//!   before it is [`Malformed`](loopbound::transport::TransportErrorKind::Malformed).
//! - An unparsable chunk, an `error` object or `event: error` ends the stream with one error;
//!   other named events are skipped.
//! - Chunks that carry nothing (a role-only first delta, an empty text fragment) are dropped.

use loopbound::transport::{ModelReply, ReplyBounds, TransportError};
use loopbound_provider::sse::SseEvent;
use loopbound_provider::{Protocol, Redactor, Step, StreamDecoder};

use crate::errors::event_error;
use crate::parse::{parse_chunk, parse_completion};

/// The chat-completions wire format as the shared HTTP machinery reads it: `data:` events of
/// `chat.completion.chunk` objects ended by `data: [DONE]`, errors as an `error` object or
/// `event: error`, whole replies as one `chat.completion`.
#[derive(Debug, Default)]
pub struct ChatCompletions;

/// Decodes a streamed chat completion into [`ReplyChunk`](loopbound::transport::ReplyChunk)s.
///
/// ```
/// use loopbound_openai::chunks::ChunkDecoder;
///
/// let mut decoder = ChunkDecoder::default();
/// let mut chunks = Vec::new();
/// decoder.feed(b"data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\nda", &mut chunks);
/// decoder.feed(b"ta: [DONE]\n\n", &mut chunks);
/// decoder.finish(&mut chunks);
/// assert_eq!(chunks.len(), 1);
/// assert_eq!(chunks[0].as_ref().unwrap().content.as_deref(), Some("Hi"));
/// ```
pub type ChunkDecoder = StreamDecoder<ChatCompletions>;

impl Protocol for ChatCompletions {
    const END: &'static str = "data: [DONE]";

    fn event(&mut self, event: &SseEvent, redactor: &Redactor) -> Step {
        let data = event.data.trim();
        match event.event.as_deref() {
            None | Some("message") => {}
            Some("error") => return Step::Fail(event_error(data, redactor)),
            // Other named events are not part of the chat-completions stream.
            Some(_) => return Step::Skip,
        }
        if data == "[DONE]" {
            Step::Done
        } else if data.is_empty() {
            Step::Skip
        } else {
            match parse_chunk(data.as_bytes(), redactor) {
                Ok(chunk) => Step::Chunk(chunk),
                Err(error) => Step::Fail(error),
            }
        }
    }

    fn ends(&self, event: &SseEvent) -> bool {
        event.event.is_none() && event.data.trim() == "[DONE]"
    }

    fn whole(body: &[u8], bounds: ReplyBounds, redactor: &Redactor) -> Result<ModelReply, TransportError> {
        parse_completion(body, bounds, redactor)
    }
}

#[cfg(test)]
mod tests {
    use loopbound::transport::{ModelReply, ToolCall, TransportErrorKind, Usage};
    use loopbound_provider::events::{assemble, decode_stream};

    use super::*;

    /// A stream as aimock and llama.cpp send it: role, text, two tool calls whose arguments
    /// arrive in fragments (the second call's index appears first), usage, `[DONE]`.
    const STREAM: &str = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Réading ✓ \"}}]}\r\n\r\n",
        ": keep-alive\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"c2\",\"type\":\"function\",\"function\":{\"name\":\"finish_review\",\"arguments\":\"\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"read_ticket\",\"arguments\":\"{\\\"in\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\"{\\\"input\\\":42}\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"put\\\":42}\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":30,\"completion_tokens\":12}}\n\n",
        "data: [DONE]\n\n",
    );

    fn expected_reply() -> ModelReply {
        ModelReply::new(
            Some("Réading ✓ ".into()),
            vec![
                ToolCall::new("c1", "read_ticket", r#"{"input":42}"#),
                ToolCall::new("c2", "finish_review", r#"{"input":42}"#),
            ],
        )
        .with_usage(Usage::new(30, 12))
    }

    #[test]
    fn a_stream_assembles_to_the_reply_at_every_split_point() {
        let bytes = STREAM.as_bytes();
        let whole = decode_stream::<ChatCompletions>([bytes]).unwrap();
        assert_eq!(assemble(whole.clone(), ReplyBounds::default()).unwrap(), expected_reply());
        for cut in 0..=bytes.len() {
            let split = decode_stream::<ChatCompletions>([&bytes[..cut], &bytes[cut..]]).unwrap();
            assert_eq!(split, whole, "cut at {cut}");
        }
        assert_eq!(decode_stream::<ChatCompletions>(bytes.chunks(1)).unwrap(), whole);
    }

    #[test]
    fn a_stream_cut_anywhere_before_done_is_malformed() {
        let bytes = STREAM.as_bytes();
        let done = STREAM.find("data: [DONE]").unwrap();
        for cut in 0..done + "data: [DONE]".len() {
            let result = decode_stream::<ChatCompletions>([&bytes[..cut]]);
            assert!(
                matches!(&result, Err(m) if m.kind() == TransportErrorKind::Malformed && m.message().starts_with("the stream ended before data: [DONE]")),
                "cut at {cut}: {result:?}"
            );
        }
        // A final `[DONE]` counts even when the server closes before the blank line.
        let whole = decode_stream::<ChatCompletions>([bytes]).unwrap();
        assert_eq!(
            decode_stream::<ChatCompletions>([&bytes[..done + "data: [DONE]".len()]]),
            Ok(whole.clone())
        );
        assert_eq!(decode_stream::<ChatCompletions>([&bytes[..done + "data: [DONE]\n".len()]]), Ok(whole));
    }

    #[test]
    fn input_after_done_is_ignored() {
        let stream =
            "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\ndata: not json\n\n";
        let chunks = decode_stream::<ChatCompletions>([stream.as_bytes()]).unwrap();
        assert_eq!(assemble(chunks, ReplyBounds::default()).unwrap(), ModelReply::text("a"));
    }

    #[test]
    fn a_bad_event_ends_the_stream_with_one_error() {
        let mut decoder = ChunkDecoder::default();
        let mut out = Vec::new();
        decoder.feed(
            b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {oops\n\ndata: {}\n\n",
            &mut out,
        );
        assert!(decoder.is_finished());
        decoder.feed(b"data: [DONE]\n\n", &mut out);
        decoder.finish(&mut out);
        assert_eq!(out.len(), 2);
        assert!(
            matches!(&out[1], Err(m) if m.kind() == TransportErrorKind::Malformed && m.message().starts_with("the stream chunk is not a chat completion"))
        );
    }

    #[test]
    fn provider_errors_inside_the_stream_are_mapped() {
        let llama = "data: {\"error\":{\"code\":500,\"message\":\"The model produced output that does not match the expected peg-native format\",\"type\":\"server_error\"}}\n\n";
        assert_eq!(
            decode_stream::<ChatCompletions>([llama.as_bytes()]),
            Err(TransportError::unavailable(
                "the provider reported an error: The model produced output that does not match the expected peg-native format"
            ))
        );
        assert_eq!(
            decode_stream::<ChatCompletions>([&b"event: error\ndata: overloaded\n\n"[..]]),
            Err(TransportError::other("the provider reported an error: overloaded"))
        );
        assert_eq!(
            decode_stream::<ChatCompletions>([&b"event: ping\ndata: {}\n\ndata: [DONE]\n\n"[..]]),
            Ok(vec![])
        );
    }
}

#[cfg(test)]
mod bounds_tests {
    use super::*;

    fn call_event(index: u32) -> String {
        format!(
            "data: {{\"choices\":[{{\"delta\":{{\"tool_calls\":[{{\"index\":{index},\"id\":\"c{index}\",\"function\":{{\"name\":\"t\",\"arguments\":\"{{}}\"}}}}]}}}}]}}\n\n"
        )
    }

    #[test]
    fn one_call_index_too_many_ends_the_stream_before_it_is_handed_on() {
        let events: String = (0..5).map(call_event).collect();
        let mut decoder = ChunkDecoder::new(ReplyBounds::new(3, 1 << 20), Redactor::default());
        let out = decoder.decode_all([events.as_bytes()]);
        assert_eq!(out.len(), 4);
        assert!(out[..3].iter().all(Result::is_ok));
        assert_eq!(out[3], Err(TransportError::too_many_calls(3)));
        // Fragments of calls already open do not count again.
        let again = format!("{}{}{}data: [DONE]\n\n", call_event(0), call_event(1), call_event(0));
        let mut decoder = ChunkDecoder::new(ReplyBounds::new(2, 1 << 20), Redactor::default());
        assert!(decoder.decode_all([again.as_bytes()]).iter().all(Result::is_ok));
    }
}
