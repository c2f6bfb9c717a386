//! A provider that echoes the API key back, in an error after padding (401, 503), in the model's
//! text (whole or split across deltas) or in a tool call's fields: no run of eight characters of
//! the key reaches the outcome (text, detail, events), the run's error, or the tracing spans.

use loopbound::{Limits, Message, Runtime};
use loopbound_openai::{ApiKey, Config, OpenAiTransport};
use loopbound_testkit::hostile::{Behaviour, HostileServer, KeyPart, KeyPlace};
use loopbound_testkit::review::{self, BOTH_CAPABILITIES, Review};
use loopbound_testkit::telemetry::Capture;

/// The key of these runs: 52 characters, as in the report.
const KEY: &str = "sk-live-4f9a2c7e1b8d3f6a0c5e9b2d7f1a4c8e6b3d0f5a9c2e";

/// Panics if `text` holds eight consecutive characters of the key.
fn assert_no_run(text: &str, what: &str) {
    for window in KEY.as_bytes().windows(8) {
        let window = std::str::from_utf8(window).unwrap();
        assert!(!text.contains(window), "{what} holds {window:?}, a run of the key: {text}");
    }
}

/// One harness run against `behaviour`, spans captured; everything it produced, as text.
async fn run(behaviour: Behaviour, streaming: bool) -> (String, Vec<String>) {
    let server = HostileServer::start(behaviour).await.unwrap();
    let config = Config::new(&server.base_url(), "hostile").unwrap().with_api_key(ApiKey::new(KEY).unwrap());
    let tools = review::tools();
    let runtime = Runtime::harness(&tools.set, OpenAiTransport::new(config).unwrap()).streaming(streaming);
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
    let spans = capture.seen();
    (printed, spans)
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
        (echo(503, KeyPlace::ErrorBody, KeyPart::Whole), false, "ProviderUnavailable"),
        (echo(200, KeyPlace::Text, KeyPart::Whole), false, "[redacted]"),
        (echo(200, KeyPlace::StreamText, KeyPart::Whole), true, "[redacted]"),
        (echo(200, KeyPlace::ToolCallFields, KeyPart::Whole), false, "ModelBudget"),
        (echo(200, KeyPlace::ToolCallFields, KeyPart::Chars(3..40)), true, "ModelBudget"),
    ];
    for (behaviour, streaming, expected) in cases {
        let case = format!("{behaviour:?} streaming={streaming}");
        let (printed, spans) = run(behaviour, streaming).await;
        assert!(printed.contains(expected), "{case}: {printed}");
        assert_no_run(&printed, &case);
        for span in &spans {
            assert_no_run(span, &format!("{case}: a span"));
        }
        assert!(spans.iter().any(|line| line == "span chat"), "{case}: {spans:?}");
    }
}
