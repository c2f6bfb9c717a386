//! How failures map to the transport contract ([`TransportError`]).
//!
//! | failure | error | run status |
//! |---|---|---|
//! | connection refused, DNS or TLS failure, connect or response timeout | `Unavailable` | `ProviderUnavailable` |
//! | HTTP 5xx (Anthropic's 529 overload included), 408, 429 (with its `Retry-After`) | `Unavailable` | `ProviderUnavailable` |
//! | HTTP 401, 403 | `Authentication` | provider error |
//! | any other non-2xx status (other 4xx, an unfollowed 3xx); a 404 names the URL requested | `Other` | provider error |
//! | an `error` object inside a reply or a stream ([`object_kind`]): by its HTTP-like `code`, else by its type words | as its status would be | as the kind says |
//! | a body cut short while it is read | `Malformed` | provider error |
//! | a request option the API cannot send ([`unsupported_option`]), found before sending | `Unsupported` | configuration error |
//!
//! # Invariants
//!
//! - No retry happens here: each attempt would have to be a counted model call, so a 429 ends
//!   the run with the provider's `Retry-After` in the message and leaves the decision to the
//!   host.
//! - Messages quote at most [`MAX_DETAIL`] bytes of what the provider said, without control
//!   characters, and never a URL the provider wrote (URLs may carry secrets in some
//!   deployments). The one URL a message names is the endpoint's own, in a 404, since that is
//!   what the host must correct; it is redacted like the rest, and holds no credentials, query
//!   or fragment (the configuration refuses them).
//! - One mapping of kinds for every transport: a status ([`status_kind`]) and an error object a
//!   provider sends inside a reply or a stream ([`object_kind`]) give the same kind for the same
//!   failure, whichever API's words the server uses (llama.cpp answers an Anthropic request in
//!   OpenAI's words, for one).
//! - What the provider said is redacted ([`Redactor`]) before it is cleaned and cut, so a
//!   provider that echoes the API key, whole or in part, after any padding, cannot make a run of
//!   it appear in an error.

use loopbound::transport::{TransportError, TransportErrorKind};

use crate::redact::Redactor;

/// Longest excerpt, in bytes, of a provider's own words quoted in an error.
pub const MAX_DETAIL: usize = 300;

/// The error for a request `option` that the transport named `transport` cannot send, and
/// `why`: refused before anything is sent.
///
/// ```
/// use loopbound::transport::TransportErrorKind;
/// use loopbound_provider::errors::unsupported_option;
///
/// let error = unsupported_option("ResponsesTransport", "seed", "the Responses API has no seed");
/// assert_eq!(error.kind(), TransportErrorKind::Unsupported);
/// assert_eq!(
///     error.to_string(),
///     "unsupported request option: ResponsesTransport cannot send seed: the Responses API has no seed"
/// );
/// ```
#[must_use]
pub fn unsupported_option(transport: &str, option: &str, why: &str) -> TransportError {
    TransportError::unsupported(format!("{transport} cannot send {option}: {why}"))
}

/// The error for an HTTP response with a non-success `status`, its `Retry-After` header value
/// (if any) and its `body`, with what the provider said redacted by `redactor`.
///
/// ```
/// use loopbound::transport::TransportError;
/// use loopbound_provider::errors::status_error;
/// use loopbound_provider::{ApiKey, Redactor};
///
/// let none = Redactor::default();
/// let error = status_error(429, Some("7"), br#"{"error":{"message":"slow down"}}"#, &none);
/// assert_eq!(error, TransportError::unavailable("HTTP 429 (rate limited; retry after 7 s): slow down"));
///
/// let redactor = Redactor::new(Some(ApiKey::new("sk-0123456789abcdef")?));
/// let echo = format!(r#"{{"error":{{"message":"{} you sent sk-0123456789abcdef"}}}}"#, ".".repeat(290));
/// let error = status_error(401, None, echo.as_bytes(), &redactor);
/// assert!(!error.to_string().contains("sk-01234"));
/// # Ok::<(), loopbound_provider::ConfigError>(())
/// ```
#[must_use]
pub fn status_error(
    status: u16,
    retry_after: Option<&str>,
    body: &[u8],
    redactor: &Redactor,
) -> TransportError {
    status_error_at(status, retry_after, body, None, redactor)
}

