//! An MCP tool's input schema, compiled once per connection and checked against every call's
//! arguments after binding and before the guard.
//!
//! MCP servers describe their tools' arguments with JSON Schema. This module checks the whole
//! of it, drafts 4, 6, 7, 2019-09 and 2020-12 (the draft `$schema` names; 2020-12, MCP's
//! default, when it names none; a schema without `$schema` that is malformed as 2020-12 is read
//! as draft 7, then draft 4, whose forms such as `items` as a list it may use), with the
//! [`jsonschema`] crate, set up so that:
//!
//! - **nothing is fetched**: no HTTP client or file reader is compiled in, and a `$ref` to a
//!   document outside the schema is not followed. Such a tool is left out with
//!   [`SchemaError::Unresolved`]: offered with that part unchecked, it would let arguments
//!   through (and count them) that the server then refuses. A host that prefers to offer it
//!   chooses [`Unsupported::LeaveToServer`]: the `$ref` is then dropped and listed by
//!   [`InputSchema::unchecked`]. The JSON Schema meta-schemas are known without fetching;
//! - **patterns match in linear time**: `pattern` and `patternProperties` run on the `regex`
//!   crate's engine (no backtracking), since the server's pattern meets the model's input. A
//!   pattern that engine cannot run (look-around, back-references) is
//!   [`SchemaError::Unsupported`] in the same way;
//! - **`format`, `contentEncoding` and `contentMediaType` are annotations** in every draft, as
//!   2019-09 and later define them by default: a value that is not a valid `uri` is not refused
//!   here (the server still checks its own input).
//!
//! # Invariants
//!
//! - A keyword is never dropped silently: a schema this module cannot check wholly is refused
//!   ([`SchemaError`]), unless the host chose [`Unsupported::LeaveToServer`], and then what was
//!   dropped is listed by [`InputSchema::unchecked`].
//! - A refusal ([`Violation`]) names where (a JSON pointer into the arguments, each token cut to
//!   64 bytes, the pointer cut to its longest ancestor of at most [`MAX_POINTER_LEN`] bytes)
//!   and which constraint, in words and values taken from the schema; it never quotes an
//!   argument's value, and its text is at most [`MAX_MESSAGE_LEN`] bytes.
//! - Compiling is bounded: a schema nests at most [`MAX_SCHEMA_DEPTH`] levels and holds at
//!   most [`MAX_SCHEMA_NODES`] objects and arrays, measured without recursion before the
//!   validator sees it, and compiles on a thread with a stack of its own.
//! - Checking is bounded: arguments nested deeper than [`MAX_DEPTH`] levels are refused before
//!   the validator sees them. The stack a check may need grows with the schema's size times the
//!   arguments' depth; a check that may need more than a caller's stack is sure to have runs
//!   on a thread with a stack sized for it, and one that may need more than
//!   [`MAX_CHECK_STACK`] bytes is refused. A `$ref` cycle that never descends into the
//!   arguments ends (it adds no constraint), never a stack overflow.
//! - Numbers are compared by value: `1`, `1.0` and `1e0` are the same number for `enum`,
//!   `const`, `uniqueItems` and the bounds.

mod bounds;
mod build;
mod check;
mod describe;
mod stack;

use std::fmt;
use std::sync::Arc;

use loopbound::tool::MAX_MESSAGE_LEN;
use serde_json::Value;

pub use build::Unsupported;
pub use stack::MAX_CHECK_STACK;

/// Deepest nesting of arrays and objects in the arguments that is checked (deeper arguments
/// are refused): the depth loopbound binds arguments to.
pub const MAX_DEPTH: usize = loopbound::canonical::MAX_DEPTH;

/// Deepest nesting of arrays and objects in a schema that is compiled.
pub const MAX_SCHEMA_DEPTH: usize = 128;

/// Most arrays and objects a schema may hold, outside the values of `enum`, `const`, `default`
/// and `examples`.
pub const MAX_SCHEMA_NODES: usize = 16_384;

/// Longest JSON pointer, in bytes, that a [`Violation`] names.
pub const MAX_POINTER_LEN: usize = 96;

/// A compiled input schema.
///
/// ```
/// use loopbound_mcp::schema::{InputSchema, Unsupported};
/// use serde_json::json;
///
/// let schema = InputSchema::compile(
///     &json!({
///         "type": "object",
///         "properties": {
///             "a": {"type": "number"},
///             "b": {"type": "number", "maximum": 10},
///             "c": {"type": "string", "pattern": "^[a-z]+$"}
///         },
///         "required": ["a", "b"]
///     }),
///     Unsupported::Refuse,
/// )?;
/// assert_eq!(schema.check(&json!({"a": 1, "b": 2.5, "c": "abc"})), Ok(()));
/// assert_eq!(schema.check(&json!({"a": "one", "b": 2})).unwrap_err().to_string(), "at /a: expected a number");
/// assert_eq!(schema.check(&json!({"a": 1})).unwrap_err().to_string(), "at /: missing required property `b`");
/// assert_eq!(schema.check(&json!({"a": 1, "b": 11})).unwrap_err().to_string(), "at /b: expected a number <= 10");
/// assert_eq!(
///     schema.check(&json!({"a": 1, "b": 2, "c": "ABC"})).unwrap_err().to_string(),
///     "at /c: expected a string matching the pattern `^[a-z]+$`"
/// );
///
/// let remote = InputSchema::compile(&json!({"$ref": "https://example.com/s.json"}), Unsupported::Refuse);
/// assert_eq!(
///     remote.unwrap_err().to_string(),
///     "unsupported schema reference `https://example.com/s.json` at /: only references inside the schema are followed"
/// );
/// # Ok::<(), loopbound_mcp::schema::SchemaError>(())
/// ```
#[derive(Clone)]
pub struct InputSchema {
    validator: Arc<jsonschema::Validator>,
    /// The schema's arrays and objects, as [`bounds::schema_nodes`] counts them.
    nodes: usize,
    unchecked: Vec<String>,
}

