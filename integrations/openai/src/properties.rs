//! Properties of the pure decoders: no input panics them, and no split changes their result.

use proptest::prelude::*;

use loopbound::transport::{ReplyBounds, ReplyChunk, TransportError};

use loopbound_provider::{Protocol, Redactor, StreamDecoder};

use loopbound_provider::events::decode_stream;

use crate::chunks::ChatCompletions;
use crate::parse::{parse_chunk, parse_completion};
use crate::responses::events::ResponsesApi;
use crate::responses::reply::parse_response;

/// Cuts `bytes` at the given points (taken modulo its length, in order).
fn split<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = cuts.iter().map(|cut| cut % (bytes.len() + 1)).collect();
    points.sort_unstable();
    let mut parts = Vec::new();
    let mut start = 0;
    for point in points {
        parts.push(&bytes[start..point]);
        start = point;
    }
    parts.push(&bytes[start..]);
    parts
}

/// Inputs that look like event streams: fields, line breaks, JSON chunks, multi-byte text,
/// `[DONE]`, and arbitrary bytes in between.
fn stream_like() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(b"data: ".to_vec()),
        Just(b"data:".to_vec()),
        Just(b"event: error".to_vec()),
        Just(b": ping".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b"[DONE]".to_vec()),
        Just("\u{feff}".as_bytes().to_vec()),
        Just("é✓𝄞".as_bytes().to_vec()),
        Just(r#"{"choices":[{"index":0,"delta":{"content":"Hé"}}]}"#.as_bytes().to_vec()),
        Just(br#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"c","function":{"name":"t","arguments":"{\"a\""}}]}}]}"#.to_vec()),
        Just(br#"{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#.to_vec()),
        Just(br#"{"error":{"code":500,"message":"x"}}"#.to_vec()),
        Just(b"event: response.completed".to_vec()),
        Just(r#"{"type":"response.output_text.delta","delta":"Hé"}"#.as_bytes().to_vec()),
        Just(br#"{"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","call_id":"c","name":"t","arguments":""}}"#.to_vec()),
        Just(br#"{"type":"response.function_call_arguments.delta","output_index":1,"delta":"{"a""}"#.to_vec()),
        Just(br#"{"type":"response.output_item.done","output_index":2,"item":{"type":"function_call","name":"t","arguments":"{}"}}"#.to_vec()),
        Just(br#"{"type":"response.completed","response":{"usage":{"input_tokens":1,"output_tokens":2}}}"#.to_vec()),
        Just(br#"{"type":"response.failed","response":{"error":{"code":"server_error","message":"x"}}}"#.to_vec()),
        proptest::collection::vec(any::<u8>(), 0..8),
    ];
    proptest::collection::vec(piece, 0..24).prop_map(|pieces| pieces.concat())
}

/// Feeds `bytes` cut at `cuts` to a decoder of protocol `P`, then ends the input; the decoder
/// must have finished.
fn decode_split<P: Protocol>(bytes: &[u8], cuts: &[usize]) -> Vec<Result<ReplyChunk, TransportError>> {
    let mut decoder = StreamDecoder::<P>::default();
    let mut out = Vec::new();
    for part in split(bytes, cuts) {
        decoder.feed(part, &mut out);
    }
    decoder.finish(&mut out);
    assert!(decoder.is_finished());
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_in_arbitrary_splits_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..1024),
        cuts in proptest::collection::vec(any::<usize>(), 0..16),
    ) {
        for out in [decode_split::<ChatCompletions>(&bytes, &cuts), decode_split::<ResponsesApi>(&bytes, &cuts)] {
            prop_assert!(out.iter().filter(|item| item.is_err()).count() <= 1, "at most one error ends a stream");
        }
        let none = Redactor::default();
        let _ = parse_completion(&bytes, ReplyBounds::default(), &none);
        let _ = parse_chunk(&bytes, &none);
        let _ = parse_response(&bytes, ReplyBounds::default(), &none);
    }

    #[test]
    fn splitting_an_event_stream_anywhere_changes_nothing(
        bytes in stream_like(),
        cuts in proptest::collection::vec(any::<usize>(), 0..16),
    ) {
        prop_assert_eq!(decode_stream::<ChatCompletions>(split(&bytes, &cuts)), decode_stream::<ChatCompletions>([&bytes[..]]));
        let one_at_a_time: Vec<&[u8]> = bytes.chunks(1).collect();
        prop_assert_eq!(decode_stream::<ChatCompletions>(one_at_a_time.clone()), decode_stream::<ChatCompletions>([&bytes[..]]));
        prop_assert_eq!(decode_stream::<ResponsesApi>(split(&bytes, &cuts)), decode_stream::<ResponsesApi>([&bytes[..]]));
        prop_assert_eq!(decode_stream::<ResponsesApi>(one_at_a_time), decode_stream::<ResponsesApi>([&bytes[..]]));
    }
}
