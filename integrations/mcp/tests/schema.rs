//! The schema check on its own: what it accepts, what it refuses and how it says so, and the
//! schemas it refuses to check.

use loopbound::tool::MAX_MESSAGE_LEN;
use loopbound_mcp::Unsupported;
use loopbound_mcp::schema::{InputSchema, MAX_DEPTH, MAX_SCHEMA_DEPTH, MAX_SCHEMA_NODES, SchemaError};
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
fn a_reference_cycle_that_never_descends_ends_and_adds_no_constraint() {
    // Once refused "too deep" by the subset checker; the cycle itself constrains nothing, and
    // what stands beside it still applies.
    assert_eq!(compile(json!({"$ref": "#"})).check(&json!({"any": [1]})), Ok(()));
    let typed = compile(json!({"$ref": "#", "type": "string"}));
    assert_eq!(typed.check(&json!("a")), Ok(()));
    assert_eq!(refusal(&typed, json!(1)), "at /: expected a string");
    let through_any_of = compile(json!({
        "$defs": {"a": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/b"}]}, "b": {"allOf": [{"$ref": "#/$defs/a"}], "minimum": 3}},
        "$ref": "#/$defs/a",
    }));
    assert_eq!(
        refusal(&through_any_of, json!(2)),
        "at /: expected a match for at least one of the 2 schemas of `anyOf`"
    );
}

#[test]
fn keywords_the_subset_checker_refused_are_checked() {
    let schema = compile(json!({
        "type": "object",
        "properties": {
            "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
            "env": {"type": "object", "patternProperties": {"^[A-Z_]+$": {"type": "string"}}, "additionalProperties": false},
            "pair": {"type": "object", "dependentRequired": {"user": ["password"]}},
            "closed": {"type": "object", "properties": {"a": true}, "unevaluatedProperties": false},
            "twice": {"type": "array", "contains": {"const": 1}, "minContains": 2},
        },
    }));
    assert_eq!(
        schema.check(&json!({"code": "ABC", "env": {"HOME": "/"}, "pair": {"user": "u", "password": "p"}, "closed": {"a": 1}, "twice": [1, 2, 1]})),
        Ok(())
    );
    let cases = [
        (json!({"code": "abc"}), "at /code: expected a string matching the pattern `^[A-Z]{3}$`"),
        (json!({"env": {"HOME": 1}}), "at /env/HOME: expected a string"),
        (
            json!({"env": {"home": "/"}}),
            "at /env: unexpected property `home` (the schema allows no other properties)",
        ),
        (json!({"pair": {"user": "u"}}), "at /pair: missing required property `password`"),
        (
            json!({"closed": {"a": 1, "b": 2}}),
            "at /closed: unexpected property `b` (`unevaluatedProperties` allows no other properties)",
        ),
        (
            json!({"twice": [1, 2]}),
            "at /twice: expected an array with as many items matching `contains` as `minContains` says",
        ),
    ];
    for (arguments, expected) in cases {
        assert_eq!(refusal(&schema, arguments.clone()), expected, "{arguments}");
    }
}

#[test]
fn parts_not_checked_here_are_refused_or_listed_never_ignored_silently() {
    let cases = [
        // Look-ahead: the linear-time engine cannot run it.
        (
            json!({"properties": {"p": {"type": "string", "pattern": "^(?=.*[0-9]).+$"}}}),
            SchemaError::Unsupported { keyword: "pattern".to_owned(), at: "/properties/p".to_owned() },
            "pattern at /properties/p",
        ),
        (
            json!({"patternProperties": {"^(?!x)": {"type": "string"}}}),
            SchemaError::Unsupported { keyword: "patternProperties".to_owned(), at: String::new() },
            "patternProperties `^(?!x)` at /",
        ),
        (
            json!({"properties": {"a": {"$ref": "https://example.com/s.json#/$defs/x"}}}),
            SchemaError::Unresolved {
                reference: "https://example.com/s.json".to_owned(),
                at: "/properties/a".to_owned(),
            },
            "$ref `https://example.com/s.json` at /properties/a",
        ),
        (
            json!({"$id": "https://example.com/root.json", "items": {"$ref": "item.json"}}),
            SchemaError::Unresolved {
                reference: "https://example.com/item.json".to_owned(),
                at: "/items".to_owned(),
            },
            "$ref `https://example.com/item.json` at /items",
        ),
    ];
    for (schema, error, listed) in cases {
        assert_eq!(InputSchema::compile(&schema, Unsupported::Refuse).unwrap_err(), error, "{schema}");
        let left =
            InputSchema::compile(&schema, Unsupported::LeaveToServer).expect("compiled without the part");
        assert_eq!(left.unchecked(), [listed], "{schema}");
    }
    let error = InputSchema::compile(&json!({"type": "string", "pattern": "(a)\\1"}), Unsupported::Refuse)
        .unwrap_err();
    assert_eq!(error.to_string(), "unsupported schema keyword `pattern` at /");
    let left = InputSchema::compile(
        &json!({"type": "string", "pattern": "(?=a)", "maxLength": 2}),
        Unsupported::LeaveToServer,
    )
    .unwrap();
    assert_eq!(left.check(&json!("b")), Ok(()), "left to the server, and listed as such");
    assert_eq!(refusal(&left, json!("bbb")), "at /: expected a string of at most 2 characters");
    assert_eq!(refusal(&left, json!(1)), "at /: expected a string");
}

#[test]
fn a_remote_reference_is_never_fetched() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}/schema.json", listener.local_addr().unwrap());
    let schema = json!({"type": "object", "properties": {"a": {"$ref": url}}});
    let refused = InputSchema::compile(&schema, Unsupported::Refuse).unwrap_err();
    assert_eq!(refused, SchemaError::Unresolved { reference: url.clone(), at: "/properties/a".to_owned() });
    let left = InputSchema::compile(&schema, Unsupported::LeaveToServer).unwrap();
    assert_eq!(left.unchecked(), [format!("$ref `{url}` at /properties/a")]);
    assert_eq!(left.check(&json!({"a": [1, "x"]})), Ok(()));
    assert_eq!(refusal(&left, json!([])), "at /: expected an object");
    let accepted = listener.accept().map(|_| ()).map_err(|error| error.kind());
    assert_eq!(accepted, Err(std::io::ErrorKind::WouldBlock), "nothing connected to the schema's server");
}

