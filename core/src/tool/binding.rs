//! Binding: the model's JSON arguments turned into a tool's typed input, before the guard.
//!
//! # Invariants
//!
//! - Binding touches nothing: no counter, no reservation, no event. A failure is a
//!   [`BindError`] for the model, never a halt.
//! - Arguments are bound from JSON text with serde_json's nesting limit (128 levels), so a deep
//!   input is a typed error, never a stack overflow.
//! - A message is at most [`MAX_MESSAGE_LEN`] bytes long, whatever the size of the input.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;

use serde::de::DeserializeOwned;

use super::error::{MAX_MESSAGE_LEN, truncate};
use crate::canonical::SignatureError;

/// Binds JSON text to `T`.
///
/// Arguments must be a JSON object; empty or blank text is read as `{}`, as some providers send
/// it for tools without parameters.
pub(crate) fn bind<T: DeserializeOwned>(tool: &Arc<str>, arguments: &str) -> Result<T, BindError> {
    let trimmed = arguments.trim_matches([' ', '\t', '\n', '\r']);
    let text = if trimmed.is_empty() { "{}" } else { arguments };
    if !text.trim_start_matches([' ', '\t', '\n', '\r']).starts_with('{') {
        return Err(BindError::new(tool, BindErrorKind::NotAnObject, "arguments must be a JSON object"));
    }
    serde_json::from_str(text).map_err(|error| {
        let message = error.to_string();
        let kind = match error.classify() {
            serde_json::error::Category::Data => BindErrorKind::Mismatch,
            // serde_json files these under syntax, but the text is valid JSON.
            _ if message.starts_with("number out of range") => BindErrorKind::Mismatch,
            _ if message.starts_with("recursion limit exceeded") => BindErrorKind::TooDeep,
            _ => BindErrorKind::InvalidJson,
        };
        BindError::new(tool, kind, &message)
    })
}

/// What kind of binding problem occurred.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BindErrorKind {
    /// The arguments are valid JSON but not an object.
    NotAnObject,
    /// The arguments are not valid JSON (including truncated text).
    InvalidJson,
    /// The JSON does not fit the input type: wrong type, missing field, unknown variant.
    Mismatch,
    /// The arguments nest deeper than serde_json's limit of 128 levels.
    TooDeep,
    /// The bound input could not be written as canonical JSON (a custom `Serialize` failed, or
    /// a map key is not a string).
    Unsignable,
    /// The input bound, but the tool's own check refused it (see
    /// [`ToolBuilder::validate`](super::ToolBuilder::validate)): the message names where and
    /// which constraint, never the value.
    Invalid,
}

/// Arguments that could not be bound to a tool's input type. Nothing was counted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindError {
    tool: Arc<str>,
    kind: BindErrorKind,
    message: String,
}

impl BindError {
    fn new(tool: &Arc<str>, kind: BindErrorKind, message: &str) -> Self {
        Self { tool: Arc::clone(tool), kind, message: truncate(message, MAX_MESSAGE_LEN).to_owned() }
    }

    pub(crate) fn invalid(tool: &Arc<str>, message: &str) -> Self {
        Self::new(tool, BindErrorKind::Invalid, message)
    }

    pub(crate) fn unsignable(tool: &Arc<str>, error: &SignatureError) -> Self {
        Self::new(tool, BindErrorKind::Unsignable, &error.to_string())
    }

    /// The tool whose arguments failed to bind.
    #[must_use]
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// What went wrong.
    #[must_use]
    pub fn kind(&self) -> BindErrorKind {
        self.kind
    }

    /// The binding problem, at most [`MAX_MESSAGE_LEN`] bytes.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for BindError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid arguments for tool {}: {}", self.tool, self.message)
    }
}

impl StdError for BindError {}
