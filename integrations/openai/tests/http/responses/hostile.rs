//! The hostile server's Responses mode echoes the API key back, in an error after padding (401,
//! 503), in the model's text (whole or split across deltas) or in a call's fields: no run of
//! eight characters of the key reaches the outcome, the run's error, or the tracing spans.

use loopbound_openai::{ApiKey, Config, ResponsesTransport};
use loopbound_testkit::leaks::assert_an_echoed_key_reaches_nothing;

/// The key of these runs: 52 characters, as in the report.
const KEY: &str = "sk-live-4f9a2c7e1b8d3f6a0c5e9b2d7f1a4c8e6b3d0f5a9c2e";

#[tokio::test(flavor = "current_thread")]
async fn an_echoed_key_reaches_no_outcome_error_or_span() {
    assert_an_echoed_key_reaches_nothing(KEY, "openai", 503, |base_url| {
        let config = Config::new(base_url, "hostile").unwrap().with_api_key(ApiKey::new(KEY).unwrap());
        ResponsesTransport::new(config).unwrap()
    })
    .await;
}
