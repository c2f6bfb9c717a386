//! The Responses mode: every hostility in the Responses API's own events and bodies, read back by
//! the Responses transport's own decoders.

use std::time::Duration;

use loopbound::transport::{ReplyBounds, TransportError, TransportErrorKind};
use loopbound_openai::responses::events::ResponsesApi;
use loopbound_provider::events::decode_stream;
use loopbound_provider::{Redactor, StreamDecoder};
use loopbound_testkit::hostile::{Behaviour, Budget};

use crate::client::{self, KEY, Response, named_events as events, responses_request, types};
use crate::modes;

const MIB: usize = 1024 * 1024;

async fn post(behaviour: Behaviour, budget: Budget, stream: bool) -> Response {
    client::post_once(behaviour, budget, &responses_request(stream, KEY)).await
}

/// The first events of every stream.
const OPEN: [&str; 2] = ["response.created", "response.in_progress"];

#[tokio::test]
async fn endless_text_is_a_responses_stream_that_never_stops() {
    let response =
        post(Behaviour::EndlessText { delta: 4096 }, Budget::new(MIB as u64, Duration::from_secs(10)), true)
            .await;
    assert_eq!((response.status, response.header("content-type")), (200, Some("text/event-stream")));
    assert_eq!(response.body.len(), MIB);
    assert!(!response.complete);
    let events = events(&response);
    assert_eq!(
        types(&events[..4]),
        [OPEN[0], OPEN[1], "response.output_item.added", "response.output_text.delta"]
    );
    assert!(events[3..].iter().all(|e| e["delta"].as_str().is_some_and(|t| t.len() == 4096)));
    let truncated = decode_stream::<ResponsesApi>([&response.body[..]]).unwrap_err();
    assert_eq!(truncated.kind(), TransportErrorKind::Malformed);
}

#[tokio::test]
async fn endless_call_indices_add_one_function_call_item_per_index() {
    let response =
        post(Behaviour::EndlessCallIndices, Budget::new(256 * 1024, Duration::from_secs(10)), true).await;
    let events = events(&response);
    assert_eq!(types(&events[..2]), OPEN);
    assert!(events.len() > 1000, "{} events", events.len());
    for (n, pair) in events[2..].chunks(2).filter(|pair| pair.len() == 2).enumerate() {
        assert_eq!(types(pair), ["response.output_item.added", "response.function_call_arguments.delta"]);
        assert_eq!(pair[0]["output_index"], n);
        assert_eq!(pair[0]["item"]["call_id"], format!("c{n}"));
        assert_eq!(pair[1]["delta"], r#"{"input":42}"#);
    }
    let mut decoder = StreamDecoder::<ResponsesApi>::new(ReplyBounds::new(16, 16 << 20), Redactor::default());
    let out = decoder.decode_all([&response.body[..]]);
    // Two chunks per call (its item, its arguments), then the one call too many.
    assert_eq!(out.len(), 2 * 16 + 1);
    assert!(out[..32].iter().all(Result::is_ok));
    assert_eq!(out[32], Err(TransportError::too_many_calls(16)));
}

#[tokio::test]
async fn endless_usage_reports_a_count_in_progress_that_grows_by_one() {
    let response =
        post(Behaviour::EndlessUsage, Budget::new(256 * 1024, Duration::from_secs(10)), true).await;
    let events = events(&response);
    assert_eq!(
        types(&events[..4]),
        [OPEN[0], OPEN[1], "response.output_item.added", "response.output_text.delta"]
    );
    let counts: Vec<u64> =
        events[4..].iter().map(|e| e["response"]["usage"]["output_tokens"].as_u64().unwrap()).collect();
    assert!(counts.len() > 1000);
    assert!(counts.iter().zip(1..).all(|(count, n)| *count == n), "1, 2, 3, …");
}

#[tokio::test]
async fn an_overload_comes_after_exactly_the_deltas_asked_for() {
    let response = post(Behaviour::ErrorAfterDeltas { deltas: 10_000 }, Budget::default(), true).await;
    assert!(response.complete, "the body ends after the error");
    let events = events(&response);
    assert_eq!(events.len(), 3 + 10_000 + 1);
    assert_eq!(events.last().unwrap()["code"], "server_error");
    assert_eq!(
        decode_stream::<ResponsesApi>([&response.body[..]]),
        Err(TransportError::unavailable("the provider reported an error: Overloaded"))
    );
}

#[tokio::test]
async fn a_flood_is_one_whole_response_or_a_well_formed_stream() {
    let reply =
        modes::a_flood_reads_back_whole_and_streamed::<ResponsesApi>(responses_request, "/output").await;
    assert_eq!(reply["output"][1000]["arguments"], r#"{"input":"x"}"#);
}

#[tokio::test]
async fn the_key_echoed_is_the_bearer_key_sent() {
    let error = modes::the_key_sent_is_echoed::<ResponsesApi>(responses_request).await;
    assert_eq!(error["error"]["code"], "invalid_api_key");
}

#[tokio::test]
async fn keep_alives_are_comments() {
    let response = post(
        Behaviour::KeepAliveForever { interval: Duration::from_millis(5) },
        Budget::new(MIB as u64, Duration::from_millis(300)),
        true,
    )
    .await;
    let all = response.events();
    assert!(all.len() > 3);
    assert!(all.iter().all(|event| *event == ": keep-alive"), "{all:?}");
}
