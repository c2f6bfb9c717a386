//! The texts of the Anthropic mode: Messages API replies, stream events and error bodies.
//!
//! # Invariants
//!
//! - Every text here is valid JSON (or a valid server-sent event around valid JSON): every string
//!   that comes from a caller or a client goes through [`json_string`], which escapes it.
//! - Every event is framed as the API frames it: `event: <type>` then `data: <json>`.
//! - A tool call's arguments become the block's `input` as they are when they are JSON, else as
//!   a JSON string of their text (the reply stays valid JSON; binding refuses it).

use crate::hostile::payload::json_string;

/// The `id` of every message.
const ID: &str = "msg_hostile";

/// `json`, an event of type `kind`, framed.
pub(crate) fn event(kind: &str, json: &str) -> Vec<u8> {
    format!("event: {kind}\ndata: {json}\n\n").into_bytes()
}

/// The `message_start` event, with the input count of every hostile reply.
pub(crate) fn start_event() -> Vec<u8> {
    event(
        "message_start",
        &format!(
            r#"{{"type":"message_start","message":{{"id":"{ID}","type":"message","role":"assistant","content":[],"model":"hostile","stop_reason":null,"usage":{{"input_tokens":10,"output_tokens":1}}}}}}"#
        ),
    )
}

/// The start of a text block at `index`.
pub(crate) fn text_start_event(index: usize) -> Vec<u8> {
    event(
        "content_block_start",
        &format!(
            r#"{{"type":"content_block_start","index":{index},"content_block":{{"type":"text","text":""}}}}"#
        ),
    )
}

/// A `text_delta` of block `index`.
pub(crate) fn text_event(index: usize, text: &str) -> Vec<u8> {
    event(
        "content_block_delta",
        &format!(
            r#"{{"type":"content_block_delta","index":{index},"delta":{{"type":"text_delta","text":{}}}}}"#,
            json_string(text)
        ),
    )
}

/// The start of a `tool_use` block at `index`, with its id and name.
pub(crate) fn call_start_event(index: usize, id: &str, name: &str) -> Vec<u8> {
    event(
        "content_block_start",
        &format!(
            r#"{{"type":"content_block_start","index":{index},"content_block":{{"type":"tool_use","id":{},"name":{},"input":{{}}}}}}"#,
            json_string(id),
            json_string(name)
        ),
    )
}

/// An `input_json_delta` of block `index`.
pub(crate) fn arguments_event(index: usize, fragment: &str) -> Vec<u8> {
    event(
        "content_block_delta",
        &format!(
            r#"{{"type":"content_block_delta","index":{index},"delta":{{"type":"input_json_delta","partial_json":{}}}}}"#,
            json_string(fragment)
        ),
    )
}

