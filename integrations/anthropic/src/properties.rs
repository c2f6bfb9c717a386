//! Properties of the pure decoders: no input panics them, and no read boundary changes their
//! result.

use loopbound::transport::ReplyBounds;
use loopbound_provider::Redactor;
use proptest::prelude::*;

use loopbound_provider::events::decode_stream;

use crate::events::{MessageDecoder, MessagesApi};
use crate::parse::parse_message;

/// Events of every type, framing and multi-byte text: what the API's streams are made of.
const TOKENS: [&str; 15] = [
    "event: message_start\n",
    "event: error\n",
    "data: ",
    "\n",
    "\r\n",
    "é✓𝄞",
    r#"{"type":"message_start","message":{"usage":{"input_tokens":3,"cache_read_input_tokens":2}}}"#,
    r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
    r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"H\u00e9"}}"#,
    r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"n","input":{}}}"#,
    r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\""}}"#,
    r#"{"type":"content_block_stop","index":1}"#,
    r#"{"type":"message_delta","usage":{"output_tokens":9}}"#,
    r#"{"type":"error","error":{"type":"overloaded_error","message":"x"}}"#,
    r#"{"type":"message_stop"}"#,
];

/// Pieces of streams that look like the API's: tokens and arbitrary bytes in between; the pieces
/// are the reads of the network.
fn stream_like() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let token = proptest::sample::select(&TOKENS[..]).prop_map(|token| token.as_bytes().to_vec());
    let piece = prop_oneof![3 => token, 1 => proptest::collection::vec(any::<u8>(), 0..8)];
    proptest::collection::vec(piece, 0..24)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_in_arbitrary_reads_never_panic(
        reads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..128), 0..16),
    ) {
        let mut decoder = MessageDecoder::default();
        let mut out = Vec::new();
        for read in &reads {
            decoder.feed(read, &mut out);
        }
        decoder.finish(&mut out);
        prop_assert!(decoder.is_finished());
        prop_assert!(out.iter().filter(|item| item.is_err()).count() <= 1, "at most one error ends a stream");
        let _ = parse_message(&reads.concat(), ReplyBounds::default(), &Redactor::default());
    }

    #[test]
    fn the_reads_a_stream_arrives_in_change_nothing(pieces in stream_like()) {
        let bytes = pieces.concat();
        let reads: Vec<&[u8]> = pieces.iter().map(Vec::as_slice).collect();
        prop_assert_eq!(decode_stream::<MessagesApi>(reads), decode_stream::<MessagesApi>([&bytes[..]]));
        let one_at_a_time: Vec<&[u8]> = bytes.chunks(1).collect();
        prop_assert_eq!(decode_stream::<MessagesApi>(one_at_a_time), decode_stream::<MessagesApi>([&bytes[..]]));
    }
}
