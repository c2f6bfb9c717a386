//! The schema check on its own: what it accepts, what it refuses and how it says so, and the
//! schemas it refuses to check.

use loopbound_mcp::Unsupported;
use loopbound_mcp::schema::{InputSchema, MAX_DEPTH, SchemaError};
use serde_json::{Value, json};

fn compile(schema: Value) -> InputSchema {
    InputSchema::compile(&schema, Unsupported::Refuse).expect("a supported schema")
}

fn refusal(schema: &InputSchema, arguments: Value) -> String {
    schema.check(&arguments).expect_err("refused").to_string()
}

#[test]
fn every_supported_keyword_refuses_what_it_should_and_names_where() {
    let schema = compile(json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 2, "maxLength": 4},
            "size": {"type": "integer", "minimum": 1, "exclusiveMaximum": 10, "multipleOf": 2},
            "ratio": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
            "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": true, "maxItems": 2},
            "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "boolean"}], "items": false},
            "mode": {"const": "fast"},
            "either": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "one": {"oneOf": [{"type": "integer"}, {"minimum": 0}]},
            "not_zero": {"not": {"const": 0}},
            "extra": {"type": "object", "additionalProperties": false, "properties": {"ok": true}},
            "map": {"type": "object", "additionalProperties": {"type": "integer"}, "maxProperties": 1},
            "keys": {"type": "object", "propertyNames": {"maxLength": 3}},
            "has_one": {"type": "array", "contains": {"const": 1}},
        },
        "required": ["name"],
    }));
    assert_eq!(schema.check(&json!({"name": "ab", "size": 4, "tags": ["a"], "one": -1})), Ok(()));
    let cases = [
        (json!({}), "at /: missing required property `name`"),
        (json!({"name": "a"}), "at /name: expected a string of at least 2 characters"),
        (json!({"name": "ééééé"}), "at /name: expected a string of at most 4 characters"),
        (json!({"name": "ab", "size": 2.5}), "at /size: expected an integer"),
        (json!({"name": "ab", "size": 0}), "at /size: expected a number >= 1"),
        (json!({"name": "ab", "size": 10}), "at /size: expected a number < 10"),
        (json!({"name": "ab", "size": 3}), "at /size: expected a multiple of 2"),
        (json!({"name": "ab", "ratio": 0}), "at /ratio: expected a number > 0"),
        (json!({"name": "ab", "ratio": 1.5}), "at /ratio: expected a number <= 1"),
        (json!({"name": "ab", "tags": ["c"]}), "at /tags/0: expected one of \"a\", \"b\""),
        (json!({"name": "ab", "tags": ["a", "a"]}), "at /tags: expected an array of unique items"),
        (json!({"name": "ab", "tags": ["a", "b", "a"]}), "at /tags: expected an array of at most 2 items"),
        (json!({"name": "ab", "pair": ["x", 1]}), "at /pair/1: expected a boolean"),
        (
            json!({"name": "ab", "pair": ["x", true, 3]}),
            "at /pair/2: expected nothing here (the schema accepts no value)",
        ),
        (json!({"name": "ab", "mode": "slow"}), "at /mode: expected the value \"fast\""),
        (
            json!({"name": "ab", "either": 1}),
            "at /either: expected a match for at least one of the 2 schemas of `anyOf`",
        ),
        (
            json!({"name": "ab", "one": 3}),
            "at /one: expected a match for exactly one of the 2 schemas of `oneOf` (matched 2)",
        ),
        (json!({"name": "ab", "not_zero": 0.0}), "at /not_zero: expected no match for the schema of `not`"),
        (
            json!({"name": "ab", "extra": {"other": 1}}),
            "at /extra: unexpected property `other` (the schema allows no other properties)",
        ),
        (json!({"name": "ab", "map": {"a": "x"}}), "at /map/a: expected an integer"),
        (
            json!({"name": "ab", "map": {"a": 1, "b": 2}}),
            "at /map: expected an object with at most 1 properties",
        ),
        (
            json!({"name": "ab", "keys": {"long": 1}}),
            "at /keys: expected property name `long` to match `propertyNames`",
        ),
        (
            json!({"name": "ab", "has_one": [2, 3]}),
            "at /has_one: expected an array with at least one item matching `contains`",
        ),
    ];
    for (arguments, expected) in cases {
        assert_eq!(refusal(&schema, arguments.clone()), expected, "{arguments}");
    }
}

#[test]
fn a_refusal_never_quotes_the_value_it_refused() {
    let schema = compile(json!({
        "type": "object",
        "properties": {"token": {"type": "integer"}, "note": {"maxLength": 3}, "list": {"items": {"type": "number"}}}
    }));
    let secret = "sk-SECRET-1234567890";
    for arguments in [json!({"token": secret}), json!({"note": secret}), json!({"list": [1, secret]})] {
        let message = refusal(&schema, arguments);
        assert!(!message.contains("SECRET"), "{message}");
    }
}

