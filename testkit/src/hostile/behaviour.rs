//! What a [`HostileServer`](crate::hostile::HostileServer) does with each model-call request, in
//! the API the request speaks (chat completions, or the Messages API in the Anthropic mode).
//!
//! # Invariants
//!
//! - A behaviour is pure data: it holds no socket and no state, so one value describes every
//!   connection; the per-request state (the request's key, its `stream` flag, its index) comes
//!   from the request.
//! - Every endless behaviour ends only through the [`Budget`](crate::hostile::Budget): it never sends
//!   `data: [DONE]` and never ends its chunked body, so the client sees a stream cut short.
//! - Nothing here parses client input; the key a behaviour echoes is cut by characters, never by
//!   bytes, so no key can make the server panic.

use std::ops::Range;
use std::time::Duration;

use crate::hostile::{messages, payload, responses};

/// How the server answers each `POST /v1/chat/completions` and each `POST /v1/messages` (its
/// Anthropic mode), in the request's API: each behaviour below says what it sends in chat
/// completions; the Messages API gets the same hostility in its own events (`message_start`,
/// `content_block_start`/`delta`/`stop` with `text_delta` and `input_json_delta`, `message_delta`,
/// `message_stop`, `ping`, `error`) and bodies.
#[derive(Clone, Debug)]
pub enum Behaviour {
    /// A server-sent-event stream of `chat.completion.chunk` objects whose
    /// `choices[0].delta.content` is `delta` bytes of `a`, forever (until the budget).
    EndlessText {
        /// The bytes of content in each event.
        delta: usize,
    },
    /// A server-sent-event stream whose every chunk opens a NEW tool call: index `n`, id `c{n}`,
    /// name `read_ticket`, arguments `{"input":42}`, for n = 0, 1, 2, … (until the budget).
    EndlessCallIndices,
    /// A server-sent-event stream of one text delta and then usage reports whose output count
    /// grows by one per event, forever (until the budget): usage-only chunks, or `message_delta`
    /// events with their cumulative `output_tokens`.
    EndlessUsage,
    /// A server-sent-event stream of `deltas` text deltas of one byte, then an overload reported
    /// inside the stream (an `error` object with code 529, or an `error` event of type
    /// `overloaded_error`), then the end of the body.
    ErrorAfterDeltas {
        /// How many text deltas come before the error.
        deltas: usize,
    },
    /// A server-sent-event stream of one tool call (index 0, name `read_ticket`) whose arguments
    /// open a JSON string (`{"input":"`) and then grow by `delta` bytes of `7` per event, forever
    /// (until the budget).
    EndlessArguments {
        /// The bytes appended to the arguments by each event.
        delta: usize,
    },
    /// `calls` tool calls named `name` with the arguments text `arguments`, in ONE whole
    /// `chat.completion` reply (`finish_reason: "tool_calls"`); when the request asked
    /// `"stream": true`, one server-sent event per call, then a finish chunk and `[DONE]`.
    CallFlood {
        /// How many tool calls the reply holds.
        calls: usize,
        /// The arguments text of every call (any text: it need not be JSON).
        arguments: String,
        /// The tool name of every call (it need not be a registered tool).
        name: String,
    },
    /// The whole `body` (sent as `application/json` with status 200) written one byte at a time,
    /// `interval` apart.
    Trickle {
        /// The reply's body, usually a valid `chat.completion` (see [`Reply::text`]).
        body: String,
        /// The pause between two bytes of the body.
        interval: Duration,
    },
    /// A server-sent-event response that sends only the comment `: keep-alive` (a `ping` event
    /// in the Messages API) every `interval`, forever (until the budget).
    KeepAliveForever {
        /// The pause between two comments.
        interval: Duration,
    },
    /// A reply with status `status` that echoes the key from the request's
    /// `Authorization: Bearer <KEY>` or `x-api-key: <KEY>` header (all of it or part of it) at
    /// `place`, after `padding` dots. The request's `stream` flag is ignored: the place decides the shape of the reply.
    EchoKey {
        /// The response's HTTP status, whatever the place (use a non-2xx one with
        /// [`KeyPlace::ErrorBody`] and 200 with the others).
        status: u16,
        /// How many `.` characters come before the key.
        padding: usize,
        /// Where in the reply the key goes.
        place: KeyPlace,
        /// Which characters of the key are echoed.
        part: KeyPart,
    },
    /// A text reply whose content holds terminal control sequences
    /// ([`ESCAPE_TEXT`](crate::hostile::ESCAPE_TEXT)); as server-sent events, split mid-sequence, when the
    /// request asked `"stream": true`.
    EscapeSequences,
    /// One canned reply, sent as it is whatever the request asked.
    Reply(Reply),
    /// Behaviour `then`, started only after `delay` (the connection's time budget counts from its
    /// accept, the delay included): a reply timed to arrive just before a client's deadline.
    Delayed {
        /// How long to wait, the request read, before answering.
        delay: Duration,
        /// How to answer then.
        then: Box<Behaviour>,
    },
    /// Request n (counting the model-call requests from 0) is answered by behaviour n; a
    /// nested `Scripted` is indexed by the same n. Requests past the end get a 500 error reply
    /// whose code is `script_exhausted`.
    Scripted(Vec<Behaviour>),
}

