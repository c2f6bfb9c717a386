//! The pure parser of a whole (non-streamed) Messages API reply.
//!
//! # Invariants
//!
//! - Bytes in, typed result out: any input gives a [`ModelReply`] or a [`TransportError`], never
//!   a panic. Invalid JSON, a wrong JSON type, a reply without `content` and a `tool_use` block
//!   without a name are [`Malformed`](loopbound::transport::TransportErrorKind::Malformed); an
//!   `error` object is mapped as the errors module says.
//! - The `tool_use` blocks are counted before anything is kept: a reply with more than the bound
//!   is refused whole.
//! - The text blocks are joined in order, without a separator (as a stream's text deltas are);
//!   an empty text is no text. Each `tool_use` block is one call, its `input` kept as the JSON
//!   text that was sent. Blocks of other kinds (thinking, server tools) are skipped.
//! - Usage counts every input token: `input_tokens`, `cache_read_input_tokens` and
//!   `cache_creation_input_tokens` are added up, the last two also reported apart.
//! - Every text the provider sent back is redacted before the reply leaves.

use loopbound::transport::{ModelReply, ReplyBounds, ToolCall, TransportError};
use loopbound_provider::Redactor;
use loopbound_provider::errors::clean;
use serde_json::value::RawValue;

use crate::errors::provider_error;
use crate::wire::{CallCount, MessageBody};

/// Parses a whole Messages API reply within `bounds`, with every text the provider sent back
/// redacted by `redactor`.
///
/// ```
/// use loopbound::transport::{ReplyBounds, Usage};
/// use loopbound_anthropic::Redactor;
/// use loopbound_anthropic::parse::parse_message;
///
/// let body = br#"{"type":"message","role":"assistant","content":[
///     {"type":"text","text":"Reading."},
///     {"type":"tool_use","id":"toolu_1","name":"read_ticket","input":{"input":42}}],
///     "usage":{"input_tokens":12,"cache_read_input_tokens":100,"output_tokens":5}}"#;
/// let reply = parse_message(body, ReplyBounds::default(), &Redactor::default())?;
/// assert_eq!(reply.content.as_deref(), Some("Reading."));
/// assert_eq!(reply.tool_calls[0].arguments, r#"{"input":42}"#);
/// assert_eq!(reply.usage, Some(Usage::new(112, 5).with_cached_input(100)));
/// # Ok::<(), loopbound::transport::TransportError>(())
/// ```
///
/// # Errors
///
/// [`TooManyCalls`](loopbound::transport::TransportErrorKind::TooManyCalls) past the bound;
/// [`Malformed`](loopbound::transport::TransportErrorKind::Malformed) for a body that is not a
/// Messages API reply; the mapped error when the body is the provider's `error` object.
pub fn parse_message(
    body: &[u8],
    bounds: ReplyBounds,
    redactor: &Redactor,
) -> Result<ModelReply, TransportError> {
    // A body that does not even count is reported by the full parse below, with its reason.
    if let Ok(count) = serde_json::from_slice::<CallCount<'_>>(body)
        && bounds.too_many(count.content.get())
    {
        return Err(bounds.too_many_calls());
    }
    let parsed: MessageBody<'_> =
        serde_json::from_slice(body).map_err(|error| malformed(&error, redactor))?;
    if let Some(error) = parsed.error.filter(|error| error.get() != "null") {
        return Err(provider_error(error, redactor));
    }
    let blocks = parsed.content.ok_or_else(|| TransportError::malformed("the reply has no content"))?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for block in blocks {
        match block.kind.as_ref() {
            // The first text is moved in, not copied: a reply of one large text costs it once.
            "text" => match block.text {
                Some(piece) if text.is_empty() => text = piece,
                Some(piece) => text.push_str(&piece),
                None => {}
            },
            "tool_use" => {
                let name =
                    block.name.ok_or_else(|| TransportError::malformed("a tool_use block has no name"))?;
                let id = block
                    .id
                    .filter(|id| !id.is_empty())
                    .unwrap_or_else(|| format!("call_{}", tool_calls.len()));
                tool_calls.push(ToolCall::new(id, name, input_text(block.input)));
            }
            _ => {}
        }
    }
    let mut reply = ModelReply::new(Some(text).filter(|text| !text.is_empty()), tool_calls);
    reply.usage = parsed.usage.map(crate::wire::WireUsage::usage);
    redactor.redact_reply(&mut reply);
    Ok(reply)
}

/// A `tool_use` block's input as JSON text: as sent, or empty when absent or `null` (core reads
/// empty arguments as `{}`).
fn input_text(input: Option<&RawValue>) -> String {
    input.map(RawValue::get).filter(|raw| *raw != "null").unwrap_or_default().to_owned()
}

/// A reply that is not a Messages API reply. The parser's own words may quote the reply, so they
/// are redacted and cut like the provider's.
pub(crate) fn malformed(error: &serde_json::Error, redactor: &Redactor) -> TransportError {
    TransportError::malformed(format!(
        "the reply is not a Messages API reply: {}",
        clean(&error.to_string(), redactor)
    ))
}

#[cfg(test)]
mod tests {
    use loopbound::transport::Usage;
    use loopbound_provider::ApiKey;

    use super::*;

    fn message(body: &[u8]) -> Result<ModelReply, TransportError> {
        parse_message(body, ReplyBounds::default(), &Redactor::default())
    }

