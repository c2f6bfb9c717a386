//! The conversation a transport carries: messages, tool calls, tool definitions, replies.

use std::ops::AddAssign;

use serde::{Deserialize, Serialize};

use super::ReplyBounds;
use crate::sync::CancellationToken;

/// One message of the conversation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// Instructions from the host.
    System {
        /// The instructions.
        content: String,
    },
    /// The user's request.
    User {
        /// The request.
        content: String,
    },
    /// A model reply: text, tool calls, or both.
    Assistant {
        /// The reply's text, if any.
        content: Option<String>,
        /// The tool calls the model asked for, in order.
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call, handed back to the model.
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
        Self::Assistant { content: reply.content.clone(), tool_calls: reply.tool_calls.clone() }
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
pub struct ToolDefinition {
    /// The tool's name.
    pub name: String,
    /// What the tool does.
    pub description: String,
    /// The JSON schema of the tool's input.
    pub parameters: serde_json::Value,
}

/// Per-call options passed to the provider.
///
/// `max_output_tokens` bounds the length of one reply where the provider supports it. It is not
/// a price, not a token budget over the run and not a financial circuit breaker.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ChatOptions {
    /// Longest reply, in tokens, the provider should produce.
    pub max_output_tokens: Option<u32>,
}

impl ChatOptions {
    /// Options with a per-call output cap.
    #[must_use]
    pub fn with_max_output_tokens(mut self, tokens: u32) -> Self {
        self.max_output_tokens = Some(tokens);
        self
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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens read by the model.
    pub prompt_tokens: u64,
    /// Tokens produced by the model.
    pub completion_tokens: u64,
}

impl AddAssign for Usage {
    fn add_assign(&mut self, other: Self) {
        self.prompt_tokens = self.prompt_tokens.saturating_add(other.prompt_tokens);
        self.completion_tokens = self.completion_tokens.saturating_add(other.completion_tokens);
    }
}

/// A complete model reply.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModelReply {
    /// The reply's text, if any.
    pub content: Option<String>,
    /// Tool calls, in the order the model asked for them.
    pub tool_calls: Vec<ToolCall>,
    /// Token counts, when the provider reported them.
    pub usage: Option<Usage>,
}

impl ModelReply {
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
