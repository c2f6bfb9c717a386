//! The Messages API wire format: the request body sent, and the shapes read back.
//!
//! # Invariants
//!
//! - The request carries what the conversation holds, in the API's shape: every system message
//!   goes to the top-level `system` (joined by blank lines, in order, the options' notice last,
//!   as the request's last instruction); user texts and tool
//!   results are `user` content blocks, assistant texts and tool calls `assistant` blocks
//!   (`text`, then `tool_use` with the call's id, name and arguments as the `input` object); a
//!   tool result is a `tool_result` block with the id of the call it answers and `is_error` when
//!   the call failed. Consecutive messages of one role become one message, so the results of one
//!   reply's calls travel together in the user message that follows it, as the API requires.
//! - What the API would refuse is left out rather than sent: an empty text block, a message left
//!   with no block. Arguments that are not a JSON object (invalid text the model sent, which
//!   binding already turned into an error result) are sent as `{}`: the API takes only an object.
//! - `max_tokens` is always present: the run's cap, else the configured default. `tool_choice` is
//!   sent with the tools, and neither without tools.
//! - The sampling options go as `temperature`, `top_p` and `stop_sequences`, each only when the
//!   run sets it (the transport refuses a seed, and a temperature above 1, before a body is
//!   built).
//! - The API key is never part of a body: it travels in a header only.
//! - Response shapes are lenient about what may be absent or `null` (ids, usage, cache counts);
//!   what is present must have the right JSON type. Reading keeps no more than it uses: the raw
//!   text of tool inputs and error objects borrowed from the reply (never a `serde_json::Value`
//!   tree), unknown block kinds skipped unread, and a count, not a list, when tool calls are only
//!   counted.

use std::borrow::Cow;

use loopbound::Message;
use loopbound::transport::{ChatRequest, ToolCall, ToolDefinition, Usage};
use loopbound_provider::json::{Count, Counted};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::config::ToolChoice;

/// Whether a request asks for a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// One JSON reply.
    Whole,
    /// Server-sent events.
    Stream,
}

/// What the configuration adds to every request.
#[derive(Clone, Copy, Debug)]
pub struct Settings<'a> {
    /// The model.
    pub model: &'a str,
    /// The output cap when the run sets none.
    pub max_tokens: u32,
    /// The tool choice sent with the tools.
    pub tool_choice: ToolChoice,
}

#[derive(Serialize)]
struct RequestBody<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<String>,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<WireToolChoice>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop_sequences: &'a [String],
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Role {
    User,
    Assistant,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: Role,
    content: Vec<Block<'a>>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        text: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Input<'a>,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a str,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

/// A call's arguments as the `input` object: the JSON text as sent when it is an object, else
/// `{}`.
struct Input<'a>(Option<&'a RawValue>);

impl<'a> Input<'a> {
    fn of(arguments: &'a str) -> Self {
        let object = serde_json::from_str::<&RawValue>(arguments)
            .ok()
            .filter(|raw| raw.get().trim_start().starts_with('{'));
        Self(object)
    }
}

impl Serialize for Input<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Some(raw) => raw.serialize(serializer),
            None => serializer.serialize_map(Some(0))?.end(),
        }
    }
}

#[derive(Serialize)]
struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a serde_json::Value,
}

#[derive(Serialize)]
struct WireToolChoice {
    r#type: &'static str,
}

impl<'a> From<&'a ToolDefinition> for WireTool<'a> {
    fn from(tool: &'a ToolDefinition) -> Self {
        Self { name: &tool.name, description: &tool.description, input_schema: &tool.parameters }
    }
}

/// The role and content blocks of one conversation message (a system message has none: it goes
/// to `system`).
fn blocks(message: &Message) -> Option<(Role, Vec<Block<'_>>)> {
    fn text(text: &str) -> Option<Block<'_>> {
        (!text.is_empty()).then_some(Block::Text { text })
    }
    match message {
        Message::System { .. } => None,
        Message::User { content, .. } => Some((Role::User, text(content).into_iter().collect())),
        Message::Assistant { content, tool_calls, .. } => {
            let mut blocks: Vec<Block<'_>> = content.as_deref().and_then(text).into_iter().collect();
            blocks.extend(tool_calls.iter().map(|call: &ToolCall| Block::ToolUse {
                id: &call.id,
                name: &call.name,
                input: Input::of(&call.arguments),
            }));
            Some((Role::Assistant, blocks))
        }
        Message::Tool { call_id, content, is_error, .. } => {
            Some((Role::User, vec![Block::ToolResult { tool_use_id: call_id, content, is_error: *is_error }]))
        }
    }
}

