//! The errors an OpenAI-compatible server reports inside a successful reply or a stream.
//!
//! HTTP statuses and client failures are mapped by `loopbound_provider::errors`, the same for
//! every provider; what is this API's own is the `error` object some servers (llama.cpp, for one)
//! send in a 200 reply or in the middle of a stream.
//!
//! # Invariants
//!
//! - The object's `code`, when it is an HTTP status, picks the kind as a status would; otherwise
//!   a `server_error` type is `Unavailable` and anything else is `Other`.
//! - The provider's words are redacted before they are cleaned and cut (see
//!   `loopbound_provider::errors::clean`).

use loopbound::transport::TransportError;
use loopbound_provider::Redactor;
use loopbound_provider::errors::clean;

/// The error for an `error` object found inside a 200 reply or a stream.
pub(crate) fn embedded_error(error: &serde_json::Value, redactor: &Redactor) -> TransportError {
    let message = match error {
        serde_json::Value::String(text) => clean(text, redactor),
        other => other
            .get("message")
            .and_then(serde_json::Value::as_str)
            .map(|text| clean(text, redactor))
            .unwrap_or_default(),
    };
    let code = error
        .get("code")
        .and_then(|code| code.as_u64().or_else(|| code.as_str().and_then(|text| text.parse().ok())));
    let kind = error.get("type").and_then(serde_json::Value::as_str).unwrap_or_default();
    let label = "the provider reported an error";
    let text = if message.is_empty() { label.to_owned() } else { format!("{label}: {message}") };
    match code.and_then(|code| u16::try_from(code).ok()) {
        Some(401 | 403) => TransportError::authentication(text),
        Some(408 | 429 | 500..=599) => TransportError::unavailable(text),
        _ if kind == "server_error" => TransportError::unavailable(text),
        _ => TransportError::other(text),
    }
}

#[cfg(test)]
mod tests {
    use loopbound_provider::ApiKey;
    use serde_json::json;

    use super::*;

    const NONE: Redactor = Redactor::none();

    fn embedded_error(error: &serde_json::Value) -> TransportError {
        super::embedded_error(error, &NONE)
    }

    #[test]
    fn embedded_errors_map_by_code_then_type() {
        let server = json!({"code": 500, "message": "The model produced output that does not match", "type": "server_error"});
        assert_eq!(
            embedded_error(&server),
            TransportError::unavailable(
                "the provider reported an error: The model produced output that does not match"
            )
        );
        assert_eq!(
            embedded_error(&json!({"code": "401", "message": "who?"})),
            TransportError::authentication("the provider reported an error: who?")
        );
        assert_eq!(
            embedded_error(&json!({"type": "server_error"})),
            TransportError::unavailable("the provider reported an error")
        );
        assert_eq!(
            embedded_error(&json!("context too long")),
            TransportError::other("the provider reported an error: context too long")
        );
    }

    #[test]
    fn an_echoed_key_is_redacted_from_an_embedded_error() {
        const KEY: &str = "sk-live-0123456789abcdefghijklmnopqrstuvwxyzABCD";
        let redactor = Redactor::new(Some(ApiKey::new(KEY).unwrap()));
        let embedded = super::embedded_error(&json!({"message": KEY, "code": 401}), &redactor);
        assert_eq!(embedded, TransportError::authentication("the provider reported an error: [redacted]"));
    }
}
