//! From a JSON Schema document to the compiled rules that [`validate`](super::validate) walks.
//!
//! # Invariants
//!
//! - Every keyword of a schema object is either compiled into a rule, listed as an annotation
//!   (it never rejects), or handled by [`Unsupported`]: nothing is dropped silently.
//! - A `$ref` is resolved inside the document only, compiled once and shared by every use, so
//!   a recursive schema compiles in finite time.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Number, Value};

use super::{InputSchema, SchemaError, push_token, short};

/// What to do with a schema keyword that this crate does not check.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Unsupported {
    /// Refuse the schema: its tool is not offered to the model, and the reason is reported.
    /// The default, because a keyword left unchecked could let arguments through that the
    /// schema refuses.
    #[default]
    Refuse,
    /// Compile the schema without the keyword, and list it in
    /// [`InputSchema::unchecked`]: arguments it would refuse reach the guard (and are counted),
    /// then the server, whose own check applies.
    LeaveToServer,
}

/// Keywords that describe and never reject.
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "$comment",
    "$anchor",
    "$defs",
    "definitions",
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "format",
    "contentEncoding",
    "contentMediaType",
    "contentSchema",
];

/// JSON types, as a set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Types(u8);

impl Types {
    pub(crate) const NULL: u8 = 1;
    pub(crate) const BOOLEAN: u8 = 2;
    pub(crate) const OBJECT: u8 = 4;
    pub(crate) const ARRAY: u8 = 8;
    pub(crate) const NUMBER: u8 = 16;
    pub(crate) const STRING: u8 = 32;
    pub(crate) const INTEGER: u8 = 64;
    const NAMES: [(u8, &'static str); 7] = [
        (Self::NULL, "null"),
        (Self::BOOLEAN, "boolean"),
        (Self::OBJECT, "object"),
        (Self::ARRAY, "array"),
        (Self::NUMBER, "number"),
        (Self::STRING, "string"),
        (Self::INTEGER, "integer"),
    ];

    fn of_name(name: &str) -> Option<u8> {
        Self::NAMES.iter().find(|(_, known)| *known == name).map(|(bit, _)| *bit)
    }

    pub(crate) fn contains(self, bit: u8) -> bool {
        self.0 & bit != 0
    }

    pub(crate) fn names(self) -> impl Iterator<Item = &'static str> {
        Self::NAMES.iter().filter(move |(bit, _)| self.contains(*bit)).map(|(_, name)| *name)
    }
}

/// One compiled schema.
#[derive(Clone, Debug)]
pub(crate) enum Node {
    /// `true` (or `{}`) accepts everything; `false` refuses everything.
    Bool(bool),
    /// A schema object's rules.
    Rules(Box<Rules>),
}

/// A lower or upper bound on numbers.
#[derive(Clone, Debug)]
pub(crate) struct Bound {
    pub(crate) value: Number,
    pub(crate) exclusive: bool,
}

/// The rules of one schema object. Type-specific rules apply only to values of that type.
#[derive(Clone, Debug, Default)]
pub(crate) struct Rules {
    pub(crate) types: Option<Types>,
    pub(crate) enumeration: Option<Vec<Value>>,
    pub(crate) constant: Option<Value>,
    pub(crate) properties: BTreeMap<String, usize>,
    pub(crate) required: Vec<String>,
    pub(crate) additional: Option<usize>,
    pub(crate) min_properties: Option<u64>,
    pub(crate) max_properties: Option<u64>,
    pub(crate) property_names: Option<usize>,
    pub(crate) prefix: Vec<usize>,
    pub(crate) items: Option<usize>,
    pub(crate) min_items: Option<u64>,
    pub(crate) max_items: Option<u64>,
    pub(crate) unique: bool,
    pub(crate) contains: Option<usize>,
    pub(crate) min_length: Option<u64>,
    pub(crate) max_length: Option<u64>,
    pub(crate) minimum: Option<Bound>,
    pub(crate) maximum: Option<Bound>,
    pub(crate) multiple_of: Option<Number>,
    pub(crate) all_of: Vec<usize>,
    pub(crate) any_of: Vec<usize>,
    pub(crate) one_of: Vec<usize>,
    pub(crate) not: Option<usize>,
    pub(crate) condition: Option<(usize, Option<usize>, Option<usize>)>,
    pub(crate) reference: Option<usize>,
}

