//! What went wrong while binding JSON text to a type, recorded as a typed problem and a path,
//! never as the input's values.
//!
//! # Invariants
//!
//! - No constructor keeps a value of the input: serde's `Unexpected` is reduced to its
//!   [`Category`] ("a string", "an integer"), an unknown variant or field to the list of
//!   declared names, and a custom message (the input type's own validation, which may quote
//!   what it refused) is dropped and recorded as [`Problem::Refused`]. What is kept is the
//!   *expected* side, which comes from the type: its `Expected` text, field and variant names.
//! - The error is one pointer wide, so that the deserializer's results stay small on the
//!   success path.

use std::fmt;

use serde::de::{Expected, Unexpected};

use super::path::{Segment, render};

/// Longest `expected` text kept, in bytes.
const MAX_EXPECTED_LEN: usize = 80;

/// A grammar error, at a byte offset of the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Syntax {
    pub(crate) code: SyntaxCode,
    pub(crate) at: usize,
}

/// Which grammar rule the text broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SyntaxCode {
    Eof,
    ExpectedValue,
    ExpectedColon,
    ExpectedCommaOrBracket,
    ExpectedCommaOrBrace,
    KeyMustBeString,
    InvalidLiteral,
    InvalidNumber,
    InvalidEscape,
    LoneSurrogate,
    ControlCharacter,
    TrailingCharacters,
    /// Not a grammar error: nesting deeper than a skip's limit (see `Reader::skip_value`).
    TooDeep,
}

impl SyntaxCode {
    fn describe(self) -> &'static str {
        match self {
            Self::Eof => "the text ends before the value does",
            Self::ExpectedValue => "expected a value",
            Self::ExpectedColon => "expected `:`",
            Self::ExpectedCommaOrBracket => "expected `,` or `]`",
            Self::ExpectedCommaOrBrace => "expected `,` or `}`",
            Self::KeyMustBeString => "an object key must be a string",
            Self::InvalidLiteral => "expected `true`, `false` or `null`",
            Self::InvalidNumber => "invalid number",
            Self::InvalidEscape => "invalid escape in a string",
            Self::LoneSurrogate => "a \\u escape is an unpaired surrogate",
            Self::ControlCharacter => "a control character in a string must be escaped",
            Self::TrailingCharacters => "text after the value",
            Self::TooDeep => "nesting too deep",
        }
    }
}

/// The kind of value found where another was expected, without the value itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Category {
    Null,
    Bool,
    Integer,
    Float,
    Char,
    String,
    Bytes,
    Array,
    Object,
    Option,
    Enum,
    Variant,
    Other,
}

impl Category {
    /// The category of serde's description of an unexpected value.
    pub(crate) fn of(unexpected: &Unexpected<'_>) -> Self {
        match unexpected {
            Unexpected::Bool(_) => Self::Bool,
            Unexpected::Unsigned(_) | Unexpected::Signed(_) => Self::Integer,
            Unexpected::Float(_) => Self::Float,
            Unexpected::Char(_) => Self::Char,
            Unexpected::Str(_) => Self::String,
            Unexpected::Bytes(_) => Self::Bytes,
            Unexpected::Unit => Self::Null,
            Unexpected::Option => Self::Option,
            Unexpected::Seq => Self::Array,
            Unexpected::Map => Self::Object,
            Unexpected::Enum => Self::Enum,
            Unexpected::UnitVariant
            | Unexpected::NewtypeVariant
            | Unexpected::TupleVariant
            | Unexpected::StructVariant => Self::Variant,
            Unexpected::NewtypeStruct | Unexpected::Other(_) => Self::Other,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Self::Null => "null",
            Self::Bool => "a boolean",
            Self::Integer => "an integer",
            Self::Float => "a number with a fraction",
            Self::Char => "a character",
            Self::String => "a string",
            Self::Bytes => "bytes",
            Self::Array => "an array",
            Self::Object => "an object",
            Self::Option => "an optional value",
            Self::Enum => "an enum",
            Self::Variant => "an enum variant",
            Self::Other => "another kind of value",
        }
    }
}

/// One binding problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Problem {
    /// The text is not JSON.
    Syntax(Syntax),
    /// Arrays and objects nest deeper than the limit.
    TooDeep { limit: usize },
    /// A value of the wrong kind.
    InvalidType { found: Category, expected: String },
    /// A value of the right kind the type refused.
    InvalidValue { found: Category, expected: String },
    /// An array or tuple of the wrong length.
    InvalidLength { len: usize, expected: String },
    /// A number beyond every integer or float the type can hold.
    OutOfRange { expected: String },
    /// A variant the enum does not declare.
    UnknownVariant { known: &'static [&'static str] },
    /// A field the struct does not declare (with `deny_unknown_fields`).
    UnknownField { known: &'static [&'static str] },
    /// A required field is absent.
    MissingField(&'static str),
    /// A field given twice.
    DuplicateField(&'static str),
    /// More array elements or object entries than the type reads.
    TooMany,
    /// The type's own validation refused the value; its message is withheld, since it may quote
    /// the value.
    Refused,
}

/// How an [`Error`] is classified for the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Class {
    /// The text is not one JSON value (including truncated text and text after the value).
    InvalidJson,
    /// Arrays and objects nest deeper than [`MAX_DEPTH`](crate::canonical::MAX_DEPTH).
    TooDeep,
    /// The text is JSON, but it does not fit the type: a wrong kind of value, a missing or
    /// unknown field, an unknown variant, a number out of the type's range, or a value the
    /// type's own validation refused.
    Mismatch,
}

