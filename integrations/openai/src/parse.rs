//! Pure parsers for replies: a whole completion, and one streamed chunk.
//!
//! # Invariants
//!
//! - Bytes in, typed result out: any input gives a [`ModelReply`] / [`ReplyChunk`] or a
//!   [`TransportError`], never a panic. Invalid JSON, a wrong JSON type and a reply without
//!   choices are [`TransportError::Malformed`]; an `error` object sent by the provider is
//!   mapped as [`crate::errors`] says.
//! - Tool-call arguments stay JSON text, exactly as sent. A provider that sends them as a JSON
//!   value instead of a string gets that value written back as text; invalid or truncated
//!   arguments are not judged here: core's binding turns them into an error result for the
//!   model.
//! - Only the first choice (index 0) is read; empty text fragments are dropped, so the
//!   streaming and non-streaming paths produce the same reply.

use loopbound::transport::{ModelReply, ReplyChunk, ToolCall, ToolCallDelta, TransportError, Usage};

use crate::errors::embedded_error;
use crate::wire::{ChunkBody, CompletionBody, WireUsage};

/// Parses a whole (non-streamed) chat-completions reply.
///
/// ```
/// use loopbound_openai::parse::parse_completion;
///
/// let body = br#"{"choices":[{"message":{"content":null,"tool_calls":[
///     {"id":"c1","type":"function","function":{"name":"read_ticket","arguments":"{\"input\":42}"}}]}}],
///     "usage":{"prompt_tokens":12,"completion_tokens":5}}"#;
/// let reply = parse_completion(body)?;
/// assert_eq!(reply.tool_calls[0].arguments, r#"{"input":42}"#);
/// assert_eq!(reply.usage.map(|u| u.completion_tokens), Some(5));
/// # Ok::<(), loopbound::transport::TransportError>(())
/// ```
///
/// # Errors
///
/// [`TransportError::Malformed`] for a body that is not a chat completion; the mapped error
/// when the body is the provider's `error` object.
pub fn parse_completion(body: &[u8]) -> Result<ModelReply, TransportError> {
    let parsed: CompletionBody = serde_json::from_slice(body).map_err(|error| malformed("reply", &error))?;
    if let Some(error) = parsed.error.filter(|error| !error.is_null()) {
        return Err(embedded_error(&error));
    }
    let choice = parsed
        .choices
        .unwrap_or_default()
        .into_iter()
        .find(|choice| choice.index.unwrap_or(0) == 0)
        .ok_or_else(|| TransportError::Malformed("the reply has no choice".to_owned()))?;
    let message = choice
        .message
        .ok_or_else(|| TransportError::Malformed("the reply's choice has no message".to_owned()))?;
    let tool_calls = message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .zip(0u32..)
        .map(|(call, index)| ToolCall {
            id: call.id.filter(|id| !id.is_empty()).unwrap_or_else(|| format!("call_{index}")),
            name: call.function.name,
            arguments: arguments_text(call.function.arguments),
        })
        .collect();
    Ok(ModelReply {
        content: message.content.filter(|text| !text.is_empty()),
        tool_calls,
        usage: parsed.usage.as_ref().map(usage),
    })
}

