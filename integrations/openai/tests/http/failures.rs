//! Failures mapped to the contract, over real HTTP on loopback: refused connections, silence,
//! refused credentials, cut and malformed bodies, redirects, and cancellation in flight.

use std::time::Duration;

use loopbound::transport::{ModelReply, TransportError, TransportErrorKind};
use loopbound::{RunError, Status};
use loopbound_openai::{ApiKey, Config, OpenAiTransport};
use loopbound_testkit::Composition;
use tokio_util::sync::CancellationToken;

use crate::{SECRET, assert_no_secret};
use loopbound_testkit::canned::{Answer, Canned, event_stream, json, response};
use loopbound_testkit::scenarios::{Scenario, call, run};

fn transport_to(base_url: &str) -> OpenAiTransport {
    let config = Config::new(base_url, "m").unwrap().with_api_key(ApiKey::new(SECRET).unwrap());
    OpenAiTransport::new(config).unwrap()
}

fn check_error(result: &Result<ModelReply, TransportError>) -> &TransportError {
    let error = result.as_ref().expect_err("the call must fail");
    assert_no_secret(&format!("{error} {error:?}"));
    error
}

const TEXT_REPLY: &str = r#"{"choices":[{"index":0,"message":{"role":"assistant","content":"Hi."}}]}"#;

#[tokio::test]
async fn a_refused_connection_ends_the_run_as_provider_unavailable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    drop(listener);
    for streaming in [false, true] {
        let live = run(Scenario::Complete, Composition::Harness, streaming, transport_to(&base)).await;
        let outcome = live.outcome();
        assert_eq!(outcome.status(), Status::ProviderUnavailable);
        assert_eq!(live.events(), ["ModelCall model 1"]);
        let detail = outcome.detail().expect("the transport's message is kept");
        assert!(detail.starts_with("cannot connect: ") && detail.contains("refused"), "{detail}");
        assert!(!detail.contains("http://"), "no URL in messages: {detail}");
        assert_no_secret(detail);
    }
    // The client's own error is the source: the chain reaches the refused connection, once.
    let result = call(&transport_to(&base), false, &CancellationToken::new()).await;
    let levels = loopbound_testkit::chain::chain(check_error(&result));
    assert_eq!(levels[0], "provider unavailable: cannot connect");
    assert!(levels.last().is_some_and(|root| root.contains("refused")), "{levels:?}");
    let root = levels.last().cloned().unwrap_or_default();
    loopbound_testkit::chain::assert_chain(check_error(&result), &root);
}

#[tokio::test]
async fn a_tls_failure_is_unavailable() {
    // A server that answers a TLS handshake with plain HTTP.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("https://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let _ =
                tokio::io::AsyncWriteExt::write_all(&mut socket, b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
        }
    });
    let result = call(&transport_to(&base), false, &CancellationToken::new()).await;
    let error = check_error(&result);
    assert_eq!((error.kind(), error.message()), (TransportErrorKind::Unavailable, "cannot connect"));
    assert!(std::error::Error::source(error).is_some(), "the client's error is the source: {result:?}");
}

#[tokio::test]
async fn http_401_is_an_authentication_error_and_an_echoed_key_is_redacted() {
    let body = format!(
        r#"{{"error":{{"message":"Incorrect API key provided: {SECRET}.","type":"invalid_request_error"}}}}"#
    );
    let answer =
        Answer::Bytes(response("401 Unauthorized", &[("Content-Type", "application/json")], body.as_bytes()));
    let server = Canned::start(vec![answer.clone(), answer]).await;
    let transport = transport_to(&server.base_url());
    for streaming in [false, true] {
        let result = call(&transport, streaming, &CancellationToken::new()).await;
        assert_eq!(
            check_error(&result),
            &TransportError::authentication("HTTP 401: Incorrect API key provided: [redacted].")
        );
    }
}

#[tokio::test]
async fn a_silent_server_times_out_as_unavailable() {
    let server = Canned::start(vec![Answer::ThenHang(Vec::new())]).await;
    let config = Config::new(&server.base_url(), "m").unwrap().with_timeout(Duration::from_millis(300));
    let result = call(&OpenAiTransport::new(config).unwrap(), false, &CancellationToken::new()).await;
    assert!(
        matches!(check_error(&result), m if m.kind() == TransportErrorKind::Unavailable && m.message().starts_with("the request timed out")),
        "{result:?}"
    );
}

#[tokio::test]
async fn a_timeout_in_the_middle_of_a_stream_is_unavailable() {
    let first = "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n";
    let server = Canned::start(vec![Answer::ThenHang(event_stream(first))]).await;
    let config = Config::new(&server.base_url(), "m").unwrap().with_timeout(Duration::from_millis(400));
    let result = call(&OpenAiTransport::new(config).unwrap(), true, &CancellationToken::new()).await;
    assert!(
        matches!(check_error(&result), m if m.kind() == TransportErrorKind::Unavailable && m.message().starts_with("the response timed out")),
        "{result:?}"
    );
}

#[tokio::test]
async fn cancellation_interrupts_a_request_in_flight_and_closes_the_connection() {
    let first = "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n";
    let server =
        Canned::start(vec![Answer::ThenHang(Vec::new()), Answer::ThenHang(event_stream(first))]).await;
    let transport = transport_to(&server.base_url());
    for streaming in [false, true] {
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(150)).await;
            trigger.cancel();
        });
        let result = call(&transport, streaming, &cancel).await;
        assert_eq!(result, Err(TransportError::cancelled()), "streaming={streaming}");
    }
    for _ in 0..100 {
        if server.client_closed() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the cancelled calls left their connections open");
}