/// As [`status_error`], for a request sent to `url`: a 404 names it (`HTTP 404 at
/// http://127.0.0.1:8080/v1/chat/completions: …`), since a wrong base URL is its usual cause.
///
/// ```
/// use loopbound::transport::TransportError;
/// use loopbound_provider::errors::status_error_at;
/// use loopbound_provider::Redactor;
///
/// let url = Some("http://127.0.0.1:8080/chat/completions");
/// let error = status_error_at(404, None, b"File Not Found", url, &Redactor::default());
/// assert_eq!(error, TransportError::other("HTTP 404 at http://127.0.0.1:8080/chat/completions: File Not Found"));
/// let error = status_error_at(500, None, b"", url, &Redactor::default());
/// assert_eq!(error, TransportError::unavailable("HTTP 500"));
/// ```
#[must_use]
pub fn status_error_at(
    status: u16,
    retry_after: Option<&str>,
    body: &[u8],
    url: Option<&str>,
    redactor: &Redactor,
) -> TransportError {
    let said = provider_words(body, redactor);
    let detail = |label: String| if said.is_empty() { label } else { format!("{label}: {said}") };
    let label = match (status, url) {
        (429, _) => {
            let wait = match retry_after.map(str::trim).filter(|value| !value.is_empty()) {
                Some(value) if value.bytes().all(|byte| byte.is_ascii_digit()) => {
                    format!("retry after {value} s")
                }
                Some(value) => format!("retry after {}", clean(value, redactor)),
                None => "no Retry-After given".to_owned(),
            };
            format!("HTTP 429 (rate limited; {wait})")
        }
        (404, Some(url)) => format!("HTTP 404 at {}", redactor.redact(url)),
        _ => format!("HTTP {status}"),
    };
    TransportError::new(status_kind(status), detail(label))
}

/// The kind of failure an HTTP `status` means: 401 and 403 `Authentication`; 408, 429 and
/// every 5xx (Anthropic's 529 overload included) `Unavailable`, since the provider could not
/// serve now and a later call may succeed; any other `Other`, since sending the same request
/// again would fail the same way (a 400, 404, 409, 413 or 422, an unfollowed 3xx).
#[must_use]
pub fn status_kind(status: u16) -> TransportErrorKind {
    match status {
        401 | 403 => TransportErrorKind::Authentication,
        408 | 429 | 500..=599 => TransportErrorKind::Unavailable,
        _ => TransportErrorKind::Other,
    }
}

/// The kind of failure an `error` object that a provider sent inside a reply or a stream means,
/// the same for every API: its `code`, when it is an HTTP status (a number, or a number in a
/// string), as [`status_kind`] maps it; else its `type` or string `code` by the words each API
/// uses for a status:
///
/// | words | the status they stand for | kind |
/// |---|---|---|
/// | `server_error`, `api_error`, `overloaded_error`, `rate_limit_error`, `rate_limit_exceeded` | 500, 529, 429 | `Unavailable` |
/// | `authentication_error`, `permission_error`, `invalid_api_key` | 401, 403 | `Authentication` |
/// | anything else (`invalid_request_error`, `not_found_error`, `invalid_prompt`, none) | 4xx | `Other` |
///
/// ```
/// use loopbound::transport::TransportErrorKind;
/// use loopbound_provider::errors::object_kind;
/// use serde_json::json;
///
/// // llama.cpp's words for a failed generation, on whichever API it answers.
/// let llama = json!({"code": 500, "message": "failed to parse", "type": "server_error"});
/// assert_eq!(object_kind(&llama), TransportErrorKind::Unavailable);
/// assert_eq!(object_kind(&json!({"type": "overloaded_error"})), TransportErrorKind::Unavailable);
/// assert_eq!(object_kind(&json!({"type": "invalid_request_error"})), TransportErrorKind::Other);
/// ```
#[must_use]
pub fn object_kind(error: &serde_json::Value) -> TransportErrorKind {
    let code = error.get("code");
    let code_text = code.and_then(serde_json::Value::as_str).unwrap_or_default();
    let status = code.and_then(|code| code.as_u64().or_else(|| code_text.trim().parse().ok()));
    if let Some(status) = status.and_then(|status| u16::try_from(status).ok()) {
        return status_kind(status);
    }
    let words = [error.get("type").and_then(serde_json::Value::as_str).unwrap_or_default(), code_text];
    if words.iter().any(|word| {
        matches!(
            *word,
            "server_error" | "api_error" | "overloaded_error" | "rate_limit_error" | "rate_limit_exceeded"
        )
    }) {
        TransportErrorKind::Unavailable
    } else if words
        .iter()
        .any(|word| matches!(*word, "authentication_error" | "permission_error" | "invalid_api_key"))
    {
        TransportErrorKind::Authentication
    } else {
        TransportErrorKind::Other
    }
}

