//! An MCP tool's input schema, compiled once per connection and checked against every call's
//! arguments after binding and before the guard.
//!
//! MCP servers describe their tools' arguments with JSON Schema. This module checks the subset
//! that tool schemas use, and refuses, explicitly, a schema that uses anything else.
//!
//! | keywords | checked |
//! |---|---|
//! | `type` (one or a list; `integer` is a number without fractional part), `enum`, `const` | yes |
//! | `properties`, `required`, `additionalProperties`, `minProperties`, `maxProperties`, `propertyNames` | yes |
//! | `items` (a schema, or draft-07's list), `prefixItems`, `additionalItems`, `minItems`, `maxItems`, `uniqueItems`, `contains` | yes |
//! | `minLength`, `maxLength` (in Unicode code points) | yes |
//! | `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum` (number, or draft-04's boolean), `multipleOf` | yes |
//! | `allOf`, `anyOf`, `oneOf`, `not`, `if` / `then` / `else` | yes |
//! | `$ref` to `#` or a JSON pointer in the same document (`#/$defs/…`, `#/definitions/…`) | yes |
//! | `$schema`, `$id`, `$comment`, `$anchor`, `$defs`, `definitions`, `title`, `description`, `default`, `examples`, `deprecated`, `readOnly`, `writeOnly`, `format`, `contentEncoding`, `contentMediaType`, `contentSchema`, `x-…` | annotations: they never reject |
//! | anything else (`pattern`, `patternProperties`, `dependentRequired`, `dependentSchemas`, `dependencies`, `unevaluated…`, `$dynamicRef`, `minContains`, remote `$ref`, …) | **refused** |
//!
//! `format` is an annotation, as JSON Schema 2019-09 and later define it by default: a value
//! that is not a valid `uri` is not refused here (the server still checks its own input).
//!
//! # Invariants
//!
//! - A keyword this module does not check never makes a schema accept what it would refuse:
//!   compiling such a schema fails with [`SchemaError::Unsupported`] (the tool is skipped and
//!   reported), unless the host chose [`Unsupported::LeaveToServer`], which is then listed by
//!   [`InputSchema::unchecked`].
//! - A refusal names where (a JSON pointer into the arguments, built from the schema's property
//!   names and array indices) and which constraint; it never quotes an argument's value.
//! - Checking is bounded: at most [`MAX_DEPTH`] nested schema applications, so a `$ref` cycle
//!   that never descends into the arguments is a refusal, never a stack overflow.
//! - Numbers are compared by value: `1`, `1.0` and `1e0` are the same number for `enum`,
//!   `const`, `uniqueItems` and the bounds.

mod compile;
mod number;
mod validate;

use std::fmt;

use serde_json::Value;

pub use compile::Unsupported;

/// How many nested schema applications one check may go through before it refuses.
pub const MAX_DEPTH: usize = 256;

/// A compiled input schema.
///
/// ```
/// use loopbound_mcp::schema::{InputSchema, Unsupported};
/// use serde_json::json;
///
/// let schema = InputSchema::compile(
///     &json!({
///         "type": "object",
///         "properties": {"a": {"type": "number"}, "b": {"type": "number", "maximum": 10}},
///         "required": ["a", "b"]
///     }),
///     Unsupported::Refuse,
/// )?;
/// assert_eq!(schema.check(&json!({"a": 1, "b": 2.5})), Ok(()));
/// assert_eq!(schema.check(&json!({"a": "one", "b": 2})).unwrap_err().to_string(), "at /a: expected a number");
/// assert_eq!(schema.check(&json!({"a": 1})).unwrap_err().to_string(), "at /: missing required property `b`");
/// assert_eq!(schema.check(&json!({"a": 1, "b": 11})).unwrap_err().to_string(), "at /b: expected a number <= 10");
///
/// let refused = InputSchema::compile(&json!({"type": "string", "pattern": "^a"}), Unsupported::Refuse);
/// assert_eq!(refused.unwrap_err().to_string(), "unsupported schema keyword `pattern` at /");
/// # Ok::<(), loopbound_mcp::schema::SchemaError>(())
/// ```
#[derive(Clone, Debug)]
pub struct InputSchema {
    nodes: Vec<compile::Node>,
    root: usize,
    unchecked: Vec<String>,
}