#[tokio::test]
async fn a_stream_cut_before_done_is_a_malformed_provider_error() {
    let cut = concat!(
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"read_ticket\",\"arguments\":\"{\\\"in\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"put\\\"",
    );
    let server = Canned::start(vec![Answer::Bytes(event_stream(cut))]).await;
    let live = run(Scenario::Complete, Composition::Harness, true, transport_to(&server.base_url())).await;
    assert_eq!(
        live.result,
        Err(RunError::Provider(TransportError::malformed(
            "the stream ended before data: [DONE] (in the middle of an event); the reply may be incomplete"
        )))
    );
    assert_eq!((live.model_calls, live.tool_calls), (1, 0), "a cut reply runs no tool");
}

#[tokio::test]
async fn bodies_cut_short_or_not_a_completion_are_malformed() {
    let mut short = response("200 OK", &[("Content-Type", "application/json")], TEXT_REPLY.as_bytes());
    short.truncate(short.len() - 10);
    let server = Canned::start(vec![
        Answer::Bytes(short),
        Answer::Bytes(response("200 OK", &[("Content-Type", "text/html")], b"<html>hello</html>")),
        Answer::Bytes(json(r#"{"choices":[]}"#)),
    ])
    .await;
    let transport = transport_to(&server.base_url());
    let cut = call(&transport, false, &CancellationToken::new()).await;
    assert!(
        matches!(check_error(&cut), m if m.kind() == TransportErrorKind::Malformed && m.message().starts_with("the response body was cut off")),
        "{cut:?}"
    );
    let html = call(&transport, false, &CancellationToken::new()).await;
    assert!(
        matches!(check_error(&html), m if m.kind() == TransportErrorKind::Malformed && m.message().starts_with("the reply is not a chat completion")),
        "{html:?}"
    );
    let empty = call(&transport, false, &CancellationToken::new()).await;
    assert_eq!(check_error(&empty), &TransportError::malformed("the reply has no choice"));
}

#[tokio::test]
async fn a_server_closing_without_an_answer_is_unavailable() {
    let server = Canned::start(vec![]).await;
    let result = call(&transport_to(&server.base_url()), false, &CancellationToken::new()).await;
    assert!(
        matches!(check_error(&result), m if m.kind() == TransportErrorKind::Unavailable && m.message().starts_with("the request failed")),
        "{result:?}"
    );
}

#[tokio::test]
async fn redirects_are_not_followed() {
    let redirect =
        response("307 Temporary Redirect", &[("Location", "http://127.0.0.1:9/v1/chat/completions")], b"");
    let server = Canned::start(vec![Answer::Bytes(redirect)]).await;
    let result = call(&transport_to(&server.base_url()), false, &CancellationToken::new()).await;
    assert_eq!(check_error(&result), &TransportError::other("HTTP 307"));
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn invalid_json_arguments_become_a_binding_error_result_for_the_model() {
    let call_reply = r#"{"choices":[{"message":{"content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"read_ticket","arguments":"{\"input\":"}}]}}]}"#;
    let call_stream = concat!(
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"function\":{\"name\":\"read_ticket\",\"arguments\":\"{\\\"input\\\":\"}}]}}]}\n\n",
        "data: [DONE]\n\n",
    );
    let text_stream = "data: {\"choices\":[{\"delta\":{\"content\":\"Hi.\"}}]}\n\ndata: [DONE]\n\n";
    for streaming in [false, true] {
        let answers = if streaming {
            vec![Answer::Bytes(event_stream(call_stream)), Answer::Bytes(event_stream(text_stream))]
        } else {
            vec![Answer::Bytes(json(call_reply)), Answer::Bytes(json(TEXT_REPLY))]
        };
        let server = Canned::start(answers).await;
        let live =
            run(Scenario::Complete, Composition::Harness, streaming, transport_to(&server.base_url())).await;
        assert_eq!(live.outcome().status(), Status::Incomplete);
        assert_eq!(live.events(), ["ModelCall model 1", "Middleware read_ticket 1", "ModelCall model 2"]);
        assert_eq!(live.outcome().text(), Some("Hi."));
        let second: serde_json::Value = serde_json::from_str(&server.requests()[1]).unwrap();
        let result = &second["messages"][2];
        assert_eq!(result["tool_call_id"], "c1");
        let text = result["content"].as_str().unwrap();
        assert_eq!(
            text,
            "Error: invalid arguments for tool read_ticket: input: invalid JSON at line 1 column 10: \
             the text ends before the value does."
        );
    }
}

#[tokio::test]
async fn a_server_that_ignores_stream_true_still_gives_its_reply() {
    let server = Canned::start(vec![Answer::Bytes(json(TEXT_REPLY))]).await;
    let result = call(&transport_to(&server.base_url()), true, &CancellationToken::new()).await;
    assert_eq!(result, Ok(ModelReply::text("Hi.")));
    let sent: serde_json::Value = serde_json::from_str(&server.requests()[0]).unwrap();
    assert_eq!(sent["stream"], true);
}

#[tokio::test]
async fn the_transport_debug_shows_the_configuration_but_never_the_key() {
    let transport = transport_to("http://127.0.0.1:9/v1");
    let debug = format!("{transport:?}");
    assert_no_secret(&debug);
    assert!(debug.contains("[redacted]") && debug.contains("127.0.0.1:9"), "{debug}");
}
