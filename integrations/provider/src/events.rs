//! From event-stream bytes to reply chunks, for any provider's stream: the byte and call bounds,
//! the first error, the end of the reply and stream redaction are here; what each event means is
//! the [`Protocol`]'s.
//!
//! # Invariants
//!
//! - Pure and incremental: bytes in any split give the same chunks as the whole input (the
//!   event-stream decoder cuts lines on bytes, and a protocol sees whole events only).
//! - A stream is complete only when the protocol says an event ends it ([`Step::Done`], or
//!   [`Step::Final`] with the reply's last piece, which counts like any chunk first); input
//!   after it is ignored, and an end of input before it is
//!   [`Malformed`](loopbound::transport::TransportErrorKind::Malformed) (a truncated stream).
//! - The first error (an event the protocol refuses, an error the provider sent, an overlong
//!   line) ends the stream: it is reported once and later input is ignored.
//! - Chunks that carry nothing are dropped.
//! - Bounded by the reply's [`ReplyBounds`]: the bytes fed (framing, comments and keep-alives
//!   included) are counted and the stream fails with `Malformed` at the first byte past
//!   `bytes()`, which is never decoded; the distinct tool-call indices are counted and the chunk
//!   that opens one index too many fails the stream with `TooManyCalls` instead of being handed
//!   on. So the decoder's memory is bounded by the reply's byte bound, whatever the server sends.
//! - Texts are redacted as streams ([`StreamRedactor`]): the end of the text and of each call's
//!   arguments that may still join a run of the key is held back and handed on in one last chunk
//!   when the reply ends.

use std::collections::BTreeSet;

use loopbound::transport::{ModelReply, ReplyAssembler, ReplyBounds, ReplyChunk, TransportError};

use crate::redact::{Redactor, StreamRedactor};
use crate::sse::{DEFAULT_MAX_EVENT, SseDecoder, SseEvent};

/// What one event of a stream means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Nothing to hand on (a keep-alive, an event of no interest).
    Skip,
    /// A piece of the reply.
    Chunk(ReplyChunk),
    /// The reply is complete.
    Done,
    /// The last piece of the reply (an end event that carries the usage): handed on, then the
    /// reply is complete.
    Final(ReplyChunk),
    /// The stream cannot go on: a malformed event, or an error the provider sent.
    Fail(TransportError),
}

/// A provider's wire format, as the shared HTTP machinery needs it: what each streamed event
/// means, and how a whole reply reads. One value decodes one streamed reply, so it may keep
/// state between events.
pub trait Protocol: Default + Send + 'static {
    /// How the end of a reply is named in messages, e.g. `data: [DONE]`.
    const END: &'static str;

    /// Interprets one event. Texts need not be redacted (the decoder redacts them as a stream);
    /// an error's words must be, with `redactor`.
    fn event(&mut self, event: &SseEvent, redactor: &Redactor) -> Step;

    /// Whether `event`, left without its closing blank line when the input ended, is the end of
    /// the reply (servers often close right after it). Only the end event counts: any other
    /// unfinished event is discarded, as the event-stream format says. What [`event`](Self::event)
    /// makes of it counts when it is [`Step::Final`] or [`Step::Fail`]; otherwise the reply is
    /// complete.
    fn ends(&self, event: &SseEvent) -> bool;

    /// Parses a whole (non-streamed) reply within `bounds`, every text redacted by `redactor`.
    ///
    /// # Errors
    ///
    /// A [`TransportError`]: the reply bound crossed, a malformed body, or the provider's error.
    fn whole(body: &[u8], bounds: ReplyBounds, redactor: &Redactor) -> Result<ModelReply, TransportError>;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Open,
    Done,
    Failed,
}

