//! What a run leaks: one review run over any transport with everything it produced captured as
//! text (its outcome, its error, the tracing spans), the check that none of it holds a run of an
//! API key's characters, and the hostile server's key-echoing cases every provider transport
//! must pass ([`assert_an_echoed_key_reaches_nothing`]).
//!
//! # Invariants
//!
//! - The run is the harness review with two model calls at most, in a fresh scope and
//!   conversation, spans captured only while it runs.
//! - The text holds every place a key could surface: the outcome's `Debug` and JSON, its
//!   detail and text, or the run error's `Display` and `Debug`.

use loopbound::transport::Transport;
use loopbound::{Limits, Message, Outcome, RunError, Runner};

use crate::hostile::{Behaviour, HostileServer, KeyPart, KeyPlace};
use crate::review::{self, BOTH_CAPABILITIES, Review};
use crate::telemetry::Capture;

/// Panics if `text` holds eight consecutive characters of `key`, naming `what` holds it.
pub fn assert_no_run_of(key: &str, text: &str, what: &str) {
    for window in key.as_bytes().windows(8) {
        let window = String::from_utf8_lossy(window);
        assert!(!text.contains(window.as_ref()), "{what} holds {window:?}, a run of the key: {text}");
    }
}

/// What one captured run produced.
#[derive(Debug)]
pub struct Captured {
    /// The run's outcome, or why it had none.
    pub result: Result<Outcome, RunError>,
    /// Everything the outcome or the error says, as text.
    pub printed: String,
    /// The spans and events recorded while it ran.
    pub spans: Vec<String>,
}

/// Runs the review over `transport` (streamed or not) with two model calls at most, spans
/// captured.
///
/// # Panics
///
/// If the outcome cannot be written as JSON.
pub async fn captured_run<T: Transport>(transport: T, streaming: bool) -> Captured {
    let tools = review::tools();
    let runtime = Runner::new(&tools.set, transport).streaming(streaming);
    let scope = review::scope(BOTH_CAPABILITIES, Limits::default().with_model_calls(2)).expect("limits");
    let capture = Capture::default();
    let result = {
        let _installed = capture.install();
        runtime
            .run(&scope, &mut vec![Message::user(review::PROMPT)], |ended| Review::completed(ended.state()))
            .await
    };
    let printed = match &result {
        Ok(outcome) => format!(
            "{outcome:?} {} {} {:?}",
            serde_json::to_string(outcome).expect("an outcome is JSON"),
            outcome.detail().unwrap_or_default(),
            outcome.text()
        ),
        Err(error) => format!("{error} {error:?}"),
    };
    Captured { result, printed, spans: capture.seen() }
}

/// Runs the review against a hostile server that echoes `key` back, over the transport
/// `transport` makes for the server's base URL: in an error after padding (401 whole and in
/// part, and `overloaded`, the provider's status for an overload), in the model's text whole or
/// split across deltas, in a tool call's fields. Each run ends as it must, and no run of eight
/// of the key's characters reaches the outcome, the error or a span; the model call's span
/// names `provider` and the model `hostile`.
///
/// # Panics
///
/// When a case leaks the key, ends otherwise, or the server cannot start.
pub async fn assert_an_echoed_key_reaches_nothing<T: Transport>(
    key: &str,
    provider: &str,
    overloaded: u16,
    transport: impl Fn(&str) -> T,
) {
    let echo = |status, place, part| Behaviour::EchoKey { status, padding: 270, place, part };
    let refused = "provider refused authentication: HTTP 401";
    let cases = [
        (echo(401, KeyPlace::ErrorBody, KeyPart::Whole), false, refused),
        (echo(401, KeyPlace::ErrorBody, KeyPart::Chars(0..30)), true, refused),
        (echo(overloaded, KeyPlace::ErrorBody, KeyPart::Whole), false, "ProviderUnavailable"),
        (echo(200, KeyPlace::Text, KeyPart::Whole), false, "[redacted]"),
        (echo(200, KeyPlace::StreamText, KeyPart::Whole), true, "[redacted]"),
        (echo(200, KeyPlace::ToolCallFields, KeyPart::Whole), false, "ModelBudget"),
        (echo(200, KeyPlace::ToolCallFields, KeyPart::Chars(3..40)), true, "ModelBudget"),
    ];
    let provider_field = format!("gen_ai.provider.name={provider:?}");
    for (behaviour, streaming, expected) in cases {
        let case = format!("{behaviour:?} streaming={streaming}");
        let server = HostileServer::start(behaviour).await.expect("the hostile server starts");
        let Captured { printed, spans, .. } = captured_run(transport(&server.base_url()), streaming).await;
        assert!(printed.contains(expected), "{case}: {printed}");
        assert_no_run_of(key, &printed, &case);
        for span in &spans {
            assert_no_run_of(key, span, &format!("{case}: a span"));
        }
        assert!(spans.iter().any(|line| line == "span chat"), "{case}: {spans:?}");
        assert!(spans.iter().any(|line| line == "otel.name=\"chat hostile\""), "{case}: {spans:?}");
        assert!(spans.contains(&provider_field), "{case}: {spans:?}");
    }
}