/// Parses the data of one streamed event (a `chat.completion.chunk`), other than `[DONE]`.
///
/// ```
/// use loopbound_openai::parse::parse_chunk;
///
/// let chunk = parse_chunk(br#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#)?;
/// assert_eq!(chunk.content.as_deref(), Some("Hel"));
/// # Ok::<(), loopbound::transport::TransportError>(())
/// ```
///
/// # Errors
///
/// As [`parse_completion`].
pub fn parse_chunk(data: &[u8]) -> Result<ReplyChunk, TransportError> {
    let parsed: ChunkBody =
        serde_json::from_slice(data).map_err(|error| malformed("stream chunk", &error))?;
    if let Some(error) = parsed.error.filter(|error| !error.is_null()) {
        return Err(embedded_error(&error));
    }
    let mut chunk = ReplyChunk { usage: parsed.usage.as_ref().map(usage), ..ReplyChunk::default() };
    let first = parsed.choices.unwrap_or_default().into_iter().find(|choice| choice.index.unwrap_or(0) == 0);
    if let Some(delta) = first.and_then(|choice| choice.delta) {
        chunk.content = delta.content.filter(|text| !text.is_empty());
        chunk.tool_calls = delta
            .tool_calls
            .unwrap_or_default()
            .into_iter()
            .map(|call| {
                let (name, arguments) = call.function.map_or((None, None), |f| (f.name, f.arguments));
                ToolCallDelta {
                    index: call.index.unwrap_or(0),
                    id: call.id,
                    name,
                    arguments: arguments.map(|value| arguments_text(Some(value))),
                }
            })
            .collect();
    }
    Ok(chunk)
}

/// Arguments as JSON text: a string is kept as is, `null` or absence is empty text (core reads
/// it as `{}`), any other JSON value is written back as text.
fn arguments_text(arguments: Option<serde_json::Value>) -> String {
    match arguments {
        None | Some(serde_json::Value::Null) => String::new(),
        Some(serde_json::Value::String(text)) => text,
        Some(other) => other.to_string(),
    }
}

fn usage(wire: &WireUsage) -> Usage {
    Usage {
        prompt_tokens: wire.prompt_tokens.unwrap_or(0),
        completion_tokens: wire.completion_tokens.unwrap_or(0),
    }
}

fn malformed(what: &str, error: &serde_json::Error) -> TransportError {
    TransportError::Malformed(format!("the {what} is not a chat completion: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_reply_keeps_its_text_and_usage() {
        let reply = parse_completion(
            br#"{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"Review finished."},"finish_reason":"stop"}],
                "usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13}}"#,
        )
        .unwrap();
        assert_eq!(
            reply,
            ModelReply::text("Review finished.")
                .with_usage(Usage { prompt_tokens: 10, completion_tokens: 3 })
        );
    }

    #[test]
    fn tool_calls_keep_their_order_ids_and_raw_arguments() {
        let reply = parse_completion(
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
            let result = parse_completion(body);
            assert!(
                matches!(result, Err(TransportError::Malformed(_))),
                "{:?} -> {result:?}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn an_error_object_in_a_success_body_is_mapped() {
        assert_eq!(
            parse_completion(br#"{"error":{"code":500,"message":"boom","type":"server_error"}}"#),
            Err(TransportError::Unavailable("the provider reported an error: boom".into()))
        );
        assert_eq!(
            parse_chunk(br#"{"error":{"message":"bad request","type":"invalid_request_error"}}"#),
            Err(TransportError::Other("the provider reported an error: bad request".into()))
        );
    }

    #[test]
    fn chunks_carry_deltas_and_usage() {
        let chunk = parse_chunk(
            br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"c","type":"function","function":{"name":"read_ticket","arguments":""}}]}}]}"#,
        )
        .unwrap();
        assert_eq!(
            chunk.tool_calls,
            vec![ToolCallDelta {
                index: 1,
                id: Some("c".into()),
                name: Some("read_ticket".into()),
                arguments: Some(String::new())
            }]
        );
        let usage =
            parse_chunk(br#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":6}}"#).unwrap();
        assert_eq!(
            usage,
            ReplyChunk {
                usage: Some(Usage { prompt_tokens: 3, completion_tokens: 6 }),
                ..ReplyChunk::default()
            }
        );
        let empty =
            parse_chunk(br#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#).unwrap();
        assert_eq!(empty, ReplyChunk::default());
        let other_choice = parse_chunk(br#"{"choices":[{"index":1,"delta":{"content":"x"}}]}"#).unwrap();
        assert_eq!(other_choice, ReplyChunk::default());
    }
}
