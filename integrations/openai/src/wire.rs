//! The chat-completions wire format: the request body sent, and the shapes read back.
//!
//! # Invariants
//!
//! - The request carries exactly what the conversation holds: each message in order, tool
//!   calls with their ids and JSON-text arguments unchanged, tool results with the id of the
//!   call they answer. Empty `tools` and empty `tool_calls` are left out, since some servers
//!   refuse empty arrays.
//! - The run's output cap travels in the one field the configuration names
//!   (`max_completion_tokens` by default, or `max_tokens`), never in both; without a cap,
//!   neither is sent. The options' notice is the last message, a system one.
//! - The sampling options go as `temperature`, `top_p`, `stop` (an array) and `seed`, each only
//!   when the run sets it: a request without them is byte for byte what it was before they
//!   existed.
//! - The API key is never part of a body: it travels in a header only.
//! - Response shapes are lenient about what may be absent or `null` (ids, content, usage,
//!   choices in a usage-only chunk); what is present must have the right JSON type.
//! - Reading a reply keeps no more than it uses: one choice of a list of choices, the raw text of
//!   arguments and error objects borrowed from the reply (never a `serde_json::Value` tree, whose
//!   size could be many times the reply's), and a count, not a list, when tool calls are only
//!   counted.

use std::fmt;
use std::marker::PhantomData;

use loopbound::Message;
use loopbound::transport::{ChatRequest, ToolCall, ToolDefinition};
use loopbound_provider::json::Count;
use serde::de::{self, Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::config::OutputCapField;

/// Whether a request asks for a stream, and whether it asks for usage figures in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// One JSON reply.
    Whole,
    /// Server-sent events; `usage` adds `stream_options: {include_usage: true}`.
    Stream {
        /// Whether to ask for usage figures in the stream.
        usage: bool,
    },
}

#[derive(Serialize)]
struct RequestBody<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<i64>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: &'a str,
    },
    Assistant {
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireToolCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

#[derive(Serialize)]
struct WireToolCall<'a> {
    id: &'a str,
    r#type: &'static str,
    function: WireFunctionCall<'a>,
}

#[derive(Serialize)]
struct WireFunctionCall<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct WireTool<'a> {
    r#type: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a serde_json::Value,
}

impl<'a> From<&'a Message> for WireMessage<'a> {
    fn from(message: &'a Message) -> Self {
        match message {
            Message::System { content, .. } => Self::System { content },
            Message::User { content, .. } => Self::User { content },
            Message::Assistant { content, tool_calls, .. } => Self::Assistant {
                content: content.as_deref(),
                tool_calls: tool_calls.iter().map(WireToolCall::from).collect(),
            },
            // The wire format has no error flag: the text already says it is an error.
            Message::Tool { call_id, content, .. } => Self::Tool { tool_call_id: call_id, content },
        }
    }
}

impl<'a> From<&'a ToolCall> for WireToolCall<'a> {
    fn from(call: &'a ToolCall) -> Self {
        Self {
            id: &call.id,
            r#type: "function",
            function: WireFunctionCall { name: &call.name, arguments: &call.arguments },
        }
    }
}

impl<'a> From<&'a ToolDefinition> for WireTool<'a> {
    fn from(tool: &'a ToolDefinition) -> Self {
        Self {
            r#type: "function",
            function: WireFunction {
                name: &tool.name,
                description: &tool.description,
                parameters: &tool.parameters,
            },
        }
    }
}

/// The JSON body of a chat-completions request for `model`, its output cap in `cap_field`.
///
/// ```
/// use loopbound::Message;
/// use loopbound::transport::{ChatOptions, ChatRequest};
/// use loopbound_openai::OutputCapField;
/// use loopbound_openai::wire::{request_body, Mode};
///
/// let messages = [Message::user("Hello")];
/// let options = ChatOptions::default().with_max_output_tokens(800);
/// let cancel = tokio_util::sync::CancellationToken::new();
/// let request = ChatRequest::new(&messages, &[], &options, &cancel);
/// let body = request_body("m", OutputCapField::MaxCompletionTokens, &request, Mode::Whole);
/// assert_eq!(
///     body,
///     br#"{"model":"m","messages":[{"role":"user","content":"Hello"}],"max_completion_tokens":800}"#
/// );
///
/// // The sampling options, each only when set; the stop sequences as the array `stop`.
/// let options = ChatOptions::default().with_temperature(0.2)?.with_stop_sequences(["END"])?.with_seed(7);
/// let request = ChatRequest::new(&messages, &[], &options, &cancel);
/// let body = request_body("m", OutputCapField::MaxCompletionTokens, &request, Mode::Whole);
/// assert_eq!(
///     body,
///     br#"{"model":"m","messages":[{"role":"user","content":"Hello"}],"temperature":0.2,"stop":["END"],"seed":7}"#
/// );
/// # Ok::<(), loopbound::transport::OptionError>(())
/// ```
#[must_use]
pub fn request_body(
    model: &str,
    cap_field: OutputCapField,
    request: &ChatRequest<'_>,
    mode: Mode,
) -> Vec<u8> {
    let (stream, stream_options) = match mode {
        Mode::Whole => (false, None),
        Mode::Stream { usage } => (true, usage.then_some(StreamOptions { include_usage: true })),
    };
    let body = RequestBody {
        model,
        messages: request
            .messages
            .iter()
            .map(WireMessage::from)
            .chain(request.options.notice.as_deref().map(|content| WireMessage::System { content }))
            .collect(),
        tools: request.tools.iter().map(WireTool::from).collect(),
        max_completion_tokens: request
            .options
            .max_output_tokens
            .filter(|_| cap_field == OutputCapField::MaxCompletionTokens),
        max_tokens: request.options.max_output_tokens.filter(|_| cap_field == OutputCapField::MaxTokens),
        temperature: request.options.temperature(),
        top_p: request.options.top_p(),
        stop: request.options.stop_sequences(),
        seed: request.options.seed(),
        stream,
        stream_options,
    };
    // Serialising borrowed strings and an existing `serde_json::Value` into memory cannot fail.
    serde_json::to_vec(&body).unwrap_or_default()
}

