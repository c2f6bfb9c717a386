//! From event-stream bytes to reply chunks: events, the `[DONE]` terminator, and truncation.
//!
//! # Invariants
//!
//! - Pure and incremental: bytes in any split give the same chunks as the whole input.
//! - A stream is complete only when `data: [DONE]` arrives; input after it is ignored, and an
//!   end of input before it is [`Malformed`](loopbound::transport::TransportErrorKind::Malformed) (a truncated stream).
//! - The first error (an unparsable event, an `error` object or `event: error`, an overlong
//!   line) ends the stream: it is reported once and later input is ignored.
//! - Chunks that carry nothing (a role-only first delta, an empty text fragment) are dropped.
//! - Bounded by the reply's [`ReplyBounds`]: the bytes fed (framing, comments and keep-alives
//!   included) are counted and the stream fails with `Malformed` at the first byte past
//!   `bytes()`, which is never decoded; the distinct tool-call indices are counted and the chunk
//!   that opens one index too many fails the stream with `TooManyCalls` instead of being handed
//!   on. So the decoder's memory is bounded by the reply's byte bound, whatever the server sends.
//! - Texts are redacted as streams (a run of the key split across events is caught): the end of
//!   the text and of each call's arguments that may still join a run is held back and handed on
//!   in one last chunk when `[DONE]` arrives.

use std::collections::BTreeSet;

use loopbound::transport::{ReplyBounds, ReplyChunk, TransportError};

use crate::errors::{clean, embedded_error};
use crate::parse::parse_chunk;
use crate::redact::{Redactor, StreamRedactor};
use crate::sse::{DEFAULT_MAX_EVENT, SseDecoder, SseEvent};

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
    bounds: ReplyBounds,
    /// Bytes fed so far.
    fed: usize,
    /// The tool-call indices seen so far.
    indices: BTreeSet<u32>,
    redactor: Redactor,
    stream: StreamRedactor,
}

impl Default for ChunkDecoder {
    /// A decoder with the default [`ReplyBounds`] and no key to redact.
    fn default() -> Self {
        Self::new(ReplyBounds::default(), Redactor::default())
    }
}

impl ChunkDecoder {
    /// A decoder of one reply within `bounds`, redacting the key of `redactor`.
    #[must_use]
    pub fn new(bounds: ReplyBounds, redactor: Redactor) -> Self {
        Self {
            sse: SseDecoder::with_limit(bounds.bytes().min(DEFAULT_MAX_EVENT)),
            events: Vec::new(),
            state: State::Open,
            bounds,
            fed: 0,
            indices: BTreeSet::new(),
            stream: StreamRedactor::new(redactor.clone()),
            redactor,
        }
    }

    /// Decodes `bytes`, appending each chunk (or the one error that ends the stream) to `out`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<Result<ReplyChunk, TransportError>>) {
        if self.state != State::Open {
            return;
        }
        let room = self.bounds.bytes().saturating_sub(self.fed);
        let (within, past) = bytes.split_at(bytes.len().min(room));
        self.fed += within.len();
        let fed = self.sse.feed(within, &mut self.events);
        self.drain_events(out);
        if let (State::Open, Err(error)) = (self.state, fed) {
            self.fail(TransportError::malformed(error.to_string()), out);
        }
        if self.state == State::Open && !past.is_empty() {
            self.fail(self.bounds.too_long(), out);
        }
    }

    /// Ends the input. A final `data: [DONE]` left without its blank line still counts
    /// (servers that close right after it are common; any other unfinished event is discarded,
    /// as the format says); a stream that neither reached `[DONE]`
    /// nor failed was truncated, and [`Malformed`](loopbound::transport::TransportErrorKind::Malformed) is appended to `out`.
    pub fn finish(&mut self, out: &mut Vec<Result<ReplyChunk, TransportError>>) {
        if self.state != State::Open {
            return;
        }
        let partial = self.sse.has_pending();
        self.sse.flush(&mut self.events);
        let events = std::mem::take(&mut self.events);
        if events.iter().any(|event| event.event.is_none() && event.data.trim() == "[DONE]") {
            self.done(out);
        } else {
            let partial = if partial { " (in the middle of an event)" } else { "" };
            let message =
                format!("the stream ended before data: [DONE]{partial}; the reply may be incomplete");
            self.fail(TransportError::malformed(message), out);
        }
    }

    /// Bytes held while an event is incomplete (its line and its data so far): what the next
    /// input may make the decoder parse at once.
    #[must_use]
    pub fn buffered(&self) -> usize {
        self.sse.buffered()
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
                let redactor = &self.redactor;
                let error = serde_json::from_str::<serde_json::Value>(data).map_or_else(
                    |_| {
                        TransportError::other(format!(
                            "the provider reported an error: {}",
                            clean(data, redactor)
                        ))
                    },
                    |json| embedded_error(json.get("error").unwrap_or(&json), redactor),
                );
                return self.fail(error, out);
            }
            // Other named events are not part of the chat-completions stream.
            Some(_) => return,
        }
        if data == "[DONE]" {
            self.done(out);
        } else if !data.is_empty() {
            match parse_chunk(data.as_bytes(), &self.redactor) {
                Ok(chunk) if chunk == ReplyChunk::default() => {}
                Ok(chunk) => {
                    for delta in &chunk.tool_calls {
                        if self.indices.insert(delta.index) && self.bounds.too_many(self.indices.len()) {
                            return self.fail(self.bounds.too_many_calls(), out);
                        }
                    }
                    if let Some(chunk) = self.stream.chunk(chunk) {
                        out.push(Ok(chunk));
                    }
                }
                Err(error) => self.fail(error, out),
            }
        }
    }

    /// The stream is complete: what the redactor held back is handed on.
    fn done(&mut self, out: &mut Vec<Result<ReplyChunk, TransportError>>) {
        self.state = State::Done;
        if let Some(chunk) = self.stream.finish() {
            out.push(Ok(chunk));
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
/// The error that ended the stream, or [`Malformed`](loopbound::transport::TransportErrorKind::Malformed) if it was truncated.
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
    use loopbound::transport::{ModelReply, ReplyAssembler, ToolCall, TransportErrorKind, Usage};

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
                matches!(&result, Err(m) if m.kind() == TransportErrorKind::Malformed && m.message().starts_with("the stream ended before data: [DONE]")),
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
            matches!(&out[1], Err(m) if m.kind() == TransportErrorKind::Malformed && m.message().starts_with("the stream chunk is not a chat completion"))
        );
    }

    #[test]
    fn provider_errors_inside_the_stream_are_mapped() {
        let llama = "data: {\"error\":{\"code\":500,\"message\":\"The model produced output that does not match the expected peg-native format\",\"type\":\"server_error\"}}\n\n";
        assert_eq!(
            decode_stream([llama.as_bytes()]),
            Err(TransportError::unavailable(
                "the provider reported an error: The model produced output that does not match the expected peg-native format"
            ))
        );
        assert_eq!(
            decode_stream([&b"event: error\ndata: overloaded\n\n"[..]]),
            Err(TransportError::other("the provider reported an error: overloaded"))
        );
        assert_eq!(decode_stream([&b"event: ping\ndata: {}\n\ndata: [DONE]\n\n"[..]]), Ok(vec![]));
    }
}

