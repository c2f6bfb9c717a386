//! Against the testkit's hostile server in its Anthropic mode: a provider that echoes the key
//! back (in an error after padding, in the model's text whole or split across deltas, in a tool
//! call's fields), floods tool_use blocks, reports usage forever, or overloads after 10,000
//! deltas. Every run ends by itself with its documented status or error, and no run of eight
//! characters of the key reaches the outcome, the error or the tracing spans.

use loopbound::transport::TransportError;
use loopbound::{Limits, Message, RunError, Runtime, Status};
use loopbound_anthropic::{AnthropicTransport, ApiKey, Config};
use loopbound_testkit::hostile::{Behaviour, HostileServer, KeyPart, KeyPlace};
use loopbound_testkit::review::{self, BOTH_CAPABILITIES, Review};
use loopbound_testkit::telemetry::Capture;

/// The key of these runs: 52 characters.
const KEY: &str = "sk-ant-4f9a2c7e1b8d3f6a0c5e9b2d7f1a4c8e6b3d0f5a9c2e7";

/// Panics if `text` holds eight consecutive characters of the key.
fn assert_no_run(text: &str, what: &str) {
    for window in KEY.as_bytes().windows(8) {
        let window = std::str::from_utf8(window).unwrap();
        assert!(!text.contains(window), "{what} holds {window:?}, a run of the key: {text}");
    }
}

/// One harness run against `behaviour` with two model calls at most, spans captured: its result,
/// everything it produced as text, and the spans.
async fn run(
    behaviour: Behaviour,
    streaming: bool,
) -> (Result<loopbound::Outcome, RunError>, String, Vec<String>) {
    let server = HostileServer::start(behaviour).await.unwrap();
    let config = Config::new(&server.base_url(), "hostile").unwrap().with_api_key(ApiKey::new(KEY).unwrap());
    let tools = review::tools();
    let runtime = Runtime::harness(&tools.set, AnthropicTransport::new(config).unwrap()).streaming(streaming);
    let scope = review::scope(BOTH_CAPABILITIES, Limits::default().with_model_calls(2)).unwrap();
    let capture = Capture::default();
    let result = {
        let _installed = capture.install();
        runtime.run(&scope, &mut vec![Message::user("Review ticket 42.")], Review::completed).await
    };
    let printed = match &result {
        Ok(outcome) => format!(
            "{outcome:?} {} {} {:?}",
            serde_json::to_string(outcome).unwrap(),
            outcome.detail().unwrap_or_default(),
            outcome.text()
        ),
        Err(error) => format!("{error} {error:?}"),
    };
    (result, printed, capture.seen())
}

#[tokio::test(flavor = "current_thread")]
async fn an_echoed_key_reaches_no_outcome_error_or_span() {
    let echo = |status, place, part| Behaviour::EchoKey { status, padding: 270, place, part };
    let cases = [
        (echo(401, KeyPlace::ErrorBody, KeyPart::Whole), false, "provider refused authentication: HTTP 401"),
        (
            echo(401, KeyPlace::ErrorBody, KeyPart::Chars(0..30)),
            true,
            "provider refused authentication: HTTP 401",
        ),
        (echo(529, KeyPlace::ErrorBody, KeyPart::Whole), false, "ProviderUnavailable"),
        (echo(200, KeyPlace::Text, KeyPart::Whole), false, "[redacted]"),
        (echo(200, KeyPlace::StreamText, KeyPart::Whole), true, "[redacted]"),
        (echo(200, KeyPlace::ToolCallFields, KeyPart::Whole), false, "ModelBudget"),
        (echo(200, KeyPlace::ToolCallFields, KeyPart::Chars(3..40)), true, "ModelBudget"),
    ];
    for (behaviour, streaming, expected) in cases {
        let case = format!("{behaviour:?} streaming={streaming}");
        let (_, printed, spans) = run(behaviour, streaming).await;
        assert!(printed.contains(expected), "{case}: {printed}");
        assert_no_run(&printed, &case);
        for span in &spans {
            assert_no_run(span, &format!("{case}: a span"));
        }
        assert!(spans.iter().any(|line| line == "span chat"), "{case}: {spans:?}");
        // The model call's span names the provider and the configured model.
        assert!(spans.iter().any(|line| line == "otel.name=\"chat hostile\""), "{case}: {spans:?}");
        assert!(spans.iter().any(|line| line == "gen_ai.provider.name=\"anthropic\""), "{case}: {spans:?}");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn floods_endless_usage_and_a_late_overload_end_with_their_documented_endings() {
    let flood = |calls| Behaviour::CallFlood {
        calls,
        arguments: r#"{"input":"x"}"#.into(),
        name: "read_ticket".into(),
    };
    for streaming in [false, true] {
        let (result, _, _) = run(flood(100_000), streaming).await;
        let outcome = result.expect("a reply bound halt is an outcome");
        assert_eq!(outcome.status(), Status::TooManyCalls, "streaming={streaming}");
        let events: Vec<String> = outcome.events().iter().map(ToString::to_string).collect();
        assert_eq!(events, ["ModelCall model 1", "TooManyCalls model 1"]);
    }
    let (result, _, _) = run(Behaviour::EndlessUsage, true).await;
    assert_eq!(
        result,
        Err(RunError::Provider(TransportError::malformed("the reply is longer than 16777216 bytes")))
    );
    let (result, _, _) = run(Behaviour::ErrorAfterDeltas { deltas: 10_000 }, true).await;
    let outcome = result.expect("an overload is an outcome");
    assert_eq!(outcome.status(), Status::ProviderUnavailable);
    assert_eq!(outcome.detail(), Some("the provider reported an error (overloaded_error): Overloaded"));
    assert_eq!(outcome.text(), None, "the 10,000 deltas before the error are not kept");
}
