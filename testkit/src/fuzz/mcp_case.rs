//! Target `mcp_arguments`: an MCP tool's schema and the model's arguments, through the path
//! `loopbound-mcp` gives them: compile the schema, bind the JSON text to
//! [`Arguments`](loopbound_mcp::Arguments), check them against the schema before the guard.
//!
//! # Invariants checked
//!
//! - Nothing panics, whatever the schema and the arguments.
//! - A schema that compiles when unsupported keywords are refused compiles the same way when
//!   they are left to the server, with nothing left unchecked, and gives the same verdicts.
//! - The verdict does not depend on spelling: the canonical form of bound arguments gets the
//!   same verdict, with the same message, as the text the model sent.
//! - A refusal is a binding error of kind `Invalid`, never a count: the scope stays untouched.
//! - A refusal never quotes a string value of the arguments (SPEC §10), unless that text is
//!   also written in the schema, is part of a property name or of the refusals' own words.
//! - The pointer of a refusal leads into the arguments.

use arbitrary::Arbitrary;
use loopbound::tool::{BindErrorKind, ToolBuilder};
use loopbound::{GuardedTool, Scope, ToolContext, ToolError};
use loopbound_mcp::schema::InputSchema;
use loopbound_mcp::{Arguments, Unsupported};
use serde_json::{Map, Value, json};

use super::json_mirror::{JsonMirror, NumberMirror, TextMirror};

/// Every word the refusals are made of: an argument's string that is part of it may show up in
/// a message without being quoted.
const VOCABULARY: &str = "at /: expected a an one of the types null boolean object array number string integer \
     nothing here (the schema accepts no value) the value missing required property an object with at least \
     most properties property name to match `propertyNames` unexpected (the schema allows no other properties) \
     and more an array of items unique with one item matching `contains` as many items says a match for \
     exactly schemas `anyOf` `oneOf` (matched no match for the schema of `not` characters >= > <= < multiple \
     (the schema allows no more) a string matching the pattern `unevaluatedProperties` allows no other \
     expected no items past those the schema evaluates (`unevaluatedItems` refused item items) \
     the schema's pattern could not be matched here; the schema's reference could not be resolved here \
     the arguments nest deeper than 128 levels, which is not checked here; the arguments nest too deeply \
     for a schema this large to check here; the arguments were not checked: no thread could be started for \
     a deep check … more";

/// Deepest schema the case writes.
const MAX_SCHEMA_DEPTH: usize = 12;
/// Deepest arguments the case writes: past serde_json's limit, to reach its error too.
const MAX_ARGUMENTS_DEPTH: usize = 140;

/// A schema and arguments.
#[derive(Arbitrary, Debug)]
pub struct McpCase {
    schema: SchemaMirror,
    definitions: Vec<SchemaMirror>,
    arguments: JsonMirror,
}

/// A JSON type name.
#[derive(Arbitrary, Clone, Copy, Debug)]
pub enum TypeName {
    /// `null`
    Null,
    /// `boolean`
    Boolean,
    /// `object`
    Object,
    /// `array`
    Array,
    /// `number`
    Number,
    /// `string`
    String,
    /// `integer`
    Integer,
}

impl TypeName {
    fn name(self) -> &'static str {
        match self {
            Self::Null => "null",
            Self::Boolean => "boolean",
            Self::Object => "object",
            Self::Array => "array",
            Self::Number => "number",
            Self::String => "string",
            Self::Integer => "integer",
        }
    }
}

/// A schema of the supported subset, or any JSON as a schema (to reach the refusals).
#[derive(Arbitrary, Debug)]
pub enum SchemaMirror {
    /// `true`
    Any,
    /// `false`
    Nothing,
    /// `{"type": …}`
    Type(Vec<TypeName>),
    /// `{"enum": […]}`
    Enum(Vec<JsonMirror>),
    /// `{"const": …}`
    Const(JsonMirror),
    /// An object schema.
    Object {
        /// `properties`
        properties: Vec<(TextMirror, SchemaMirror)>,
        /// `required`
        required: Vec<TextMirror>,
        /// `additionalProperties`
        additional: Option<Box<SchemaMirror>>,
        /// `maxProperties`
        max: Option<u8>,
    },
    /// An array schema.
    Array {
        /// `prefixItems`
        prefix: Vec<SchemaMirror>,
        /// `items`
        items: Option<Box<SchemaMirror>>,
        /// `minItems`
        min: Option<u8>,
        /// `maxItems`
        max: Option<u8>,
        /// `uniqueItems`
        unique: bool,
    },
    /// A string schema.
    String {
        /// `minLength`
        min: Option<u8>,
        /// `maxLength`
        max: Option<u8>,
    },
    /// A number schema.
    Number {
        /// `minimum` or `exclusiveMinimum`
        minimum: Option<(NumberMirror, bool)>,
        /// `maximum` or `exclusiveMaximum`
        maximum: Option<(NumberMirror, bool)>,
        /// `multipleOf`
        multiple: Option<u8>,
    },
    /// `anyOf`
    AnyOf(Vec<SchemaMirror>),
    /// `oneOf`
    OneOf(Vec<SchemaMirror>),
    /// `allOf`
    AllOf(Vec<SchemaMirror>),
    /// `not`
    Not(Box<SchemaMirror>),
    /// `$ref` to one of the case's definitions (or past them: unresolved).
    Ref(u8),
    /// Any JSON, as a schema.
    Raw(JsonMirror),
}

