//! The checks every provider's decoders go through, whatever the provider's [`Protocol`]: the
//! targets `openai_parse`, `responses_parse` and `anthropic_parse` run them on arbitrary bytes,
//! within arbitrary reply bounds, with an arbitrary key to redact.
//!
//! The input is a body, the points where the network cut it, the reply's bounds, and an API key
//! with pieces of it spliced into the body (as a provider that echoes it would). Checks: nothing
//! panics; the whole-reply parser returns a reply or a typed error; the event-stream decoder and
//! the protocol's stream decoder give the same result whatever the cuts; a stream ends with at
//! most one error and its decoder always reaches its end state; a decoded reply holds at most the
//! bound of calls and, when the stream fits its bounds, equals the unbounded decoding; the core's
//! assembler refuses exactly at the first chunk that crosses a bound; and no run of eight
//! characters of the key survives in any text the decoders hand on, nor in an error.

use std::collections::BTreeSet;

use arbitrary::Arbitrary;
use loopbound::transport::{ModelReply, ReplyBounds, ReplyChunk, TransportError};
use loopbound_provider::events::decode_stream;
use loopbound_provider::redact::RUN;
use loopbound_provider::sse::{SseDecoder, SseEvent};
use loopbound_provider::{ApiKey, REDACTED, Redactor};
use loopbound_provider::{Protocol, StreamDecoder};

/// A body, where it was cut into network reads, the reply's bounds, and a key echoed into it.
#[derive(Debug, Arbitrary)]
pub struct StreamCase {
    /// Cut points, taken modulo the body's length.
    pub cuts: Vec<u16>,
    /// The bound on tool calls (small, so that it is crossed).
    pub calls: u8,
    /// The bound on bytes.
    pub bytes: u16,
    /// The API key's characters, mapped to visible ASCII, cut to 24 and padded to 8 (see `key`).
    pub key: Vec<u8>,
    /// Pieces of the key spliced into the body: at (modulo the body's length), from, length.
    pub echoes: Vec<(u16, u8, u8)>,
    /// The bytes the server sent (before the echoes are spliced in).
    pub body: Vec<u8>,
}

/// `body` cut at `cuts`.
pub fn split<'a>(body: &'a [u8], cuts: &[u16]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = cuts.iter().map(|&cut| usize::from(cut) % (body.len() + 1)).collect();
    points.sort_unstable();
    let mut parts = Vec::with_capacity(points.len() + 1);
    let mut start = 0;
    for point in points {
        parts.push(&body[start..point]);
        start = point;
    }
    parts.push(&body[start..]);
    parts
}

/// The events and pending state of an event-stream decoder fed `parts`.
fn sse_events(parts: &[&[u8]]) -> (Vec<SseEvent>, bool, bool) {
    let mut decoder = SseDecoder::default();
    let mut events = Vec::new();
    let mut failed = false;
    for part in parts {
        failed |= decoder.feed(part, &mut events).is_err();
    }
    decoder.flush(&mut events);
    (events, decoder.has_pending(), failed)
}

/// The key of the case, as visible ASCII, and its bytes: 8 to 24 characters, every fourth one a
/// `~`, which none of the transport's own words contains, so that a run of the key found in an
/// output can only have come from what the provider sent.
pub fn key(case: &StreamCase) -> Option<(ApiKey, Vec<u8>)> {
    let mut bytes: Vec<u8> = case.key.iter().take(24).map(|b| b % 94 + 33).collect();
    bytes.resize(bytes.len().max(8), b'k');
    for tilde in bytes.iter_mut().skip(3).step_by(4) {
        *tilde = b'~';
    }
    let text = String::from_utf8(bytes.clone()).ok()?;
    ApiKey::new(text).ok().map(|key| (key, bytes))
}

/// The body with the key's pieces spliced in.
pub fn echoed(case: &StreamCase, key: &[u8]) -> Vec<u8> {
    let mut body = case.body.clone();
    for &(at, from, len) in case.echoes.iter().take(8) {
        let from = usize::from(from) % key.len();
        let piece = &key[from..(from + usize::from(len)).min(key.len())];
        let at = usize::from(at) % (body.len() + 1);
        body.splice(at..at, piece.iter().copied());
    }
    body
}

