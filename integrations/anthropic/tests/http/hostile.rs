//! Against the testkit's hostile server in its Anthropic mode: a provider that echoes the key
//! back (in an error after padding, in the model's text whole or split across deltas, in a tool
//! call's fields), floods tool_use blocks, reports usage forever, or overloads after 10,000
//! deltas. Every run ends by itself with its documented status or error, and no run of eight
//! characters of the key reaches the outcome, the error or the tracing spans.

use loopbound::transport::TransportError;
use loopbound::{RunError, Status};
use loopbound_anthropic::{AnthropicTransport, ApiKey, Config};
use loopbound_testkit::hostile::{Behaviour, HostileServer};
use loopbound_testkit::leaks::{Captured, assert_an_echoed_key_reaches_nothing, captured_run};

/// The key of these runs: 52 characters.
const KEY: &str = "sk-ant-4f9a2c7e1b8d3f6a0c5e9b2d7f1a4c8e6b3d0f5a9c2e7";

/// A transport to the hostile server at `base_url`, in its Anthropic mode (the transport posts
/// to `/v1/messages`), with the key.
fn transport(base_url: &str) -> AnthropicTransport {
    let config = Config::new(base_url, "hostile").unwrap().with_api_key(ApiKey::new(KEY).unwrap());
    AnthropicTransport::new(config).unwrap()
}

/// One captured run against `behaviour`.
async fn run(behaviour: Behaviour, streaming: bool) -> Captured {
    let server = HostileServer::start(behaviour).await.unwrap();
    captured_run(transport(&server.base_url()), streaming).await
}

#[tokio::test(flavor = "current_thread")]
async fn an_echoed_key_reaches_no_outcome_error_or_span() {
    // 529 is the Messages API's overload status.
    assert_an_echoed_key_reaches_nothing(KEY, "anthropic", 529, transport).await;
}

#[tokio::test(flavor = "current_thread")]
async fn floods_endless_usage_and_a_late_overload_end_with_their_documented_endings() {
    let flood = |calls| Behaviour::CallFlood {
        calls,
        arguments: r#"{"input":"x"}"#.into(),
        name: "read_ticket".into(),
    };
    for streaming in [false, true] {
        let Captured { result, .. } = run(flood(100_000), streaming).await;
        let outcome = result.expect("a reply bound halt is an outcome");
        assert_eq!(outcome.status(), Status::TooManyCalls, "streaming={streaming}");
        let events: Vec<String> = outcome.events().iter().map(ToString::to_string).collect();
        assert_eq!(events, ["ModelCall model 1", "TooManyCalls model 1"]);
    }
    let Captured { result, .. } = run(Behaviour::EndlessUsage, true).await;
    assert_eq!(
        result,
        Err(RunError::Provider(TransportError::malformed("the reply is longer than 16777216 bytes")))
    );
    let Captured { result, .. } = run(Behaviour::ErrorAfterDeltas { deltas: 10_000 }, true).await;
    let outcome = result.expect("an overload is an outcome");
    assert_eq!(outcome.status(), Status::ProviderUnavailable);
    assert_eq!(outcome.detail(), Some("the provider reported an error (overloaded_error): Overloaded"));
    assert_eq!(outcome.text(), None, "the 10,000 deltas before the error are not kept");
}