fn number(mirror: &NumberMirror) -> Value {
    serde_json::from_str(&mirror.text()).unwrap_or(Value::Null)
}

fn mirror_value(mirror: &JsonMirror, depth: usize) -> Value {
    serde_json::from_str(&mirror.to_text(depth)).unwrap_or(Value::Null)
}

impl SchemaMirror {
    fn to_value(&self, depth: usize) -> Value {
        if depth >= MAX_SCHEMA_DEPTH {
            return json!(true);
        }
        let below = |schema: &Self| schema.to_value(depth + 1);
        let list = |schemas: &[Self]| Value::Array(schemas.iter().map(below).collect());
        match self {
            Self::Any => json!(true),
            Self::Nothing => json!(false),
            Self::Type(names) if names.is_empty() => json!({}),
            Self::Type(names) => json!({"type": names.iter().map(|name| name.name()).collect::<Vec<_>>()}),
            Self::Enum(values) => {
                json!({"enum": values.iter().map(|v| mirror_value(v, 4)).collect::<Vec<_>>()})
            }
            Self::Const(value) => json!({"const": mirror_value(value, 4)}),
            Self::Object { properties, required, additional, max } => {
                let mut schema = Map::new();
                schema.insert("type".into(), json!("object"));
                let properties: Map<String, Value> =
                    properties.iter().map(|(name, schema)| (name.value(), below(schema))).collect();
                schema.insert("properties".into(), Value::Object(properties));
                schema.insert(
                    "required".into(),
                    json!(required.iter().map(TextMirror::value).collect::<Vec<_>>()),
                );
                if let Some(additional) = additional {
                    schema.insert("additionalProperties".into(), below(additional));
                }
                if let Some(max) = max {
                    schema.insert("maxProperties".into(), json!(max));
                }
                Value::Object(schema)
            }
            Self::Array { prefix, items, min, max, unique } => {
                let mut schema = Map::new();
                schema.insert("type".into(), json!("array"));
                if !prefix.is_empty() {
                    schema.insert("prefixItems".into(), list(prefix));
                }
                if let Some(items) = items {
                    schema.insert("items".into(), below(items));
                }
                if let Some(min) = min {
                    schema.insert("minItems".into(), json!(min));
                }
                if let Some(max) = max {
                    schema.insert("maxItems".into(), json!(max));
                }
                schema.insert("uniqueItems".into(), json!(unique));
                Value::Object(schema)
            }
            Self::String { min, max } => {
                let mut schema = Map::new();
                schema.insert("type".into(), json!("string"));
                if let Some(min) = min {
                    schema.insert("minLength".into(), json!(min));
                }
                if let Some(max) = max {
                    schema.insert("maxLength".into(), json!(max));
                }
                Value::Object(schema)
            }
            Self::Number { minimum, maximum, multiple } => {
                let mut schema = Map::new();
                schema.insert("type".into(), json!("number"));
                if let Some((bound, exclusive)) = minimum {
                    let key = if *exclusive { "exclusiveMinimum" } else { "minimum" };
                    schema.insert(key.into(), number(bound));
                }
                if let Some((bound, exclusive)) = maximum {
                    let key = if *exclusive { "exclusiveMaximum" } else { "maximum" };
                    schema.insert(key.into(), number(bound));
                }
                if let Some(multiple) = multiple {
                    schema.insert("multipleOf".into(), json!(multiple));
                }
                Value::Object(schema)
            }
            Self::AnyOf(schemas) => json!({"anyOf": list(schemas)}),
            Self::OneOf(schemas) => json!({"oneOf": list(schemas)}),
            Self::AllOf(schemas) => json!({"allOf": list(schemas)}),
            Self::Not(schema) => json!({"not": below(schema)}),
            Self::Ref(index) => json!({"$ref": format!("#/$defs/d{index}")}),
            Self::Raw(value) => mirror_value(value, 6),
        }
    }
}

impl McpCase {
    /// The schema document, with the case's definitions under `$defs`.
    #[must_use]
    pub fn schema(&self) -> Value {
        let mut schema = self.schema.to_value(0);
        if let Value::Object(object) = &mut schema {
            let definitions: Map<String, Value> =
                self.definitions.iter().enumerate().map(|(i, d)| (format!("d{i}"), d.to_value(1))).collect();
            object.insert("$defs".into(), Value::Object(definitions));
        }
        schema
    }

    /// The arguments' JSON text.
    #[must_use]
    pub fn arguments(&self) -> String {
        self.arguments.to_text(MAX_ARGUMENTS_DEPTH)
    }
}

