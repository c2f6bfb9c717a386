//! Pure parsers for replies: a whole completion, and one streamed chunk.
//!
//! # Invariants
//!
//! - Bytes in, typed result out: any input gives a [`ModelReply`] / [`ReplyChunk`] or a
//!   [`TransportError`], never a panic. Invalid JSON, a wrong JSON type and a reply without
//!   choices are [`Malformed`](loopbound::transport::TransportErrorKind::Malformed); an `error` object sent by the provider is
//!   mapped by its `code` and `type`, as an HTTP status would be.
//! - Tool-call arguments stay JSON text, exactly as sent. A provider that sends them as a JSON
//!   value instead of a string gets that value written back as text; invalid or truncated
//!   arguments are not judged here: core's binding turns them into an error result for the
//!   model.
//! - Only the first choice (index 0) is read; empty text fragments are dropped, so the
//!   streaming and non-streaming paths produce the same reply.

use loopbound::transport::{
    ModelReply, ReplyBounds, ReplyChunk, ToolCall, ToolCallDelta, TransportError, Usage,
};
use serde_json::value::RawValue;

use loopbound_provider::Redactor;

use crate::errors::{malformed_as, provider_error};
use crate::wire::{CallCount, ChunkBody, CompletionBody, WireUsage};

/// Parses a whole (non-streamed) chat-completions reply, within `bounds`, with every text the
/// provider sent back redacted by `redactor`.
///
/// The reply's tool calls are counted first, without keeping any of them: a reply with more
/// than `bounds.calls()` is refused before it is parsed. (Its size is the reader's to bound: a
/// whole body is read up to `bounds.bytes()`.)
///
/// ```
/// use loopbound::transport::{ReplyBounds, TransportError};
/// use loopbound_openai::Redactor;
/// use loopbound_openai::parse::parse_completion;
///
/// let body = br#"{"choices":[{"message":{"content":null,"tool_calls":[
///     {"id":"c1","type":"function","function":{"name":"read_ticket","arguments":"{\"input\":42}"}}]}}],
///     "usage":{"prompt_tokens":12,"completion_tokens":5}}"#;
/// let reply = parse_completion(body, ReplyBounds::default(), &Redactor::default())?;
/// assert_eq!(reply.tool_calls[0].arguments, r#"{"input":42}"#);
/// assert_eq!(reply.usage.map(|u| u.output_tokens), Some(5));
///
/// let refused = parse_completion(body, ReplyBounds::new(0, 1024), &Redactor::default());
/// assert_eq!(refused, Err(TransportError::too_many_calls(0)));
/// # Ok::<(), loopbound::transport::TransportError>(())
/// ```
///
/// # Errors
///
/// [`TooManyCalls`](loopbound::transport::TransportErrorKind::TooManyCalls) past the bound; [`Malformed`](loopbound::transport::TransportErrorKind::Malformed) for a body that
/// is not a chat completion; the mapped error when the body is the provider's `error` object.
pub fn parse_completion(
    body: &[u8],
    bounds: ReplyBounds,
    redactor: &Redactor,
) -> Result<ModelReply, TransportError> {
    // A body that does not even count is reported by the full parse below, with its reason.
    if let Ok(count) = serde_json::from_slice::<CallCount>(body) {
        let calls =
            count.choices.0.and_then(|choice| choice.message).map_or(0, |message| message.tool_calls.get());
        if bounds.too_many(calls) {
            return Err(bounds.too_many_calls());
        }
    }
    let parsed: CompletionBody<'_> =
        serde_json::from_slice(body).map_err(|error| malformed("reply", &error, redactor))?;
    if let Some(error) = parsed.error.filter(|error| error.get() != "null") {
        return Err(provider_error(error, redactor));
    }
    let choice = parsed.choices.0.ok_or_else(|| TransportError::malformed("the reply has no choice"))?;
    let message =
        choice.message.ok_or_else(|| TransportError::malformed("the reply's choice has no message"))?;
    let tool_calls = message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .zip(0u32..)
        .map(|(call, index)| {
            Ok(ToolCall::new(
                call.id.filter(|id| !id.is_empty()).unwrap_or_else(|| format!("call_{index}")),
                call.function.name,
                arguments_text(call.function.arguments, redactor)?,
            ))
        })
        .collect::<Result<_, TransportError>>()?;
    let mut reply = ModelReply::new(message.content.filter(|text| !text.is_empty()), tool_calls);
    reply.usage = parsed.usage.as_ref().map(usage);
    redactor.redact_reply(&mut reply);
    Ok(reply)
}

