//! The body of a Responses API request (`POST {base}/responses`).
//!
//! # Invariants
//!
//! - Stateless: every request says `store: false` and carries the whole conversation as its
//!   `input`; nothing refers to an earlier response (no `previous_response_id`), so the server
//!   keeps nothing between calls and a run can move to another server mid-way.
//! - The conversation is sent in order, one input item per part: system and user messages as
//!   messages of their role; an assistant message as its text (a message, when there is text or
//!   no call) followed by one `function_call` item per call, with its `call_id` and JSON-text
//!   arguments unchanged; a tool result as a `function_call_output` item with the `call_id` it
//!   answers. System messages stay items in place rather than one `instructions` field, since a
//!   conversation may hold several anywhere (the options' notice is the last item, a system one).
//! - Tools are `function` tools with `strict: false`: the API's default (`true`) would refuse the
//!   schemas core derives, which strict mode does not accept. Empty `tools` are left out.
//! - The run's output cap travels as `max_output_tokens`; without a cap, it is left out. The
//!   sampling options the API has travel as `temperature` and `top_p`, each only when set (the
//!   transport refuses stop sequences and a seed before a body is built).
//! - The API key is never part of a body: it travels in a header only.

use loopbound::Message;
use loopbound::transport::{ChatRequest, ToolCall, ToolDefinition};
use serde::Serialize;

#[derive(Serialize)]
struct RequestBody<'a> {
    model: &'a str,
    input: Vec<Item<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    store: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
}

/// One input item.
#[derive(Serialize)]
#[serde(untagged)]
enum Item<'a> {
    /// Typed: the API takes an untyped message too, and llama.cpp's server refuses an untyped
    /// assistant message ("Cannot determine type of 'item'").
    Message {
        r#type: &'static str,
        role: &'static str,
        content: &'a str,
    },
    Call {
        r#type: &'static str,
        call_id: &'a str,
        name: &'a str,
        arguments: &'a str,
    },
    Output {
        r#type: &'static str,
        call_id: &'a str,
        output: &'a str,
    },
}

#[derive(Serialize)]
struct Tool<'a> {
    r#type: &'static str,
    name: &'a str,
    description: &'a str,
    parameters: &'a serde_json::Value,
    strict: bool,
}

impl<'a> Item<'a> {
    fn call(call: &'a ToolCall) -> Self {
        Self::Call {
            r#type: "function_call",
            call_id: &call.id,
            name: &call.name,
            arguments: &call.arguments,
        }
    }
}

