//! The checks every mode of the server passes in its own API, read back by that API's transport
//! decoders (`P`): a flood of calls whole and streamed, and the key echoed back. A mode's module
//! adds what is its API's own.

use loopbound::transport::{ReplyBounds, ToolCall};
use loopbound_provider::events::{assemble, decode_stream};
use loopbound_provider::{Protocol, Redactor, StreamDecoder};
use loopbound_testkit::hostile::{Behaviour, Budget, KeyPart, KeyPlace};
use serde_json::Value;

use crate::client::{KEY, post_once};

/// The bytes of a request in a mode's API, streamed or not, authorized by a key.
pub(crate) type Request = fn(bool, &str) -> Vec<u8>;

/// A flood of 1001 calls to `read_ticket`: one whole reply with 1001 items at `items` (a JSON
/// pointer) that the API's parser reads as 1001 calls, and a well-formed stream that assembles
/// to 1001 calls. Returns the whole reply's JSON.
pub(crate) async fn a_flood_reads_back_whole_and_streamed<P: Protocol>(
    request: Request,
    items: &str,
) -> Value {
    let flood = || Behaviour::CallFlood {
        calls: 1001,
        arguments: r#"{"input":"x"}"#.into(),
        name: "read_ticket".into(),
    };
    let bounds = ReplyBounds::new(2000, 16 << 20);
    let whole = post_once(flood(), Budget::default(), &request(false, KEY)).await;
    assert!(whole.complete, "the Content-Length is exact");
    let json = whole.json();
    assert_eq!(json.pointer(items).and_then(Value::as_array).map(Vec::len), Some(1001));
    let parsed = P::whole(&whole.body, bounds, &Redactor::default()).unwrap();
    assert_eq!(parsed.tool_calls.len(), 1001);
    assert_eq!(parsed.tool_calls[7], ToolCall::new("c7", "read_ticket", r#"{"input":"x"}"#));
    let streamed = post_once(flood(), Budget::default(), &request(true, KEY)).await;
    let mut decoder = StreamDecoder::<P>::new(bounds, Redactor::default());
    let chunks: Result<Vec<_>, _> = decoder.decode_all([&streamed.body[..]]).into_iter().collect();
    let reply = assemble(chunks.expect("a whole stream"), bounds).unwrap();
    assert_eq!(reply.tool_calls.len(), 1001);
    assert_eq!(reply.tool_calls[3], ToolCall::new("c3", "read_ticket", r#"{"input":"x"}"#));
    json
}

/// The key the request carried, echoed back whole: in a 401's error message after padding, and
/// in a stream's text. Returns the 401's JSON body.
pub(crate) async fn the_key_sent_is_echoed<P: Protocol>(request: Request) -> Value {
    let echo = |status, place| Behaviour::EchoKey { status, padding: 3, place, part: KeyPart::Whole };
    let error = post_once(echo(401, KeyPlace::ErrorBody), Budget::default(), &request(false, KEY)).await;
    assert_eq!(error.status, 401);
    let json = error.json();
    assert_eq!(json["error"]["message"], format!("... the key you sent was {KEY}"));
    let streamed = post_once(echo(200, KeyPlace::StreamText), Budget::default(), &request(true, KEY)).await;
    let reply = assemble(decode_stream::<P>([&streamed.body[..]]).unwrap(), ReplyBounds::default()).unwrap();
    assert_eq!(reply.content, Some(format!("... the key you sent was {KEY}")));
    json
}
