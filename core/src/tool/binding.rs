//! Binding: the model's JSON arguments turned into a tool's typed input, before the guard.
//!
//! # Invariants
//!
//! - Binding touches nothing: no counter, no reservation, no event. A failure is a
//!   [`BindError`] for the model, never a halt.
//! - Arguments are read by loopbound's own JSON reader ([`loopbound_json::from_str`]: no
//!   serde_json parser, no serde_json feature): numbers by value, nesting at most [`MAX_DEPTH`](crate::canonical::MAX_DEPTH) levels, so a deep input is a typed
//!   error, never a stack overflow.
//! - A [`BindError`] holds no argument value, in its message, its `Display` or its `Debug`: it
//!   names the field path (declared field and variant names, array indices; other object keys
//!   as `[<key>]`), what the type expected and what kind of value was found.
//! - Its kind comes from the reader's typed classification, never from matching message text.
//! - A message is at most [`MAX_MESSAGE_LEN`] bytes long, whatever the size of the input.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;

use serde::de::DeserializeOwned;

use super::error::{MAX_MESSAGE_LEN, truncate};
use crate::canonical::SignatureError;
use loopbound_json::Class;

/// Binds JSON text to `T`.
///
/// Arguments must be a JSON object; empty or blank text is read as `{}`, as some providers send
/// it for tools without parameters.
pub(crate) fn bind<T: DeserializeOwned>(tool: &Arc<str>, arguments: &str) -> Result<T, BindError> {
    const WHITESPACE: [char; 4] = [' ', '\t', '\n', '\r'];
    let trimmed = arguments.trim_start_matches(WHITESPACE);
    let text = if trimmed.is_empty() { "{}" } else { arguments };
    if !text.trim_start_matches(WHITESPACE).starts_with('{') {
        return Err(BindError::new(tool, BindErrorKind::NotAnObject, "", "arguments must be a JSON object"));
    }
    loopbound_json::from_str(text).map_err(|error| {
        let described = error.describe(text);
        let kind = match described.class {
            Class::InvalidJson => BindErrorKind::InvalidJson,
            Class::TooDeep => BindErrorKind::TooDeep,
            // A class the codec adds later is, like every class but the two above, about the
            // text against the type.
            _ => BindErrorKind::Mismatch,
        };
        BindError::new(tool, kind, &described.path, &described.message)
    })
}

/// What kind of binding problem occurred.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BindErrorKind {
    /// The arguments are not a JSON object (their text does not start with `{`).
    NotAnObject,
    /// The arguments are not valid JSON (including truncated text). Decided before any other
    /// kind: text that is not JSON is reported as such, whatever the type found first.
    InvalidJson,
    /// The JSON does not fit the input type: wrong type, missing field, unknown variant, a
    /// number out of the field's range or with a fraction for an integer field.
    Mismatch,
    /// The input type reads arrays and objects nested deeper than [`MAX_DEPTH`](crate::canonical::MAX_DEPTH) levels.
    TooDeep,
    /// The bound input could not be written as canonical JSON (a custom `Serialize` failed, a
    /// map key is not a string, or it nests deeper than [`MAX_DEPTH`](crate::canonical::MAX_DEPTH) levels).
    Unsignable,
    /// The input bound, but the tool's own check refused it (see
    /// [`ToolBuilder::validate`](super::ToolBuilder::validate)): the message names where and
    /// which constraint, never the value.
    Invalid,
}

/// Arguments that could not be bound to a tool's input type. Nothing was counted.
///
/// Neither its message nor its `Display` or `Debug` output holds a value of the arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindError {
    tool: Arc<str>,
    kind: BindErrorKind,
    path: String,
    message: String,
}

impl BindError {
    fn new(tool: &Arc<str>, kind: BindErrorKind, path: &str, message: &str) -> Self {
        Self {
            tool: Arc::clone(tool),
            kind,
            path: path.to_owned(),
            message: truncate(message, MAX_MESSAGE_LEN).to_owned(),
        }
    }

    /// The error for an input that bound but that the tool's own check refused; `message` names
    /// where and which constraint, never the value.
    pub(crate) fn invalid(tool: &Arc<str>, message: &str) -> Self {
        Self::new(tool, BindErrorKind::Invalid, "", message)
    }

    /// The error for a bound input that has no signature. A `Serialize` implementation's own
    /// message is left out: it may quote the value.
    pub(crate) fn unsignable(tool: &Arc<str>, error: &SignatureError) -> Self {
        let message = match error {
            SignatureError::TooDeep { limit } => {
                format!("the bound input nests deeper than {limit} levels and has no signature")
            }
            SignatureError::KeyNotAString => {
                "the bound input has a map key that is not a string, a number, a boolean or a unit variant"
                    .to_owned()
            }
            SignatureError::InvalidRawJson => "the bound input holds raw text that is not JSON".to_owned(),
            _ => "the bound input could not be serialized".to_owned(),
        };
        Self::new(tool, BindErrorKind::Unsignable, "", &message)
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

    /// Where in the arguments: field and variant names and array indices, outermost first
    /// (`shapes[2].radius`), with `[<key>]` for an object key the type does not declare; empty
    /// for the arguments as a whole.
    #[must_use]
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The binding problem with its path, at most [`MAX_MESSAGE_LEN`] bytes.
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