/// Appends the items of `message` to `items`.
fn push_items<'a>(message: &'a Message, items: &mut Vec<Item<'a>>) {
    match message {
        Message::System { content, .. } => {
            items.push(Item::Message { r#type: "message", role: "system", content });
        }
        Message::User { content, .. } => {
            items.push(Item::Message { r#type: "message", role: "user", content });
        }
        Message::Assistant { content, tool_calls, .. } => {
            if content.is_some() || tool_calls.is_empty() {
                items.push(Item::Message {
                    r#type: "message",
                    role: "assistant",
                    content: content.as_deref().unwrap_or_default(),
                });
            }
            items.extend(tool_calls.iter().map(Item::call));
        }
        // The API has no error flag: the text already says it is an error.
        Message::Tool { call_id, content, .. } => {
            items.push(Item::Output { r#type: "function_call_output", call_id, output: content });
        }
    }
}

impl<'a> From<&'a ToolDefinition> for Tool<'a> {
    fn from(tool: &'a ToolDefinition) -> Self {
        Self {
            r#type: "function",
            name: &tool.name,
            description: &tool.description,
            parameters: &tool.parameters,
            strict: false,
        }
    }
}

/// The JSON body of a Responses API request for `model`, streamed or not.
///
/// ```
/// use loopbound::Message;
/// use loopbound::transport::{ChatOptions, ChatRequest};
/// use loopbound_openai::responses::request::request_body;
///
/// let messages = [Message::user("Hello")];
/// let options = ChatOptions::default().with_max_output_tokens(800);
/// let cancel = tokio_util::sync::CancellationToken::new();
/// let request = ChatRequest::new(&messages, &[], &options, &cancel);
/// assert_eq!(
///     request_body("m", &request, false),
///     br#"{"model":"m","input":[{"type":"message","role":"user","content":"Hello"}],"max_output_tokens":800,"store":false}"#
/// );
///
/// let options = ChatOptions::default().with_temperature(0.2)?.with_top_p(0.9)?;
/// let request = ChatRequest::new(&messages, &[], &options, &cancel);
/// assert_eq!(
///     request_body("m", &request, false),
///     br#"{"model":"m","input":[{"type":"message","role":"user","content":"Hello"}],"temperature":0.2,"top_p":0.9,"store":false}"#
/// );
/// # Ok::<(), loopbound::transport::OptionError>(())
/// ```
#[must_use]
pub fn request_body(model: &str, request: &ChatRequest<'_>, stream: bool) -> Vec<u8> {
    let mut input = Vec::with_capacity(request.messages.len() + 1);
    for message in request.messages {
        push_items(message, &mut input);
    }
    if let Some(content) = request.options.notice.as_deref() {
        input.push(Item::Message { r#type: "message", role: "system", content });
    }
    let body = RequestBody {
        model,
        input,
        tools: request.tools.iter().map(Tool::from).collect(),
        max_output_tokens: request.options.max_output_tokens,
        temperature: request.options.temperature(),
        top_p: request.options.top_p(),
        store: false,
        stream,
    };
    // Serialising borrowed strings and an existing `serde_json::Value` into memory cannot fail.
    serde_json::to_vec(&body).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use loopbound::transport::ChatOptions;
    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    use super::*;

    #[test]
    fn every_message_kind_and_tool_is_an_input_item_in_order() {
        let messages = [
            Message::system("Be brief."),
            Message::user("Review 42."),
            Message::assistant_parts(None, vec![ToolCall::new("c1", "read_ticket", r#"{"input":42}"#)]),
            Message::tool_result("c1", "Ticket 42"),
            Message::assistant_parts(
                Some("Two more.".into()),
                vec![ToolCall::new("c2", "a", "{}"), ToolCall::new("c3", "b", "")],
            ),
            Message::tool_error("c2", "Error: nope."),
            Message::tool_result("c3", "ok"),
            Message::assistant_parts(Some("Done.".into()), vec![]),
            Message::assistant_parts(None, vec![]),
        ];
        let tools = [ToolDefinition::new(
            "read_ticket",
            "Read a ticket.",
            json!({"type": "object", "properties": {"input": {"type": "integer"}}}),
        )];
        let options = ChatOptions::default().with_max_output_tokens(64).with_notice("2 model calls left.");
        let cancel = CancellationToken::new();
        let request = ChatRequest::new(&messages, &tools, &options, &cancel);
        let body: serde_json::Value = serde_json::from_slice(&request_body("m", &request, true)).unwrap();
        assert_eq!(
            body,
            json!({
                "model": "m",
                "input": [
                    {"type": "message", "role": "system", "content": "Be brief."},
                    {"type": "message", "role": "user", "content": "Review 42."},
                    {"type": "function_call", "call_id": "c1", "name": "read_ticket", "arguments": "{\"input\":42}"},
                    {"type": "function_call_output", "call_id": "c1", "output": "Ticket 42"},
                    {"type": "message", "role": "assistant", "content": "Two more."},
                    {"type": "function_call", "call_id": "c2", "name": "a", "arguments": "{}"},
                    {"type": "function_call", "call_id": "c3", "name": "b", "arguments": ""},
                    {"type": "function_call_output", "call_id": "c2", "output": "Error: nope."},
                    {"type": "function_call_output", "call_id": "c3", "output": "ok"},
                    {"type": "message", "role": "assistant", "content": "Done."},
                    {"type": "message", "role": "assistant", "content": ""},
                    {"type": "message", "role": "system", "content": "2 model calls left."}
                ],
                "tools": [{
                    "type": "function",
                    "name": "read_ticket",
                    "description": "Read a ticket.",
                    "parameters": {"type": "object", "properties": {"input": {"type": "integer"}}},
                    "strict": false
                }],
                "max_output_tokens": 64,
                "store": false,
                "stream": true
            })
        );
    }

    #[test]
    fn without_a_cap_or_tools_neither_is_sent_and_store_is_always_false() {
        let messages = [Message::user("Hi")];
        let options = ChatOptions::default();
        let cancel = CancellationToken::new();
        let request = ChatRequest::new(&messages, &[], &options, &cancel);
        assert_eq!(
            request_body("m", &request, true),
            br#"{"model":"m","input":[{"type":"message","role":"user","content":"Hi"}],"store":false,"stream":true}"#
        );
        assert_eq!(
            request_body("m", &request, false),
            br#"{"model":"m","input":[{"type":"message","role":"user","content":"Hi"}],"store":false}"#
        );
    }
}