/// The conversation as the API's messages: consecutive messages of one role merged, empty ones
/// left out.
fn messages<'a>(conversation: &'a [Message]) -> Vec<WireMessage<'a>> {
    let mut out: Vec<WireMessage<'a>> = Vec::new();
    for (role, content) in conversation.iter().filter_map(blocks) {
        if content.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.role == role => last.content.extend(content),
            _ => out.push(WireMessage { role, content }),
        }
    }
    out
}

/// The system messages' texts and the notice after them, joined by blank lines; `None`
/// without any.
fn system(conversation: &[Message], notice: Option<&str>) -> Option<String> {
    let texts: Vec<&str> = conversation
        .iter()
        .filter_map(|message| match message {
            Message::System { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .chain(notice)
        .filter(|text| !text.is_empty())
        .collect();
    (!texts.is_empty()).then(|| texts.join("\n\n"))
}

/// The JSON body of a Messages API request.
///
/// ```
/// use loopbound::Message;
/// use loopbound::transport::{ChatOptions, ChatRequest};
/// use loopbound_anthropic::ToolChoice;
/// use loopbound_anthropic::wire::{Mode, Settings, request_body};
///
/// let messages = [Message::system("Be brief."), Message::user("Hello")];
/// let options = ChatOptions::default().with_max_output_tokens(800);
/// let cancel = tokio_util::sync::CancellationToken::new();
/// let settings = Settings { model: "m", max_tokens: 4096, tool_choice: ToolChoice::Auto };
/// let body = request_body(settings, &ChatRequest::new(&messages, &[], &options, &cancel), Mode::Whole);
/// assert_eq!(
///     body,
///     br#"{"model":"m","max_tokens":800,"system":"Be brief.","messages":[{"role":"user","content":[{"type":"text","text":"Hello"}]}]}"#
/// );
///
/// let options = ChatOptions::default().with_temperature(0.5)?.with_top_p(0.9)?.with_stop_sequences(["END"])?;
/// let body = request_body(settings, &ChatRequest::new(&messages[1..], &[], &options, &cancel), Mode::Whole);
/// assert_eq!(
///     body,
///     br#"{"model":"m","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"Hello"}]}],"temperature":0.5,"top_p":0.9,"stop_sequences":["END"]}"#
/// );
/// # Ok::<(), loopbound::transport::OptionError>(())
/// ```
#[must_use]
pub fn request_body(settings: Settings<'_>, request: &ChatRequest<'_>, mode: Mode) -> Vec<u8> {
    let tools: Vec<WireTool<'_>> = request.tools.iter().map(WireTool::from).collect();
    let tool_choice = (!tools.is_empty()).then(|| WireToolChoice { r#type: settings.tool_choice.name() });
    let body = RequestBody {
        model: settings.model,
        max_tokens: request.options.max_output_tokens.unwrap_or(settings.max_tokens),
        system: system(request.messages, request.options.notice.as_deref()),
        messages: messages(request.messages),
        tools,
        tool_choice,
        temperature: request.options.temperature(),
        top_p: request.options.top_p(),
        stop_sequences: request.options.stop_sequences(),
        stream: mode == Mode::Stream,
    };
    // Serialising borrowed strings, raw JSON and an existing `serde_json::Value` into memory
    // cannot fail.
    serde_json::to_vec(&body).unwrap_or_default()
}

/// A whole Messages API reply (`"type": "message"`), or an error object sent with a success.
#[derive(Debug, Deserialize)]
pub(crate) struct MessageBody<'a> {
    #[serde(borrow)]
    pub(crate) content: Option<Vec<WireBlock<'a>>>,
    pub(crate) usage: Option<WireUsage>,
    #[serde(borrow)]
    pub(crate) error: Option<&'a RawValue>,
}

/// One content block: the fields of every kind this transport reads, the others left unread.
#[derive(Debug, Deserialize)]
pub(crate) struct WireBlock<'a> {
    #[serde(rename = "type", borrow)]
    pub(crate) kind: Cow<'a, str>,
    pub(crate) text: Option<String>,
    pub(crate) id: Option<String>,
    pub(crate) name: Option<String>,
    #[serde(borrow)]
    pub(crate) input: Option<&'a RawValue>,
}

/// Token counts as the API reports them: input, cache reads and cache writes are counted apart.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
#[allow(clippy::struct_field_names, reason = "the fields are named as the API names them")]
pub(crate) struct WireUsage {
    pub(crate) input_tokens: Option<u64>,
    pub(crate) output_tokens: Option<u64>,
    pub(crate) cache_read_input_tokens: Option<u64>,
    pub(crate) cache_creation_input_tokens: Option<u64>,
}

impl WireUsage {
    /// These counts, updated by the fields a later report carries (a stream's `message_delta`
    /// reports cumulative counts: each present field replaces the one before).
    pub(crate) fn updated(self, later: Self) -> Self {
        Self {
            input_tokens: later.input_tokens.or(self.input_tokens),
            output_tokens: later.output_tokens.or(self.output_tokens),
            cache_read_input_tokens: later.cache_read_input_tokens.or(self.cache_read_input_tokens),
            cache_creation_input_tokens: later
                .cache_creation_input_tokens
                .or(self.cache_creation_input_tokens),
        }
    }

    /// The core's usage: every input token counted (plain, read from the cache, written to it),
    /// the cache reads and writes said apart.
    pub(crate) fn usage(self) -> Usage {
        let read = self.cache_read_input_tokens.unwrap_or(0);
        let written = self.cache_creation_input_tokens.unwrap_or(0);
        let input = self.input_tokens.unwrap_or(0).saturating_add(read).saturating_add(written);
        Usage::new(input, self.output_tokens.unwrap_or(0)).with_cached_input(read).with_cache_write(written)
    }
}

/// The number of `tool_use` blocks of a whole reply, read without keeping any of them: a reply is
/// measured before it is parsed, so a flood of calls costs no memory.
#[derive(Debug, Deserialize)]
pub(crate) struct CallCount<'a> {
    #[serde(default, borrow)]
    pub(crate) content: Count<Kind<'a>>,
}

/// A block's kind only: it counts when it is a `tool_use` block.
#[derive(Deserialize)]
pub(crate) struct Kind<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
}

impl<'de: 'a, 'a> Counted<'de> for Kind<'a> {
    fn counts(&self) -> bool {
        self.kind.as_deref() == Some("tool_use")
    }
}