impl InputSchema {
    /// Compiles `schema`; `unsupported` says what to do with a keyword this module does not check.
    ///
    /// # Errors
    ///
    /// [`SchemaError`] when the schema uses an unsupported keyword (under
    /// [`Unsupported::Refuse`]), is malformed (`"minimum": "ten"`), or refers outside itself.
    pub fn compile(schema: &Value, unsupported: Unsupported) -> Result<Self, SchemaError> {
        compile::compile(schema, unsupported)
    }

    /// Checks `arguments` against the schema.
    ///
    /// # Errors
    ///
    /// The first [`Violation`] found: where, and which constraint.
    pub fn check(&self, arguments: &Value) -> Result<(), Violation> {
        validate::check(self, arguments)
    }

    /// The keywords this schema uses that are not checked here, each with the JSON pointer of
    /// the schema that holds it; empty unless compiled with [`Unsupported::LeaveToServer`].
    #[must_use]
    pub fn unchecked(&self) -> &[String] {
        &self.unchecked
    }
}

/// Why a schema cannot be checked here. The tool is not offered to the model.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemaError {
    /// A keyword this module does not check, at this JSON pointer into the schema.
    Unsupported {
        /// The keyword.
        keyword: String,
        /// Where, in the schema.
        at: String,
    },
    /// A keyword whose value has the wrong shape.
    Malformed {
        /// The keyword.
        keyword: String,
        /// Where, in the schema.
        at: String,
        /// What was expected.
        expected: &'static str,
    },
    /// A `$ref` that does not resolve inside the schema itself.
    Unresolved {
        /// The reference, as written by the server.
        reference: String,
        /// Where, in the schema.
        at: String,
    },
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unsupported { keyword, at } => {
                write!(f, "unsupported schema keyword `{}` at {}", short(keyword), pointer(at))
            }
            Self::Malformed { keyword, at, expected } => {
                write!(f, "malformed schema: `{}` at {} must be {expected}", short(keyword), pointer(at))
            }
            Self::Unresolved { reference, at } => write!(
                f,
                "unsupported schema reference `{}` at {}: only references inside the schema are followed",
                short(reference),
                pointer(at)
            ),
        }
    }
}

impl std::error::Error for SchemaError {}

/// Arguments that do not satisfy a schema: where, and which constraint. Never the value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    at: String,
    constraint: String,
}

impl Violation {
    pub(crate) fn new(at: String, constraint: String) -> Self {
        Self { at, constraint }
    }

    /// Where: a JSON pointer into the arguments (`/` for the arguments themselves).
    #[must_use]
    pub fn at(&self) -> &str {
        pointer(&self.at)
    }

    /// The constraint, in words, such as "expected a number <= 10".
    #[must_use]
    pub fn constraint(&self) -> &str {
        &self.constraint
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at {}: {}", self.at(), self.constraint)
    }
}

impl std::error::Error for Violation {}

/// `/` for the root pointer, else the pointer itself.
fn pointer(at: &str) -> &str {
    if at.is_empty() { "/" } else { at }
}

/// A server-given name, cut to 64 bytes on a character boundary.
pub(crate) fn short(text: &str) -> &str {
    let mut end = text.len().min(64);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Appends one reference token to a JSON pointer, escaped as RFC 6901 says.
pub(crate) fn push_token(pointer: &mut String, token: &str) {
    pointer.push('/');
    for c in short(token).chars() {
        match c {
            '~' => pointer.push_str("~0"),
            '/' => pointer.push_str("~1"),
            c => pointer.push(c),
        }
    }
}
