//! The Anthropic mode: every hostility in the Messages API's own events and bodies, read back by
//! the Anthropic transport's own decoders.

use std::time::Duration;

use loopbound::transport::{TransportError, TransportErrorKind};
use loopbound_anthropic::events::MessagesApi;
use loopbound_anthropic::parse::parse_message;
use loopbound_provider::events::{assemble, decode_stream};
use loopbound_provider::{Redactor, StreamDecoder};
use loopbound_testkit::hostile::{Behaviour, Budget, HostileServer, KeyPart, KeyPlace};
use serde_json::Value;

use crate::client::{KEY, Response, exchange, messages_request};

const MIB: usize = 1024 * 1024;

async fn post(behaviour: Behaviour, budget: Budget, stream: bool) -> Response {
    let server = HostileServer::start_with(behaviour, budget).await.unwrap();
    let response = exchange(&server, &messages_request(stream, KEY)).await;
    assert_eq!(server.requests(), 1);
    response
}

/// The events' data, each checked to be named after its type.
fn events(response: &Response) -> Vec<Value> {
    response
        .events()
        .into_iter()
        .map(|event| {
            let (name, data) = event.split_once('\n').expect("an event and a data line");
            let json: Value = serde_json::from_str(data.strip_prefix("data: ").expect("data")).expect("JSON");
            assert_eq!(
                name.strip_prefix("event: "),
                json["type"].as_str(),
                "the event is named after its type"
            );
            json
        })
        .collect()
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|event| event["type"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn endless_text_is_a_messages_stream_that_never_stops() {
    let response =
        post(Behaviour::EndlessText { delta: 4096 }, Budget::new(MIB as u64, Duration::from_secs(10)), true)
            .await;
    assert_eq!((response.status, response.header("content-type")), (200, Some("text/event-stream")));
    assert_eq!(response.body.len(), MIB);
    assert!(!response.complete);
    let events = events(&response);
    assert_eq!(types(&events[..3]), ["message_start", "content_block_start", "content_block_delta"]);
    assert!(events[2..].iter().all(|e| e["delta"]["text"].as_str().is_some_and(|t| t.len() == 4096)));
    let truncated = decode_stream::<MessagesApi>([&response.body[..]]).unwrap_err();
    assert_eq!(truncated.kind(), TransportErrorKind::Malformed);
}

#[tokio::test]
async fn endless_call_indices_open_one_tool_use_block_per_index() {
    let response =
        post(Behaviour::EndlessCallIndices, Budget::new(256 * 1024, Duration::from_secs(10)), true).await;
    let events = events(&response);
    assert!(events.len() > 1000, "{} events", events.len());
    for (n, block) in events[1..].chunks(3).filter(|block| block.len() == 3).enumerate() {
        assert_eq!(types(block), ["content_block_start", "content_block_delta", "content_block_stop"]);
        assert_eq!(block[0]["index"], n);
        assert_eq!(block[0]["content_block"]["id"], format!("c{n}"));
        assert_eq!(block[1]["delta"]["partial_json"], r#"{"input":42}"#);
    }
}

#[tokio::test]
async fn endless_usage_reports_a_cumulative_count_that_grows_by_one() {
    let response =
        post(Behaviour::EndlessUsage, Budget::new(256 * 1024, Duration::from_secs(10)), true).await;
    let events = events(&response);
    assert_eq!(types(&events[..3]), ["message_start", "content_block_start", "content_block_delta"]);
    let counts: Vec<u64> =
        events[3..].iter().map(|e| e["usage"]["output_tokens"].as_u64().unwrap()).collect();
    assert!(counts.len() > 1000);
    assert!(counts.iter().zip(1..).all(|(count, n)| *count == n), "1, 2, 3, …");
}

#[tokio::test]
async fn an_overload_comes_after_exactly_the_deltas_asked_for() {
    let response = post(Behaviour::ErrorAfterDeltas { deltas: 10_000 }, Budget::default(), true).await;
    assert!(response.complete, "the body ends after the error");
    let events = events(&response);
    assert_eq!(events.len(), 2 + 10_000 + 1);
    assert_eq!(events.last().unwrap()["error"]["type"], "overloaded_error");
    assert_eq!(
        decode_stream::<MessagesApi>([&response.body[..]]),
        Err(TransportError::unavailable("the provider reported an error (overloaded_error): Overloaded"))
    );
}

#[tokio::test]
async fn a_flood_is_one_whole_message_or_a_well_formed_stream() {
    let flood = || Behaviour::CallFlood {
        calls: 1001,
        arguments: r#"{"input":"x"}"#.into(),
        name: "read_ticket".into(),
    };
    let whole = post(flood(), Budget::default(), false).await;
    assert!(whole.complete, "the Content-Length is exact");
    let reply = whole.json();
    assert_eq!(reply["content"].as_array().unwrap().len(), 1001);
    assert_eq!(reply["content"][1000]["input"]["input"], "x");
    let parsed = parse_message(
        &whole.body,
        loopbound::transport::ReplyBounds::new(2000, 16 << 20),
        &Redactor::default(),
    )
    .unwrap();
    assert_eq!((parsed.tool_calls.len(), parsed.tool_calls[7].id.as_str()), (1001, "c7"));
    let streamed = post(flood(), Budget::default(), true).await;
    let bounds = loopbound::transport::ReplyBounds::new(2000, 16 << 20);
    let mut decoder = StreamDecoder::<MessagesApi>::new(bounds, Redactor::default());
    let chunks: Result<Vec<_>, _> = decoder.decode_all([&streamed.body[..]]).into_iter().collect();
    let chunks = chunks.expect("a whole stream");
    let reply = assemble(chunks, loopbound::transport::ReplyBounds::new(2000, 16 << 20)).unwrap();
    assert_eq!(reply.tool_calls.len(), 1001);
    assert_eq!(reply.tool_calls[3].arguments, r#"{"input":"x"}"#);
}

#[tokio::test]
async fn the_key_echoed_is_the_x_api_key_sent() {
    let echo = |place| Behaviour::EchoKey { status: 401, padding: 3, place, part: KeyPart::Whole };
    let error = post(echo(KeyPlace::ErrorBody), Budget::default(), false).await;
    assert_eq!(error.status, 401);
    assert_eq!(error.json()["error"]["message"], format!("... the key you sent was {KEY}"));
    assert_eq!(error.json()["error"]["type"], "authentication_error");
    let streamed = post(
        Behaviour::EchoKey { status: 200, padding: 0, place: KeyPlace::StreamText, part: KeyPart::Whole },
        Budget::default(),
        true,
    )
    .await;
    let reply =
        assemble(decode_stream::<MessagesApi>([&streamed.body[..]]).unwrap(), Default::default()).unwrap();
    assert_eq!(reply.content, Some(format!(" the key you sent was {KEY}")));
}

#[tokio::test]
async fn keep_alives_are_ping_events() {
    let response = post(
        Behaviour::KeepAliveForever { interval: Duration::from_millis(5) },
        Budget::new(MIB as u64, Duration::from_millis(300)),
        true,
    )
    .await;
    let events = events(&response);
    assert!(events.len() > 3);
    assert!(types(&events).iter().all(|kind| *kind == "ping"));
}
