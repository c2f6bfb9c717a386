//! From a JSON Schema document to a validator: the options, and what a compile error means.
//!
//! # Invariants
//!
//! - The validator never fetches: its retriever refuses every document outside the schema
//!   (and the crate is built without an HTTP client or a file reader).
//! - Patterns compile for the `regex` crate's engine only, whose matching time is linear in
//!   the input; a pattern it cannot run is a compile error, never a slower engine.
//! - Every compile error is typed: a part this module cannot check ([`Removal`]) is refused
//!   under [`Unsupported::Refuse`], or dropped from a copy of the schema under
//!   [`Unsupported::LeaveToServer`] and listed, then the copy compiles again (at most
//!   [`MAX_LEFT_TO_SERVER`] times); anything else is refused.

use std::sync::Arc;

use jsonschema::error::ValidationErrorKind as Kind;
use jsonschema::paths::LocationSegment;
use jsonschema::{Draft, PatternOptions, ReferencingError, ValidationError, ValidationOptions, Validator};
use serde_json::Value;

use super::stack::{self, COMPILE_STACK};
use super::{InputSchema, SchemaError, bounds, describe, pointer, pointer_of, short};

/// What to do with a part of a schema that this crate does not check: a `$ref` to a document
/// outside the schema (never fetched), a pattern the linear-time regex engine cannot run, or a
/// `$schema` that names no draft known here.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Unsupported {
    /// Refuse the schema: its tool is not offered to the model, and the reason is reported.
    /// The default, because a part left unchecked could let arguments through that the
    /// schema refuses.
    #[default]
    Refuse,
    /// Compile the schema without that keyword (a `$schema` dropped means 2020-12), and list
    /// it in [`InputSchema::unchecked`]: arguments it would refuse reach the guard (and are
    /// counted), then the server, whose own check applies.
    LeaveToServer,
}

/// The most keywords one schema may leave to the server: each one costs a compile.
pub(super) const MAX_LEFT_TO_SERVER: usize = 16;

/// Drafts tried, in order, for a schema without `$schema` that is malformed as 2020-12: the
/// forms they allow (`items` as a list, a boolean `exclusiveMinimum`) are still common.
const OLDER_DRAFTS: [Draft; 2] = [Draft::Draft7, Draft::Draft4];

/// The validator's options: no fetching, linear-time patterns, annotations that never reject.
fn options() -> ValidationOptions<'static> {
    jsonschema::options()
        .offline()
        .with_pattern_options(PatternOptions::regex())
        .should_validate_formats(false)
        .without_content_encoding_support("base64")
        .without_content_media_type_support("application/json")
}

pub(super) fn compile(schema: &Value, unsupported: Unsupported) -> Result<InputSchema, SchemaError> {
    if !(schema.is_object() || schema.is_boolean()) {
        return Err(SchemaError::Malformed {
            keyword: "(schema)".to_owned(),
            at: String::new(),
            expected: "expected an object or a boolean".to_owned(),
        });
    }
    let nodes = bounds::schema_nodes(schema)?;
    let mut copy: Option<Value> = None;
    let mut unchecked = Vec::new();
    loop {
        let current = copy.as_ref().unwrap_or(schema);
        let built = stack::run(COMPILE_STACK, || build(current)).map_err(|_| SchemaError::NoThread)?;
        let removal = match built {
            Ok(validator) => return Ok(InputSchema { validator: Arc::new(validator), nodes, unchecked }),
            Err(Problem::Refused(error)) => return Err(error),
            Err(Problem::Removable(removal)) => removal,
        };
        if unsupported == Unsupported::Refuse || unchecked.len() >= MAX_LEFT_TO_SERVER {
            return Err(removal.error());
        }
        if !removal.apply(copy.get_or_insert_with(|| schema.clone())) {
            return Err(removal.error());
        }
        unchecked.push(removal.describe());
    }
}

