//! The stored form of what a run's conversation and replies are made of: messages, tool calls,
//! token usage. Each is a private struct of its own, mapped to and from the public type by
//! hand, so a field added to [`Message`], [`ToolCall`] or [`Usage`] (they are
//! `#[non_exhaustive]` so that one can be), or a change to their serde derives, cannot change
//! what the journal writes or stop it reading what an earlier version wrote.
//!
//! # Invariants
//!
//! - The text is the one the public types' derives wrote when the journal first stored them
//!   (the fixtures of `testkit/fixtures/journal-2026-12-06/` and the pinned strings of the
//!   tests prove it): a message tagged by its `role` in snake case, its fields by their names,
//!   every field written, `null` for an absent text.
//! - Reading accepts what those derives accepted: a field the struct does not name is skipped,
//!   an absent optional text reads as none.

use serde::{Deserialize, Serialize};

use crate::transport::{Message, ToolCall, Usage};

/// A tool call as stored: the provider's id, the tool's name, the arguments' JSON text.
#[derive(Serialize, Deserialize)]
pub(super) struct StoredToolCall {
    id: String,
    name: String,
    arguments: String,
}

impl StoredToolCall {
    pub(super) fn encode(call: &ToolCall) -> Self {
        Self { id: call.id.clone(), name: call.name.clone(), arguments: call.arguments.clone() }
    }

    pub(super) fn decode(self) -> ToolCall {
        ToolCall::new(self.id, self.name, self.arguments)
    }
}

/// Token counts as stored, every count written.
#[derive(Serialize, Deserialize)]
#[allow(clippy::struct_field_names, reason = "the names are the text the journal first stored")]
pub(super) struct StoredUsage {
    input_tokens: u64,
    cached_input_tokens: u64,
    cache_write_tokens: u64,
    output_tokens: u64,
}

impl StoredUsage {
    pub(super) fn encode(usage: &Usage) -> Self {
        Self {
            input_tokens: usage.input_tokens,
            cached_input_tokens: usage.cached_input_tokens,
            cache_write_tokens: usage.cache_write_tokens,
            output_tokens: usage.output_tokens,
        }
    }

    pub(super) fn decode(self) -> Usage {
        Usage::new(self.input_tokens, self.output_tokens)
            .with_cached_input(self.cached_input_tokens)
            .with_cache_write(self.cache_write_tokens)
    }
}

/// One message of a conversation as stored, tagged by its role.
#[derive(Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub(super) enum StoredMessage {
    System { content: String },
    User { content: String },
    Assistant { content: Option<String>, tool_calls: Vec<StoredToolCall> },
    Tool { call_id: String, content: String, is_error: bool },
}

impl StoredMessage {
    pub(super) fn encode(message: &Message) -> Self {
        match message {
            Message::System { content, .. } => Self::System { content: content.clone() },
            Message::User { content, .. } => Self::User { content: content.clone() },
            Message::Assistant { content, tool_calls, .. } => Self::Assistant {
                content: content.clone(),
                tool_calls: tool_calls.iter().map(StoredToolCall::encode).collect(),
            },
            Message::Tool { call_id, content, is_error, .. } => {
                Self::Tool { call_id: call_id.clone(), content: content.clone(), is_error: *is_error }
            }
        }
    }

    pub(super) fn decode(self) -> Message {
        match self {
            Self::System { content } => Message::system(content),
            Self::User { content } => Message::user(content),
            Self::Assistant { content, tool_calls } => Message::assistant_parts(
                content,
                tool_calls.into_iter().map(StoredToolCall::decode).collect(),
            ),
            Self::Tool { call_id, content, is_error: false } => Message::tool_result(call_id, content),
            Self::Tool { call_id, content, is_error: true } => Message::tool_error(call_id, content),
        }
    }
}