/// A whole chat-completions reply.
#[derive(Debug, Deserialize)]
pub(crate) struct CompletionBody<'a> {
    #[serde(default, borrow)]
    pub(crate) choices: FirstChoice<Choice<'a>>,
    pub(crate) usage: Option<WireUsage>,
    #[serde(borrow)]
    pub(crate) error: Option<&'a RawValue>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Choice<'a> {
    pub(crate) index: Option<u32>,
    #[serde(borrow)]
    pub(crate) message: Option<ReplyMessage<'a>>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ReplyMessage<'a> {
    pub(crate) content: Option<String>,
    #[serde(borrow)]
    pub(crate) tool_calls: Option<Vec<ReplyToolCall<'a>>>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ReplyToolCall<'a> {
    pub(crate) id: Option<String>,
    #[serde(borrow)]
    pub(crate) function: ReplyFunction<'a>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ReplyFunction<'a> {
    pub(crate) name: String,
    #[serde(borrow)]
    pub(crate) arguments: Option<&'a RawValue>,
}

/// The number of tool calls of a whole reply's first choice, read without keeping any of them:
/// a reply is measured before it is parsed, so a flood of calls costs no memory.
#[derive(Debug, Deserialize)]
pub(crate) struct CallCount {
    #[serde(default)]
    pub(crate) choices: FirstChoice<CountedChoice>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct CountedChoice {
    index: Option<u32>,
    pub(crate) message: Option<CountedMessage>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct CountedMessage {
    #[serde(default)]
    pub(crate) tool_calls: Count<IgnoredAny>,
}

/// One streamed chunk (`chat.completion.chunk`).
#[derive(Debug, Deserialize)]
pub(crate) struct ChunkBody<'a> {
    #[serde(default, borrow)]
    pub(crate) choices: FirstChoice<ChunkChoice<'a>>,
    pub(crate) usage: Option<WireUsage>,
    #[serde(borrow)]
    pub(crate) error: Option<&'a RawValue>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ChunkChoice<'a> {
    pub(crate) index: Option<u32>,
    #[serde(borrow)]
    pub(crate) delta: Option<Delta<'a>>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Delta<'a> {
    pub(crate) content: Option<String>,
    #[serde(borrow)]
    pub(crate) tool_calls: Option<Vec<DeltaToolCall<'a>>>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct DeltaToolCall<'a> {
    pub(crate) index: Option<u32>,
    pub(crate) id: Option<String>,
    #[serde(borrow)]
    pub(crate) function: Option<DeltaFunction<'a>>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct DeltaFunction<'a> {
    pub(crate) name: Option<String>,
    #[serde(borrow)]
    pub(crate) arguments: Option<&'a RawValue>,
}

/// Token counts as the provider reports them.
#[derive(Debug, Deserialize)]
pub(crate) struct WireUsage {
    pub(crate) prompt_tokens: Option<u64>,
    pub(crate) completion_tokens: Option<u64>,
    /// Where the provider says how many prompt tokens it read from its cache.
    pub(crate) prompt_tokens_details: Option<WirePromptDetails>,
}

/// The breakdown of the prompt's tokens.
#[derive(Debug, Deserialize)]
pub(crate) struct WirePromptDetails {
    pub(crate) cached_tokens: Option<u64>,
}

/// A choice that knows its index (absent means 0).
pub(crate) trait Indexed {
    fn index(&self) -> u32;
}

impl Indexed for Choice<'_> {
    fn index(&self) -> u32 {
        self.index.unwrap_or(0)
    }
}

impl Indexed for ChunkChoice<'_> {
    fn index(&self) -> u32 {
        self.index.unwrap_or(0)
    }
}

impl Indexed for CountedChoice {
    fn index(&self) -> u32 {
        self.index.unwrap_or(0)
    }
}

/// The first choice of index 0 in a `choices` list (`null` or absent: none). The other choices
/// are read one at a time and dropped, so a list of many choices costs one.
#[derive(Debug)]
pub(crate) struct FirstChoice<T>(pub(crate) Option<T>);

impl<T> Default for FirstChoice<T> {
    fn default() -> Self {
        Self(None)
    }
}

impl<'de, T: Deserialize<'de> + Indexed> Deserialize<'de> for FirstChoice<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_option(FirstChoiceVisitor(PhantomData))
    }
}

struct FirstChoiceVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de> + Indexed> Visitor<'de> for FirstChoiceVisitor<T> {
    type Value = FirstChoice<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of choices")
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(FirstChoice(None))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(FirstChoice(None))
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut first = None;
        while let Some(choice) = seq.next_element::<T>()? {
            if first.is_none() && choice.index() == 0 {
                first = Some(choice);
            }
        }
        Ok(FirstChoice(first))
    }
}

#[cfg(test)]
mod tests {
    use loopbound::transport::{ChatOptions, ToolCall};
    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    use super::*;

    const CAP: OutputCapField = OutputCapField::MaxCompletionTokens;

    #[test]
    fn every_message_kind_and_tool_is_written_in_the_openai_shape() {
        let messages = [
            Message::system("Be brief."),
            Message::user("Review 42."),
            Message::assistant_parts(None, vec![ToolCall::new("c1", "read_ticket", r#"{"input":42}"#)]),
            Message::tool_result("c1", "Ticket 42"),
            Message::tool_error("c2", "Error: nope."),
            Message::assistant_parts(Some("Done.".into()), vec![]),
        ];
        let tools = [ToolDefinition::new(
            "read_ticket",
            "Read a ticket.",
            json!({"type": "object", "properties": {"input": {"type": "integer"}}}),
        )];
        let options = ChatOptions::default();
        let cancel = CancellationToken::new();
        let request = ChatRequest::new(&messages, &tools, &options, &cancel);
        let body: serde_json::Value =
            serde_json::from_slice(&request_body("m", CAP, &request, Mode::Stream { usage: true })).unwrap();
        assert_eq!(
            body,
            json!({
                "model": "m",
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "Review 42."},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "read_ticket", "arguments": "{\"input\":42}"}}
                    ]},
                    {"role": "tool", "tool_call_id": "c1", "content": "Ticket 42"},
                    {"role": "tool", "tool_call_id": "c2", "content": "Error: nope."},
                    {"role": "assistant", "content": "Done."}
                ],
                "tools": [{"type": "function", "function": {
                    "name": "read_ticket",
                    "description": "Read a ticket.",
                    "parameters": {"type": "object", "properties": {"input": {"type": "integer"}}}
                }}],
                "stream": true,
                "stream_options": {"include_usage": true}
            })
        );
    }

    #[test]
    fn streams_without_usage_leave_stream_options_out() {
        let messages = [Message::user("Hi")];
        let options = ChatOptions::default();
        let cancel = CancellationToken::new();
        let request = ChatRequest::new(&messages, &[], &options, &cancel);
        assert_eq!(
            request_body("m", CAP, &request, Mode::Stream { usage: false }),
            br#"{"model":"m","messages":[{"role":"user","content":"Hi"}],"stream":true}"#
        );
    }

    #[test]
    fn the_cap_goes_in_the_configured_field_only_and_the_notice_is_the_last_message() {
        let messages = [Message::system("Be brief."), Message::user("Hi")];
        let options = ChatOptions::default().with_max_output_tokens(64).with_notice("2 model calls left.");
        let cancel = CancellationToken::new();
        let request = ChatRequest::new(&messages, &[], &options, &cancel);
        let sent = |field| -> serde_json::Value {
            serde_json::from_slice(&request_body("m", field, &request, Mode::Stream { usage: true })).unwrap()
        };
        let expected = |field: &str| {
            let mut body = json!({
                "model": "m",
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "Hi"},
                    {"role": "system", "content": "2 model calls left."}
                ],
                "stream": true,
                "stream_options": {"include_usage": true}
            });
            body[field] = json!(64);
            body
        };
        assert_eq!(sent(OutputCapField::MaxCompletionTokens), expected("max_completion_tokens"));
        assert_eq!(sent(OutputCapField::MaxTokens), expected("max_tokens"));
    }

    #[test]
    fn the_sampling_options_are_sent_in_the_chat_shape_in_a_fixed_order() {
        let messages = [Message::user("Hi")];
        let options = ChatOptions::default()
            .with_max_output_tokens(9)
            .with_temperature(0.25)
            .and_then(|options| options.with_top_p(0.5))
            .and_then(|options| options.with_stop_sequences(["END", "\n\n"]))
            .unwrap()
            .with_seed(42);
        let cancel = CancellationToken::new();
        let request = ChatRequest::new(&messages, &[], &options, &cancel);
        assert_eq!(
            String::from_utf8(request_body("m", CAP, &request, Mode::Whole)).unwrap(),
            r#"{"model":"m","messages":[{"role":"user","content":"Hi"}],"max_completion_tokens":9,"temperature":0.25,"top_p":0.5,"stop":["END","\n\n"],"seed":42}"#
        );
    }
}
