//! Why an invocation produced no result, and what the model is told about it.
//!
//! # Invariants
//!
//! - A [`ToolError::Stopped`] means the run must end; every other kind becomes an error result
//!   for the model and the loop goes on.
//! - Messages handed to the model are at most [`MAX_MESSAGE_LEN`] bytes of the error's own text,
//!   plus a short fixed frame naming the tool.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;

use super::binding::BindError;
use crate::guard::{Refuse, Stop};
use crate::progress::Nudge;

/// The error a tool body returns; its text goes back to the model.
pub type BodyError = Box<dyn StdError + Send + Sync>;

/// Longest message, in bytes, that a binding or body error hands to the model.
pub const MAX_MESSAGE_LEN: usize = 240;

/// Why an invocation did not produce a result.
#[derive(Debug)]
#[non_exhaustive]
pub enum ToolError {
    /// No tool of this name is in the set (only from a call by name). Nothing was counted.
    NotFound {
        /// The requested name, truncated to [`MAX_MESSAGE_LEN`] bytes.
        name: String,
    },
    /// The arguments did not bind. Nothing was counted.
    Bind(BindError),
    /// The body ran and returned an error. The attempt stays counted; this is not a halt.
    Failed {
        /// The tool's name.
        tool: Arc<str>,
        /// The body's error.
        source: BodyError,
    },
    /// The run must end: the guard refused, or the scope stopped before or during the body.
    Stopped(Stop),
    /// The progress policy answered a repetition or a cycle with its one nudge: the body did
    /// not run, nothing was reserved, and the run goes on (the next one halts). Its message
    /// tells the model what it repeated.
    Nudged(Nudge),
}

impl ToolError {
    /// The error result to hand to the model, or `None` when the run must end instead.
    #[must_use]
    pub fn model_message(&self) -> Option<String> {
        match self {
            Self::NotFound { name } => Some(format!("Error: tool {name} not found.")),
            Self::Bind(error) => Some(format!("Error: {error}.")),
            Self::Failed { tool, source } => {
                let text = source.to_string();
                Some(format!("Error: tool {tool} failed: {}", truncate(&text, MAX_MESSAGE_LEN)))
            }
            Self::Nudged(nudge) => Some(nudge.to_string()),
            Self::Stopped(_) => None,
        }
    }

    /// A `NotFound` error for `name`, truncated.
    pub(crate) fn not_found(name: &str) -> Self {
        Self::NotFound { name: truncate(name, MAX_MESSAGE_LEN).to_owned() }
    }
}

impl fmt::Display for ToolError {
    /// `Failed` writes which tool failed and leaves the body's error to
    /// [`source`](StdError::source); `Bind` and `Stopped` write the inner error's words (they
    /// are transparent).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotFound { name } => write!(f, "tool {name} not found"),
            Self::Bind(error) => error.fmt(f),
            Self::Failed { tool, .. } => write!(f, "tool {tool} failed"),
            Self::Stopped(stop) => stop.fmt(f),
            Self::Nudged(nudge) => {
                write!(f, "no progress: a call to {} was answered with a nudge", nudge.tool())
            }
        }
    }
}

impl StdError for ToolError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            Self::Failed { source, .. } => Some(source.as_ref()),
            Self::Bind(_) | Self::Stopped(_) | Self::NotFound { .. } | Self::Nudged(_) => None,
        }
    }
}

impl From<BindError> for ToolError {
    fn from(error: BindError) -> Self {
        Self::Bind(error)
    }
}

impl From<Stop> for ToolError {
    fn from(stop: Stop) -> Self {
        Self::Stopped(stop)
    }
}

impl From<Refuse> for ToolError {
    fn from(refuse: Refuse) -> Self {
        match refuse {
            Refuse::Stop(stop) => Self::Stopped(stop),
            Refuse::Nudge(nudge) => Self::Nudged(nudge),
        }
    }
}

/// The longest prefix of `text` of at most `max` bytes that ends on a char boundary.
pub(crate) fn truncate(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}