/// Where [`Behaviour::EchoKey`] puts the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyPlace {
    /// An OpenAI-style error body, `{"error":{"message":"<padding>… the key you sent was <KEY>",
    /// "type":"invalid_request_error","code":"invalid_api_key"}}`.
    ErrorBody,
    /// A whole `chat.completion` whose `message.content` holds the padding, then the key.
    Text,
    /// A whole `chat.completion` with one tool call whose id (`call_<KEY>`), name (`key_<KEY>`)
    /// and arguments (`{"input":"<padding><KEY>"}`) hold the key.
    ToolCallFields,
    /// Server-sent events whose content holds the padding and the key's first half in one delta
    /// and the key's second half in the next, then a finish chunk and `[DONE]`.
    StreamText,
}

/// Which characters of the key [`Behaviour::EchoKey`] echoes.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum KeyPart {
    /// The whole key.
    #[default]
    Whole,
    /// The characters (not bytes) in this range, clamped to the key's length; an empty or
    /// inverted range echoes nothing.
    Chars(Range<usize>),
}

impl KeyPart {
    /// The part of `key` this selects; it never panics, whatever the key and the range.
    #[must_use]
    pub fn of(&self, key: &str) -> String {
        match self {
            Self::Whole => key.to_owned(),
            Self::Chars(range) => {
                key.chars().skip(range.start).take(range.end.saturating_sub(range.start)).collect()
            }
        }
    }
}

/// A canned reply: an HTTP status and a whole JSON body, sent with `Content-Length`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// The body, sent as `application/json` exactly as it is (it need not be valid JSON).
    pub body: String,
}

impl Reply {
    /// A reply of `status` with `body`.
    #[must_use]
    pub fn new(status: u16, body: impl Into<String>) -> Self {
        Self { status, body: body.into() }
    }

    /// A 200 `chat.completion` whose message content is `content` (`finish_reason: "stop"`).
    #[must_use]
    pub fn text(content: &str) -> Self {
        Self::new(200, payload::completion_text(content))
    }

    /// A 200 Messages API `message` whose content is one text block of `content`.
    #[must_use]
    pub fn message_text(content: &str) -> Self {
        Self::new(200, messages::message_text(content))
    }

    /// A 200 Responses API `response` whose output is one message of `content`.
    #[must_use]
    pub fn response_text(content: &str) -> Self {
        Self::new(200, responses::response_text(content))
    }

    /// A 200 `chat.completion` with one tool call (id `call_0`) of `name` with the arguments text
    /// `arguments` (`finish_reason: "tool_calls"`).
    #[must_use]
    pub fn tool_call(name: &str, arguments: &str) -> Self {
        Self::new(200, payload::completion_tool_call("call_0", name, arguments))
    }

    /// An OpenAI-style error reply of `status`: `{"error":{"message":..,"type":..,"code":..}}`.
    #[must_use]
    pub fn error(status: u16, message: &str, kind: &str, code: &str) -> Self {
        Self::new(status, payload::error(message, kind, code))
    }
}