/// Decodes `parts` with a decoder of protocol `P`, `bounds` and `redactor`: every item it hands
/// on, and whether it reached its end state.
fn decode_with<P: Protocol>(
    bounds: ReplyBounds,
    redactor: &Redactor,
    parts: &[&[u8]],
) -> (Vec<Result<ReplyChunk, TransportError>>, bool) {
    let mut decoder = StreamDecoder::<P>::new(bounds, redactor.clone());
    let out = decoder.decode_all(parts.iter().copied());
    (out, decoder.is_finished())
}

/// The first error of `items`, or the chunks.
fn first_error(items: Vec<Result<ReplyChunk, TransportError>>) -> Result<Vec<ReplyChunk>, TransportError> {
    items.into_iter().collect()
}

/// What the assembler must answer for `chunks` under `bounds`: the first chunk that opens one
/// call index too many or brings the bytes past the bound decides.
fn reference_assembly(chunks: &[ReplyChunk], bounds: ReplyBounds) -> Result<(), TransportError> {
    let mut indices = BTreeSet::new();
    let mut bytes = 0_usize;
    for chunk in chunks {
        let field = |text: &Option<String>| text.as_ref().map_or(0, String::len);
        indices.extend(chunk.tool_calls.iter().map(|delta| delta.index));
        if bounds.too_many(indices.len()) {
            return Err(bounds.too_many_calls());
        }
        bytes += field(&chunk.content)
            + chunk
                .tool_calls
                .iter()
                .map(|d| field(&d.id) + field(&d.name) + field(&d.arguments))
                .sum::<usize>();
        if bytes > bounds.bytes() {
            return Err(bounds.too_long());
        }
    }
    Ok(())
}

/// Assembles `chunks` under `bounds`.
fn assemble(chunks: &[ReplyChunk], bounds: ReplyBounds) -> Result<ModelReply, TransportError> {
    loopbound_provider::events::assemble(chunks.iter().cloned(), bounds)
}

/// Panics if `text` holds, outside the redaction markers, a window of the key.
pub fn assert_no_run(text: &str, key: &[u8], what: &str) {
    let width = key.len().min(RUN);
    let windows: BTreeSet<&[u8]> = key.windows(width).collect();
    let bytes = text.as_bytes();
    let mut marker = vec![false; bytes.len()];
    for (at, _) in text.match_indices(REDACTED) {
        marker[at..at + REDACTED.len()].iter_mut().for_each(|m| *m = true);
    }
    for start in 0..bytes.len().saturating_sub(width - 1) {
        let window = &bytes[start..start + width];
        if !marker[start..start + width].iter().any(|m| *m) && windows.contains(window) {
            panic!("a run of the key survived redaction in {what}");
        }
    }
}

/// Panics if any text of `reply` holds a window of the key.
fn assert_reply_redacted(reply: &ModelReply, key: &[u8]) {
    assert_no_run(reply.content.as_deref().unwrap_or_default(), key, "the text");
    for call in &reply.tool_calls {
        assert_no_run(&call.id, key, "a call id");
        assert_no_run(&call.name, key, "a call name");
        assert_no_run(&call.arguments, key, "call arguments");
    }
}

/// Runs the checks on one case with protocol `P`'s decoders; panics with the broken invariant's
/// name.
pub fn check<P: Protocol>(case: &StreamCase) {
    let none = Redactor::default();
    let body = &case.body[..];
    let parts = split(body, &case.cuts);

    let _ = P::whole(body, ReplyBounds::default(), &none);

    let whole = decode_stream::<P>([body]);
    assert_eq!(decode_stream::<P>(parts.iter().copied()), whole, "a cut changed the decoded stream");

    let (out, finished) = decode_with::<P>(ReplyBounds::default(), &none, &parts);
    assert!(finished, "the chunk decoder did not reach its end");
    assert!(out.iter().filter(|item| item.is_err()).count() <= 1, "a stream ended with two errors");

    let (events, pending, failed) = sse_events(&parts);
    if !failed {
        assert_eq!(sse_events(&[body]), (events, pending, false), "a cut changed the events");
    }

    check_bounds::<P>(case, &parts, &whole);
    check_redaction::<P>(case);
}

