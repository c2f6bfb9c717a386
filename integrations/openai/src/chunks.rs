//! From event-stream bytes to reply chunks: events, the `[DONE]` terminator, and truncation.
//!
//! # Invariants
//!
//! - Pure and incremental: bytes in any split give the same chunks as the whole input.
//! - A stream is complete only when `data: [DONE]` arrives; input after it is ignored, and an
//!   end of input before it is [`TransportError::Malformed`] (a truncated stream).
//! - The first error (an unparsable event, an `error` object or `event: error`, an overlong
//!   line) ends the stream: it is reported once and later input is ignored.
//! - Chunks that carry nothing (a role-only first delta, an empty text fragment) are dropped.

use loopbound::transport::{ReplyChunk, TransportError};

use crate::errors::{clean, embedded_error};
use crate::parse::parse_chunk;
use crate::sse::{SseDecoder, SseEvent};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Open,
    Done,
    Failed,
}

/// Decodes a streamed chat completion into [`ReplyChunk`]s.
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
#[derive(Debug)]
pub struct ChunkDecoder {
    sse: SseDecoder,
    events: Vec<SseEvent>,
    state: State,
}

impl Default for ChunkDecoder {
    fn default() -> Self {
        Self { sse: SseDecoder::default(), events: Vec::new(), state: State::Open }
    }
}

impl ChunkDecoder {
    /// Decodes `bytes`, appending each chunk (or the one error that ends the stream) to `out`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<Result<ReplyChunk, TransportError>>) {
        if self.state != State::Open {
            return;
        }
        let fed = self.sse.feed(bytes, &mut self.events);
        self.drain_events(out);
        if let (State::Open, Err(error)) = (self.state, fed) {
            self.fail(TransportError::Malformed(error.to_string()), out);
        }
    }

    /// Ends the input. A final `data: [DONE]` left without its blank line still counts
    /// (servers that close right after it are common; any other unfinished event is discarded,
    /// as the format says); a stream that neither reached `[DONE]`
    /// nor failed was truncated, and [`TransportError::Malformed`] is appended to `out`.
    pub fn finish(&mut self, out: &mut Vec<Result<ReplyChunk, TransportError>>) {
        if self.state != State::Open {
            return;
        }
        let partial = self.sse.has_pending();
        self.sse.flush(&mut self.events);
        let events = std::mem::take(&mut self.events);
        if events.iter().any(|event| event.event.is_none() && event.data.trim() == "[DONE]") {
            self.state = State::Done;
        } else {
            let partial = if partial { " (in the middle of an event)" } else { "" };
            let message =
                format!("the stream ended before data: [DONE]{partial}; the reply may be incomplete");
            self.fail(TransportError::Malformed(message), out);
        }
    }

    /// Whether `[DONE]` arrived or an error ended the stream: no further input matters.
    #[must_use]
    pub fn is_finished(&self) -> bool {
        self.state != State::Open
    }

    fn drain_events(&mut self, out: &mut Vec<Result<ReplyChunk, TransportError>>) {
        for event in std::mem::take(&mut self.events) {
            if self.state != State::Open {
                break;
            }
            self.event(&event, out);
        }
    }

    fn event(&mut self, event: &SseEvent, out: &mut Vec<Result<ReplyChunk, TransportError>>) {
        let data = event.data.trim();
        match event.event.as_deref() {
            None | Some("message") => {}
            Some("error") => {
                let error = serde_json::from_str::<serde_json::Value>(data).map_or_else(
                    |_| TransportError::Other(format!("the provider reported an error: {}", clean(data))),
                    |json| embedded_error(json.get("error").unwrap_or(&json)),
                );
                return self.fail(error, out);
            }
            // Other named events are not part of the chat-completions stream.
            Some(_) => return,
        }
        if data == "[DONE]" {
            self.state = State::Done;
        } else if !data.is_empty() {
            match parse_chunk(data.as_bytes()) {
                Ok(chunk) if chunk == ReplyChunk::default() => {}
                Ok(chunk) => out.push(Ok(chunk)),
                Err(error) => self.fail(error, out),
            }
        }
    }

    fn fail(&mut self, error: TransportError, out: &mut Vec<Result<ReplyChunk, TransportError>>) {
        self.state = State::Failed;
        out.push(Err(error));
    }
}

