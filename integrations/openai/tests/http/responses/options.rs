//! The sampling options on the Responses wire: `temperature` and `top_p` are sent (aimock's journal
//! keeps the temperature of each request, a canned server the exact bytes); stop sequences and a
//! seed, which the API has no field for, are refused before anything is sent, at the run's start
//! and at a direct call alike.

use loopbound::transport::{ChatOptions, ChatRequest, Transport, TransportError};
use loopbound::{Message, RunError, RunErrorKind, Status};
use loopbound_testkit::Composition;
use loopbound_testkit::aimock::Aimock;
use loopbound_testkit::canned::{Answer, Canned, json};
use loopbound_testkit::review::MAX_OUTPUT_TOKENS;
use loopbound_testkit::scenarios::{Scenario, assert_refused, run_with_options};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::scenarios::transport;
use super::transport_to;

const TEXT_REPLY: &str =
    r#"{"status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"Hi."}]}]}"#;

fn review_options() -> ChatOptions {
    ChatOptions::default().with_max_output_tokens(MAX_OUTPUT_TOKENS)
}

#[tokio::test]
async fn the_temperature_reaches_the_journal_on_every_call_of_both_paths() {
    let Some(server) = Aimock::start() else { return };
    let options = review_options().with_temperature(0.4).and_then(|o| o.with_top_p(0.5)).unwrap();
    for streaming in [false, true] {
        let live = run_with_options(
            Scenario::Complete,
            Composition::Harness,
            streaming,
            options.clone(),
            transport(&server),
        )
        .await;
        assert_eq!(live.outcome().status(), Status::Completed, "streaming={streaming}");
    }
    // aimock journals a Responses request in the chat shape it matches fixtures on, which keeps
    // `temperature` (and the cap as `max_tokens`) but not `top_p`: the bytes below show that one.
    let sent: Vec<(serde_json::Value, serde_json::Value)> = server
        .response_bodies()
        .await
        .into_iter()
        .map(|body| (body["temperature"].clone(), body["max_tokens"].clone()))
        .collect();
    assert_eq!(sent, vec![(json!(0.4), json!(800)); 6]);
}

#[tokio::test]
async fn the_exact_body_carries_temperature_and_top_p_after_the_cap() {
    let server = Canned::start(vec![Answer::Bytes(json(TEXT_REPLY))]).await;
    let transport = transport_to(&server.base_url(), "m");
    let options = review_options().with_temperature(1.5).and_then(|o| o.with_top_p(0.25)).unwrap();
    let messages = [Message::user("Hi")];
    let cancel = CancellationToken::new();
    let reply = transport.complete(ChatRequest::new(&messages, &[], &options, &cancel)).await.unwrap();
    assert_eq!(reply.content.as_deref(), Some("Hi."));
    assert_eq!(
        server.requests(),
        [
            r#"{"model":"m","input":[{"type":"message","role":"user","content":"Hi"}],"max_output_tokens":800,"temperature":1.5,"top_p":0.25,"store":false}"#
        ]
    );
}

#[tokio::test]
async fn stop_sequences_and_a_seed_are_refused_before_anything_is_sent() {
    let server = Canned::start(Vec::new()).await;
    let cases = [
        (
            review_options().with_stop_sequences(["END"]).unwrap(),
            "ResponsesTransport cannot send stop_sequences: the Responses API has no stop sequences",
        ),
        (review_options().with_seed(7), "ResponsesTransport cannot send seed: the Responses API has no seed"),
    ];
    for (options, message) in cases {
        let refused = TransportError::unsupported(message);
        assert_refused(|| transport_to(&server.base_url(), "m"), &options, &refused).await;
        let error = RunError::Unsupported(refused);
        assert_eq!(error.kind(), RunErrorKind::Configuration);
        assert_eq!(error.to_string(), format!("unsupported request option: {message}; nothing ran"));
    }
    assert_eq!(server.requests(), Vec::<String>::new(), "no request reached the server");
}