/// The bounds: the decoder's and the assembler's.
fn check_bounds<P: Protocol>(
    case: &StreamCase,
    parts: &[&[u8]],
    whole: &Result<Vec<ReplyChunk>, TransportError>,
) {
    let none = Redactor::default();
    let bounds = ReplyBounds::new(u32::from(case.calls % 20), usize::from(case.bytes));
    let (bounded, finished) = decode_with::<P>(bounds, &none, parts);
    assert!(finished, "a bounded decoder did not reach its end");
    let bounded = first_error(bounded);
    let (again, _) = decode_with::<P>(bounds, &none, &[&case.body[..]]);
    assert_eq!(first_error(again), bounded, "a cut changed the bounded decoding");
    if let Ok(chunks) = &bounded {
        let indices: BTreeSet<u32> =
            chunks.iter().flat_map(|c| c.tool_calls.iter().map(|d| d.index)).collect();
        assert!(!bounds.too_many(indices.len()), "a bounded stream handed on too many calls");
        assert_eq!(
            assemble(chunks, ReplyBounds::new(bounds.calls(), usize::MAX)).map(|_| ()),
            Ok(()),
            "the assembler refused the calls of a stream its decoder accepted"
        );
    }
    if let Ok(chunks) = whole {
        let indices: BTreeSet<u32> =
            chunks.iter().flat_map(|c| c.tool_calls.iter().map(|d| d.index)).collect();
        if case.body.len() <= bounds.bytes() && !bounds.too_many(indices.len()) {
            assert_eq!(&bounded, whole, "a stream within its bounds decoded differently under them");
        }
        let assembled = assemble(chunks, bounds);
        assert_eq!(
            assembled.as_ref().map(|_| ()).map_err(Clone::clone),
            reference_assembly(chunks, bounds),
            "the assembler refused at another chunk than the first one past a bound"
        );
        if let Ok(reply) = assembled {
            assert_eq!(bounds.check(&reply), Ok(()), "an assembled reply is over its bounds");
        }
    }
    if let Ok(reply) = P::whole(&case.body, bounds, &none) {
        assert!(!bounds.too_many(reply.tool_calls.len()), "a whole reply over the call bound was parsed");
    }
}

/// Redaction: whatever pieces of the key the body echoes, none of eight characters is handed on.
fn check_redaction<P: Protocol>(case: &StreamCase) {
    let Some((key, bytes)) = key(case) else { return };
    let redactor = Redactor::new(Some(key));
    let body = echoed(case, &bytes);
    let parts = split(&body, &case.cuts);
    let (out, _) = decode_with::<P>(ReplyBounds::default(), &redactor, &parts);
    for item in &out {
        match item {
            Ok(chunk) => {
                if let Some(content) = &chunk.content {
                    // A single piece may end with a held-back start: the whole text is checked below.
                    assert_no_run(content, &bytes, "a streamed text piece");
                }
            }
            Err(error) => assert_no_run(&error.to_string(), &bytes, "a stream error"),
        }
    }
    if let Ok(chunks) = first_error(out)
        && let Ok(reply) = assemble(&chunks, ReplyBounds::new(u32::MAX, usize::MAX))
    {
        assert_reply_redacted(&reply, &bytes);
    }
    match P::whole(&body, ReplyBounds::default(), &redactor) {
        Ok(reply) => assert_reply_redacted(&reply, &bytes),
        Err(error) => assert_no_run(&error.to_string(), &bytes, "a reply error"),
    }
    let status = loopbound_provider::errors::status_error(401, None, &body, &redactor);
    assert_no_run(&status.to_string(), &bytes, "a status error");
}

/// The committed seed `name` of the fuzz target `target`, decoded as a case (for the targets'
/// own tests, which check what each seed holds).
///
/// # Panics
///
/// When the seed cannot be read or does not decode.
#[cfg(test)]
pub(crate) fn seed(target: &str, name: &str) -> StreamCase {
    use arbitrary::Unstructured;
    let path = format!("{}/../fuzz/seeds/{target}/{name}", env!("CARGO_MANIFEST_DIR"));
    let data = std::fs::read(&path).unwrap_or_else(|error| panic!("reading {path}: {error}"));
    StreamCase::arbitrary_take_rest(Unstructured::new(&data)).expect("a seed decodes")
}
