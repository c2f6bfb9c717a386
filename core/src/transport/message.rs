//! The conversation a transport carries: messages, tool calls, tool definitions, replies.
//!
//! Provider wire shapes change often, so the structs here and each [`Message`] variant are
//! `#[non_exhaustive]`: build them with their constructors (`Message::user`, `ModelReply::text`,
//! `ToolCall::new`, `Usage::new`, …) and match them with `..`, so that a field added later breaks
//! nobody. The set of [`Message`] kinds itself is exhaustive on purpose: every transport must
//! turn every kind into its provider's shape, so a new kind must fail to compile there rather
//! than be dropped in silence.

use std::ops::AddAssign;

use serde::{Deserialize, Serialize};

use super::{ChatOptions, ReplyBounds};
use crate::sync::CancellationToken;

/// One message of the conversation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// Instructions from the host.
    #[non_exhaustive]
    System {
        /// The instructions.
        content: String,
    },
    /// The user's request.
    #[non_exhaustive]
    User {
        /// The request.
        content: String,
    },
    /// A model reply: text, tool calls, or both.
    #[non_exhaustive]
    Assistant {
        /// The reply's text, if any.
        content: Option<String>,
        /// The tool calls the model asked for, in order.
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call, handed back to the model.
    #[non_exhaustive]
    Tool {
        /// The id of the call this answers.
        call_id: String,
        /// The result text, or the error text when `is_error`.
        content: String,
        /// Whether the call failed (binding error, body error, unknown tool).
        is_error: bool,
    },
}

impl Message {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::System { content: content.into() }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::User { content: content.into() }
    }

    /// An assistant message carrying a model reply.
    #[must_use]
    pub fn assistant(reply: &ModelReply) -> Self {
        Self::assistant_parts(reply.content.clone(), reply.tool_calls.clone())
    }

    /// An assistant message of `content` (if any) and `tool_calls`.
    #[must_use]
    pub fn assistant_parts(content: Option<String>, tool_calls: Vec<ToolCall>) -> Self {
        Self::Assistant { content, tool_calls }
    }

    /// A successful tool result.
    pub fn tool_result(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self::Tool { call_id: call_id.into(), content: content.into(), is_error: false }
    }

    /// A failed tool result.
    pub fn tool_error(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self::Tool { call_id: call_id.into(), content: content.into(), is_error: true }
    }
}

/// A tool call proposed by the model. `arguments` is JSON text, exactly as the provider sent it;
/// it is parsed and bound to the tool's input type only when the call is invoked.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolCall {
    /// The provider's id for the call, echoed in the tool result.
    pub id: String,
    /// The name of the tool to call.
    pub name: String,
    /// The arguments as JSON text.
    pub arguments: String,
}

impl ToolCall {
    /// A tool call.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: impl Into<String>) -> Self {
        Self { id: id.into(), name: name.into(), arguments: arguments.into() }
    }
}

/// What the model is told about a tool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolDefinition {
    /// The tool's name.
    pub name: String,
    /// What the tool does.
    pub description: String,
    /// The JSON schema of the tool's input.
    pub parameters: serde_json::Value,
}

impl ToolDefinition {
    /// A tool's definition.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: serde_json::Value,
    ) -> Self {
        Self { name: name.into(), description: description.into(), parameters }
    }
}

/// One request to a transport. `cancel` fires when the scope stops; a transport may watch it to
/// abort early, but the runtime does not depend on that: it drops the call's future. `bounds`
/// are the scope's bounds on the reply: a transport that reads bytes should stop reading as soon
/// as a reply crosses them (the runtime refuses such a reply anyway).
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct ChatRequest<'a> {
    /// The conversation so far.
    pub messages: &'a [Message],
    /// The tools the model may call.
    pub tools: &'a [ToolDefinition],
    /// Per-call options.
    pub options: &'a ChatOptions,
    /// Fires when the run stops.
    pub cancel: &'a CancellationToken,
    /// How many tool calls and bytes the reply may hold.
    pub bounds: ReplyBounds,
}