pub(super) fn compile(schema: &Value, unsupported: Unsupported) -> Result<InputSchema, SchemaError> {
    let mut compiler = Compiler {
        root: schema,
        nodes: Vec::new(),
        refs: HashMap::new(),
        unsupported,
        unchecked: Vec::new(),
    };
    let root = compiler.node(schema, "")?;
    Ok(InputSchema { nodes: compiler.nodes, root, unchecked: compiler.unchecked })
}

struct Compiler<'a> {
    root: &'a Value,
    nodes: Vec<Node>,
    refs: HashMap<String, usize>,
    unsupported: Unsupported,
    unchecked: Vec<String>,
}

impl<'a> Compiler<'a> {
    /// Compiles `schema`, found at `at`, into a new node.
    fn node(&mut self, schema: &'a Value, at: &str) -> Result<usize, SchemaError> {
        let index = self.nodes.len();
        self.nodes.push(Node::Bool(true));
        self.nodes[index] = self.compile(schema, at)?;
        Ok(index)
    }

    fn compile(&mut self, schema: &'a Value, at: &str) -> Result<Node, SchemaError> {
        match schema {
            Value::Bool(accept) => Ok(Node::Bool(*accept)),
            Value::Object(object) => Ok(Node::Rules(Box::new(self.rules(object, at)?))),
            _ => Err(malformed("(schema)", at, "an object or a boolean")),
        }
    }