/// Compiles `schema` as the draft its `$schema` names, or as 2020-12, else as an older draft
/// under which it is well-formed.
fn build(schema: &Value) -> Result<Validator, Problem> {
    let error = match options().build(schema) {
        Ok(validator) => return Ok(validator),
        Err(error) => classify(schema, &error),
    };
    let undeclared = schema.as_object().is_some_and(|object| !object.contains_key("$schema"));
    if undeclared && matches!(error, Problem::Refused(SchemaError::Malformed { .. })) {
        for draft in OLDER_DRAFTS {
            if let Ok(validator) = options().with_draft(draft).build(schema) {
                return Ok(validator);
            }
        }
    }
    Err(error)
}

/// Why a schema did not compile.
enum Problem {
    /// A part that can be dropped under [`Unsupported::LeaveToServer`].
    Removable(Removal),
    /// Anything else.
    Refused(SchemaError),
}

/// A keyword (or one entry of `patternProperties`) to drop, in the schema object at `at`.
struct Removal {
    /// The reference tokens of the schema object that holds it.
    at: Vec<String>,
    keyword: String,
    what: Part,
}

enum Part {
    /// A pattern the engine cannot run, in `pattern`.
    Pattern,
    /// A key of `patternProperties` the engine cannot run.
    PatternKey(String),
    /// A `$ref` (or `$dynamicRef`, `$recursiveRef`) to a document outside the schema.
    Remote(String),
    /// A `$schema` naming no known draft.
    Dialect,
}

impl Removal {
    fn pointer(&self) -> String {
        pointer_of(self.at.iter().map(String::as_str))
    }

    fn error(&self) -> SchemaError {
        let at = self.pointer();
        match &self.what {
            Part::Remote(reference) => SchemaError::Unresolved { reference: short(reference).to_owned(), at },
            Part::Pattern | Part::PatternKey(_) | Part::Dialect => {
                SchemaError::Unsupported { keyword: self.keyword.clone(), at }
            }
        }
    }

    fn describe(&self) -> String {
        let at = self.pointer();
        match &self.what {
            Part::Pattern | Part::Dialect => format!("{} at {}", self.keyword, pointer(&at)),
            Part::PatternKey(key) => format!("{} `{}` at {}", self.keyword, short(key), pointer(&at)),
            Part::Remote(reference) => format!("{} `{}` at {}", self.keyword, short(reference), pointer(&at)),
        }
    }

    /// Drops the part from `schema`; `false` if it is not there.
    fn apply(&self, schema: &mut Value) -> bool {
        let mut target = schema;
        for token in &self.at {
            let next = match target {
                Value::Object(object) => object.get_mut(token),
                Value::Array(items) => token.parse::<usize>().ok().and_then(|i| items.get_mut(i)),
                _ => None,
            };
            let Some(next) = next else { return false };
            target = next;
        }
        let Value::Object(object) = target else { return false };
        match &self.what {
            Part::PatternKey(key) => object
                .get_mut(&self.keyword)
                .and_then(Value::as_object_mut)
                .is_some_and(|patterns| patterns.remove(key).is_some()),
            Part::Pattern | Part::Remote(_) | Part::Dialect => object.remove(&self.keyword).is_some(),
        }
    }
}

/// The reference tokens of a location in the schema.
fn tokens(error: &ValidationError<'_>) -> Vec<String> {
    error
        .instance_path()
        .iter()
        .map(|segment| match segment {
            LocationSegment::Property(name) => name.into_owned(),
            LocationSegment::Index(index) => index.to_string(),
        })
        .collect()
}

/// What a compile error of `schema` means.
fn classify(schema: &Value, error: &ValidationError<'_>) -> Problem {
    let mut at = tokens(error);
    match error.kind() {
        Kind::Referencing(reference) => referencing(schema, reference),
        // The meta-schema checks that patterns compile for the engine in use.
        Kind::Format { format } if format == "regex" => {
            let last = at.pop();
            match (last, at.last().map(String::as_str)) {
                (Some(keyword), _) if keyword == "pattern" => {
                    Problem::Removable(Removal { at, keyword, what: Part::Pattern })
                }
                (Some(key), Some("patternProperties")) => {
                    let keyword = at.pop().unwrap_or_default();
                    Problem::Removable(Removal { at, keyword, what: Part::PatternKey(key) })
                }
                (last, _) => Problem::Refused(malformed(&at, last.as_deref(), error)),
            }
        }
        _ => {
            let last = at.pop();
            Problem::Refused(malformed(&at, last.as_deref(), error))
        }
    }
}

