//! Why a value has no signature.
//!
//! # Invariants
//!
//! - Each variant names one cause; only [`SignatureError::Custom`] carries text, and that text
//!   comes from the value's own `Serialize` implementation.

use std::fmt;

use serde::ser;

/// Why a value has no signature.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignatureError {
    /// The value nests arrays and objects deeper than [`MAX_DEPTH`](super::MAX_DEPTH).
    TooDeep {
        /// The deepest nesting accepted.
        limit: usize,
    },
    /// A map key is not a string, a number, a boolean or a unit variant.
    KeyNotAString,
    /// A serde_json `RawValue` (or a value posing as one) holds text that is not JSON.
    InvalidRawJson,
    /// The value's own `Serialize` implementation failed, with this message.
    Custom(String),
}

impl fmt::Display for SignatureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooDeep { limit } => write!(f, "the value nests deeper than {limit} levels"),
            Self::KeyNotAString => {
                f.write_str("a map key must be a string, a number, a boolean or a unit variant")
            }
            Self::InvalidRawJson => f.write_str("a raw JSON value holds text that is not JSON"),
            Self::Custom(message) => write!(f, "the value could not be serialized: {message}"),
        }
    }
}

impl std::error::Error for SignatureError {}

impl ser::Error for SignatureError {
    fn custom<M: fmt::Display>(message: M) -> Self {
        Self::Custom(message.to_string())
    }
}
