//! The transport over real HTTP on loopback: against the scripted mock server aimock's
//! `/v1/messages` (the eight review scenarios, the wire format, injected errors), against small
//! canned servers (what aimock does not send: cache tokens, error events, cut streams, hangs),
//! and against the testkit's hostile server in its Anthropic mode.

mod failures;
mod hostile;
mod options;
mod scenarios;
mod usage;
mod wire;

use loopbound_anthropic::{AnthropicTransport, ApiKey, Config};

/// The API key every test configures; no error, `Debug` or request body may contain it.
pub(crate) const SECRET: &str = "sk-ant-loopbound-test-7c2e9d41";

/// Fails if `text` contains the API key.
pub(crate) fn assert_no_secret(text: &str) {
    assert!(!text.contains(SECRET), "the API key leaked into: {text}");
}

/// A transport to `base_url` with the test key.
pub(crate) fn transport_to(base_url: &str) -> AnthropicTransport {
    let config = Config::new(base_url, "claude-test-model")
        .expect("a valid base URL")
        .with_api_key(ApiKey::new(SECRET).expect("a valid key"));
    AnthropicTransport::new(config).expect("the client builds")
}