/// Decodes one streamed reply of protocol `P` into [`ReplyChunk`]s, within its bounds.
#[derive(Debug)]
pub struct StreamDecoder<P> {
    protocol: P,
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

impl<P: Protocol> Default for StreamDecoder<P> {
    /// A decoder with the default [`ReplyBounds`] and no key to redact.
    fn default() -> Self {
        Self::new(ReplyBounds::default(), Redactor::default())
    }
}

impl<P: Protocol> StreamDecoder<P> {
    /// A decoder of one reply within `bounds`, redacting the key of `redactor`.
    #[must_use]
    pub fn new(bounds: ReplyBounds, redactor: Redactor) -> Self {
        Self {
            protocol: P::default(),
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

    /// Ends the input. An end event left without its blank line still counts ([`Protocol::ends`]);
    /// a stream that neither ended nor failed was truncated, and
    /// [`Malformed`](loopbound::transport::TransportErrorKind::Malformed) is appended to `out`.
    pub fn finish(&mut self, out: &mut Vec<Result<ReplyChunk, TransportError>>) {
        if self.state != State::Open {
            return;
        }
        let partial = self.sse.has_pending();
        self.sse.flush(&mut self.events);
        let events = std::mem::take(&mut self.events);
        if let Some(end) = events.iter().find(|event| self.protocol.ends(event)) {
            match self.protocol.event(end, &self.redactor) {
                Step::Final(chunk) => self.chunk(chunk, out),
                Step::Fail(error) => self.fail(error, out),
                Step::Skip | Step::Chunk(_) | Step::Done => {}
            }
            if self.state == State::Open {
                self.done(out);
            }
        } else {
            let partial = if partial { " (in the middle of an event)" } else { "" };
            let message = format!("the stream ended before {}{partial}; the reply may be incomplete", P::END);
            self.fail(TransportError::malformed(message), out);
        }
    }

    /// Decodes every one of `parts`, then ends the input: everything [`feed`](Self::feed) and
    /// [`finish`](Self::finish) append, in order.
    pub fn decode_all<'a>(
        &mut self,
        parts: impl IntoIterator<Item = &'a [u8]>,
    ) -> Vec<Result<ReplyChunk, TransportError>> {
        let mut out = Vec::new();
        for part in parts {
            self.feed(part, &mut out);
        }
        self.finish(&mut out);
        out
    }

    /// Bytes held while an event is incomplete (its line and its data so far): what the next
    /// input may make the decoder parse at once.
    #[must_use]
    pub fn buffered(&self) -> usize {
        self.sse.buffered()
    }

    /// Whether the reply ended or an error ended the stream: no further input matters.
    #[must_use]
    pub fn is_finished(&self) -> bool {
        self.state != State::Open
    }

    fn drain_events(&mut self, out: &mut Vec<Result<ReplyChunk, TransportError>>) {
        for event in std::mem::take(&mut self.events) {
            if self.state != State::Open {
                break;
            }
            match self.protocol.event(&event, &self.redactor) {
                Step::Skip => {}
                Step::Chunk(chunk) => self.chunk(chunk, out),
                Step::Done => self.done(out),
                Step::Final(chunk) => {
                    self.chunk(chunk, out);
                    if self.state == State::Open {
                        self.done(out);
                    }
                }
                Step::Fail(error) => self.fail(error, out),
            }
        }
    }

    /// Counts a chunk's new call indices, then hands it on redacted.
    fn chunk(&mut self, chunk: ReplyChunk, out: &mut Vec<Result<ReplyChunk, TransportError>>) {
        if chunk == ReplyChunk::default() {
            return;
        }
        for delta in &chunk.tool_calls {
            if self.indices.insert(delta.index) && self.bounds.too_many(self.indices.len()) {
                return self.fail(self.bounds.too_many_calls(), out);
            }
        }
        if let Some(chunk) = self.stream.chunk(chunk) {
            out.push(Ok(chunk));
        }
    }

    /// The reply is complete: what the redactor held back is handed on.
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

/// The reply `chunks` assemble to within `bounds` (core's [`ReplyAssembler`]).
///
/// # Errors
///
/// The bound's error, at the first chunk that crosses it.
pub fn assemble(
    chunks: impl IntoIterator<Item = ReplyChunk>,
    bounds: ReplyBounds,
) -> Result<ModelReply, TransportError> {
    let mut assembler = ReplyAssembler::new(bounds);
    for chunk in chunks {
        assembler.push(chunk)?;
    }
    Ok(assembler.finish())
}

/// Decodes a whole stream of protocol `P` given in `parts`, with the default bounds and no key:
/// the chunks, or the first error.
///
/// # Errors
///
/// The error that ended the stream, or [`Malformed`](loopbound::transport::TransportErrorKind::Malformed)
/// if it was truncated.
pub fn decode_stream<'a, P: Protocol>(
    parts: impl IntoIterator<Item = &'a [u8]>,
) -> Result<Vec<ReplyChunk>, TransportError> {
    StreamDecoder::<P>::default().decode_all(parts).into_iter().collect()
}

#[cfg(test)]
mod tests {
    use loopbound::transport::{ToolCallDelta, TransportErrorKind};

