//! Target `openai_parse`: the live transport's pure decoders on arbitrary bytes.
//!
//! The input is a body and the points where the network cut it. Checks: nothing panics; the
//! whole-reply parser and the chunk parser return a reply or a typed error; the event-stream
//! decoder and the chunk decoder give the same result whatever the cuts; a stream ends with at
//! most one error and its decoder always reaches its end state.

use arbitrary::Arbitrary;
use loopbound_openai::chunks::{ChunkDecoder, decode_stream};
use loopbound_openai::parse::{parse_chunk, parse_completion};
use loopbound_openai::sse::SseDecoder;

/// A body and where it was cut into network reads.
#[derive(Debug, Arbitrary)]
pub struct OpenAiCase {
    /// Cut points, taken modulo the body's length.
    pub cuts: Vec<u16>,
    /// The bytes the server sent.
    pub body: Vec<u8>,
}

/// `body` cut at `cuts`.
fn split<'a>(body: &'a [u8], cuts: &[u16]) -> Vec<&'a [u8]> {
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
fn sse_events(parts: &[&[u8]]) -> (Vec<loopbound_openai::sse::SseEvent>, bool, bool) {
    let mut decoder = SseDecoder::default();
    let mut events = Vec::new();
    let mut failed = false;
    for part in parts {
        failed |= decoder.feed(part, &mut events).is_err();
    }
    decoder.flush(&mut events);
    (events, decoder.has_pending(), failed)
}

/// Runs the checks on one case; panics with the broken invariant's name.
pub fn check(case: &OpenAiCase) {
    let body = &case.body[..];
    let parts = split(body, &case.cuts);

    let _ = parse_completion(body);
    let _ = parse_chunk(body);

    let whole = decode_stream([body]);
    assert_eq!(decode_stream(parts.iter().copied()), whole, "a cut changed the decoded stream");

    let mut decoder = ChunkDecoder::default();
    let mut out = Vec::new();
    for part in &parts {
        decoder.feed(part, &mut out);
    }
    decoder.finish(&mut out);
    assert!(decoder.is_finished(), "the chunk decoder did not reach its end");
    assert!(out.iter().filter(|item| item.is_err()).count() <= 1, "a stream ended with two errors");

    let (events, pending, failed) = sse_events(&parts);
    if !failed {
        assert_eq!(sse_events(&[body]), (events, pending, false), "a cut changed the events");
    }
}