/// Parses the data of one streamed event (a `chat.completion.chunk`), other than `[DONE]`.
/// Texts are not redacted here: a run of the key may be split across events, so the stream's
/// decoder redacts them as a stream ([`ChunkDecoder`](crate::chunks::ChunkDecoder)); the
/// provider's error messages are redacted by `redactor`.
///
/// ```
/// use loopbound_openai::Redactor;
/// use loopbound_openai::parse::parse_chunk;
///
/// let chunk = parse_chunk(br#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#, &Redactor::default())?;
/// assert_eq!(chunk.content.as_deref(), Some("Hel"));
/// # Ok::<(), loopbound::transport::TransportError>(())
/// ```
///
/// # Errors
///
/// As [`parse_completion`], but for the call bound, which is the stream's to count.
pub fn parse_chunk(data: &[u8], redactor: &Redactor) -> Result<ReplyChunk, TransportError> {
    let parsed: ChunkBody<'_> =
        serde_json::from_slice(data).map_err(|error| malformed("stream chunk", &error, redactor))?;
    if let Some(error) = parsed.error.filter(|error| error.get() != "null") {
        return Err(provider_error(error, redactor));
    }
    let mut chunk = ReplyChunk::default();
    chunk.usage = parsed.usage.as_ref().map(usage);
    if let Some(delta) = parsed.choices.0.and_then(|choice| choice.delta) {
        chunk.content = delta.content.filter(|text| !text.is_empty());
        chunk.tool_calls = delta
            .tool_calls
            .unwrap_or_default()
            .into_iter()
            .map(|call| {
                let (name, arguments) = call.function.map_or((None, None), |f| (f.name, f.arguments));
                let mut delta = ToolCallDelta::new(call.index.unwrap_or(0));
                delta.id = call.id;
                delta.name = name;
                delta.arguments = arguments.map(|raw| arguments_text(Some(raw), redactor)).transpose()?;
                Ok(delta)
            })
            .collect::<Result<_, TransportError>>()?;
    }
    Ok(chunk)
}

/// Arguments as JSON text: a string is kept as its decoded text, `null` or absence is empty text
/// (core reads it as `{}`), any other JSON value is kept as the text that was sent.
pub(crate) fn arguments_text(
    arguments: Option<&RawValue>,
    redactor: &Redactor,
) -> Result<String, TransportError> {
    let Some(raw) = arguments.map(RawValue::get) else { return Ok(String::new()) };
    match raw.as_bytes().first() {
        Some(b'"') => serde_json::from_str(raw).map_err(|error| malformed("reply", &error, redactor)),
        _ if raw == "null" => Ok(String::new()),
        _ => Ok(raw.to_owned()),
    }
}

fn usage(wire: &WireUsage) -> Usage {
    let cached = wire.prompt_tokens_details.as_ref().and_then(|details| details.cached_tokens).unwrap_or(0);
    Usage::new(wire.prompt_tokens.unwrap_or(0), wire.completion_tokens.unwrap_or(0)).with_cached_input(cached)
}