fn malformed(at: &[String], keyword: Option<&str>, error: &ValidationError<'_>) -> SchemaError {
    SchemaError::Malformed {
        keyword: short(keyword.unwrap_or("(schema)")).to_owned(),
        at: pointer_of(at.iter().map(String::as_str)),
        expected: describe::constraint(error),
    }
}

/// Keywords that refer to another schema.
const REFERENCES: &[&str] = &["$ref", "$dynamicRef", "$recursiveRef"];

fn referencing(schema: &Value, error: &ReferencingError) -> Problem {
    match error {
        ReferencingError::Unretrievable { uri, .. } => {
            match find(schema, REFERENCES, |value| names_document(uri, value)) {
                Some((at, keyword)) => {
                    Problem::Removable(Removal { at, keyword, what: Part::Remote(uri.clone()) })
                }
                None => unresolved(schema, uri, |_| false),
            }
        }
        ReferencingError::UnknownSpecification { specification } => {
            match find(schema, &["$schema"], |value| value == specification) {
                Some((at, keyword)) => Problem::Removable(Removal { at, keyword, what: Part::Dialect }),
                None => Problem::Refused(SchemaError::Unsupported {
                    keyword: "$schema".to_owned(),
                    at: String::new(),
                }),
            }
        }
        ReferencingError::PointerToNowhere { pointer }
        | ReferencingError::InvalidPercentEncoding { pointer, .. }
        | ReferencingError::InvalidArrayIndex { pointer, .. } => {
            let reference = format!("#{pointer}");
            unresolved(schema, &reference, |value| value.ends_with(&reference))
        }
        ReferencingError::NoSuchAnchor { anchor } | ReferencingError::InvalidAnchor { anchor } => {
            let reference = format!("#{anchor}");
            unresolved(schema, &reference, |value| value.ends_with(&reference))
        }
        ReferencingError::CircularMetaschema { uri } => unresolved(schema, uri, |_| false),
        other @ ReferencingError::InvalidUri(_) => unresolved(schema, &other.to_string(), |_| false),
    }
}

/// A refusal for `reference`, at the first reference keyword whose value `matches`.
fn unresolved(schema: &Value, reference: &str, matches: impl Fn(&str) -> bool) -> Problem {
    let at = find(schema, REFERENCES, matches).map(|(at, _)| pointer_of(at.iter().map(String::as_str)));
    Problem::Refused(SchemaError::Unresolved {
        reference: short(reference).to_owned(),
        at: at.unwrap_or_default(),
    })
}

/// Whether a reference written `value` may name the document `uri` (absolute, or resolved
/// against a base): the same document, or a relative one that ends it.
fn names_document(uri: &str, value: &str) -> bool {
    let document = value.split('#').next().unwrap_or_default();
    let uri = uri.split('#').next().unwrap_or_default();
    !document.is_empty() && (uri == document || uri.ends_with(document))
}

/// The first schema object, walking `schema` without recursion, with one of `keywords` whose
/// string value `matches`: its reference tokens and the keyword.
fn find(schema: &Value, keywords: &[&str], matches: impl Fn(&str) -> bool) -> Option<(Vec<String>, String)> {
    let mut stack: Vec<(&Value, Vec<String>)> = vec![(schema, Vec::new())];
    while let Some((value, at)) = stack.pop() {
        match value {
            Value::Object(object) => {
                for keyword in keywords {
                    if object.get(*keyword).and_then(Value::as_str).is_some_and(&matches) {
                        return Some((at, (*keyword).to_owned()));
                    }
                }
                for (key, child) in object.iter().rev() {
                    let mut below = at.clone();
                    below.push(key.clone());
                    stack.push((child, below));
                }
            }
            Value::Array(items) => {
                for (index, child) in items.iter().enumerate().rev() {
                    let mut below = at.clone();
                    below.push(index.to_string());
                    stack.push((child, below));
                }
            }
            _ => {}
        }
    }
    None
}
