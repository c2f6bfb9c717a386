//! A validation error's constraint in words, from the schema's side only.
//!
//! # Invariants
//!
//! - The words come from the error's kind: the keyword and the schema's own values (limits,
//!   allowed values, patterns, required names). Of the arguments they name property names
//!   only (a key the model chose), never a value: the validator's own messages quote the value
//!   and are never used, nor are the items it lists for `unevaluatedItems`.
//! - Every name or value taken from the schema is cut (names to 64 bytes, lists of values to
//!   about 96 bytes), so a constraint stays short whatever the schema.

use std::fmt::Write as _;

use jsonschema::error::{TypeKind, ValidationErrorKind as Kind};
use jsonschema::paths::LocationSegment;
use jsonschema::{JsonType, ValidationError};
use serde_json::Value;

use super::short;

/// The constraint `error` reports.
pub(super) fn constraint(error: &ValidationError<'_>) -> String {
    match error.kind() {
        Kind::AdditionalItems { limit } => {
            format!("expected an array of at most {limit} items (the schema allows no more)")
        }
        Kind::AdditionalProperties { unexpected } => {
            unexpected_names(unexpected, "(the schema allows no other properties)")
        }
        Kind::UnevaluatedProperties { unexpected } => {
            unexpected_names(unexpected, "(`unevaluatedProperties` allows no other properties)")
        }
        Kind::UnevaluatedItems { unexpected } => format!(
            "expected no items past those the schema evaluates (`unevaluatedItems` refused {})",
            count(unexpected.len(), "item")
        ),
        Kind::AnyOf { context } => {
            format!("expected a match for at least one of the {} schemas of `anyOf`", context.len())
        }
        Kind::OneOfNotValid { context } => format!(
            "expected a match for exactly one of the {} schemas of `oneOf` (matched 0)",
            context.len()
        ),
        Kind::OneOfMultipleValid { context } => format!(
            "expected a match for exactly one of the {} schemas of `oneOf` (matched {})",
            context.len(),
            context.iter().filter(|errors| errors.is_empty()).count()
        ),
        Kind::Not { .. } => "expected no match for the schema of `not`".to_owned(),
        Kind::FalseSchema => "expected nothing here (the schema accepts no value)".to_owned(),
        Kind::Constant { expected_value } => {
            format!("expected the value {}", listed(std::slice::from_ref(expected_value)))
        }
        Kind::Enum { options } => match options.as_ref() {
            Value::Array(options) => format!("expected one of {}", listed(options)),
            other => format!("expected one of {}", listed(std::slice::from_ref(other))),
        },
        Kind::Type { kind } => types(kind),
        Kind::Required { property } => {
            format!("missing required property `{}`", short(property.as_str().unwrap_or("")))
        }
        Kind::PropertyNames { error } => match error.instance().as_ref() {
            Value::String(name) => {
                format!("expected property name `{}` to match `propertyNames`", short(name))
            }
            _ => "expected property names matching `propertyNames`".to_owned(),
        },
        Kind::MinProperties { limit } => format!("expected an object with at least {limit} properties"),
        Kind::MaxProperties { limit } => format!("expected an object with at most {limit} properties"),
        Kind::MinItems { limit } => format!("expected an array of at least {limit} items"),
        Kind::MaxItems { limit } => format!("expected an array of at most {limit} items"),
        Kind::UniqueItems => "expected an array of unique items".to_owned(),
        Kind::Contains => match error.schema_path().iter().last() {
            Some(LocationSegment::Property(keyword)) if keyword != "contains" => format!(
                "expected an array with as many items matching `contains` as `{}` says",
                short(&keyword)
            ),
            _ => "expected an array with at least one item matching `contains`".to_owned(),
        },
        Kind::MinLength { limit } => format!("expected a string of at least {limit} characters"),
        Kind::MaxLength { limit } => format!("expected a string of at most {limit} characters"),
        Kind::Pattern { pattern } => format!("expected a string matching the pattern `{}`", short(pattern)),
        Kind::BacktrackLimitExceeded { .. } | Kind::RegexEngineFailure { .. } => {
            "the schema's pattern could not be matched here".to_owned()
        }
        Kind::Minimum { limit } => format!("expected a number >= {}", number(limit)),
        Kind::Maximum { limit } => format!("expected a number <= {}", number(limit)),
        Kind::ExclusiveMinimum { limit } => format!("expected a number > {}", number(limit)),
        Kind::ExclusiveMaximum { limit } => format!("expected a number < {}", number(limit)),
        Kind::MultipleOf { multiple_of } => format!("expected a multiple of {multiple_of}"),
        Kind::Format { format } => format!("expected a string of format `{}`", short(format)),
        Kind::ContentEncoding { content_encoding } => {
            format!("expected a string encoded as `{}`", short(content_encoding))
        }
        Kind::ContentMediaType { content_media_type } => {
            format!("expected a string of media type `{}`", short(content_media_type))
        }
        Kind::FromUtf8 { .. } => "expected content that decodes to UTF-8 text".to_owned(),
        Kind::Custom { keyword, .. } => format!("expected to satisfy `{}`", short(keyword)),
        Kind::Referencing(_) => "the schema's reference could not be resolved here".to_owned(),
    }
}

fn count(n: usize, noun: &str) -> String {
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
}

/// "unexpected property `a`", or "unexpected properties `a` and 2 more", then `why`.
fn unexpected_names(names: &[String], why: &str) -> String {
    match names {
        [] => format!("unexpected properties {why}"),
        [one] => format!("unexpected property `{}` {why}", short(one)),
        [first, rest @ ..] => {
            format!("unexpected properties `{}` and {} more {why}", short(first), rest.len())
        }
    }
}

fn types(kind: &TypeKind) -> String {
    match kind {
        TypeKind::Single(one) => format!("expected {}", article(*one)),
        TypeKind::Multiple(set) => {
            let names: Vec<&str> = set.iter().map(JsonType::as_str).collect();
            format!("expected one of the types {}", names.join(", "))
        }
    }
}

fn article(kind: JsonType) -> String {
    match kind {
        JsonType::Null => "null".to_owned(),
        JsonType::Integer | JsonType::Object | JsonType::Array => format!("an {}", kind.as_str()),
        other => format!("a {}", other.as_str()),
    }
}

/// A limit from the schema, cut.
fn number(limit: &Value) -> String {
    short(&limit.to_string()).to_owned()
}

/// The schema's own values, as JSON, cut to about 96 bytes.
fn listed(values: &[Value]) -> String {
    let mut out = String::new();
    for (i, value) in values.iter().enumerate() {
        if out.len() > 96 {
            let _ = write!(out, ", … ({} more)", values.len() - i);
            break;
        }
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(short(&value.to_string()));
    }
    out
}