/// A reply that is not a chat completion.
fn malformed(what: &str, error: &serde_json::Error, redactor: &Redactor) -> TransportError {
    malformed_as(&format!("the {what} is not a chat completion"), error, redactor)
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopbound::transport::TransportErrorKind;

    fn completion(body: &[u8]) -> Result<ModelReply, TransportError> {
        parse_completion(body, ReplyBounds::default(), &Redactor::default())
    }

    fn chunk(data: &[u8]) -> Result<ReplyChunk, TransportError> {
        parse_chunk(data, &Redactor::default())
    }

    #[test]
    fn a_text_reply_keeps_its_text_and_usage() {
        let reply = completion(
            br#"{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"Review finished."},"finish_reason":"stop"}],
                "usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13}}"#,
        )
        .unwrap();
        assert_eq!(reply, ModelReply::text("Review finished.").with_usage(Usage::new(10, 3)));
    }

    #[test]
    fn tool_calls_keep_their_order_ids_and_raw_arguments() {
        let reply = completion(
            br#"{"choices":[{"message":{"content":"","tool_calls":[
                {"id":"a","type":"function","function":{"name":"read_ticket","arguments":"{\"input\": 42.0}"}},
                {"type":"function","function":{"name":"finish_review","arguments":{"input":42}}},
                {"id":"","function":{"name":"x","arguments":null}},
                {"id":"d","function":{"name":"y","arguments":"{\"input\":"}}
            ]}}]}"#,
        )
        .unwrap();
        assert_eq!(
            reply,
            ModelReply::calls(vec![
                ToolCall::new("a", "read_ticket", "{\"input\": 42.0}"),
                ToolCall::new("call_1", "finish_review", "{\"input\":42}"),
                ToolCall::new("call_2", "x", ""),
                ToolCall::new("d", "y", "{\"input\":"),
            ])
        );
    }

    #[test]
    fn malformed_bodies_are_malformed_errors() {
        for body in [
            &b""[..],
            b"not json",
            b"{\"choices\":[{\"message\":{\"content\":\"cut",
            b"[]",
            b"{\"choices\":\"many\"}",
            b"{\"choices\":[]}",
            b"{}",
            b"{\"choices\":[{\"finish_reason\":\"stop\"}]}",
            b"{\"choices\":[{\"message\":{\"content\":7}}]}",
            b"{\"choices\":[{\"message\":{\"tool_calls\":[{\"id\":\"a\",\"function\":{}}]}}]}",
            b"{\"choices\":[{\"message\":{\"content\":\"x\"}}],\"usage\":{\"prompt_tokens\":-1}}",
        ] {
            let result = completion(body);
            assert!(
                matches!(result, Err(ref e) if e.kind() == TransportErrorKind::Malformed),
                "{:?} -> {result:?}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn an_error_object_in_a_success_body_is_mapped() {
        assert_eq!(
            completion(br#"{"error":{"code":500,"message":"boom","type":"server_error"}}"#),
            Err(TransportError::unavailable("the provider reported an error: boom"))
        );
        assert_eq!(
            chunk(br#"{"error":{"message":"bad request","type":"invalid_request_error"}}"#),
            Err(TransportError::other("the provider reported an error: bad request"))
        );
    }

    #[test]
    fn chunks_carry_deltas_and_usage() {
        let one = chunk(
            br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"c","type":"function","function":{"name":"read_ticket","arguments":""}}]}}]}"#,
        )
        .unwrap();
        assert_eq!(
            one.tool_calls,
            vec![ToolCallDelta::new(1).with_id("c").with_name("read_ticket").with_arguments("")]
        );
        let usage = chunk(br#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":6}}"#).unwrap();
        assert_eq!(usage, ReplyChunk::usage(Usage::new(3, 6)));
        let empty = chunk(br#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#).unwrap();
        assert_eq!(empty, ReplyChunk::default());
        let other_choice = chunk(br#"{"choices":[{"index":1,"delta":{"content":"x"}}]}"#).unwrap();
        assert_eq!(other_choice, ReplyChunk::default());
    }
}

#[cfg(test)]
mod bounds_tests {
    use super::*;
    use loopbound_provider::ApiKey;

    /// A reply of `calls` tool calls, the index-0 choice coming second.
    fn flood(calls: usize) -> String {
        let call = r#"{"id":"c","type":"function","function":{"name":"t","arguments":{"input": 1}}}"#;
        let calls = vec![call; calls].join(",");
        format!(
            r#"{{"choices":[{{"index":1,"message":{{"content":"other"}}}},{{"index":0,"message":{{"content":null,"tool_calls":[{calls}]}}}}]}}"#
        )
    }

    #[test]
    fn calls_are_counted_before_any_is_kept() {
        let none = Redactor::default();
        let reply = parse_completion(flood(3).as_bytes(), ReplyBounds::new(3, 1 << 20), &none).unwrap();
        assert_eq!(reply.tool_calls.len(), 3);
        assert_eq!(reply.tool_calls[2].arguments, r#"{"input": 1}"#, "a JSON value is kept as sent");
        assert_eq!(
            parse_completion(flood(4).as_bytes(), ReplyBounds::new(3, 1 << 20), &none),
            Err(TransportError::too_many_calls(3))
        );
        assert_eq!(
            parse_completion(flood(100_000).as_bytes(), ReplyBounds::default(), &none),
            Err(TransportError::too_many_calls(16))
        );
    }

    #[test]
    fn every_field_of_a_whole_reply_is_redacted() {
        let key = "sk-abcdefghijklmnopqrstuvwxyz0123";
        let redactor = Redactor::new(Some(ApiKey::new(key).unwrap()));
        let body = serde_json::json!({"choices": [{"message": {
            "content": format!("{} {key}", ".".repeat(300)),
            "tool_calls": [{"id": format!("call_{key}"), "function": {"name": format!("key_{key}"), "arguments": format!("{{\"input\":\"{key}\"}}")}}]
        }}]})
        .to_string();
        let reply = parse_completion(body.as_bytes(), ReplyBounds::default(), &redactor).unwrap();
        let text = format!("{reply:?}");
        assert!(!text.contains(&key[..8]) && !text.contains(&key[key.len() - 8..]), "{text}");
        assert_eq!(reply.tool_calls[0].name, "key_[redacted]");
        // The parser's own words, which quote what it read, are redacted too.
        let wrong = format!(r#"{{"choices":"{key}"}}"#);
        let error = parse_completion(wrong.as_bytes(), ReplyBounds::default(), &redactor).unwrap_err();
        assert!(!error.to_string().contains(&key[3..11]), "{error}");
    }

    #[test]
    fn a_huge_error_object_is_reported_without_its_words() {
        let huge = format!(
            r#"{{"error":{{"message":"{}","code":500}}}}"#,
            "x".repeat(crate::errors::MAX_ERROR_OBJECT)
        );
        assert_eq!(
            parse_completion(huge.as_bytes(), ReplyBounds::default(), &Redactor::default()),
            Err(TransportError::other("the provider reported an error"))
        );
    }
}
