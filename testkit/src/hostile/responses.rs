//! The texts of the Responses mode: OpenAI Responses API replies and stream events (its error
//! bodies are the chat API's, [`payload::error`](crate::hostile::payload::error)).
//!
//! # Invariants
//!
//! - Every text here is valid JSON (or a valid server-sent event around valid JSON): every string
//!   that comes from a caller or a client goes through [`json_string`], which escapes it.
//! - Every event is framed as the API frames it, `event: <type>` then `data: <json>`, its data's
//!   `type` the event's name.
//! - Text is output item 0; call `index` is output item `index`, its `call_id` the id given.

use crate::hostile::messages::event;
use crate::hostile::payload::json_string;

/// The fields every response starts with.
const HEAD: &str = r#""id":"resp_hostile","object":"response","created_at":0,"model":"hostile""#;

/// The usage of every finished response.
const USAGE: &str =
    r#""usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens":5}"#;

/// An event of type `kind` whose other fields are `fields` (JSON members, without braces).
fn typed(kind: &str, fields: &str) -> Vec<u8> {
    event(kind, &format!(r#"{{"type":"{kind}",{fields}}}"#))
}

/// The events that open every stream: the response created, then in progress.
pub(crate) fn open_events() -> Vec<u8> {
    let response = format!(r#""response":{{{HEAD},"status":"in_progress","output":[]}}"#);
    [typed("response.created", &response), typed("response.in_progress", &response)].concat()
}

/// The message item (output item 0) added, before its text.
pub(crate) fn text_open_event() -> Vec<u8> {
    typed(
        "response.output_item.added",
        r#""output_index":0,"item":{"type":"message","id":"msg_hostile","role":"assistant","status":"in_progress","content":[]}"#,
    )
}

/// A delta of the message's text.
pub(crate) fn text_event(text: &str) -> Vec<u8> {
    typed(
        "response.output_text.delta",
        &format!(
            r#""item_id":"msg_hostile","output_index":0,"content_index":0,"delta":{}"#,
            json_string(text)
        ),
    )
}

/// The message item done.
pub(crate) fn text_close_event() -> Vec<u8> {
    typed(
        "response.output_item.done",
        r#""output_index":0,"item":{"type":"message","id":"msg_hostile","role":"assistant","status":"completed","content":[]}"#,
    )
}

/// The `function_call` item `index` added, with its id and name and no arguments yet.
pub(crate) fn call_open_event(index: usize, id: &str, name: &str) -> Vec<u8> {
    typed(
        "response.output_item.added",
        &format!(
            r#""output_index":{index},"item":{{"type":"function_call","id":"fc_{index}","call_id":{},"name":{},"arguments":"","status":"in_progress"}}"#,
            json_string(id),
            json_string(name)
        ),
    )
}

/// A fragment of call `index`'s arguments.
pub(crate) fn arguments_event(index: usize, fragment: &str) -> Vec<u8> {
    typed(
        "response.function_call_arguments.delta",
        &format!(r#""item_id":"fc_{index}","output_index":{index},"delta":{}"#, json_string(fragment)),
    )
}

/// A response still in progress that reports `output` tokens so far.
pub(crate) fn usage_event(output: u64) -> Vec<u8> {
    typed(
        "response.in_progress",
        &format!(
            r#""response":{{{HEAD},"status":"in_progress","output":[],"usage":{{"input_tokens":10,"output_tokens":{output}}}}}"#
        ),
    )
}

/// An overload reported inside the stream: an `error` event.
pub(crate) fn overloaded_event() -> Vec<u8> {
    typed("error", r#""code":"server_error","message":"Overloaded","param":null"#)
}

/// The event that ends a well-formed stream: the response completed, with its usage.
pub(crate) fn completed_event() -> Vec<u8> {
    typed("response.completed", &format!(r#""response":{{{HEAD},"status":"completed","output":[],{USAGE}}}"#))
}

/// A whole response whose output is one message of `content`.
pub(crate) fn response_text(content: &str) -> String {
    format!(
        r#"{OUTPUT_PREFIX}{{"type":"message","id":"msg_hostile","role":"assistant","status":"completed","content":[{{"type":"output_text","text":{},"annotations":[]}}]}}{}"#,
        json_string(content),
        output_suffix()
    )
}

/// A whole response of one `function_call`.
pub(crate) fn response_call(id: &str, name: &str, arguments: &str) -> String {
    format!(
        "{OUTPUT_PREFIX}{}{}",
        call_item(id, &json_string(name), &json_string(arguments)),
        output_suffix()
    )
}

/// The text of a whole response, before its first output item.
pub(crate) const OUTPUT_PREFIX: &str = r#"{"id":"resp_hostile","object":"response","created_at":0,"model":"hostile","status":"completed","output":["#;

/// The text of a whole response, after its last output item.
pub(crate) fn output_suffix() -> String {
    format!("],{USAGE}}}")
}

/// One `function_call` item; `name` and `arguments` are already JSON string literals.
pub(crate) fn call_item(id: &str, name: &str, arguments: &str) -> String {
    format!(
        r#"{{"type":"function_call","call_id":{},"name":{name},"arguments":{arguments}}}"#,
        json_string(id)
    )
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    fn parse(text: &str) -> Value {
        serde_json::from_str(text).expect("valid JSON")
    }

    /// The data of each event of `events`, checked to be named by its type.
    fn data(events: &[u8]) -> Vec<Value> {
        let text = std::str::from_utf8(events).expect("UTF-8");
        text.split_terminator("\n\n")
            .map(|one| {
                let (head, rest) = one.split_once('\n').expect("two lines");
                let kind = head.strip_prefix("event: ").expect("an event line");
                let json = parse(rest.strip_prefix("data: ").expect("a data line"));
                assert_eq!(json["type"], kind, "the event name is its type");
                json
            })
            .collect()
    }

    #[test]
    fn every_text_is_valid_json_in_the_api_shape() {
        let hostile = "\"quoted\" \\ \u{1b}[2J \u{9b}";
        assert_eq!(parse(&response_text(hostile))["output"][0]["content"][0]["text"], hostile);
        let call = parse(&response_call("c0", hostile, "not json"));
        assert_eq!(
            (&call["output"][0]["name"], &call["output"][0]["arguments"]),
            (&Value::from(hostile), &Value::from("not json"))
        );
        assert_eq!(call["usage"]["input_tokens"], 10);
        assert_eq!(data(&open_events()).len(), 2);
        assert_eq!(data(&text_open_event())[0]["item"]["type"], "message");
        assert_eq!(data(&text_event(hostile))[0]["delta"], hostile);
        assert_eq!(data(&text_close_event())[0]["output_index"], 0);
        assert_eq!(data(&call_open_event(3, "c3", hostile))[0]["item"]["name"], hostile);
        assert_eq!(data(&arguments_event(3, "{\"a\""))[0]["delta"], "{\"a\"");
        assert_eq!(data(&usage_event(7))[0]["response"]["usage"]["output_tokens"], 7);
        assert_eq!(data(&overloaded_event())[0]["code"], "server_error");
        assert_eq!(data(&completed_event())[0]["response"]["status"], "completed");
    }
}