/// Decodes a whole stream given in `parts`: the chunks, or the first error.
///
/// # Errors
///
/// The error that ended the stream, or [`TransportError::Malformed`] if it was truncated.
pub fn decode_stream<'a>(
    parts: impl IntoIterator<Item = &'a [u8]>,
) -> Result<Vec<ReplyChunk>, TransportError> {
    let mut decoder = ChunkDecoder::default();
    let mut out = Vec::new();
    for part in parts {
        decoder.feed(part, &mut out);
    }
    decoder.finish(&mut out);
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use loopbound::transport::{ModelReply, ReplyAssembler, ToolCall, Usage};

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
        ModelReply {
            content: Some("Réading ✓ ".into()),
            tool_calls: vec![
                ToolCall::new("c1", "read_ticket", r#"{"input":42}"#),
                ToolCall::new("c2", "finish_review", r#"{"input":42}"#),
            ],
            usage: Some(Usage { prompt_tokens: 30, completion_tokens: 12 }),
        }
    }

    fn assemble(chunks: Vec<ReplyChunk>) -> ModelReply {
        let mut assembler = ReplyAssembler::default();
        for chunk in chunks {
            assembler.push(chunk).unwrap();
        }
        assembler.finish()
    }

    #[test]
    fn a_stream_assembles_to_the_reply_at_every_split_point() {
        let bytes = STREAM.as_bytes();
        let whole = decode_stream([bytes]).unwrap();
        assert_eq!(assemble(whole.clone()), expected_reply());
        for cut in 0..=bytes.len() {
            let split = decode_stream([&bytes[..cut], &bytes[cut..]]).unwrap();
            assert_eq!(split, whole, "cut at {cut}");
        }
        assert_eq!(decode_stream(bytes.chunks(1)).unwrap(), whole);
    }

    #[test]
    fn a_stream_cut_anywhere_before_done_is_malformed() {
        let bytes = STREAM.as_bytes();
        let done = STREAM.find("data: [DONE]").unwrap();
        for cut in 0..done + "data: [DONE]".len() {
            let result = decode_stream([&bytes[..cut]]);
            assert!(
                matches!(&result, Err(TransportError::Malformed(m)) if m.starts_with("the stream ended before data: [DONE]")),
                "cut at {cut}: {result:?}"
            );
        }
        // A final `[DONE]` counts even when the server closes before the blank line.
        let whole = decode_stream([bytes]).unwrap();
        assert_eq!(decode_stream([&bytes[..done + "data: [DONE]".len()]]), Ok(whole.clone()));
        assert_eq!(decode_stream([&bytes[..done + "data: [DONE]\n".len()]]), Ok(whole));
    }

    #[test]
    fn input_after_done_is_ignored() {
        let stream =
            "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\ndata: not json\n\n";
        let chunks = decode_stream([stream.as_bytes()]).unwrap();
        assert_eq!(assemble(chunks), ModelReply::text("a"));
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
            matches!(&out[1], Err(TransportError::Malformed(m)) if m.starts_with("the stream chunk is not a chat completion"))
        );
    }

    #[test]
    fn provider_errors_inside_the_stream_are_mapped() {
        let llama = "data: {\"error\":{\"code\":500,\"message\":\"The model produced output that does not match the expected peg-native format\",\"type\":\"server_error\"}}\n\n";
        assert_eq!(
            decode_stream([llama.as_bytes()]),
            Err(TransportError::Unavailable(
                "the provider reported an error: The model produced output that does not match the expected peg-native format".into()
            ))
        );
        assert_eq!(
            decode_stream([&b"event: error\ndata: overloaded\n\n"[..]]),
            Err(TransportError::Other("the provider reported an error: overloaded".into()))
        );
        assert_eq!(decode_stream([&b"event: ping\ndata: {}\n\ndata: [DONE]\n\n"[..]]), Ok(vec![]));
    }
}
