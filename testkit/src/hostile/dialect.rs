//! The three APIs the hostile server speaks, and the texts each behaviour writes in each: the
//! OpenAI-compatible chat completions (`POST /v1/chat/completions`), the Anthropic Messages API
//! (`POST /v1/messages`, its Anthropic mode) and the OpenAI Responses API (`POST /v1/responses`,
//! its Responses mode).
//!
//! # Invariants
//!
//! - The request's path alone picks the API; every behaviour is written in each, with the same
//!   hostility: the same endless stream, flood, echo or error, in each API's own shape.
//! - A stream opened here is well framed in its API (a Messages stream opens its text block
//!   before the first text delta), so that what a client sees is the behaviour, not a framing
//!   mistake of the server.

use crate::hostile::{messages, payload, responses};

/// Which API a request speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// OpenAI-compatible chat completions.
    Chat,
    /// The Anthropic Messages API.
    Messages,
    /// The OpenAI Responses API.
    Responses,
}

/// How a finished stream ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Finish {
    /// The model stopped talking.
    Stop,
    /// The model asked for tool calls.
    ToolCalls,
}

impl Dialect {
    /// The first events of every stream (the role chunk; `message_start`; the response created
    /// and in progress).
    pub(crate) fn open(self) -> Vec<u8> {
        match self {
            Self::Chat => payload::role_event(),
            Self::Messages => messages::start_event(),
            Self::Responses => responses::open_events(),
        }
    }

    /// What opens the reply's text (nothing; the start of text block 0; message item 0 added).
    pub(crate) fn open_text(self) -> Vec<u8> {
        match self {
            Self::Chat => Vec::new(),
            Self::Messages => messages::text_start_event(0),
            Self::Responses => responses::text_open_event(),
        }
    }

    /// A piece of the reply's text.
    pub(crate) fn text(self, text: &str) -> Vec<u8> {
        match self {
            Self::Chat => payload::content_event(text),
            Self::Messages => messages::text_event(0, text),
            Self::Responses => responses::text_event(text),
        }
    }

    /// What closes the reply's text (nothing; the end of text block 0; message item 0 done).
    pub(crate) fn close_text(self) -> Vec<u8> {
        match self {
            Self::Chat => Vec::new(),
            Self::Messages => messages::stop_event(0),
            Self::Responses => responses::text_close_event(),
        }
    }

    /// The events that open tool call `index` (id `id`, name `name`) with the arguments text
    /// `arguments`, and leave it open for more arguments.
    pub(crate) fn open_call(self, index: usize, id: &str, name: &str, arguments: &str) -> Vec<u8> {
        match self {
            Self::Chat => {
                let item = payload::tool_call_item(
                    index,
                    id,
                    &payload::json_string(name),
                    &payload::json_string(arguments),
                );
                payload::tool_call_event(&item)
            }
            Self::Messages => {
                let mut events = messages::call_start_event(index, id, name);
                events.extend(messages::arguments_event(index, arguments));
                events
            }
            Self::Responses => {
                let mut events = responses::call_open_event(index, id, name);
                events.extend(responses::arguments_event(index, arguments));
                events
            }
        }
    }

    /// A fragment of call `index`'s arguments.
    pub(crate) fn arguments(self, index: usize, fragment: &str) -> Vec<u8> {
        match self {
            Self::Chat => {
                let growth = format!(
                    r#"{{"index":{index},"function":{{"arguments":{}}}}}"#,
                    payload::json_string(fragment)
                );
                payload::tool_call_event(&growth)
            }
            Self::Messages => messages::arguments_event(index, fragment),
            Self::Responses => responses::arguments_event(index, fragment),
        }
    }

    /// What closes call `index` (nothing; the end of its block; nothing, its arguments have come).
    pub(crate) fn close_call(self, index: usize) -> Vec<u8> {
        match self {
            Self::Chat | Self::Responses => Vec::new(),
            Self::Messages => messages::stop_event(index),
        }
    }

    /// The whole tool call `index`, opened and closed.
    pub(crate) fn call(self, index: usize, id: &str, name: &str, arguments: &str) -> Vec<u8> {
        let mut events = self.open_call(index, id, name, arguments);
        events.extend(self.close_call(index));
        events
    }

