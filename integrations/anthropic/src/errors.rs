//! The errors the Messages API reports in a body or inside a stream: `{"type": "error",
//! "error": {"type": …, "message": …}}`.
//!
//! HTTP statuses and client failures are mapped by `loopbound_provider::errors`, the same for
//! every provider (Anthropic's 529 overload, 5xx and 429 are `Unavailable`, 401 and 403
//! `Authentication`). An error object is mapped as every transport maps one
//! (`loopbound_provider::errors::object_kind`): by its `code` when it is an HTTP status (the
//! OpenAI-style objects that servers such as llama.cpp send on this API too), else by its type,
//! as the status the API gives that type would be:
//!
//! | `error.type` | its HTTP status | error |
//! |---|---|---|
//! | `overloaded_error`, `api_error`, `rate_limit_error` (and OpenAI's `server_error`) | 529, 500, 429 | `Unavailable` |
//! | `authentication_error`, `permission_error` | 401, 403 | `Authentication` |
//! | any other (`invalid_request_error`, `not_found_error`, `request_too_large`, …) | 4xx | `Other` |
//!
//! # Invariants
//!
//! - The provider's words (its type and message) are redacted before they are cleaned and cut
//!   (see `loopbound_provider::errors::clean`); an error object larger than
//!   [`MAX_ERROR_OBJECT`] is reported by its type alone, its message unread.
//! - The kind depends on the error's code and type only, never on its message.

use loopbound::transport::TransportError;
use loopbound_provider::Redactor;
use loopbound_provider::errors::{clean, object_kind};
use serde_json::value::RawValue;

/// The largest `error` object read in full to explain a failure: 64 KiB.
pub(crate) const MAX_ERROR_OBJECT: usize = 64 << 10;

/// The error for an `error` object (the value of the `error` field). Its message is read only
/// when the object is small; its type always.
pub(crate) fn provider_error(raw: &RawValue, redactor: &Redactor) -> TransportError {
    let text = raw.get();
    if text.len() <= MAX_ERROR_OBJECT {
        let value = serde_json::from_str(text).unwrap_or(serde_json::Value::Null);
        return error_object(&value, redactor);
    }
    let only = serde_json::from_str::<TypeOnly>(text).ok();
    let kind = only.as_ref().and_then(|only| only.kind.clone()).unwrap_or_default();
    let code = only.and_then(|only| only.code).unwrap_or(serde_json::Value::Null);
    mapped(&serde_json::json!({"type": kind, "code": code}), &clean(&kind, redactor), "")
}

/// An error object's type and code, its other fields left unread.
#[derive(serde::Deserialize)]
struct TypeOnly {
    #[serde(rename = "type")]
    kind: Option<String>,
    code: Option<serde_json::Value>,
}

/// The error for an error object already read.
pub(crate) fn error_object(error: &serde_json::Value, redactor: &Redactor) -> TransportError {
    let field = |name: &str| {
        error
            .get(name)
            .and_then(serde_json::Value::as_str)
            .map(|text| clean(text, redactor))
            .unwrap_or_default()
    };
    match error {
        serde_json::Value::String(text) => mapped(error, "", &clean(text, redactor)),
        _ => mapped(error, &field("type"), &field("message")),
    }
}

/// The error for the object `error`, of type `kind` saying `message` (both already redacted and
/// cleaned; either may be empty).
fn mapped(error: &serde_json::Value, kind: &str, message: &str) -> TransportError {
    let kind_part = if kind.is_empty() { String::new() } else { format!(" ({kind})") };
    let message_part = if message.is_empty() { String::new() } else { format!(": {message}") };
    TransportError::new(
        object_kind(error),
        format!("the provider reported an error{kind_part}{message_part}"),
    )
}

#[cfg(test)]
mod tests {
    use loopbound_provider::ApiKey;
    use serde_json::json;

    use super::*;

    fn error(value: &serde_json::Value) -> TransportError {
        error_object(value, &Redactor::none())
    }

    #[test]
    fn error_objects_map_by_their_type() {
        assert_eq!(
            error(&json!({"type": "overloaded_error", "message": "Overloaded"})),
            TransportError::unavailable("the provider reported an error (overloaded_error): Overloaded")
        );
        assert_eq!(
            error(&json!({"type": "api_error", "message": "Internal"})),
            TransportError::unavailable("the provider reported an error (api_error): Internal")
        );
        assert_eq!(
            error(&json!({"type": "rate_limit_error"})),
            TransportError::unavailable("the provider reported an error (rate_limit_error)")
        );
        assert_eq!(
            error(&json!({"type": "permission_error", "message": "no"})),
            TransportError::authentication("the provider reported an error (permission_error): no")
        );
        assert_eq!(
            error(&json!({"type": "invalid_request_error", "message": "max_tokens: too large"})),
            TransportError::other(
                "the provider reported an error (invalid_request_error): max_tokens: too large"
            )
        );
        assert_eq!(
            error(&json!("plain words")),
            TransportError::other("the provider reported an error: plain words")
        );
        assert_eq!(error(&json!(null)), TransportError::other("the provider reported an error"));
        // OpenAI's words, as llama.cpp sends them on this API: the code is an HTTP status.
        assert_eq!(
            error(&json!({"code": 500, "message": "failed to parse", "type": "server_error"})),
            TransportError::unavailable("the provider reported an error (server_error): failed to parse")
        );
        assert_eq!(
            error(&json!({"code": 401, "message": "who?", "type": "x"})),
            TransportError::authentication("the provider reported an error (x): who?")
        );
    }

    #[test]
    fn an_echoed_key_is_redacted_and_a_huge_object_keeps_only_its_type() {
        const KEY: &str = "sk-ant-0123456789abcdefghijklmnopqrstuvwxyz";
        let redactor = Redactor::new(Some(ApiKey::new(KEY).unwrap()));
        let echoed = json!({"type": "overloaded_error", "message": format!("{} {KEY}", ".".repeat(290))});
        let text = error_object(&echoed, &redactor).to_string();
        assert!(!text.contains(&KEY[..8]) && !text.contains(&KEY[20..28]), "{text}");
        let huge = json!({"type": "overloaded_error", "message": "x".repeat(MAX_ERROR_OBJECT)}).to_string();
        let raw: &RawValue = serde_json::from_str(&huge).unwrap();
        assert_eq!(
            provider_error(raw, &redactor),
            TransportError::unavailable("the provider reported an error (overloaded_error)")
        );
    }
}
