//! The errors an OpenAI-compatible server reports inside a successful reply or a stream.
//!
//! HTTP statuses and client failures are mapped by `loopbound_provider::errors`, the same for
//! every provider; what is this API's own is the `error` object some servers (llama.cpp, for one)
//! send in a 200 reply or in the middle of a stream.
//!
//! # Invariants
//!
//! - The object's kind is `loopbound_provider::errors::object_kind`'s, the same on every
//!   transport: its `code`, when it is an HTTP status, picks the kind as a status would; else
//!   its type or string code (`server_error`, `rate_limit_exceeded`, Anthropic's
//!   `overloaded_error`, …) does.
//! - The provider's words are redacted before they are cleaned and cut (see
//!   `loopbound_provider::errors::clean`); an `error` object larger than [`MAX_ERROR_OBJECT`] is
//!   reported without its words, and never parsed into a tree.
//! - A reply that does not parse is `Malformed`, with the parser's words, which may quote the
//!   reply, redacted and cut like the provider's.

use loopbound::transport::TransportError;
use loopbound_provider::Redactor;
use loopbound_provider::errors::{clean, object_kind};
use serde_json::value::RawValue;

/// The largest `error` object read in full to explain a failure: 64 KiB. A larger one is
/// reported without its words.
pub(crate) const MAX_ERROR_OBJECT: usize = 64 << 10;

/// The error a provider sent inside a reply, read in full only when it is small.
pub(crate) fn provider_error(raw: &RawValue, redactor: &Redactor) -> TransportError {
    let text = raw.get();
    let value = if text.len() <= MAX_ERROR_OBJECT {
        serde_json::from_str(text).unwrap_or(serde_json::Value::Null)
    } else {
        serde_json::Value::Null
    };
    embedded_error(&value, redactor)
}

/// The error an `event: error` of a stream says: its data's `error` object, or the data itself
/// when it is JSON, else the data as text. (An event's data is bounded by the stream's event
/// size.)
pub(crate) fn event_error(data: &str, redactor: &Redactor) -> TransportError {
    serde_json::from_str::<serde_json::Value>(data).map_or_else(
        |_| TransportError::other(format!("the provider reported an error: {}", clean(data, redactor))),
        |json| embedded_error(json.get("error").unwrap_or(&json), redactor),
    )
}

/// A reply that does not parse: `description` (e.g. `the reply is not a chat completion`), then
/// the parser's words, redacted and cut.
pub(crate) fn malformed_as(
    description: &str,
    error: &serde_json::Error,
    redactor: &Redactor,
) -> TransportError {
    TransportError::malformed(format!("{description}: {}", clean(&error.to_string(), redactor)))
}

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
    let label = "the provider reported an error";
    let text = if message.is_empty() { label.to_owned() } else { format!("{label}: {message}") };
    TransportError::new(object_kind(error), text)
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
        // The Responses API names the failure in a string code.
        assert_eq!(
            embedded_error(&json!({"code": "server_error", "message": "try again"})),
            TransportError::unavailable("the provider reported an error: try again")
        );
        assert_eq!(
            embedded_error(&json!({"code": "rate_limit_exceeded", "message": "slow down"})),
            TransportError::unavailable("the provider reported an error: slow down")
        );
        assert_eq!(
            embedded_error(&json!({"code": "invalid_prompt", "message": "no"})),
            TransportError::other("the provider reported an error: no")
        );
        // Anthropic's words, from a server that mixes the two APIs: the same kinds.
        assert_eq!(
            embedded_error(&json!({"type": "overloaded_error", "message": "Overloaded"})),
            TransportError::unavailable("the provider reported an error: Overloaded")
        );
        assert_eq!(
            embedded_error(&json!({"type": "permission_error", "message": "no"})),
            TransportError::authentication("the provider reported an error: no")
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