/// Why JSON text did not bind to a type, and where in the value.
///
/// It holds no value of the text, in its [`describe`](Self::describe)d message, its `Display`
/// or its `Debug`: only the path (field and variant names, array indices, `[<key>]` for other
/// object keys), what the type expected and what kind of value was found. It is one pointer
/// wide.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error(Box<Inner>);

#[derive(Clone, Debug, PartialEq, Eq)]
struct Inner {
    problem: Problem,
    /// Innermost first: segments are added as the error travels out of the value.
    path: Vec<Segment>,
}

/// An [`Error`] rendered for people and models, made by [`Error::describe`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Described {
    /// How the error is classified.
    pub class: Class,
    /// Where in the value, as `shapes[2].Circle.radius` (empty at the top level).
    pub path: String,
    /// The whole message: the path, then the problem, with a syntax error's position as a
    /// line and column of the text.
    pub message: String,
}

impl Error {
    pub(crate) fn new(problem: Problem) -> Self {
        Self(Box::new(Inner { problem, path: Vec::new() }))
    }

    pub(crate) fn syntax(syntax: Syntax) -> Self {
        match syntax.code {
            SyntaxCode::TooDeep => Self::new(Problem::TooDeep { limit: crate::canonical::MAX_DEPTH }),
            _ => Self::new(Problem::Syntax(syntax)),
        }
    }

    pub(crate) fn too_deep() -> Self {
        Self::new(Problem::TooDeep { limit: crate::canonical::MAX_DEPTH })
    }

    pub(crate) fn invalid_type_of(found: Category, expected: &dyn Expected) -> Self {
        Self::new(Problem::InvalidType { found, expected: expected_text(expected) })
    }

    pub(crate) fn out_of_range(expected: &dyn Expected) -> Self {
        Self::new(Problem::OutOfRange { expected: expected_text(expected) })
    }

    /// The error, found inside `segment` of its parent value.
    #[must_use]
    pub(crate) fn within(mut self, segment: Segment) -> Self {
        self.0.path.push(segment);
        self
    }

    #[cfg(test)]
    pub(crate) fn problem(&self) -> &Problem {
        &self.0.problem
    }

    pub(crate) fn is_syntax(&self) -> bool {
        matches!(self.0.problem, Problem::Syntax(_))
    }

    /// The class, path and message of the error, with positions counted in `text`, the text
    /// the error was read from (any other text gives a wrong position, never a panic).
    #[must_use]
    pub fn describe(&self, text: &str) -> Described {
        let path = render(&self.0.path);
        let (class, problem) = match &self.0.problem {
            Problem::Syntax(syntax) => {
                let (line, column) = line_and_column(text, syntax.at);
                let message =
                    format!("invalid JSON at line {line} column {column}: {}", syntax.code.describe());
                (Class::InvalidJson, message)
            }
            Problem::TooDeep { limit } => {
                (Class::TooDeep, format!("arrays and objects nest deeper than {limit} levels"))
            }
            other => (Class::Mismatch, mismatch(other)),
        };
        let message = if path.is_empty() { problem } else { format!("{path}: {problem}") };
        Described { class, path, message }
    }
}

/// The text of a mismatch.
fn mismatch(problem: &Problem) -> String {
    match problem {
        Problem::InvalidType { found, expected } => {
            format!("invalid type: {}, expected {expected}", found.describe())
        }
        Problem::InvalidValue { found, expected } => {
            format!("invalid value: {}, expected {expected}", found.describe())
        }
        Problem::InvalidLength { len, expected } => format!("invalid length {len}, expected {expected}"),
        Problem::OutOfRange { expected } => format!("number out of range, expected {expected}"),
        Problem::UnknownVariant { known } => format!("unknown variant, {}", one_of(known)),
        Problem::UnknownField { known } => format!("unknown field, {}", one_of(known)),
        Problem::MissingField(field) => format!("missing field `{field}`"),
        Problem::DuplicateField(field) => format!("duplicate field `{field}`"),
        Problem::TooMany => "more elements than the input type reads".to_owned(),
        Problem::Refused => "invalid value: refused by the input type's own validation".to_owned(),
        Problem::Syntax(_) | Problem::TooDeep { .. } => String::new(),
    }
}

/// "expected one of `a`, `b`", or "there are none" for an empty list.
fn one_of(names: &[&str]) -> String {
    if names.is_empty() {
        return "there are none".to_owned();
    }
    let quoted: Vec<String> = names.iter().map(|name| format!("`{name}`")).collect();
    format!("expected one of {}", quoted.join(", "))
}

