//! Target `openai_parse`: the OpenAI-compatible transport's pure decoders on arbitrary bytes,
//! within arbitrary reply bounds, with an arbitrary key to redact.
//!
//! Every check of [`stream_case`](super::stream_case) with the chat-completions protocol, and the
//! chunk parser of one event: it returns a chunk or a typed error, and its errors hold no run of
//! the key.

use loopbound_openai::chunks::ChatCompletions;
use loopbound_openai::parse::parse_chunk;
use loopbound_provider::Redactor;

use super::stream_case::{self, StreamCase, assert_no_run, echoed, key};

/// The input of `openai_parse`: a body and its cuts, the reply's bounds, a key echoed into it.
pub type OpenAiCase = StreamCase;

/// Runs the checks on one case; panics with the broken invariant's name.
pub fn check(case: &OpenAiCase) {
    stream_case::check::<ChatCompletions>(case);
    let _ = parse_chunk(&case.body, &Redactor::default());
    let Some((api_key, bytes)) = key(case) else { return };
    let redactor = Redactor::new(Some(api_key));
    if let Err(error) = parse_chunk(&echoed(case, &bytes), &redactor) {
        assert_no_run(&error.to_string(), &bytes, "a chunk error");
    }
}