    use super::*;
    use crate::key::ApiKey;

    /// A protocol of this test's own: `data: t:TEXT` is text, `data: c:N` opens call N, `data:
    /// end` ends the reply, `data: fail` is the provider's error, anything else is skipped.
    #[derive(Debug, Default)]
    struct Lines;

    impl Protocol for Lines {
        const END: &'static str = "end";

        fn event(&mut self, event: &SseEvent, _redactor: &Redactor) -> Step {
            let data = event.data.as_str();
            if let Some(text) = data.strip_prefix("t:") {
                Step::Chunk(ReplyChunk::text(text))
            } else if let Some(index) = data.strip_prefix("c:").and_then(|n| n.parse().ok()) {
                Step::Chunk(ReplyChunk::calls(vec![ToolCallDelta::new(index).with_name("t")]))
            } else if data == "end" {
                Step::Done
            } else if let Some(text) = data.strip_prefix("last:") {
                Step::Final(ReplyChunk::text(text))
            } else if data == "fail" {
                Step::Fail(TransportError::other("failed"))
            } else {
                Step::Skip
            }
        }

        fn ends(&self, event: &SseEvent) -> bool {
            event.data == "end" || event.data.starts_with("last:")
        }

        fn whole(_: &[u8], _: ReplyBounds, _: &Redactor) -> Result<ModelReply, TransportError> {
            Err(TransportError::malformed("not used"))
        }
    }

    #[test]
    fn the_end_event_completes_a_stream_and_input_after_it_is_ignored() {
        let stream = b"data: t:a\n\n: ping\n\ndata: t:b\n\ndata: end\n\ndata: fail\n\n";
        let chunks = decode_stream::<Lines>([&stream[..]]).unwrap();
        assert_eq!(chunks, vec![ReplyChunk::text("a"), ReplyChunk::text("b")]);
        for cut in 0..=stream.len() {
            assert_eq!(decode_stream::<Lines>([&stream[..cut], &stream[cut..]]), Ok(chunks.clone()), "{cut}");
        }
    }

    #[test]
    fn a_stream_without_its_end_is_malformed_unless_the_end_only_lacks_its_blank_line() {
        assert_eq!(
            decode_stream::<Lines>([&b"data: t:a\n\ndata: t:"[..]]),
            Err(TransportError::malformed(
                "the stream ended before end (in the middle of an event); the reply may be incomplete"
            ))
        );
        assert_eq!(
            decode_stream::<Lines>([&b"data: t:a\n\n"[..]]),
            Err(TransportError::malformed("the stream ended before end; the reply may be incomplete"))
        );
        assert_eq!(decode_stream::<Lines>([&b"data: t:a\n\ndata: end"[..]]), Ok(vec![ReplyChunk::text("a")]));
    }

