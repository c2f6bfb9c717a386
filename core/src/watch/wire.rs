//! The JSON of an [`Update`]: the wire contract of a live stream (a Server-Sent Event's data)
//! and of a journaled run's recorded stream, which stores this text and serves it back.
//!
//! The form is written here by hand, through private mirror types, never through a derive on
//! the public types: a field added to a `#[non_exhaustive]` payload, a variant renamed in Rust,
//! or a change of serde's defaults changes nothing a reader gets unless this module says so.
//!
//! The form is the table of the [`watch`](super) module's docs ("The JSON of an update").
//!
//! # Invariants
//!
//! - The text of every variant is pinned by a test (`journal/codec_stream_pins.rs`): a change
//!   shows there, and must come with the journal's conversion of the lines already stored (see
//!   `journal/codec_stream.rs`).
//! - A change is additive only (a new key after the others, a new `type`), so a reader that
//!   skips keys and types it does not know goes on reading every line.
//! - The first key is `type`; `outcome` and `error` are the only final types.

use std::sync::Arc;

use serde::{Serialize, Serializer};

use super::update::{Suspension, Text, ToolResult, ToolStarted, Update};
use crate::event::ControlEvent;
use crate::outcome::{Outcome, Pending, PendingForm, RunError, Status};

/// An update's form: its `type` tag, then its payload's keys.
#[derive(Serialize)]
#[serde(tag = "type")]
enum Wire<'u> {
    #[serde(rename = "event")]
    Event(&'u ControlEvent),
    #[serde(rename = "text")]
    Text(WireText<'u>),
    #[serde(rename = "tool_started")]
    ToolStarted(WireToolStarted<'u>),
    #[serde(rename = "tool_result")]
    ToolResult(WireToolResult<'u>),
    #[serde(rename = "suspended")]
    Suspended(WireSuspension<'u>),
    #[serde(rename = "outcome")]
    Outcome(&'u Outcome),
    #[serde(rename = "error")]
    Error(&'u RunError),
}

#[derive(Serialize)]
struct WireText<'u> {
    reply: u32,
    text: &'u str,
}

#[derive(Serialize)]
struct WireToolStarted<'u> {
    reply: u32,
    index: u32,
    call_id: &'u str,
    name: &'u str,
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments: Option<&'u str>,
}

#[derive(Serialize)]
struct WireToolResult<'u> {
    reply: u32,
    index: u32,
    call_id: &'u str,
    text: &'u str,
    is_error: bool,
}

#[derive(Serialize)]
struct WireSuspension<'u> {
    status: Status,
    operation: Option<&'u str>,
    pending: Option<PendingForm<'u>>,
}

impl<'u> WireText<'u> {
    fn of(text: &'u Text) -> Self {
        Self { reply: text.reply, text: &text.text }
    }
}

impl<'u> WireToolStarted<'u> {
    fn of(started: &'u ToolStarted) -> Self {
        Self {
            reply: started.reply,
            index: started.index,
            call_id: &started.call_id,
            name: &started.name,
            arguments: started.arguments.as_deref(),
        }
    }
}

impl<'u> WireToolResult<'u> {
    fn of(result: &'u ToolResult) -> Self {
        Self {
            reply: result.reply,
            index: result.index,
            call_id: &result.call_id,
            text: &result.text,
            is_error: result.is_error,
        }
    }
}

impl<'u> WireSuspension<'u> {
    fn of(suspension: &'u Suspension) -> Self {
        let pending: Option<&'u Pending> = suspension.pending.as_deref();
        Self {
            status: suspension.status,
            operation: suspension.operation.as_ref().map(Arc::as_ref),
            pending: pending.map(PendingForm),
        }
    }
}

impl<'u> Wire<'u> {
    fn of(update: &'u Update) -> Self {
        match update {
            Update::Event(event) => Self::Event(event),
            Update::Text(text) => Self::Text(WireText::of(text)),
            Update::ToolStarted(started) => Self::ToolStarted(WireToolStarted::of(started)),
            Update::ToolResult(result) => Self::ToolResult(WireToolResult::of(result)),
            Update::Suspended(suspension) => Self::Suspended(WireSuspension::of(suspension)),
            Update::Outcome(outcome) => Self::Outcome(outcome),
            Update::Error(error) => Self::Error(error),
        }
    }
}

impl Serialize for Update {
    /// The form of this module's table: `{"type":…,…}`.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Wire::of(self).serialize(serializer)
    }
}

impl Serialize for Text {
    /// `{"reply":…,"text":…}`: a `text` update without its tag.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        WireText::of(self).serialize(serializer)
    }
}

impl Serialize for ToolStarted {
    /// `{"reply":…,"index":…,"call_id":…,"name":…}`, and `"arguments"` when the host opted in.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        WireToolStarted::of(self).serialize(serializer)
    }
}

impl Serialize for ToolResult {
    /// `{"reply":…,"index":…,"call_id":…,"text":…,"is_error":…}`.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        WireToolResult::of(self).serialize(serializer)
    }
}

impl Serialize for Suspension {
    /// `{"status":…,"operation":…,"pending":…}`, `null` for what it does not have.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        WireSuspension::of(self).serialize(serializer)
    }
}