/// The text of what the type expected, at most [`MAX_EXPECTED_LEN`] bytes.
fn expected_text(expected: &dyn Expected) -> String {
    let mut text = expected.to_string();
    if text.len() > MAX_EXPECTED_LEN {
        let mut end = MAX_EXPECTED_LEN;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// The 1-based line and column (in characters) of byte `at` of `text`.
fn line_and_column(text: &str, at: usize) -> (usize, usize) {
    let mut end = at.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = text.get(..end).unwrap_or_default();
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |index| index + 1);
    let column = before.get(line_start..).unwrap_or_default().chars().count() + 1;
    (line, column)
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Without the text, a syntax error's position is shown as a byte offset.
        match &self.0.problem {
            Problem::Syntax(syntax) => {
                write!(f, "invalid JSON at byte {}: {}", syntax.at, syntax.code.describe())
            }
            Problem::TooDeep { limit } => write!(f, "arrays and objects nest deeper than {limit} levels"),
            other => f.write_str(&mismatch(other)),
        }
    }
}

impl std::error::Error for Error {}

impl serde::de::Error for Error {
    fn custom<T: fmt::Display>(_message: T) -> Self {
        Self::new(Problem::Refused)
    }

    fn invalid_type(unexpected: Unexpected<'_>, expected: &dyn Expected) -> Self {
        Self::invalid_type_of(Category::of(&unexpected), expected)
    }

    fn invalid_value(unexpected: Unexpected<'_>, expected: &dyn Expected) -> Self {
        Self::new(Problem::InvalidValue {
            found: Category::of(&unexpected),
            expected: expected_text(expected),
        })
    }

    fn invalid_length(len: usize, expected: &dyn Expected) -> Self {
        Self::new(Problem::InvalidLength { len, expected: expected_text(expected) })
    }

    fn unknown_variant(_variant: &str, expected: &'static [&'static str]) -> Self {
        Self::new(Problem::UnknownVariant { known: expected })
    }

    fn unknown_field(_field: &str, expected: &'static [&'static str]) -> Self {
        Self::new(Problem::UnknownField { known: expected })
    }

    fn missing_field(field: &'static str) -> Self {
        Self::new(Problem::MissingField(field))
    }

    fn duplicate_field(field: &'static str) -> Self {
        Self::new(Problem::DuplicateField(field))
    }
}

#[cfg(test)]
mod tests {
    use serde::de::Error as _;

    use super::*;

    const SECRET: &str = "SECRET-PIN-4242";

    fn message(error: &Error) -> String {
        error.describe("").message
    }

    #[test]
    fn no_constructor_keeps_the_value() {
        let errors = [
            Error::invalid_type(Unexpected::Str(SECRET), &"u32"),
            Error::invalid_value(Unexpected::Str(SECRET), &"u32"),
            Error::invalid_value(Unexpected::Other(SECRET), &"u32"),
            Error::unknown_variant(SECRET, &["A", "B"]),
            Error::unknown_field(SECRET, &["a"]),
            Error::custom(format!("bad value {SECRET}")),
        ];
        for error in errors {
            for shown in [message(&error), error.to_string(), format!("{error:?}")] {
                assert!(!shown.contains(SECRET), "{shown}");
            }
        }
    }

    #[test]
    fn messages_name_the_path_the_expected_type_and_the_kind_found() {
        let error = Error::invalid_type(Unexpected::Str(SECRET), &"u32")
            .within(Segment::Field("radius"))
            .within(Segment::Variant("Circle"))
            .within(Segment::Index(2))
            .within(Segment::Field("shapes"));
        let described = error.describe("");
        assert_eq!(described.class, Class::Mismatch);
        assert_eq!(described.path, "shapes[2].Circle.radius");
        assert_eq!(described.message, "shapes[2].Circle.radius: invalid type: a string, expected u32");
        assert_eq!(message(&Error::missing_field("input")), "missing field `input`");
        assert_eq!(
            message(&Error::unknown_variant("x", &["Circle", "Square"])),
            "unknown variant, expected one of `Circle`, `Square`"
        );
        assert_eq!(message(&Error::custom("x")), "invalid value: refused by the input type's own validation");
    }

    #[test]
    fn syntax_errors_give_line_and_column_and_too_deep_its_limit() {
        let text = "{\n  \"é\": tru }";
        let error = Error::syntax(Syntax { code: SyntaxCode::InvalidLiteral, at: 10 });
        let described = error.describe(text);
        assert_eq!(described.class, Class::InvalidJson);
        assert_eq!(described.message, "invalid JSON at line 2 column 8: expected `true`, `false` or `null`");
        let deep = Error::syntax(Syntax { code: SyntaxCode::TooDeep, at: 3 }).describe("");
        assert_eq!(
            (deep.class, deep.message.as_str()),
            (Class::TooDeep, "arrays and objects nest deeper than 128 levels")
        );
    }

    #[test]
    fn long_expectations_are_clipped() {
        let long = "é".repeat(100);
        let error = Error::invalid_type(Unexpected::Unit, &long.as_str());
        let Problem::InvalidType { expected, .. } = error.problem() else { panic!("{error:?}") };
        assert!(expected.len() <= MAX_EXPECTED_LEN && long.starts_with(expected.as_str()));
    }
}