#[test]
fn numbers_are_compared_by_value_whatever_their_spelling() {
    let schema = compile(json!({"enum": [1, 2.5], "minimum": 1.0}));
    for accepted in [json!(1), json!(1.0), json!(2.5), json!(25e-1)] {
        assert_eq!(schema.check(&accepted), Ok(()), "{accepted}");
    }
    assert!(schema.check(&json!(1.5)).is_err());
    let integer = compile(json!({"type": "integer"}));
    assert_eq!(integer.check(&json!(3.0)), Ok(()));
    assert_eq!(integer.check(&json!(u64::MAX)), Ok(()));
}

#[test]
fn references_inside_the_schema_are_followed_even_when_recursive() {
    let schema = compile(json!({
        "$defs": {"node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/node"}, "v": {"type": "integer"}}}},
        "$ref": "#/$defs/node",
    }));
    assert_eq!(schema.check(&json!({"child": {"child": {"v": 1}}})), Ok(()));
    assert_eq!(
        refusal(&schema, json!({"child": {"child": {"v": "x"}}})),
        "at /child/child/v: expected an integer"
    );
    let draft07 = compile(
        json!({"definitions": {"a~b/c": {"type": "string"}}, "properties": {"p": {"$ref": "#/definitions/a~0b~1c"}}}),
    );
    assert_eq!(refusal(&draft07, json!({"p": 1})), "at /p: expected a string");
}

#[test]
fn a_reference_cycle_that_never_descends_is_refused_not_a_stack_overflow() {
    let schema = compile(json!({"$ref": "#"}));
    let message = refusal(&schema, json!({}));
    assert_eq!(
        message,
        format!("at /: the schema nests too deeply to check here (at most {MAX_DEPTH} levels)")
    );
}

#[test]
fn unsupported_keywords_are_refused_or_listed_never_ignored_silently() {
    for (schema, keyword, at) in [
        (json!({"type": "string", "pattern": "^a"}), "pattern", "/"),
        (
            json!({"properties": {"p": {"patternProperties": {"^x": {}}}}}),
            "patternProperties",
            "/properties/p",
        ),
        (json!({"dependentRequired": {"a": ["b"]}}), "dependentRequired", "/"),
        (json!({"unevaluatedProperties": false}), "unevaluatedProperties", "/"),
        (json!({"items": {"type": "array", "minContains": 2}}), "minContains", "/items"),
    ] {
        let error = InputSchema::compile(&schema, Unsupported::Refuse).unwrap_err();
        assert_eq!(
            error,
            SchemaError::Unsupported {
                keyword: keyword.to_owned(),
                at: if at == "/" { String::new() } else { at.to_owned() }
            }
        );
        assert_eq!(error.to_string(), format!("unsupported schema keyword `{keyword}` at {at}"));
    }
    let left = InputSchema::compile(&json!({"type": "string", "pattern": "^a"}), Unsupported::LeaveToServer)
        .unwrap();
    assert_eq!(left.unchecked(), ["pattern at /"]);
    assert_eq!(left.check(&json!("b")), Ok(()), "left to the server, and listed as such");
    assert_eq!(left.check(&json!(1)).unwrap_err().to_string(), "at /: expected a string");
}

#[test]
fn annotations_never_reject() {
    let schema = compile(json!({
        "$schema": "http://json-schema.org/draft-07/schema#", "title": "t", "description": "d",
        "default": 1, "examples": [1], "format": "uri", "deprecated": true, "x-vendor": {"pattern": "^a"},
    }));
    assert_eq!(schema.check(&json!("not a uri at all")), Ok(()));
}

#[test]
fn malformed_and_external_schemas_are_typed_errors() {
    let malformed = InputSchema::compile(&json!({"minimum": "ten"}), Unsupported::Refuse).unwrap_err();
    assert_eq!(malformed.to_string(), "malformed schema: `minimum` at / must be a number");
    let remote = InputSchema::compile(&json!({"$ref": "https://example.com/s.json"}), Unsupported::Refuse)
        .unwrap_err();
    assert!(matches!(remote, SchemaError::Unresolved { .. }), "{remote:?}");
    let missing = InputSchema::compile(&json!({"$ref": "#/$defs/none"}), Unsupported::Refuse).unwrap_err();
    assert!(matches!(missing, SchemaError::Unresolved { .. }), "{missing:?}");
    let not_a_schema = InputSchema::compile(&json!(42), Unsupported::Refuse).unwrap_err();
    assert_eq!(not_a_schema.to_string(), "malformed schema: `(schema)` at / must be an object or a boolean");
}

#[test]
fn draft_04_and_draft_07_forms_are_understood() {
    let exclusive = compile(json!({"minimum": 5, "exclusiveMinimum": true}));
    assert_eq!(refusal(&exclusive, json!(5)), "at /: expected a number > 5");
    let tuple = compile(json!({"items": [{"type": "string"}], "additionalItems": {"type": "integer"}}));
    assert_eq!(tuple.check(&json!(["a", 1, 2])), Ok(()));
    assert_eq!(refusal(&tuple, json!(["a", "b"])), "at /1: expected an integer");
    let conditional =
        compile(json!({"if": {"type": "integer"}, "then": {"minimum": 0}, "else": {"type": "string"}}));
    assert_eq!(refusal(&conditional, json!(-1)), "at /: expected a number >= 0");
    assert_eq!(refusal(&conditional, json!(true)), "at /: expected a string");
}