    #[test]
    fn text_blocks_join_and_tool_uses_keep_their_order_ids_and_raw_inputs() {
        let reply = message(
            br#"{"id":"msg_1","type":"message","content":[
                {"type":"thinking","thinking":"hmm","signature":"s"},
                {"type":"text","text":"Let me "},
                {"type":"tool_use","id":"toolu_a","name":"read_ticket","input":{"input": 42.0}},
                {"type":"text","text":"look."},
                {"type":"tool_use","name":"finish_review","input":null},
                {"type":"tool_use","id":"","name":"x"}
            ],"stop_reason":"tool_use","usage":{"input_tokens":3,"output_tokens":4}}"#,
        )
        .unwrap();
        assert_eq!(
            reply,
            ModelReply::new(
                Some("Let me look.".into()),
                vec![
                    ToolCall::new("toolu_a", "read_ticket", r#"{"input": 42.0}"#),
                    ToolCall::new("call_1", "finish_review", ""),
                    ToolCall::new("call_2", "x", ""),
                ]
            )
            .with_usage(Usage::new(3, 4))
        );
    }

    #[test]
    fn cache_reads_and_writes_count_as_input_and_are_reported_apart() {
        let reply = message(
            br#"{"content":[{"type":"text","text":"Hi"}],"usage":{"input_tokens":7,"cache_creation_input_tokens":2000,"cache_read_input_tokens":30000,"output_tokens":12}}"#,
        )
        .unwrap();
        assert_eq!(
            reply.usage,
            Some(Usage::new(32_007, 12).with_cached_input(30_000).with_cache_write(2000))
        );
        let nulls = message(
            br#"{"content":[],"usage":{"input_tokens":7,"cache_creation_input_tokens":null,"cache_read_input_tokens":null,"output_tokens":1}}"#,
        )
        .unwrap();
        assert_eq!(nulls, ModelReply::default().with_usage(Usage::new(7, 1)));
    }

    #[test]
    fn malformed_bodies_are_malformed_errors_that_say_why() {
        let prefix = "the reply is not a Messages API reply: ";
        for (body, why) in [
            (&b""[..], "EOF while parsing a value at line 1 column 0"),
            (b"not json", "expected ident at line 1 column 2"),
            (
                b"{\"content\":[{\"type\":\"text\",\"text\":\"cut",
                "EOF while parsing a string at line 1 column 38",
            ),
            (b"[]", "invalid length 0, expected struct MessageBody with 3 elements at line 1 column 2"),
            (
                b"{\"content\":\"text\"}",
                "invalid type: string \"text\", expected a sequence at line 1 column 17",
            ),
            (b"{\"content\":[{\"text\":\"no type\"}]}", "missing field `type` at line 1 column 30"),
            (
                b"{\"content\":[{\"type\":\"text\",\"text\":7}]}",
                "invalid type: integer `7`, expected a string at line 1 column 35",
            ),
            (
                b"{\"content\":[],\"usage\":{\"input_tokens\":-1}}",
                "invalid value: integer `-1`, expected u64 at line 1 column 40",
            ),
        ] {
            let expected = TransportError::malformed(format!("{prefix}{why}"));
            assert_eq!(message(body), Err(expected), "{}", String::from_utf8_lossy(body));
        }
        assert_eq!(message(b"{}"), Err(TransportError::malformed("the reply has no content")));
        assert_eq!(
            message(br#"{"content":[{"type":"tool_use","id":"a","input":{}}]}"#),
            Err(TransportError::malformed("a tool_use block has no name"))
        );
    }

    #[test]
    fn an_error_object_in_a_success_body_is_mapped() {
        assert_eq!(
            message(br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#),
            Err(TransportError::unavailable("the provider reported an error (overloaded_error): Overloaded"))
        );
    }

    /// A reply of `calls` `tool_use` blocks after a text block.
    fn flood(calls: usize) -> String {
        let call = r#"{"type":"tool_use","id":"c","name":"t","input":{"input":1}}"#;
        format!(r#"{{"content":[{{"type":"text","text":"x"}},{}]}}"#, vec![call; calls].join(","))
    }

    #[test]
    fn tool_uses_are_counted_before_any_is_kept() {
        let none = Redactor::default();
        let reply = parse_message(flood(3).as_bytes(), ReplyBounds::new(3, 1 << 20), &none).unwrap();
        assert_eq!(reply.tool_calls.len(), 3);
        assert_eq!(
            parse_message(flood(4).as_bytes(), ReplyBounds::new(3, 1 << 20), &none),
            Err(TransportError::too_many_calls(3))
        );
        assert_eq!(
            parse_message(flood(100_000).as_bytes(), ReplyBounds::default(), &none),
            Err(TransportError::too_many_calls(16))
        );
    }

    #[test]
    fn every_field_of_a_whole_reply_and_the_parsers_words_are_redacted() {
        let key = "sk-ant-abcdefghijklmnopqrstuvwxyz0123";
        let redactor = Redactor::new(Some(ApiKey::new(key).unwrap()));
        let body = serde_json::json!({"content": [
            {"type": "text", "text": format!("{} {key}", ".".repeat(300))},
            {"type": "tool_use", "id": format!("toolu_{key}"), "name": format!("key_{key}"), "input": {"input": key}}
        ]})
        .to_string();
        let reply = parse_message(body.as_bytes(), ReplyBounds::default(), &redactor).unwrap();
        let text = format!("{reply:?}");
        assert!(!text.contains(&key[..8]) && !text.contains(&key[key.len() - 8..]), "{text}");
        assert_eq!(reply.tool_calls[0].name, "key_[redacted]");
        assert_eq!(reply.tool_calls[0].arguments, r#"{"input":"[redacted]"}"#);
        let wrong = format!(r#"{{"content":"{key}"}}"#);
        let error = parse_message(wrong.as_bytes(), ReplyBounds::default(), &redactor).unwrap_err();
        assert!(!error.to_string().contains(&key[3..11]), "{error}");
    }
}