    #[allow(clippy::too_many_lines, reason = "one arm per keyword: the match is the table of keywords")]
    fn rules(&mut self, object: &'a Map<String, Value>, at: &str) -> Result<Rules, SchemaError> {
        let mut rules = Rules::default();
        let mut exclusive_minimum_flag = false;
        let mut exclusive_maximum_flag = false;
        for (keyword, value) in object {
            let here = join(at, keyword);
            match keyword.as_str() {
                "type" => rules.types = Some(types(value, at)?),
                "enum" => match value {
                    Value::Array(values) => rules.enumeration = Some(values.clone()),
                    _ => return Err(malformed(keyword, at, "an array")),
                },
                "const" => rules.constant = Some(value.clone()),
                "properties" => {
                    let Value::Object(properties) = value else {
                        return Err(malformed(keyword, at, "an object of schemas"));
                    };
                    for (name, schema) in properties {
                        let index = self.node(schema, &join(&here, name))?;
                        rules.properties.insert(name.clone(), index);
                    }
                }
                "required" => rules.required = strings(value, keyword, at)?,
                "additionalProperties" | "additionalItems" if !value.is_object() && !value.is_boolean() => {
                    return Err(malformed(keyword, at, "a schema"));
                }
                "additionalProperties" => rules.additional = Some(self.node(value, &here)?),
                "minProperties" => rules.min_properties = Some(count(value, keyword, at)?),
                "maxProperties" => rules.max_properties = Some(count(value, keyword, at)?),
                "propertyNames" => rules.property_names = Some(self.node(value, &here)?),
                "items" => match value {
                    // Draft-07's list form: one schema per position; `additionalItems` is the rest.
                    Value::Array(schemas) => rules.prefix = self.list(schemas, &here)?,
                    schema => rules.items = Some(self.node(schema, &here)?),
                },
                "prefixItems" => match value {
                    Value::Array(schemas) => rules.prefix = self.list(schemas, &here)?,
                    _ => return Err(malformed(keyword, at, "an array of schemas")),
                },
                "minItems" => rules.min_items = Some(count(value, keyword, at)?),
                "maxItems" => rules.max_items = Some(count(value, keyword, at)?),
                "uniqueItems" => match value {
                    Value::Bool(unique) => rules.unique = *unique,
                    _ => return Err(malformed(keyword, at, "a boolean")),
                },
                "contains" => rules.contains = Some(self.node(value, &here)?),
                "minLength" => rules.min_length = Some(count(value, keyword, at)?),
                "maxLength" => rules.max_length = Some(count(value, keyword, at)?),
                "minimum" => {
                    let inclusive = bound(value, keyword, at, false)?;
                    rules.minimum = Some(tighter_minimum(rules.minimum.take(), inclusive));
                }
                "maximum" => {
                    let inclusive = bound(value, keyword, at, false)?;
                    rules.maximum = Some(tighter_maximum(rules.maximum.take(), inclusive));
                }
                // Draft-04: a flag that makes `minimum` exclusive.
                "exclusiveMinimum" if value.is_boolean() => {
                    exclusive_minimum_flag = value == &Value::Bool(true);
                }
                "exclusiveMinimum" => {
                    let exclusive = bound(value, keyword, at, true)?;
                    rules.minimum = Some(tighter_minimum(rules.minimum.take(), exclusive));
                }
                "exclusiveMaximum" if value.is_boolean() => {
                    exclusive_maximum_flag = value == &Value::Bool(true);
                }
                "exclusiveMaximum" => {
                    let exclusive = bound(value, keyword, at, true)?;
                    rules.maximum = Some(tighter_maximum(rules.maximum.take(), exclusive));
                }
                "multipleOf" => match value {
                    Value::Number(number) if super::number::is_positive(number) => {
                        rules.multiple_of = Some(number.clone());
                    }
                    _ => return Err(malformed(keyword, at, "a number greater than 0")),
                },
                "allOf" => rules.all_of = self.schemas(value, keyword, &here)?,
                "anyOf" => rules.any_of = self.schemas(value, keyword, &here)?,
                "oneOf" => rules.one_of = self.schemas(value, keyword, &here)?,
                "not" => rules.not = Some(self.node(value, &here)?),
                "if" => {
                    let condition = self.node(value, &here)?;
                    let then =
                        object.get("then").map(|then| self.node(then, &join(at, "then"))).transpose()?;
                    let otherwise =
                        object.get("else").map(|other| self.node(other, &join(at, "else"))).transpose()?;
                    rules.condition = Some((condition, then, otherwise));
                }
                // `additionalItems` is handled below, once `items` is known; `then` and `else`
                // with `if` (and, without it, they have no effect).
                "additionalItems" | "then" | "else" => {}
                "$ref" => match value {
                    Value::String(reference) => rules.reference = Some(self.reference(reference, at)?),
                    _ => return Err(malformed(keyword, at, "a string")),
                },
                known if ANNOTATIONS.contains(&known) || known.starts_with("x-") => {}
                _ => self.unsupported(keyword, at)?,
            }
        }
        // Draft-07: with the list form of `items`, `additionalItems` applies past the list.
        if let Some(rest) = object.get("additionalItems")
            && object.get("items").is_some_and(Value::is_array)
        {
            rules.items = Some(self.node(rest, &join(at, "additionalItems"))?);
        }
        if exclusive_minimum_flag {
            let Some(minimum) = rules.minimum.as_mut() else {
                return Err(malformed("exclusiveMinimum", at, "used with `minimum` when it is a boolean"));
            };
            minimum.exclusive = true;
        }
        if exclusive_maximum_flag {
            let Some(maximum) = rules.maximum.as_mut() else {
                return Err(malformed("exclusiveMaximum", at, "used with `maximum` when it is a boolean"));
            };
            maximum.exclusive = true;
        }
        Ok(rules)
    }

    fn unsupported(&mut self, keyword: &str, at: &str) -> Result<(), SchemaError> {
        match self.unsupported {
            Unsupported::Refuse => {
                Err(SchemaError::Unsupported { keyword: short(keyword).to_owned(), at: at.to_owned() })
            }
            Unsupported::LeaveToServer => {
                self.unchecked.push(format!("{} at {}", short(keyword), super::pointer(at)));
                Ok(())
            }
        }
    }

    fn list(&mut self, schemas: &'a [Value], at: &str) -> Result<Vec<usize>, SchemaError> {
        schemas
            .iter()
            .zip(0..)
            .map(|(schema, i): (&Value, usize)| self.node(schema, &join(at, &i.to_string())))
            .collect()
    }

    fn schemas(&mut self, value: &'a Value, keyword: &str, at: &str) -> Result<Vec<usize>, SchemaError> {
        match value {
            Value::Array(schemas) if !schemas.is_empty() => self.list(schemas, at),
            _ => Err(malformed(keyword, at, "a non-empty array of schemas")),
        }
    }

