//! The transports (chat completions, and the Responses API in `responses`) over real HTTP on
//! loopback: against the scripted mock server aimock (the review scenarios, the wire format,
//! injected errors) and against a small canned server (failures that a well-behaved server does
//! not produce: cut streams, hangs, refused connections).

mod failures;
mod hostile;
mod options;
mod responses;
mod scenarios;
mod wire;

/// The API key every test configures; no error, `Debug` or request body may contain it.
pub(crate) const SECRET: &str = "sk-loopbound-test-3f9a1c7e";

/// Fails if `text` contains the API key.
pub(crate) fn assert_no_secret(text: &str) {
    assert!(!text.contains(SECRET), "the API key leaked into: {text}");
}
