//! The Anthropic mode: every hostility in the Messages API's own events and bodies, read back by
//! the Anthropic transport's own decoders.

use std::time::Duration;

use loopbound::transport::{TransportError, TransportErrorKind};
use loopbound_anthropic::events::MessagesApi;
use loopbound_provider::events::decode_stream;
use loopbound_testkit::hostile::{Behaviour, Budget};

use crate::client::{self, KEY, Response, messages_request, named_events as events, types};
use crate::modes;

const MIB: usize = 1024 * 1024;

async fn post(behaviour: Behaviour, budget: Budget, stream: bool) -> Response {
    client::post_once(behaviour, budget, &messages_request(stream, KEY)).await
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
    let reply =
        modes::a_flood_reads_back_whole_and_streamed::<MessagesApi>(messages_request, "/content").await;
    assert_eq!(reply["content"][1000]["input"]["input"], "x");
}

#[tokio::test]
async fn the_key_echoed_is_the_x_api_key_sent() {
    let error = modes::the_key_sent_is_echoed::<MessagesApi>(messages_request).await;
    assert_eq!(error["error"]["type"], "authentication_error");
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