/// What the provider said in an error body: `error.message` (or `message`, or `error` as a
/// string) from JSON, else the body as text; redacted, cleaned and cut to [`MAX_DETAIL`] bytes.
#[must_use]
pub fn provider_words(body: &[u8], redactor: &Redactor) -> String {
    if let Ok(json) = serde_json::from_slice::<serde_json::Value>(body) {
        let error = json.get("error");
        let message = error
            .and_then(|error| error.get("message"))
            .or_else(|| error.filter(|error| error.is_string()))
            .or_else(|| json.get("message"))
            .and_then(serde_json::Value::as_str);
        if let Some(message) = message {
            return clean(message, redactor);
        }
    }
    clean(&String::from_utf8_lossy(body), redactor)
}

/// `text` on one line: redacted first, then control characters become spaces, runs of spaces
/// collapse, and the result is cut to [`MAX_DETAIL`] bytes on a character boundary.
#[must_use]
pub fn clean(text: &str, redactor: &Redactor) -> String {
    let text = redactor.redact(text);
    let mut out = String::new();
    for word in text.split(|c: char| c.is_whitespace() || c.is_control()).filter(|word| !word.is_empty()) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
        if out.len() > MAX_DETAIL {
            break;
        }
    }
    if out.len() > MAX_DETAIL {
        let mut end = MAX_DETAIL;
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        out.truncate(end);
        out.push('…');
    }
    out
}

/// The error for a failure of `reqwest` before a response status arrived. The `reqwest` error,
/// without its URL, is the source; the message names only what failed.
#[must_use]
pub fn send_error(error: reqwest::Error) -> TransportError {
    let error = error.without_url();
    let base = if error.is_timeout() {
        TransportError::unavailable("the request timed out")
    } else if error.is_connect() {
        TransportError::unavailable("cannot connect")
    } else if error.is_builder() || error.is_redirect() {
        TransportError::other("the request could not be sent")
    } else {
        // The connection closed or failed before a response: the server is not serving.
        TransportError::unavailable("the request failed")
    };
    base.with_source(error)
}