    #[test]
    fn a_final_chunk_is_handed_on_and_ends_the_stream_even_without_its_blank_line() {
        let stream = b"data: t:a\n\ndata: last:b\n\ndata: t:c\n\n";
        let expected = vec![ReplyChunk::text("a"), ReplyChunk::text("b")];
        assert_eq!(decode_stream::<Lines>([&stream[..]]), Ok(expected.clone()));
        assert_eq!(decode_stream::<Lines>([&b"data: t:a\n\ndata: last:b"[..]]), Ok(expected));
    }

    #[test]
    fn the_first_error_ends_the_stream_once() {
        let mut decoder = StreamDecoder::<Lines>::default();
        let out = decoder.decode_all([&b"data: t:a\n\ndata: fail\n\ndata: fail\n\n"[..], b"data: end\n\n"]);
        assert_eq!(out, vec![Ok(ReplyChunk::text("a")), Err(TransportError::other("failed"))]);
        assert!(decoder.is_finished());
    }

    #[test]
    fn one_call_index_too_many_ends_the_stream_before_it_is_handed_on() {
        let mut decoder = StreamDecoder::<Lines>::new(ReplyBounds::new(2, 1 << 20), Redactor::default());
        let out =
            decoder.decode_all([&b"data: c:4\n\ndata: c:4\n\ndata: c:9\n\ndata: c:1\n\ndata: end\n\n"[..]]);
        assert_eq!(out.len(), 4);
        assert!(out[..3].iter().all(Result::is_ok));
        assert_eq!(out[3], Err(TransportError::too_many_calls(2)));
    }

    #[test]
    fn the_byte_bound_counts_every_byte_fed_and_stops_at_the_first_past_it() {
        let pings = ": ping\n\n".repeat(8);
        let bound = pings.len();
        for parts in [vec![pings.as_bytes(), b":"], vec![format!("{pings}:").as_bytes()]] {
            let mut decoder = StreamDecoder::<Lines>::new(ReplyBounds::new(16, bound), Redactor::default());
            let out = decoder.decode_all(parts);
            assert_eq!(
                out,
                vec![Err(TransportError::malformed(format!("the reply is longer than {bound} bytes")))]
            );
        }
        let exact = b"data: t:Hi\n\ndata: end\n\n";
        let mut decoder = StreamDecoder::<Lines>::new(ReplyBounds::new(16, exact.len()), Redactor::default());
        assert_eq!(decoder.decode_all([&exact[..]]), vec![Ok(ReplyChunk::text("Hi"))]);
    }

    #[test]
    fn an_overlong_event_is_malformed() {
        let long = format!("data: t:{}", "x".repeat(64));
        let mut decoder = StreamDecoder::<Lines>::new(ReplyBounds::new(16, 32), Redactor::default());
        let out = decoder.decode_all([long.as_bytes()]);
        assert!(matches!(&out[..], [Err(e)] if e.kind() == TransportErrorKind::Malformed), "{out:?}");
    }

    #[test]
    fn a_key_split_across_events_is_redacted_in_the_assembled_text() {
        let key = "sk-live-0123456789abcdefghijklmnop";
        let redactor = Redactor::new(Some(ApiKey::new(key).unwrap()));
        let stream =
            "data: t:the key: sk-live-0\n\ndata: t:123456789abc\n\ndata: t:defghijklmnop.\n\ndata: end\n\n";
        let bytes = stream.as_bytes();
        for cut in 0..=bytes.len() {
            let mut decoder = StreamDecoder::<Lines>::new(ReplyBounds::default(), redactor.clone());
            let chunks = decoder.decode_all([&bytes[..cut], &bytes[cut..]]).into_iter().map(Result::unwrap);
            let reply = assemble(chunks, ReplyBounds::default()).unwrap();
            assert_eq!(reply.content.as_deref(), Some("the key: [redacted]."), "cut at {cut}");
        }
    }
}
