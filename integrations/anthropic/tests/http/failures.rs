//! Failures mapped to the contract, over real HTTP on loopback, against canned servers: an error
//! event in the middle of a stream, streams cut before `message_stop`, blocks out of order,
//! echoed keys, bodies that are not a reply, timeouts, redirects, cancellation in flight.

use std::time::Duration;

use loopbound::transport::{ModelReply, TransportError, TransportErrorKind};
use loopbound::{RunError, Status};
use loopbound_anthropic::{AnthropicTransport, Config};
use loopbound_testkit::Composition;
use loopbound_testkit::canned::{Answer, Canned, event_stream, json, response};
use loopbound_testkit::scenarios::{Scenario, call, run};
use tokio_util::sync::CancellationToken;

use crate::{SECRET, assert_no_secret, transport_to};

/// One server-sent event of the API.
fn event(data: &str) -> String {
    let kind =
        serde_json::from_str::<serde_json::Value>(data).map_or(String::new(), |v| v["type"].to_string());
    format!("event: {}\ndata: {data}\n\n", kind.trim_matches('"'))
}

const START: &str = r#"{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"usage":{"input_tokens":5,"output_tokens":1}}}"#;
const TEXT_START: &str =
    r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#;
const STOP: &str = r#"{"type":"message_stop"}"#;

fn text_delta(text: &str) -> String {
    serde_json::json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}})
        .to_string()
}

/// One canned answer, the path it is read on, and the error the call must end with.
struct Case {
    name: &'static str,
    answer: Answer,
    streaming: bool,
    expected: TransportError,
}