/// The error for a failure while reading a response body whose status was a success. The
/// `reqwest` error, without its URL, is the source.
#[must_use]
pub fn body_error(error: reqwest::Error) -> TransportError {
    let error = error.without_url();
    let base = if error.is_timeout() {
        TransportError::unavailable("the response timed out")
    } else {
        TransportError::malformed("the response body was cut off")
    };
    base.with_source(error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::ApiKey;

    const NONE: Redactor = Redactor::none();

    fn status_error(status: u16, retry_after: Option<&str>, body: &[u8]) -> TransportError {
        super::status_error(status, retry_after, body, &NONE)
    }

    #[test]
    fn statuses_map_to_the_contract() {
        let body = br#"{"error":{"message":"nope","type":"x"}}"#;
        assert_eq!(status_error(401, None, body), TransportError::authentication("HTTP 401: nope"));
        assert_eq!(status_error(403, None, b""), TransportError::authentication("HTTP 403"));
        assert_eq!(status_error(500, None, body), TransportError::unavailable("HTTP 500: nope"));
        assert_eq!(status_error(503, None, b"down\n"), TransportError::unavailable("HTTP 503: down"));
        assert_eq!(status_error(408, None, b""), TransportError::unavailable("HTTP 408"));
        assert_eq!(status_error(404, None, body), TransportError::other("HTTP 404: nope"));
        assert_eq!(status_error(400, None, b"{\"message\":\"bad\"}"), TransportError::other("HTTP 400: bad"));
        assert_eq!(status_error(302, None, b""), TransportError::other("HTTP 302"));
        let overloaded = br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(status_error(529, None, overloaded), TransportError::unavailable("HTTP 529: Overloaded"));
    }

    #[test]
    fn error_objects_map_as_their_status_would_whatever_the_apis_words() {
        use TransportErrorKind::{Authentication, Other, Unavailable};
        use serde_json::json;
        let cases = [
            (json!({"code": 500, "type": "invalid_request_error"}), Unavailable),
            (json!({"code": "503"}), Unavailable),
            (json!({"code": 429}), Unavailable),
            (json!({"code": 401, "type": "server_error"}), Authentication),
            (json!({"code": 422, "type": "server_error"}), Other),
            (json!({"type": "server_error"}), Unavailable),
            (json!({"type": "api_error"}), Unavailable),
            (json!({"type": "overloaded_error"}), Unavailable),
            (json!({"type": "rate_limit_error"}), Unavailable),
            (json!({"code": "rate_limit_exceeded"}), Unavailable),
            (json!({"type": "authentication_error"}), Authentication),
            (json!({"type": "permission_error"}), Authentication),
            (json!({"code": "invalid_api_key"}), Authentication),
            (json!({"type": "invalid_request_error"}), Other),
            (json!({"code": "invalid_prompt"}), Other),
            (json!("plain words"), Other),
            (json!(null), Other),
        ];
        for (object, kind) in cases {
            assert_eq!(object_kind(&object), kind, "{object}");
        }
        let statuses: Vec<TransportErrorKind> =
            [400, 401, 403, 404, 408, 409, 413, 422, 429, 500, 502, 503, 529].map(status_kind).to_vec();
        assert_eq!(
            statuses,
            [Other, Authentication, Authentication, Other, Unavailable, Other, Other, Other, Unavailable]
                .into_iter()
                .chain([Unavailable; 4])
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_rate_limit_carries_its_retry_after_value() {
        assert_eq!(
            status_error(429, Some(" 30 "), b""),
            TransportError::unavailable("HTTP 429 (rate limited; retry after 30 s)")
        );
        assert_eq!(
            status_error(429, Some("Wed, 21 Oct 2015 07:28:00 GMT"), b""),
            TransportError::unavailable("HTTP 429 (rate limited; retry after Wed, 21 Oct 2015 07:28:00 GMT)")
        );
        assert_eq!(
            status_error(429, None, b"{\"error\":\"slow\"}"),
            TransportError::unavailable("HTTP 429 (rate limited; no Retry-After given): slow")
        );
    }

    #[test]
    fn provider_words_are_one_short_line() {
        let long = "é".repeat(400);
        let text = clean(&format!("a\n\tb\u{0}c  {long}"), &NONE);
        assert!(text.starts_with("a b c éé"));
        assert!(text.len() <= MAX_DETAIL + '…'.len_utf8(), "{}", text.len());
        assert!(text.ends_with('…'));
    }

    #[test]
    fn the_key_is_redacted_before_the_message_is_cut() {
        const KEY: &str = "sk-live-0123456789abcdefghijklmnopqrstuvwxyzABCD";
        let redactor = Redactor::new(Some(ApiKey::new(KEY).unwrap()));
        // The key after 270 bytes of padding: a cut at 300 bytes would have kept 30 of its
        // characters, had the cut come first.
        for padding in [0, 270, 290, 296] {
            let message = format!("{} {KEY}", ".".repeat(padding));
            let body = serde_json::json!({"error": {"message": message}}).to_string();
            for status in [401, 503, 400] {
                let text = super::status_error(status, None, body.as_bytes(), &redactor).to_string();
                assert!(!text.contains(&KEY[..8]) && !text.contains(&KEY[KEY.len() - 8..]), "{text}");
                let kept = KEY.as_bytes().windows(8).filter(|w| text.as_bytes().windows(8).any(|t| t == *w));
                assert_eq!(kept.count(), 0, "{status} {padding}: {text}");
            }
        }
    }
}