impl<'a> ChatRequest<'a> {
    /// A request, with the default [`ReplyBounds`].
    #[must_use]
    pub fn new(
        messages: &'a [Message],
        tools: &'a [ToolDefinition],
        options: &'a ChatOptions,
        cancel: &'a CancellationToken,
    ) -> Self {
        Self { messages, tools, options, cancel, bounds: ReplyBounds::default() }
    }

    /// This request with the reply bounds `bounds`.
    #[must_use]
    pub fn with_bounds(mut self, bounds: ReplyBounds) -> Self {
        self.bounds = bounds;
        self
    }
}

/// Token counts a provider reported for a call, or summed over a run.
///
/// `input_tokens` counts every input token, those the provider read from its prompt cache and
/// those it wrote to it included; `cached_input_tokens` and `cache_write_tokens` say how many of
/// them were which, since providers price them differently. (OpenAI reports cached tokens inside
/// its prompt count; Anthropic reports cache reads and writes beside its input count: a
/// transport adds them up.)
///
/// ```
/// use loopbound::transport::Usage;
///
/// let usage = Usage::new(1200, 80).with_cached_input(1000);
/// assert_eq!((usage.input_tokens, usage.cached_input_tokens, usage.output_tokens), (1200, 1000, 80));
/// assert_eq!(usage.total_tokens(), 1280);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Usage {
    /// Tokens read by the model, all of them.
    pub input_tokens: u64,
    /// Of `input_tokens`, those read from the provider's prompt cache.
    pub cached_input_tokens: u64,
    /// Of `input_tokens`, those written to the provider's prompt cache.
    pub cache_write_tokens: u64,
    /// Tokens produced by the model.
    pub output_tokens: u64,
}

impl Usage {
    /// `input` tokens read and `output` tokens produced, none of them cached.
    #[must_use]
    pub const fn new(input: u64, output: u64) -> Self {
        Self { input_tokens: input, cached_input_tokens: 0, cache_write_tokens: 0, output_tokens: output }
    }

    /// This usage with `cached` of its input tokens read from the provider's cache.
    #[must_use]
    pub const fn with_cached_input(mut self, cached: u64) -> Self {
        self.cached_input_tokens = cached;
        self
    }

    /// This usage with `written` of its input tokens written to the provider's cache.
    #[must_use]
    pub const fn with_cache_write(mut self, written: u64) -> Self {
        self.cache_write_tokens = written;
        self
    }

    /// Input and output tokens together.
    #[must_use]
    pub const fn total_tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

impl AddAssign for Usage {
    fn add_assign(&mut self, other: Self) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.cached_input_tokens = self.cached_input_tokens.saturating_add(other.cached_input_tokens);
        self.cache_write_tokens = self.cache_write_tokens.saturating_add(other.cache_write_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
    }
}

/// A complete model reply.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ModelReply {
    /// The reply's text, if any.
    pub content: Option<String>,
    /// Tool calls, in the order the model asked for them.
    pub tool_calls: Vec<ToolCall>,
    /// Token counts, when the provider reported them.
    pub usage: Option<Usage>,
}

impl ModelReply {
    /// A reply of `content` (if any) and `tool_calls`.
    #[must_use]
    pub fn new(content: Option<String>, tool_calls: Vec<ToolCall>) -> Self {
        Self { content, tool_calls, usage: None }
    }

    /// A reply made of text only.
    pub fn text(content: impl Into<String>) -> Self {
        Self { content: Some(content.into()), ..Self::default() }
    }

    /// A reply made of tool calls only.
    #[must_use]
    pub fn calls(tool_calls: Vec<ToolCall>) -> Self {
        Self { tool_calls, ..Self::default() }
    }

    /// A reply made of one tool call.
    pub fn call(id: impl Into<String>, name: impl Into<String>, arguments: impl Into<String>) -> Self {
        Self::calls(vec![ToolCall::new(id, name, arguments)])
    }

    /// This reply with usage figures.
    #[must_use]
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }
}