    /// Resolves a `$ref` inside the document, compiling its target once.
    fn reference(&mut self, reference: &str, at: &str) -> Result<usize, SchemaError> {
        let unresolved =
            || SchemaError::Unresolved { reference: short(reference).to_owned(), at: at.to_owned() };
        let Some(fragment) = reference.strip_prefix('#') else { return Err(unresolved()) };
        let pointer = percent_decode(fragment).ok_or_else(unresolved)?;
        if let Some(index) = self.refs.get(&pointer) {
            return Ok(*index);
        }
        let target: &'a Value = if pointer.is_empty() {
            self.root
        } else {
            self.root.pointer(&pointer).ok_or_else(unresolved)?
        };
        let index = self.nodes.len();
        self.nodes.push(Node::Bool(true));
        // Registered before compiling, so a recursive reference finds it.
        self.refs.insert(pointer.clone(), index);
        self.nodes[index] = self.compile(target, &pointer)?;
        Ok(index)
    }
}

fn join(at: &str, token: &str) -> String {
    let mut pointer = at.to_owned();
    push_token(&mut pointer, token);
    pointer
}

fn malformed(keyword: &str, at: &str, expected: &'static str) -> SchemaError {
    SchemaError::Malformed { keyword: short(keyword).to_owned(), at: at.to_owned(), expected }
}

fn types(value: &Value, at: &str) -> Result<Types, SchemaError> {
    let bit = |name: &Value| name.as_str().and_then(Types::of_name);
    match value {
        Value::String(_) => bit(value).map(Types).ok_or_else(|| malformed("type", at, "a JSON type name")),
        Value::Array(names) if !names.is_empty() => names
            .iter()
            .try_fold(0, |set, name| bit(name).map(|b| set | b))
            .map(Types)
            .ok_or_else(|| malformed("type", at, "a list of JSON type names")),
        _ => Err(malformed("type", at, "a JSON type name or a non-empty list of them")),
    }
}

fn strings(value: &Value, keyword: &str, at: &str) -> Result<Vec<String>, SchemaError> {
    let Value::Array(names) = value else { return Err(malformed(keyword, at, "an array of strings")) };
    names
        .iter()
        .map(|name| {
            name.as_str().map(str::to_owned).ok_or_else(|| malformed(keyword, at, "an array of strings"))
        })
        .collect()
}

/// A non-negative integer (`3` or `3.0`).
fn count(value: &Value, keyword: &str, at: &str) -> Result<u64, SchemaError> {
    let Value::Number(number) = value else { return Err(malformed(keyword, at, "a non-negative integer")) };
    if let Some(count) = number.as_u64() {
        return Ok(count);
    }
    match number.as_f64() {
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "checked: a non-negative whole number; larger ones saturate"
        )]
        Some(float) if float >= 0.0 && float.fract() == 0.0 => Ok(float as u64),
        _ => Err(malformed(keyword, at, "a non-negative integer")),
    }
}

fn bound(value: &Value, keyword: &str, at: &str, exclusive: bool) -> Result<Bound, SchemaError> {
    match value {
        Value::Number(number) if super::number::is_finite(number) => {
            Ok(Bound { value: number.clone(), exclusive })
        }
        _ => Err(malformed(keyword, at, "a number")),
    }
}

/// The stricter of two lower bounds.
fn tighter_minimum(current: Option<Bound>, other: Bound) -> Bound {
    match current {
        Some(current) => match super::number::compare(&current.value, &other.value) {
            std::cmp::Ordering::Greater => current,
            std::cmp::Ordering::Less => other,
            std::cmp::Ordering::Equal => {
                Bound { value: other.value, exclusive: current.exclusive || other.exclusive }
            }
        },
        None => other,
    }
}

/// The stricter of two upper bounds.
fn tighter_maximum(current: Option<Bound>, other: Bound) -> Bound {
    match current {
        Some(current) => match super::number::compare(&current.value, &other.value) {
            std::cmp::Ordering::Less => current,
            std::cmp::Ordering::Greater => other,
            std::cmp::Ordering::Equal => {
                Bound { value: other.value, exclusive: current.exclusive || other.exclusive }
            }
        },
        None => other,
    }
}

/// Decodes `%XX` escapes of a URI fragment; `None` if an escape is broken or not UTF-8.
fn percent_decode(fragment: &str) -> Option<String> {
    let bytes = fragment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = fragment.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}
