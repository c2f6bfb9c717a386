//! The sampling options on the Messages API wire: `temperature`, `top_p` and `stop_sequences` are
//! sent (aimock's journal keeps the temperature of each request, a canned server the exact
//! bytes); a seed, which the API has no field for, and a temperature above the API's 1 are
//! refused before anything is sent, at the run's start and at a direct call alike.

use loopbound::transport::{ChatOptions, ChatRequest, Transport, TransportError};
use loopbound::{Message, RunError, RunErrorKind, Status};
use loopbound_testkit::Composition;
use loopbound_testkit::aimock::Aimock;
use loopbound_testkit::canned::{Answer, Canned, json};
use loopbound_testkit::review::MAX_OUTPUT_TOKENS;
use loopbound_testkit::scenarios::{Scenario, assert_refused, run_with_options};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::transport_to;

const TEXT_REPLY: &str = r#"{"type":"message","role":"assistant","content":[{"type":"text","text":"Hi."}],"stop_reason":"end_turn"}"#;

fn review_options() -> ChatOptions {
    ChatOptions::default().with_max_output_tokens(MAX_OUTPUT_TOKENS)
}

#[tokio::test]
async fn the_temperature_reaches_the_journal_on_every_call_of_both_paths() {
    let Some(server) = Aimock::start() else { return };
    let options = review_options()
        .with_temperature(0.7)
        .and_then(|o| o.with_top_p(0.5))
        .and_then(|o| o.with_stop_sequences(["END"]))
        .unwrap();
    for streaming in [false, true] {
        let live = run_with_options(
            Scenario::Complete,
            Composition::Harness,
            streaming,
            options.clone(),
            transport_to(&server.base_url()),
        )
        .await;
        assert_eq!(live.outcome().status(), Status::Completed, "streaming={streaming}");
    }
    // aimock journals a Messages request in the chat shape it matches fixtures on, which keeps
    // `temperature` and `max_tokens` but neither `top_p` nor `stop_sequences`: the bytes below
    // show those.
    let sent: Vec<(serde_json::Value, serde_json::Value)> = server
        .message_bodies()
        .await
        .into_iter()
        .map(|body| (body["temperature"].clone(), body["max_tokens"].clone()))
        .collect();
    assert_eq!(sent, vec![(json!(0.7), json!(800)); 6]);
}

#[tokio::test]
async fn the_exact_body_carries_temperature_top_p_and_stop_sequences_after_the_tools() {
    let server = Canned::start(vec![Answer::Bytes(json(TEXT_REPLY))]).await;
    let transport = transport_to(&server.base_url());
    let options = review_options()
        .with_temperature(0.0)
        .and_then(|o| o.with_top_p(1.0))
        .and_then(|o| o.with_stop_sequences(["END", "\n\nHuman:"]))
        .unwrap();
    let messages = [Message::user("Hi")];
    let cancel = CancellationToken::new();
    let reply = transport.complete(ChatRequest::new(&messages, &[], &options, &cancel)).await.unwrap();
    assert_eq!(reply.content.as_deref(), Some("Hi."));
    assert_eq!(
        server.requests(),
        [concat!(
            r#"{"model":"claude-test-model","max_tokens":800,"messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}],"#,
            r#""temperature":0.0,"top_p":1.0,"stop_sequences":["END","\n\nHuman:"]}"#
        )]
    );
}

#[tokio::test]
async fn a_seed_and_a_temperature_above_1_are_refused_before_anything_is_sent() {
    let server = Canned::start(Vec::new()).await;
    let cases = [
        (review_options().with_seed(7), "AnthropicTransport cannot send seed: the Messages API has no seed"),
        (
            review_options().with_temperature(1.2).unwrap(),
            "AnthropicTransport cannot send temperature 1.2: the Messages API accepts a temperature from 0 to 1",
        ),
    ];
    for (options, message) in cases {
        let refused = TransportError::unsupported(message);
        assert_refused(|| transport_to(&server.base_url()), &options, &refused).await;
        let error = RunError::Unsupported(refused);
        assert_eq!(error.kind(), RunErrorKind::Configuration);
        assert_eq!(error.to_string(), format!("unsupported request option: {message}; nothing ran"));
    }
    // The top of the API's range is sent, not refused.
    let top = review_options().with_temperature(1.0).unwrap();
    assert_eq!(transport_to(&server.base_url()).check_options(&top), Ok(()));
    assert_eq!(server.requests(), Vec::<String>::new(), "no request reached the server");
}
