//! Properties of the shared decoders: no input panics them, and no split changes their result.

use proptest::prelude::*;

use crate::errors::status_error;
use crate::key::ApiKey;
use crate::redact::{RUN, Redactor};
use crate::sse::SseDecoder;

/// Fields, every line ending, multi-byte text and a byte-order mark: what event streams are made
/// of.
const TOKENS: [&str; 12] = [
    "data: ",
    "data:",
    "event: error",
    "event: message_stop",
    ": ping",
    "id: 7",
    "\n",
    "\r\n",
    "\r",
    "\u{feff}",
    "é✓𝄞",
    r#"{"type":"content_block_delta","index":0}"#,
];

/// Pieces of inputs that look like event streams: tokens and arbitrary bytes in between; the
/// pieces are the reads of the network.
fn stream_like() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let token = proptest::sample::select(&TOKENS[..]).prop_map(|token| token.as_bytes().to_vec());
    let piece = prop_oneof![3 => token, 1 => proptest::collection::vec(any::<u8>(), 0..8)];
    proptest::collection::vec(piece, 0..24)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_sse_decoder_gives_the_same_events_in_any_split(pieces in stream_like()) {
        let bytes = pieces.concat();
        let decode = |parts: Vec<&[u8]>| {
            let mut decoder = SseDecoder::default();
            let mut events = Vec::new();
            for part in parts {
                decoder.feed(part, &mut events).expect("small inputs stay under the limit");
            }
            (events, decoder.has_pending())
        };
        let reads: Vec<&[u8]> = pieces.iter().map(Vec::as_slice).collect();
        prop_assert_eq!(decode(reads), decode(vec![&bytes[..]]));
        let one_at_a_time: Vec<&[u8]> = bytes.chunks(1).collect();
        prop_assert_eq!(decode(one_at_a_time), decode(vec![&bytes[..]]));
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_event_decoder_or_the_status_mapping(
        reads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..128), 0..16),
        status in 100_u16..1000,
    ) {
        let mut sse = SseDecoder::with_limit(64);
        let mut events = Vec::new();
        for read in &reads {
            let _ = sse.feed(read, &mut events);
        }
        let bytes = reads.concat();
        sse.flush(&mut events);
        let _ = status_error(status, std::str::from_utf8(&bytes).ok(), &bytes, &Redactor::default());
    }

    #[test]
    fn no_run_of_the_key_survives_redaction(
        key in "[!-~]{8,40}",
        text in "[ -~é]{0,80}",
        at in any::<usize>(),
        from in any::<usize>(),
        len in 8_usize..40,
    ) {
        let redactor = Redactor::new(Some(ApiKey::new(key.clone()).expect("visible ASCII")));
        let from = from % key.len();
        let piece = &key[from..(from + len).min(key.len())];
        let mut at = at % (text.len() + 1);
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        let echoed = format!("{}{piece}{}", &text[..at], &text[at..]);
        let redacted = redactor.redact(&echoed).replace(crate::REDACTED, "\u{0}");
        let windows: Vec<&[u8]> = key.as_bytes().windows(RUN.min(key.len())).collect();
        for window in redacted.as_bytes().windows(RUN) {
            prop_assert!(!windows.contains(&window), "a run of the key survived: {redacted:?}");
        }
    }
}
