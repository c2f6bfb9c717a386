//! What goes over the wire, and how the server's errors end a run: the exact request bodies and
//! headers (a canned server records the bytes; aimock's journal shows what it matched on), queued
//! 429, 529 and 500 responses, refused credentials.

use loopbound::transport::{TransportError, TransportErrorKind};
use loopbound::{RunError, Status};
use loopbound_anthropic::{AnthropicTransport, ApiKey, Config, ToolChoice};
use loopbound_testkit::Composition;
use loopbound_testkit::aimock::{Aimock, MESSAGES};
use loopbound_testkit::canned::{Answer, Canned, json};
use loopbound_testkit::review::{self as review_task, REVIEW_DONE, TICKET_TEXT};
use loopbound_testkit::scenarios::{Scenario, run};
use serde_json::{Value, json};

use crate::{SECRET, assert_no_secret, transport_to};

fn tool_use_reply(id: &str, name: &str) -> String {
    json!({"id": "msg", "type": "message", "role": "assistant", "content": [
        {"type": "tool_use", "id": id, "name": name, "input": {"input": 42}}
    ], "stop_reason": "tool_use", "usage": {"input_tokens": 1, "output_tokens": 1}})
    .to_string()
}

fn text_reply(text: &str) -> String {
    json!({"type": "message", "role": "assistant", "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}})
    .to_string()
}

fn tool_use(id: &str, name: &str) -> Value {
    json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": name, "input": {"input": 42}}]})
}

fn tool_result(id: &str, text: &str) -> Value {
    json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": text}]})
}

#[tokio::test]
async fn the_request_bodies_are_the_messages_api_shape_exactly_and_carry_no_key() {
    let server = Canned::start(vec![
        Answer::Bytes(json(&tool_use_reply("toolu_read", "read_ticket"))),
        Answer::Bytes(json(&tool_use_reply("toolu_finish", "finish_review"))),
        Answer::Bytes(json(&text_reply("Review finished."))),
    ])
    .await;
    let live = run(Scenario::Complete, Composition::Harness, false, transport_to(&server.base_url())).await;
    assert_eq!(live.outcome().status(), Status::Completed);

    let tools = review_task::tools();
    let schemas: Vec<Value> = tools.set.definitions().iter().map(|tool| tool.parameters.clone()).collect();
    let definitions: Vec<Value> = tools
        .set
        .definitions()
        .iter()
        .zip(&schemas)
        .map(|(tool, schema)| json!({"name": tool.name, "description": tool.description, "input_schema": schema}))
        .collect();
    let user = json!({"role": "user", "content": [{"type": "text", "text": Scenario::Complete.request()}]});
    let body = |messages: Value| {
        json!({"model": "claude-test-model", "max_tokens": 800, "messages": messages,
            "tools": definitions, "tool_choice": {"type": "auto"}})
    };
    let sent: Vec<Value> = server.requests().iter().map(|body| serde_json::from_str(body).unwrap()).collect();
    assert_eq!(
        sent,
        vec![
            body(json!([user])),
            body(json!([
                user,
                tool_use("toolu_read", "read_ticket"),
                tool_result("toolu_read", TICKET_TEXT)
            ])),
            body(json!([
                user,
                tool_use("toolu_read", "read_ticket"),
                tool_result("toolu_read", TICKET_TEXT),
                tool_use("toolu_finish", "finish_review"),
                tool_result("toolu_finish", REVIEW_DONE)
            ])),
        ]
    );
    for (head, body) in server.heads().iter().zip(server.requests()) {
        assert!(head.starts_with("post /v1/messages http/1.1"), "{head}");
        assert!(
            head.contains(&format!("x-api-key: {}", SECRET.to_ascii_lowercase())),
            "the key is sent: {head}"
        );
        assert!(head.contains("anthropic-version: 2023-06-01"), "{head}");
        assert!(head.contains("content-type: application/json") && head.contains("accept: application/json"));
        assert!(!head.contains("authorization"), "no bearer token goes to this provider: {head}");
        assert_no_secret(&body);
    }
}

#[tokio::test]
async fn the_journal_shows_every_result_answering_its_call_and_the_key_as_a_header() {
    let Some(server) = Aimock::start() else { return };
    for streaming in [false, true] {
        let live =
            run(Scenario::Complete, Composition::Harness, streaming, transport_to(&server.base_url())).await;
        assert_eq!(live.outcome().status(), Status::Completed);
    }
    let bodies = server.message_bodies().await;
    assert_eq!(bodies.len(), 6);
    let last = &bodies[2];
    let roles: Vec<&str> =
        last["messages"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant", "tool"]);
    assert_eq!(last["messages"][2]["tool_call_id"], "call_read_42");
    assert_eq!(last["messages"][4]["tool_call_id"], "call_finish_42");
    assert_eq!(
        (&last["max_tokens"], &bodies[3]["stream"], &bodies[0]["stream"]),
        (&json!(800), &json!(true), &Value::Null)
    );
    let names: Vec<&str> =
        last["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["read_ticket", "finish_review"]);
    for entry in server.entries(MESSAGES).await {
        assert_eq!(entry["headers"]["x-api-key"], "[REDACTED]", "{entry}");
        assert_eq!(entry["headers"]["anthropic-version"], "2023-06-01");
    }
    assert_no_secret(&server.journal_text().await);
}

#[tokio::test]
async fn the_tool_choice_and_default_cap_come_from_the_configuration() {
    let server = Canned::start(vec![Answer::Bytes(json(&text_reply("Hi.")))]).await;
    let config =
        Config::new(&server.base_url(), "m").unwrap().with_tool_choice(ToolChoice::Any).with_max_tokens(77);
    let transport = AnthropicTransport::new(config).unwrap();
    let scope = review_task::scope(review_task::BOTH_CAPABILITIES, loopbound::Limits::default()).unwrap();
    let runtime = loopbound::Runner::new(&review_task::tools().set, transport);
    let outcome = runtime
        .run(&scope, &mut vec![loopbound::Message::user("Hi")], |ended| ended.state().completed())
        .await
        .unwrap();
    assert_eq!(outcome.text(), Some("Hi."));
    let sent: Value = serde_json::from_str(&server.requests()[0]).unwrap();
    assert_eq!((&sent["tool_choice"], &sent["max_tokens"]), (&json!({"type": "any"}), &json!(77)));
}

#[tokio::test]
async fn queued_429_529_and_500_responses_end_the_run_as_provider_unavailable() {
    let Some(server) = Aimock::start() else { return };
    let cases = [
        (
            429,
            "rate_limit_error",
            "Rate limit reached",
            "HTTP 429 (rate limited; retry after 1 s): Rate limit reached",
        ),
        (529, "overloaded_error", "Overloaded", "HTTP 529: Overloaded"),
        (500, "api_error", "Internal server error", "HTTP 500: Internal server error"),
    ];
    for (status, kind, message, detail) in cases {
        for streaming in [false, true] {
            server.queue_error(status, json!({"message": message, "type": kind})).await;
            let live =
                run(Scenario::Complete, Composition::Harness, streaming, transport_to(&server.base_url()))
                    .await;
            let outcome = live.outcome();
            assert_eq!(outcome.status(), Status::ProviderUnavailable, "{status} streaming={streaming}");
            assert_eq!(outcome.detail(), Some(detail));
            assert_eq!(live.events(), ["ModelCall model 1"]);
            assert_eq!(outcome.text(), None);
        }
    }
    // One error was queued per run and each was consumed by exactly one request: no retry.
    assert_eq!(server.message_bodies().await.len(), 6);
}

#[tokio::test]
async fn refused_credentials_are_an_authentication_error_that_never_quotes_the_key() {
    let Some(server) = Aimock::start_with_env(&[("AIMOCK_API_KEYS", SECRET)]) else { return };
    let accepted =
        run(Scenario::Complete, Composition::Harness, true, transport_to(&server.base_url())).await;
    assert_eq!(accepted.outcome().status(), Status::Completed, "the configured key is sent as x-api-key");

    let wrong = "sk-ant-wrong-key-5d2b";
    let config = Config::new(&server.base_url(), "m").unwrap().with_api_key(ApiKey::new(wrong).unwrap());
    for streaming in [false, true] {
        let transport = AnthropicTransport::new(config.clone()).unwrap();
        let refused = run(Scenario::Complete, Composition::Simple, streaming, transport).await;
        let error = refused.result.expect_err("a refused key is a provider error");
        assert_eq!(error, RunError::Provider(TransportError::authentication("HTTP 401: Invalid API key")));
        let text = format!("{error} {error:?}");
        assert!(!text.contains(wrong), "{text}");
        assert_no_secret(&text);
    }
    let anonymous = AnthropicTransport::new(Config::new(&server.base_url(), "m").unwrap()).unwrap();
    let refused = run(Scenario::Complete, Composition::Harness, false, anonymous).await;
    assert!(
        matches!(refused.result, Err(RunError::Provider(ref e)) if e.kind() == TransportErrorKind::Authentication),
        "{:?}",
        refused.result
    );
}