#[tokio::test]
async fn every_failure_maps_to_its_error_and_none_quotes_the_key() {
    let overloaded = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let invalid =
        r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long"}}"#;
    let echoed = format!(
        r#"{{"type":"error","error":{{"type":"authentication_error","message":"{} invalid x-api-key {SECRET}"}}}}"#,
        ".".repeat(270)
    );
    let mut short = json(r#"{"type":"message","content":[{"type":"text","text":"Hi."}]}"#);
    short.truncate(short.len() - 10);
    let cases = vec![
        Case {
            name: "an overload after some text",
            answer: Answer::Bytes(event_stream(&format!(
                "{}{}{}{}",
                event(START),
                event(TEXT_START),
                event(&text_delta("Hel")),
                event(overloaded)
            ))),
            streaming: true,
            expected: TransportError::unavailable(
                "the provider reported an error (overloaded_error): Overloaded",
            ),
        },
        Case {
            name: "an invalid request reported inside the stream",
            answer: Answer::Bytes(event_stream(&format!("{}{}", event(START), event(invalid)))),
            streaming: true,
            expected: TransportError::other(
                "the provider reported an error (invalid_request_error): prompt is too long",
            ),
        },
        Case {
            name: "a stream cut before message_stop",
            answer: Answer::Bytes(event_stream(&format!(
                "{}{}{}",
                event(START),
                event(TEXT_START),
                event(&text_delta("Hi"))
            ))),
            streaming: true,
            expected: TransportError::malformed(
                "the stream ended before message_stop; the reply may be incomplete",
            ),
        },
        Case {
            name: "a delta for a block that was never started",
            answer: Answer::Bytes(event_stream(&format!(
                "{}{}{}",
                event(START),
                event(&text_delta("Hi")),
                event(STOP)
            ))),
            streaming: true,
            expected: TransportError::malformed(
                "the stream is not a Messages API stream: a delta for a block that is not open",
            ),
        },
        Case {
            name: "a 401 echoing the key after padding",
            answer: Answer::Bytes(response(
                "401 Unauthorized",
                &[("Content-Type", "application/json")],
                echoed.as_bytes(),
            )),
            streaming: false,
            expected: TransportError::authentication(format!(
                "HTTP 401: {} invalid x-api-key [redacted]",
                ".".repeat(270)
            )),
        },
        Case {
            name: "a 529 overload",
            answer: Answer::Bytes(response(
                "529 Overloaded",
                &[("Content-Type", "application/json")],
                overloaded.as_bytes(),
            )),
            streaming: true,
            expected: TransportError::unavailable("HTTP 529: Overloaded"),
        },
        Case {
            name: "a body cut short",
            answer: Answer::Bytes(short),
            streaming: false,
            expected: TransportError::malformed("the response body was cut off"),
        },
        Case {
            name: "a body without content",
            answer: Answer::Bytes(json(r#"{"type":"message","role":"assistant"}"#)),
            streaming: false,
            expected: TransportError::malformed("the reply has no content"),
        },
        Case {
            name: "a redirect, not followed",
            answer: Answer::Bytes(response(
                "307 Temporary Redirect",
                &[("Location", "http://127.0.0.1:9/v1/messages")],
                b"",
            )),
            streaming: false,
            expected: TransportError::other("HTTP 307"),
        },
    ];
    for case in cases {
        let server = Canned::start(vec![case.answer]).await;
        let result = call(&transport_to(&server.base_url()), case.streaming, &CancellationToken::new()).await;
        let error = result.expect_err(case.name);
        assert_no_secret(&format!("{error} {error:?}"));
        assert_eq!(
            (error.kind(), error.message()),
            (case.expected.kind(), case.expected.message()),
            "{}",
            case.name
        );
        assert_eq!(server.requests().len(), 1, "{}: exactly one request", case.name);
    }
}

#[tokio::test]
async fn an_overload_inside_a_stream_ends_the_run_as_provider_unavailable_and_runs_no_tool() {
    let tool = r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"read_ticket","input":{}}}"#;
    let overloaded = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let server = Canned::start(vec![Answer::Bytes(event_stream(&format!(
        "{}{}{}",
        event(START),
        event(tool),
        event(overloaded)
    )))])
    .await;
    let live = run(Scenario::Complete, Composition::Harness, true, transport_to(&server.base_url())).await;
    assert_eq!(live.outcome().status(), Status::ProviderUnavailable);
    assert_eq!(
        live.outcome().detail(),
        Some("the provider reported an error (overloaded_error): Overloaded")
    );
    assert_eq!((live.model_calls, live.tool_calls), (1, 0), "the cut reply's call never ran");
    let invalid = r#"{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}"#;
    let server =
        Canned::start(vec![Answer::Bytes(event_stream(&format!("{}{}", event(START), event(invalid))))])
            .await;
    let live = run(Scenario::Complete, Composition::Simple, true, transport_to(&server.base_url())).await;
    assert_eq!(
        live.result,
        Err(RunError::Provider(TransportError::other(
            "the provider reported an error (invalid_request_error): bad"
        )))
    );
}

#[tokio::test]
async fn silence_times_out_and_cancellation_closes_the_connection_on_both_paths() {
    let first = format!("{}{}", event(START), event(TEXT_START));
    for streaming in [false, true] {
        let server =
            Canned::start(vec![Answer::ThenHang(if streaming { event_stream(&first) } else { Vec::new() })])
                .await;
        let config = Config::new(&server.base_url(), "m").unwrap().with_timeout(Duration::from_millis(300));
        let result =
            call(&AnthropicTransport::new(config).unwrap(), streaming, &CancellationToken::new()).await;
        let error = result.expect_err("silence times out");
        let expected = if streaming { "the response timed out" } else { "the request timed out" };
        assert_eq!((error.kind(), error.message()), (TransportErrorKind::Unavailable, expected));

        let server =
            Canned::start(vec![Answer::ThenHang(if streaming { event_stream(&first) } else { Vec::new() })])
                .await;
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(150)).await;
            trigger.cancel();
        });
        let result = call(&transport_to(&server.base_url()), streaming, &cancel).await;
        assert_eq!(result, Err(TransportError::cancelled()), "streaming={streaming}");
        let mut closed = false;
        for _ in 0..100 {
            closed = server.client_closed();
            if closed {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(closed, "streaming={streaming}: the cancelled call left its connection open");
    }
}

#[tokio::test]
async fn a_server_that_ignores_stream_true_still_gives_its_reply() {
    let reply = r#"{"type":"message","content":[{"type":"text","text":"Hi."}],"usage":{"input_tokens":3,"output_tokens":2}}"#;
    let server = Canned::start(vec![Answer::Bytes(json(reply))]).await;
    let result = call(&transport_to(&server.base_url()), true, &CancellationToken::new()).await;
    assert_eq!(result, Ok(ModelReply::text("Hi.").with_usage(loopbound::transport::Usage::new(3, 2))));
    let sent: serde_json::Value = serde_json::from_str(&server.requests()[0]).unwrap();
    assert_eq!(sent["stream"], true);
}

#[tokio::test]
async fn the_transport_debug_shows_the_configuration_but_never_the_key() {
    let debug = format!("{:?}", transport_to("http://127.0.0.1:9/v1"));
    assert_no_secret(&debug);
    assert!(
        debug.contains("[redacted]") && debug.contains("127.0.0.1:9") && debug.contains("2023-06-01"),
        "{debug}"
    );
}