impl InputSchema {
    /// Compiles `schema`; `unsupported` says what to do with a part this module cannot check.
    ///
    /// # Errors
    ///
    /// [`SchemaError`] when the schema refers outside itself or uses a pattern the linear-time
    /// engine cannot run (under [`Unsupported::Refuse`]), is malformed (`"minimum": "ten"`), or
    /// is too deep or too large.
    pub fn compile(schema: &Value, unsupported: Unsupported) -> Result<Self, SchemaError> {
        build::compile(schema, unsupported)
    }

    /// Checks `arguments` against the schema.
    ///
    /// # Errors
    ///
    /// The first [`Violation`] found: where, and which constraint.
    pub fn check(&self, arguments: &Value) -> Result<(), Violation> {
        check::check(self, arguments)
    }

    /// What of the schema is not checked here, each with the JSON pointer of the schema that
    /// holds it (`pattern at /properties/code`); empty unless compiled with
    /// [`Unsupported::LeaveToServer`].
    #[must_use]
    pub fn unchecked(&self) -> &[String] {
        &self.unchecked
    }
}

impl fmt::Debug for InputSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InputSchema")
            .field("draft", &self.validator.draft())
            .field("nodes", &self.nodes)
            .field("unchecked", &self.unchecked)
            .finish_non_exhaustive()
    }
}

/// Why a schema cannot be checked here. The tool is not offered to the model.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemaError {
    /// A part this module does not check: a pattern the linear-time engine cannot run
    /// (`pattern`, or a key of `patternProperties`), or a `$schema` that names no draft known
    /// here; at this JSON pointer into the schema.
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
        /// What the meta-schema expects, in words.
        expected: String,
    },
    /// A `$ref` that does not resolve inside the schema itself (a remote document is never
    /// fetched).
    Unresolved {
        /// The reference, as resolved against the schema's base URI.
        reference: String,
        /// Where, in the schema (`/` when it cannot be told).
        at: String,
    },
    /// The schema nests arrays and objects deeper than [`MAX_SCHEMA_DEPTH`].
    TooDeep {
        /// The limit.
        limit: usize,
    },
    /// The schema holds more arrays and objects than [`MAX_SCHEMA_NODES`].
    TooLarge {
        /// The limit.
        limit: usize,
    },
    /// No thread could be started to compile the schema on a stack of its own; nothing was
    /// compiled.
    NoThread,
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unsupported { keyword, at } => {
                write!(f, "unsupported schema keyword `{}` at {}", short(keyword), pointer(at))
            }
            Self::Malformed { keyword, at, expected } => {
                write!(f, "malformed schema: `{}` at {}", short(keyword), pointer(at))?;
                match expected.strip_prefix("expected ") {
                    Some(form) => write!(f, " must be {form}"),
                    None => write!(f, ": {expected}"),
                }
            }
            Self::Unresolved { reference, at } => write!(
                f,
                "unsupported schema reference `{}` at {}: only references inside the schema are followed",
                short(reference),
                pointer(at)
            ),
            Self::TooDeep { limit } => write!(f, "the schema nests deeper than {limit} levels"),
            Self::TooLarge { limit } => write!(f, "the schema holds more than {limit} arrays and objects"),
            Self::NoThread => write!(f, "no thread could be started to compile the schema"),
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
    /// A violation at `at` (a JSON pointer, cut to [`MAX_POINTER_LEN`] bytes on a token
    /// boundary), with `constraint` cut so that the whole text fits [`MAX_MESSAGE_LEN`].
    pub(crate) fn new(at: String, constraint: impl Into<String>) -> Self {
        let at = ancestor(at);
        let mut constraint = constraint.into();
        // "at " + pointer + ": " + constraint.
        let room = MAX_MESSAGE_LEN.saturating_sub(5 + pointer(&at).len());
        constraint.truncate(boundary(&constraint, room));
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

/// The longest ancestor of the pointer `at` that fits [`MAX_POINTER_LEN`] bytes.
fn ancestor(mut at: String) -> String {
    while at.len() > MAX_POINTER_LEN {
        let end = at.rfind('/').unwrap_or(0);
        at.truncate(end);
    }
    at
}

/// The largest index at most `max` that is a character boundary of `text`.
fn boundary(text: &str, max: usize) -> usize {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    end
}

/// A server-given name, cut to 64 bytes on a character boundary.
pub(crate) fn short(text: &str) -> &str {
    &text[..boundary(text, 64)]
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

/// The JSON pointer made of `tokens`.
pub(crate) fn pointer_of<'a>(tokens: impl IntoIterator<Item = &'a str>) -> String {
    let mut at = String::new();
    for token in tokens {
        push_token(&mut at, token);
    }
    at
}