    /// A usage report of `output` tokens so far (a usage-only chunk; a `message_delta`; a response
    /// in progress, whose usage a client has no reason to read).
    pub(crate) fn usage(self, output: u64) -> Vec<u8> {
        match self {
            Self::Chat => payload::event(&format!(
                r#"{{"id":"{}","object":"chat.completion.chunk","created":0,"model":"{}","choices":[],"usage":{{"prompt_tokens":10,"completion_tokens":{output}}}}}"#,
                payload::ID,
                payload::MODEL
            )),
            Self::Messages => messages::usage_event(output, None),
            Self::Responses => responses::usage_event(output),
        }
    }

    /// An overload reported inside the stream (an `error` object; an `error` event; an `error`
    /// event with the code `server_error`).
    pub(crate) fn overloaded(self) -> Vec<u8> {
        match self {
            Self::Chat => {
                payload::event(r#"{"error":{"code":529,"message":"Overloaded","type":"server_error"}}"#)
            }
            Self::Messages => messages::error_event("overloaded_error", "Overloaded"),
            Self::Responses => responses::overloaded_event(),
        }
    }

    /// The end of a stream that finished well.
    pub(crate) fn finish(self, finish: Finish) -> Vec<u8> {
        match (self, finish) {
            (Self::Chat, Finish::Stop) => [payload::finish_event("stop"), payload::DONE.to_vec()].concat(),
            (Self::Chat, Finish::ToolCalls) => {
                [payload::finish_event("tool_calls"), payload::DONE.to_vec()].concat()
            }
            (Self::Messages, Finish::Stop) => {
                [messages::usage_event(5, Some("end_turn")), messages::STOP.to_vec()].concat()
            }
            (Self::Messages, Finish::ToolCalls) => {
                [messages::usage_event(5, Some("tool_use")), messages::STOP.to_vec()].concat()
            }
            (Self::Responses, _) => responses::completed_event(),
        }
    }

    /// The keep-alive event (a comment; a `ping`; a comment).
    pub(crate) fn keep_alive(self) -> &'static [u8] {
        match self {
            Self::Chat | Self::Responses => payload::KEEP_ALIVE,
            Self::Messages => messages::PING,
        }
    }

    /// A whole reply whose text is `content`.
    pub(crate) fn whole_text(self, content: &str) -> String {
        match self {
            Self::Chat => payload::completion_text(content),
            Self::Messages => messages::message_text(content),
            Self::Responses => responses::response_text(content),
        }
    }

    /// A whole reply of one tool call.
    pub(crate) fn whole_call(self, id: &str, name: &str, arguments: &str) -> String {
        match self {
            Self::Chat => payload::completion_tool_call(id, name, arguments),
            Self::Messages => messages::message_tool_call(id, name, arguments),
            Self::Responses => responses::response_call(id, name, arguments),
        }
    }

    /// An error body saying `message`; `kind` and `code` are the chat API's names (the Responses
    /// API's too), the Messages API's type is derived from the code.
    pub(crate) fn error(self, message: &str, kind: &str, code: &str) -> String {
        match self {
            Self::Chat | Self::Responses => payload::error(message, kind, code),
            Self::Messages => {
                let kind = match code {
                    "invalid_api_key" => "authentication_error",
                    "script_exhausted" | "overloaded" => "api_error",
                    "not_found" => "not_found_error",
                    _ => "invalid_request_error",
                };
                messages::error(kind, message)
            }
        }
    }

    /// The text of a whole reply with tool calls, before the first call.
    pub(crate) fn calls_prefix(self) -> &'static str {
        match self {
            Self::Chat => payload::CALLS_PREFIX,
            Self::Messages => messages::MESSAGE_PREFIX,
            Self::Responses => responses::OUTPUT_PREFIX,
        }
    }

    /// The text of a whole reply with tool calls, after the last call.
    pub(crate) fn calls_suffix(self) -> String {
        match self {
            Self::Chat => payload::CALLS_SUFFIX.to_owned(),
            Self::Messages => messages::message_suffix("tool_use"),
            Self::Responses => responses::output_suffix(),
        }
    }

    /// One call of a whole reply: index `index`, id `c{index}`; `name` and `arguments` are
    /// already JSON string literals.
    pub(crate) fn call_item(self, index: usize, name: &str, arguments: &str) -> String {
        let id = format!("c{index}");
        match self {
            Self::Chat => payload::tool_call_item(index, &id, name, arguments),
            Self::Messages => {
                // The literal is a JSON string; its text becomes the block's input.
                let text: String = serde_json::from_str(arguments).unwrap_or_default();
                messages::tool_use_block(&id, name, &messages::input(&text))
            }
            Self::Responses => responses::call_item(&id, name, arguments),
        }
    }
}