/// The end of block `index`.
pub(crate) fn stop_event(index: usize) -> Vec<u8> {
    event("content_block_stop", &format!(r#"{{"type":"content_block_stop","index":{index}}}"#))
}

/// A `message_delta` with the cumulative `output` count and `stop_reason` (or `null`).
pub(crate) fn usage_event(output: u64, stop_reason: Option<&str>) -> Vec<u8> {
    let reason = stop_reason.map_or_else(|| "null".to_owned(), json_string);
    event(
        "message_delta",
        &format!(
            r#"{{"type":"message_delta","delta":{{"stop_reason":{reason},"stop_sequence":null}},"usage":{{"output_tokens":{output}}}}}"#
        ),
    )
}

/// The event that ends a well-formed stream.
pub(crate) const STOP: &[u8] = b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

/// The keep-alive of the Anthropic mode: a `ping` event.
pub(crate) const PING: &[u8] = b"event: ping\ndata: {\"type\":\"ping\"}\n\n";

/// An `error` event of `kind` saying `message`.
pub(crate) fn error_event(kind: &str, message: &str) -> Vec<u8> {
    event("error", &error(kind, message))
}

/// An error body (or an `error` event's data): `{"type":"error","error":{"type":..,"message":..}}`.
pub(crate) fn error(kind: &str, message: &str) -> String {
    format!(
        r#"{{"type":"error","error":{{"type":{},"message":{}}}}}"#,
        json_string(kind),
        json_string(message)
    )
}

/// A whole message whose content is one text block of `content`.
pub(crate) fn message_text(content: &str) -> String {
    format!("{}{}{}", MESSAGE_PREFIX, text_block(content), message_suffix("end_turn"))
}

/// A whole message of one `tool_use` block.
pub(crate) fn message_tool_call(id: &str, name: &str, arguments: &str) -> String {
    format!(
        "{}{}{}",
        MESSAGE_PREFIX,
        tool_use_block(id, &json_string(name), &input(arguments)),
        message_suffix("tool_use")
    )
}

/// The text of a whole message, before its first content block.
pub(crate) const MESSAGE_PREFIX: &str =
    r#"{"id":"msg_hostile","type":"message","role":"assistant","model":"hostile","content":["#;

/// The text of a whole message after its last content block.
pub(crate) fn message_suffix(stop_reason: &str) -> String {
    format!(
        r#"],"stop_reason":{},"usage":{{"input_tokens":10,"output_tokens":1}}}}"#,
        json_string(stop_reason)
    )
}

/// A text block of `content`.
fn text_block(content: &str) -> String {
    format!(r#"{{"type":"text","text":{}}}"#, json_string(content))
}

/// A `tool_use` block; `name` and `input` are already JSON.
pub(crate) fn tool_use_block(id: &str, name: &str, input: &str) -> String {
    format!(r#"{{"type":"tool_use","id":{},"name":{name},"input":{input}}}"#, json_string(id))
}

/// `arguments` as a block's `input`: as they are when they are JSON, else as a JSON string.
pub(crate) fn input(arguments: &str) -> String {
    if serde_json::from_str::<serde::de::IgnoredAny>(arguments).is_ok() {
        arguments.to_owned()
    } else {
        json_string(arguments)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    fn parse(text: &str) -> Value {
        serde_json::from_str(text).expect("valid JSON")
    }

    fn data(event: &[u8]) -> Value {
        let text = std::str::from_utf8(event).expect("UTF-8");
        let (head, rest) = text.split_once('\n').expect("two lines");
        let kind = head.strip_prefix("event: ").expect("an event line");
        let json = parse(rest.strip_prefix("data: ").and_then(|t| t.strip_suffix("\n\n")).expect("framed"));
        assert_eq!(json["type"], kind, "the event name is its type");
        json
    }

    #[test]
    fn every_text_is_valid_json_in_the_api_shape() {
        let hostile = "\"quoted\" \\ \u{1b}[2J \u{9b}";
        assert_eq!(parse(&message_text(hostile))["content"][0]["text"], hostile);
        let call = parse(&message_tool_call("c0", hostile, "not json"));
        assert_eq!(
            (&call["content"][0]["name"], &call["content"][0]["input"]),
            (&Value::from(hostile), &Value::from("not json"))
        );
        assert_eq!(
            parse(&message_tool_call("c0", "t", r#"{"input":42}"#))["content"][0]["input"]["input"],
            42
        );
        assert_eq!(parse(&error("overloaded_error", hostile))["error"]["message"], hostile);
        assert_eq!(data(&start_event())["message"]["usage"]["input_tokens"], 10);
        assert_eq!(data(&text_event(0, hostile))["delta"]["text"], hostile);
        assert_eq!(data(&call_start_event(3, "c3", "t"))["content_block"]["id"], "c3");
        assert_eq!(data(&arguments_event(3, "{\"a\""))["delta"]["partial_json"], "{\"a\"");
        assert_eq!(data(&usage_event(7, None))["usage"]["output_tokens"], 7);
        assert_eq!(data(STOP)["type"], "message_stop");
        assert_eq!(data(PING)["type"], "ping");
        assert_eq!(data(&error_event("overloaded_error", "x"))["error"]["type"], "overloaded_error");
        assert_eq!(data(&stop_event(2))["index"], 2);
        assert_eq!(data(&text_start_event(0))["content_block"]["type"], "text");
    }
}