/// A tool that checks its arguments as `loopbound-mcp` does.
fn tool(schema: InputSchema) -> GuardedTool<Arguments> {
    ToolBuilder::new("t", "cap")
        .validate(move |arguments: &Arguments| schema.check(arguments.as_value()).map_err(|v| v.to_string()))
        .build(|_: Arguments, _: ToolContext| async move { Ok::<_, String>("ran") })
        .unwrap_or_else(|error| panic!("a valid tool name was refused: {error}"))
}

/// Every string value (not key) of `value`.
fn string_values<'a>(value: &'a Value, keys: &mut Vec<&'a str>, out: &mut Vec<&'a str>) {
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::String(text) => out.push(text),
            Value::Array(items) => stack.extend(items),
            Value::Object(object) => {
                keys.extend(object.keys().map(String::as_str));
                stack.extend(object.values());
            }
            _ => {}
        }
    }
}

/// Runs the case's checks.
///
/// # Panics
///
/// When an invariant of the module's list does not hold.
pub fn check(case: &McpCase) {
    let schema = case.schema();
    let refused = InputSchema::compile(&schema, Unsupported::Refuse);
    let left = InputSchema::compile(&schema, Unsupported::LeaveToServer);
    let (strict, lenient) = match (refused, left) {
        (Ok(strict), Ok(lenient)) => (strict, lenient),
        (Err(_), _) => return,
        (Ok(_), Err(error)) => panic!("a schema compiled strictly but not leniently: {error}"),
    };
    assert!(
        lenient.unchecked().is_empty(),
        "a strictly compiled schema left {:?} unchecked",
        lenient.unchecked()
    );
    let schema_text = schema.to_string();
    let tools = [tool(strict), tool(lenient)];
    let text = case.arguments();
    let verdicts: Vec<Result<Arguments, loopbound::tool::BindError>> =
        tools.iter().map(|t| t.bind(&text)).collect();
    assert_eq!(
        verdicts[0].as_ref().err().map(ToString::to_string),
        verdicts[1].as_ref().err().map(ToString::to_string),
        "the two compilations disagree"
    );
    let bound = match &verdicts[0] {
        Ok(arguments) => arguments.clone(),
        Err(error) if error.kind() != BindErrorKind::Invalid => return,
        Err(error) => {
            // Refused by the schema: check the message against the arguments.
            let parsed: Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("bound text is JSON: {e}"));
            let (mut keys, mut strings) = (Vec::new(), Vec::new());
            string_values(&parsed, &mut keys, &mut strings);
            let message = error.message();
            for value in strings {
                let quoted = value.len() >= 4 && message.contains(value);
                let excused = schema_text.contains(value)
                    || VOCABULARY.contains(value)
                    || keys.iter().any(|key| key.contains(value));
                assert!(!quoted || excused, "the refusal {message:?} quotes an argument's value");
            }
            let at = message.strip_prefix("at ").and_then(|rest| rest.split_once(": ")).map(|(at, _)| at);
            let at = at.unwrap_or_else(|| panic!("the refusal {message:?} names no place"));
            let pointer = if at == "/" { "" } else { at };
            let long_key = pointer.split('/').any(|token| token.len() >= 64);
            assert!(
                long_key || parsed.pointer(pointer).is_some(),
                "the refusal's place {at} is not in the arguments"
            );
            let canonical = loopbound::canonical::canonical_json(&parsed);
            let again = tools[0].bind(&canonical).err().map(|error| error.message().to_owned());
            assert_eq!(again.as_deref(), Some(message), "the canonical form {canonical} got another verdict");
            assert_refused_without_counting(&tools[0], &text);
            return;
        }
    };
    // Accepted: its canonical form is accepted too, and the tool runs once under the guard.
    let canonical = loopbound::canonical::canonical_json(bound.as_value());
    let again = tools[0].bind(&canonical);
    assert!(again.is_ok(), "the canonical form {canonical} of accepted arguments was refused: {again:?}");
    run_once(&tools[0], bound);
}

fn scope() -> Scope {
    Scope::builder().grant("cap").build().unwrap_or_else(|error| panic!("default limits: {error}"))
}

fn assert_refused_without_counting(tool: &GuardedTool<Arguments>, text: &str) {
    let scope = scope();
    let result = super::paused_runtime().block_on(tool.invoke_json(&scope, text));
    assert!(
        matches!(&result, Err(ToolError::Bind(error)) if error.kind() == BindErrorKind::Invalid),
        "a refused input went on: {result:?}"
    );
    assert_eq!(scope.tool_calls(), 0);
    assert!(scope.events().is_empty());
}

fn run_once(tool: &GuardedTool<Arguments>, arguments: Arguments) {
    let scope = scope();
    let result = super::paused_runtime().block_on(tool.invoke(&scope, arguments));
    assert_eq!(result.ok().as_deref(), Some("ran"));
    assert_eq!(scope.tool_calls(), 1);
}