#[cfg(test)]
mod bounds_tests {
    use loopbound::transport::ReplyAssembler;

    use super::*;
    use crate::config::ApiKey;

    fn call_event(index: u32) -> String {
        format!(
            "data: {{\"choices\":[{{\"delta\":{{\"tool_calls\":[{{\"index\":{index},\"id\":\"c{index}\",\"function\":{{\"name\":\"t\",\"arguments\":\"{{}}\"}}}}]}}}}]}}\n\n"
        )
    }

    fn decode(decoder: &mut ChunkDecoder, parts: &[&[u8]]) -> Vec<Result<ReplyChunk, TransportError>> {
        let mut out = Vec::new();
        for part in parts {
            decoder.feed(part, &mut out);
        }
        decoder.finish(&mut out);
        out
    }

    #[test]
    fn one_call_index_too_many_ends_the_stream_before_it_is_handed_on() {
        let events: String = (0..5).map(call_event).collect();
        let mut decoder = ChunkDecoder::new(ReplyBounds::new(3, 1 << 20), Redactor::default());
        let out = decode(&mut decoder, &[events.as_bytes()]);
        assert_eq!(out.len(), 4);
        assert!(out[..3].iter().all(Result::is_ok));
        assert_eq!(out[3], Err(TransportError::too_many_calls(3)));
        // Fragments of calls already open do not count again.
        let again = format!("{}{}{}data: [DONE]\n\n", call_event(0), call_event(1), call_event(0));
        let mut decoder = ChunkDecoder::new(ReplyBounds::new(2, 1 << 20), Redactor::default());
        assert!(decode(&mut decoder, &[again.as_bytes()]).iter().all(Result::is_ok));
    }

    #[test]
    fn the_byte_bound_counts_every_byte_fed_and_stops_at_the_first_past_it() {
        let keep_alive = ": keep-alive\n\n".repeat(10);
        let bound = keep_alive.len();
        for parts in [vec![keep_alive.as_bytes(), b":"], vec![format!("{keep_alive}:").as_bytes()]] {
            let mut decoder = ChunkDecoder::new(ReplyBounds::new(16, bound), Redactor::default());
            let out = decode(&mut decoder, &parts);
            assert_eq!(
                out,
                vec![Err(TransportError::malformed(format!("the reply is longer than {bound} bytes")))]
            );
        }
        // Exactly the bound, ending with [DONE], is a complete stream.
        let stream = "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: [DONE]\n\n";
        let mut decoder = ChunkDecoder::new(ReplyBounds::new(16, stream.len()), Redactor::default());
        let out = decode(&mut decoder, &[stream.as_bytes()]);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].as_ref().map(|chunk| chunk.content.as_deref()), Ok(Some("Hi")));
    }

    #[test]
    fn a_key_split_across_events_is_redacted_in_the_assembled_text() {
        let key = "sk-live-0123456789abcdefghijklmnop";
        let redactor = Redactor::new(Some(ApiKey::new(key).unwrap()));
        let event = |text: &str| {
            format!("data: {}\n\n", serde_json::json!({"choices": [{"delta": {"content": text}}]}))
        };
        let stream = format!(
            "{}{}{}data: [DONE]\n\n",
            event("the key: sk-live-0"),
            event("123456789abc"),
            event("defghijklmnop.")
        );
        let bytes = stream.as_bytes();
        for cut in 0..=bytes.len() {
            let mut decoder = ChunkDecoder::new(ReplyBounds::default(), redactor.clone());
            let out = decode(&mut decoder, &[&bytes[..cut], &bytes[cut..]]);
            let mut assembler = ReplyAssembler::default();
            for chunk in out {
                assembler.push(chunk.unwrap()).unwrap();
            }
            assert_eq!(assembler.finish().content.as_deref(), Some("the key: [redacted]."), "cut at {cut}");
        }
    }
}