#[test]
fn a_schema_naming_an_unknown_dialect_is_refused_or_read_as_2020_12() {
    let schema = json!({"$schema": "https://example.com/my-dialect", "type": "integer"});
    assert_eq!(
        InputSchema::compile(&schema, Unsupported::Refuse).unwrap_err(),
        SchemaError::Unsupported { keyword: "$schema".to_owned(), at: String::new() }
    );
    let left = InputSchema::compile(&schema, Unsupported::LeaveToServer).unwrap();
    assert_eq!(left.unchecked(), ["$schema at /"]);
    assert_eq!(refusal(&left, json!("1")), "at /: expected an integer");
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

/// Arrays nested `levels` deep, an empty one innermost.
fn nested(levels: usize) -> Value {
    let mut value = json!([]);
    for _ in 1..levels {
        value = Value::Array(vec![value]);
    }
    value
}

#[test]
fn arguments_deeper_than_loopbound_binds_are_refused_before_the_validator() {
    let schema = compile(
        json!({"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}}, "$ref": "#/$defs/n"}),
    );
    assert_eq!(schema.check(&nested(MAX_DEPTH)), Ok(()));
    assert_eq!(
        refusal(&schema, nested(MAX_DEPTH + 1)),
        format!("at /: the arguments nest deeper than {MAX_DEPTH} levels, which is not checked here")
    );
}

#[test]
fn a_hostile_schema_and_deep_arguments_never_overflow_the_callers_stack() {
    // 1,000 `$ref`s chained under `anyOf`, the last one descending and starting again: the
    // validator's worst shape, re-entered at every level of the arguments.
    let mut defs = serde_json::Map::new();
    for i in 0..1000 {
        defs.insert(
            format!("d{i}"),
            json!({"anyOf": [{"type": "string"}, {"$ref": format!("#/$defs/d{}", i + 1)}]}),
        );
    }
    defs.insert("d1000".to_owned(), json!({"type": "array", "items": {"$ref": "#/$defs/d0"}}));
    let schema = compile(json!({"$defs": defs, "$ref": "#/$defs/d0"}));
    // A tokio worker's stack.
    let verdicts = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            [8, 60, 100]
                .map(|levels| schema.check(&nested(levels)).map_err(|violation| violation.to_string()))
        })
        .unwrap()
        .join()
        .expect("no overflow, no panic");
    assert_eq!(
        verdicts,
        [
            Ok(()),
            Ok(()),
            Err("at /: the arguments nest too deeply for a schema this large to check here".to_owned())
        ]
    );
}

#[test]
fn a_refusal_is_bounded_and_names_an_ancestor_when_its_place_is_long() {
    let schema = compile(json!({
        "$defs": {"n": {"type": ["object", "integer"], "additionalProperties": {"$ref": "#/$defs/n"}}},
        "$ref": "#/$defs/n",
    }));
    let keys: Vec<String> = (0..20).map(|i| format!("{i:02}{}", "k".repeat(38))).collect();
    let mut arguments = json!("a string where an object or an integer is expected");
    for key in keys.iter().rev() {
        arguments = json!({key.clone(): arguments});
    }
    let message = refusal(&schema, arguments);
    assert_eq!(message, format!("at /{}/{}: expected one of the types integer, object", keys[0], keys[1]));
    let long_enum = compile(json!({"enum": (0..100).map(|i| format!("value-{i:03}")).collect::<Vec<_>>()}));
    let message = refusal(&long_enum, json!("other"));
    assert!(message.len() <= MAX_MESSAGE_LEN, "{message}");
    assert!(message.ends_with(", … (92 more)"), "{message}");
}

#[test]
fn schemas_past_the_size_bounds_are_typed_errors() {
    let mut deep = json!({"type": "integer"});
    for _ in 0..MAX_SCHEMA_DEPTH {
        deep = json!({"not": deep});
    }
    assert_eq!(
        InputSchema::compile(&deep, Unsupported::Refuse).unwrap_err(),
        SchemaError::TooDeep { limit: MAX_SCHEMA_DEPTH }
    );
    let properties: serde_json::Map<String, Value> =
        (0..=MAX_SCHEMA_NODES).map(|i| (format!("p{i}"), json!({"type": "string"}))).collect();
    assert_eq!(
        InputSchema::compile(&json!({"properties": properties}), Unsupported::Refuse).unwrap_err(),
        SchemaError::TooLarge { limit: MAX_SCHEMA_NODES }
    );
}
