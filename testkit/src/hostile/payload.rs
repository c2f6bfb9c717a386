//! The texts the server sends: `chat.completion` bodies, `chat.completion.chunk` events, error
//! bodies and the server-sent-event framing around them.
//!
//! # Invariants
//!
//! - Every text here is valid JSON (or a valid server-sent event around valid JSON): every string
//!   that comes from a caller or a client goes through [`json_string`], which escapes it.
//! - The texts are built by hand, in a fixed key order, so their lengths are known in advance
//!   (the call flood's `Content-Length` depends on it: see [`tool_call_item`]).

use serde_json::Value;

/// The `id` of every completion and chunk.
pub(crate) const ID: &str = "chatcmpl-hostile";
/// The `model` of every completion and chunk.
pub(crate) const MODEL: &str = "hostile";
/// The event that ends a well-formed stream.
pub(crate) const DONE: &[u8] = b"data: [DONE]\n\n";
/// The comment event of [`Behaviour::KeepAliveForever`](crate::hostile::Behaviour::KeepAliveForever).
pub(crate) const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";
/// The text of a whole `chat.completion` with tool calls, before the first call.
pub(crate) const CALLS_PREFIX: &str = concat!(
    r#"{"id":"chatcmpl-hostile","object":"chat.completion","created":0,"model":"hostile","#,
    r#""choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":["#
);
/// The text of a whole `chat.completion` with tool calls, after the last call.
pub(crate) const CALLS_SUFFIX: &str = r#"]},"finish_reason":"tool_calls"}]}"#;

/// `text` as a JSON string literal, quotes included.
pub(crate) fn json_string(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

/// `json` framed as one server-sent event, `data: {json}\n\n`.
pub(crate) fn event(json: &str) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(json.len() + 8);
    bytes.extend_from_slice(b"data: ");
    bytes.extend_from_slice(json.as_bytes());
    bytes.extend_from_slice(b"\n\n");
    bytes
}

/// A `chat.completion.chunk` whose `choices[0].delta` is the JSON text `delta`, with
/// `finish_reason` `finish` (or `null`).
pub(crate) fn chunk(delta: &str, finish: Option<&str>) -> String {
    let finish = finish.map_or_else(|| "null".to_owned(), json_string);
    format!(
        r#"{{"id":"{ID}","object":"chat.completion.chunk","created":0,"model":"{MODEL}","choices":[{{"index":0,"delta":{delta},"finish_reason":{finish}}}]}}"#
    )
}

/// The event of the first chunk of every stream: the assistant's role and empty content.
pub(crate) fn role_event() -> Vec<u8> {
    event(&chunk(r#"{"role":"assistant","content":""}"#, None))
}

/// The event of a chunk whose delta is the content `text`.
pub(crate) fn content_event(text: &str) -> Vec<u8> {
    event(&chunk(&format!(r#"{{"content":{}}}"#, json_string(text)), None))
}

/// The event of a chunk whose delta carries the one tool-call item `item`.
pub(crate) fn tool_call_event(item: &str) -> Vec<u8> {
    event(&chunk(&format!(r#"{{"tool_calls":[{item}]}}"#), None))
}

/// The event of the last chunk of a stream: an empty delta and `finish_reason` `finish`.
pub(crate) fn finish_event(finish: &str) -> Vec<u8> {
    event(&chunk("{}", Some(finish)))
}

/// One tool-call item: `{"index":i,"id":id,"type":"function","function":{"name":..,
/// "arguments":..}}`, where `name` and `arguments` are already JSON string literals.
///
/// Its length is the length of its parts plus a constant, so a flood of such items has a length
/// known before it is written.
pub(crate) fn tool_call_item(index: usize, id: &str, name: &str, arguments: &str) -> String {
    format!(
        r#"{{"index":{index},"id":{},"type":"function","function":{{"name":{name},"arguments":{arguments}}}}}"#,
        json_string(id)
    )
}

/// A whole `chat.completion` whose message content is `content`.
pub(crate) fn completion_text(content: &str) -> String {
    format!(
        r#"{{"id":"{ID}","object":"chat.completion","created":0,"model":"{MODEL}","choices":[{{"index":0,"message":{{"role":"assistant","content":{}}},"finish_reason":"stop"}}]}}"#,
        json_string(content)
    )
}

/// A whole `chat.completion` with one tool call of id `id`, name `name` and arguments text
/// `arguments`.
pub(crate) fn completion_tool_call(id: &str, name: &str, arguments: &str) -> String {
    let item = tool_call_item(0, id, &json_string(name), &json_string(arguments));
    format!("{CALLS_PREFIX}{item}{CALLS_SUFFIX}")
}

/// An OpenAI-style error body.
pub(crate) fn error(message: &str, kind: &str, code: &str) -> String {
    format!(
        r#"{{"error":{{"message":{},"type":{},"code":{}}}}}"#,
        json_string(message),
        json_string(kind),
        json_string(code)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Value {
        serde_json::from_str(text).expect("valid JSON")
    }

    #[test]
    fn every_text_is_valid_json() {
        let hostile = "\"quoted\" \\ \u{1b}[2J \u{9b} \u{7f}";
        assert_eq!(parse(&completion_text(hostile))["choices"][0]["message"]["content"], hostile);
        let call = parse(&completion_tool_call("c0", hostile, hostile));
        assert_eq!(call["choices"][0]["message"]["tool_calls"][0]["function"]["name"], hostile);
        assert_eq!(call["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(parse(&error(hostile, "t", "c"))["error"]["message"], hostile);
        assert_eq!(parse(&chunk("{}", Some("stop")))["object"], "chat.completion.chunk");
        assert_eq!(parse(&format!("{CALLS_PREFIX}{CALLS_SUFFIX}"))["object"], "chat.completion");
    }

    #[test]
    fn events_are_framed() {
        let event = content_event("hi");
        let text = std::str::from_utf8(&event).expect("UTF-8");
        let json = text.strip_prefix("data: ").and_then(|t| t.strip_suffix("\n\n")).expect("framed");
        assert_eq!(parse(json)["choices"][0]["delta"]["content"], "hi");
    }
}