#[cfg(test)]
mod tests {
    use loopbound::transport::{ChatOptions, ToolCall};
    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    use super::*;

    fn body(
        messages: &[Message],
        tools: &[ToolDefinition],
        options: &ChatOptions,
        mode: Mode,
    ) -> serde_json::Value {
        let cancel = CancellationToken::new();
        let settings = Settings { model: "m", max_tokens: 4096, tool_choice: ToolChoice::Auto };
        let request = ChatRequest::new(messages, tools, options, &cancel);
        serde_json::from_slice(&request_body(settings, &request, mode)).unwrap()
    }

    #[test]
    fn every_message_kind_and_tool_is_written_in_the_messages_shape() {
        let messages = [
            Message::system("Be brief."),
            Message::user("Review 42."),
            Message::assistant_parts(
                Some("Reading.".into()),
                vec![
                    ToolCall::new("c1", "read_ticket", r#"{"input":42}"#),
                    ToolCall::new("c2", "read_ticket", r#"{"input": 7.0}"#),
                ],
            ),
            Message::tool_result("c1", "Ticket 42"),
            Message::tool_error("c2", "Error: nope."),
            Message::assistant_parts(Some("Done.".into()), vec![]),
            Message::system("Answer in English."),
        ];
        let tools = [ToolDefinition::new(
            "read_ticket",
            "Read a ticket.",
            json!({"type": "object", "properties": {"input": {"type": "integer"}}}),
        )];
        let options = ChatOptions::default();
        assert_eq!(
            body(&messages, &tools, &options, Mode::Stream),
            json!({
                "model": "m",
                "max_tokens": 4096,
                "system": "Be brief.\n\nAnswer in English.",
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "Review 42."}]},
                    {"role": "assistant", "content": [
                        {"type": "text", "text": "Reading."},
                        {"type": "tool_use", "id": "c1", "name": "read_ticket", "input": {"input": 42}},
                        {"type": "tool_use", "id": "c2", "name": "read_ticket", "input": {"input": 7.0}}
                    ]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "c1", "content": "Ticket 42"},
                        {"type": "tool_result", "tool_use_id": "c2", "content": "Error: nope.", "is_error": true}
                    ]},
                    {"role": "assistant", "content": [{"type": "text", "text": "Done."}]}
                ],
                "tools": [{
                    "name": "read_ticket",
                    "description": "Read a ticket.",
                    "input_schema": {"type": "object", "properties": {"input": {"type": "integer"}}}
                }],
                "tool_choice": {"type": "auto"},
                "stream": true
            })
        );
    }

    #[test]
    fn arguments_that_are_not_an_object_are_sent_as_an_empty_object_and_kept_otherwise() {
        let calls = ["", "{\"input\":", "42", "[1]", "null", " {\"a\": 1} "];
        let messages = [Message::assistant_parts(
            None,
            calls.iter().enumerate().map(|(n, args)| ToolCall::new(format!("c{n}"), "t", *args)).collect(),
        )];
        let sent = body(&messages, &[], &ChatOptions::default(), Mode::Whole);
        let inputs: Vec<&serde_json::Value> =
            sent["messages"][0]["content"].as_array().unwrap().iter().map(|block| &block["input"]).collect();
        let empty = json!({});
        assert_eq!(inputs, [&empty, &empty, &empty, &empty, &empty, &json!({"a": 1})]);
    }

    #[test]
    fn empty_texts_and_messages_are_left_out_and_the_run_cap_wins() {
        let messages = [
            Message::user(""),
            Message::user("Hi"),
            Message::user("again"),
            Message::assistant_parts(Some(String::new()), vec![]),
            Message::system(""),
        ];
        let options = ChatOptions::default().with_max_output_tokens(12);
        assert_eq!(
            body(&messages, &[], &options, Mode::Whole),
            json!({
                "model": "m",
                "max_tokens": 12,
                "messages": [{"role": "user", "content": [
                    {"type": "text", "text": "Hi"}, {"type": "text", "text": "again"}
                ]}]
            })
        );
    }

    #[test]
    fn the_notice_ends_the_system_prompt_or_is_the_whole_of_it() {
        let options = ChatOptions::default().with_notice("2 model calls left.");
        let messages = [Message::system("Be brief."), Message::user("Hi"), Message::system("In English.")];
        let sent = body(&messages, &[], &options, Mode::Whole);
        assert_eq!(sent["system"], "Be brief.\n\nIn English.\n\n2 model calls left.");
        let alone = body(&[Message::user("Hi")], &[], &options, Mode::Whole);
        assert_eq!(alone["system"], "2 model calls left.");
        let empty = body(&[Message::user("Hi")], &[], &ChatOptions::default().with_notice(""), Mode::Whole);
        assert_eq!(empty.get("system"), None);
    }

    #[test]
    fn cumulative_usage_keeps_the_latest_of_each_field_and_counts_every_input_token() {
        let start = WireUsage {
            input_tokens: Some(10),
            output_tokens: Some(1),
            cache_read_input_tokens: Some(100),
            cache_creation_input_tokens: Some(20),
        };
        let delta = WireUsage { output_tokens: Some(9), ..WireUsage::default() };
        let usage = start.updated(delta).usage();
        assert_eq!(usage, Usage::new(130, 9).with_cached_input(100).with_cache_write(20));
        let huge = WireUsage { input_tokens: Some(u64::MAX), cache_read_input_tokens: Some(5), ..start };
        assert_eq!(huge.usage().input_tokens, u64::MAX, "sums saturate");
    }
}
