//! Bad arguments give typed errors, count nothing and never panic.

mod common;

use common::{Ticket, scope_with, tools};
use loopbound::tool::ToolBuilder;
use loopbound::tool::{BindErrorKind, MAX_MESSAGE_LEN};
use loopbound::{Limits, ToolError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

fn bind_kind(result: &Result<String, ToolError>) -> Option<BindErrorKind> {
    match result {
        Err(ToolError::Bind(error)) => Some(error.kind()),
        _ => None,
    }
}

#[tokio::test]
async fn every_binding_failure_is_typed_and_counts_nothing() {
    let scope = scope_with(Limits::default());
    let tools = tools();
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    const NOT_AN_OBJECT: &str = "arguments must be a JSON object";
    let cases: Vec<(String, BindErrorKind, &str)> = vec![
        ("42".into(), BindErrorKind::NotAnObject, NOT_AN_OBJECT),
        ("[42]".into(), BindErrorKind::NotAnObject, NOT_AN_OBJECT),
        ("\"input\"".into(), BindErrorKind::NotAnObject, NOT_AN_OBJECT),
        (deep.clone(), BindErrorKind::NotAnObject, NOT_AN_OBJECT),
        (
            format!(r#"{{"input":{deep}}}"#),
            BindErrorKind::Mismatch,
            "input: invalid type: an array, expected i64",
        ),
        (r#"{"input":"42"}"#.into(), BindErrorKind::Mismatch, "input: invalid type: a string, expected i64"),
        (
            r#"{"input":42.5}"#.into(),
            BindErrorKind::Mismatch,
            "input: invalid type: a number with a fraction, expected i64",
        ),
        (r#"{"input":1e400}"#.into(), BindErrorKind::Mismatch, "input: number out of range, expected i64"),
        (r#"{"input":null}"#.into(), BindErrorKind::Mismatch, "input: invalid type: null, expected i64"),
        ("{}".into(), BindErrorKind::Mismatch, "missing field `input`"),
        ("".into(), BindErrorKind::Mismatch, "missing field `input`"),
        (
            r#"{"input":99999999999999999999999}"#.into(),
            BindErrorKind::Mismatch,
            "input: number out of range, expected i64",
        ),
        (r#"{"input":1,"input":2}"#.into(), BindErrorKind::Mismatch, "duplicate field `input`"),
        (
            r#"{"input":42"#.into(),
            BindErrorKind::InvalidJson,
            "invalid JSON at line 1 column 12: the text ends before the value does",
        ),
        (
            r#"{"input":42}}"#.into(),
            BindErrorKind::InvalidJson,
            "invalid JSON at line 1 column 13: text after the value",
        ),
        (
            "{input:42}".into(),
            BindErrorKind::InvalidJson,
            "invalid JSON at line 1 column 2: an object key must be a string",
        ),
        // The type's complaint comes first in the text, but text that is not JSON is reported as such.
        (
            r#"{"input":"42"#.into(),
            BindErrorKind::InvalidJson,
            "invalid JSON at line 1 column 13: the text ends before the value does",
        ),
    ];
    for (arguments, kind, message) in cases {
        let result = tools.read_ticket.invoke_json(&scope, &arguments).await;
        let shown = &arguments[..arguments.len().min(40)];
        assert_eq!(bind_kind(&result), Some(kind), "{shown}");
        let error = result.unwrap_err();
        let Some(model_message) = error.model_message() else { panic!("a binding error goes to the model") };
        assert_eq!(
            model_message,
            format!("Error: invalid arguments for tool read_ticket: {message}."),
            "{shown}"
        );
    }
    assert_eq!(scope.tool_calls(), 0);
    assert!(scope.events().is_empty());
    assert_eq!(scope.state().bodies_run(), 0);
}

/// SPEC §5: `42`, `42.0`, `4.2e1` and `420e-1` are one value. Unlike serde_json, which refuses
/// `42.0` for an `i64`, binding reads numbers by value: every spelling binds to the integer 42,
/// and so every spelling is the same call.
#[tokio::test]
async fn every_spelling_of_an_integer_is_one_call() {
    let tools = tools();
    for spelling in ["42", "42.0", "4.2e1", "420e-1", "0.42E+2"] {
        let arguments = format!(r#"{{"input":{spelling}}}"#);
        assert_eq!(tools.read_ticket.bind(&arguments).unwrap(), Ticket { input: 42 }, "{spelling}");
    }
    let scope = scope_with(Limits::default());
    assert!(tools.read_ticket.invoke_json(&scope, r#"{"input":42}"#).await.is_ok());
    for spelling in ["42.0", "4.2e1", "420e-1"] {
        let again = tools.read_ticket.invoke_json(&scope, &format!(r#"{{"input":{spelling}}}"#)).await;
        assert!(matches!(again, Err(ToolError::Stopped(_))), "{spelling} is the same call");
    }
    assert_eq!(scope.state().bodies_run(), 1);
}

#[tokio::test]
async fn binding_errors_never_quote_the_arguments() {
    const SECRET: &str = "SECRET-PIN-4242";
    let scope = scope_with(Limits::default());
    let draw = draw_tool();
    let cases = [
        (
            format!(r#"{{"shapes":[{{"Circle":{{"radius":"{SECRET}"}}}}]}}"#),
            "shapes[0].Circle.radius: invalid type: a string, expected u32",
        ),
        (
            format!(r#"{{"shapes":[{{"{SECRET}":1}}]}}"#),
            "shapes[0]: unknown variant, expected one of `Circle`, `Square`",
        ),
        (
            format!(r#"{{"shapes":["{SECRET}"]}}"#),
            "shapes[0]: unknown variant, expected one of `Circle`, `Square`",
        ),
        (
            format!(r#"{{"shapes":[],"label":{{"{SECRET}":"{SECRET}"}}}}"#),
            "label: invalid type: an object, expected a string",
        ),
        (
            format!(r#"{{"shapes":[{{"Square":"{SECRET}"}}],"label":"{SECRET}"}}"#),
            "shapes[0].Square: invalid type: a string, expected u32",
        ),
        (format!(r#"{{"{SECRET}":"{SECRET}"}}"#), "missing field `shapes`"),
        (
            format!(r#"{{"shapes":[],"label":"{SECRET}"#),
            "label: invalid JSON at line 1 column 38: the text ends before the value does",
        ),
    ];
    for (arguments, message) in cases {
        let Err(error) = draw.invoke_json(&scope, &arguments).await else { panic!("{arguments} bound") };
        let ToolError::Bind(bind) = &error else { panic!("{arguments}: {error:?}") };
        assert_eq!(bind.message(), message, "{arguments}");
        let model = error.model_message().unwrap_or_default();
        for shown in [error.to_string(), format!("{error:?}"), model, bind.to_string(), format!("{bind:?}")] {
            assert!(!shown.contains("SECRET") && !shown.contains("4242"), "{shown}");
        }
    }
    assert_eq!(scope.tool_calls(), 0);
}

#[tokio::test]
async fn a_huge_string_is_refused_with_a_short_message() {
    let scope = scope_with(Limits::default());
    let tools = tools();
    let huge = format!(r#"{{"input":"{}"}}"#, "é".repeat(1_000_000));
    let result = tools.read_ticket.invoke_json(&scope, &huge).await;
    let Err(ToolError::Bind(error)) = result else { panic!("expected a binding error") };
    assert_eq!(error.kind(), BindErrorKind::Mismatch);
    assert_eq!(error.message(), "input: invalid type: a string, expected i64");
    assert_eq!(error.path(), "input");
    assert!(error.message().len() <= MAX_MESSAGE_LEN);
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Note {
    text: String,
}

#[tokio::test]
async fn a_huge_valid_string_is_admitted_and_compared_exactly() {
    let scope = scope_with(Limits::default());
    let note = ToolBuilder::new("note", "ticket.read")
        .build(|n: Note, _| async move { Ok::<_, String>(n.text.len().to_string()) })
        .unwrap();
    let long = "a".repeat(2_000_000);
    assert_eq!(note.invoke(&scope, Note { text: long.clone() }).await.unwrap(), "2000000");
    let mut other = long.clone();
    other.push('b');
    assert_eq!(note.invoke(&scope, Note { text: other }).await.unwrap(), "2000001");
    assert_eq!(scope.tool_calls(), 2);
    assert!(matches!(note.invoke(&scope, Note { text: long }).await, Err(ToolError::Stopped(_))));
}

#[tokio::test]
async fn an_unknown_tool_counts_nothing() {
    let scope = scope_with(Limits::default());
    let tools = tools();
    let result = tools.set.invoke(&scope, "delete_everything", "{}").await;
    let Err(error) = result else { panic!("expected NotFound") };
    assert!(matches!(&error, ToolError::NotFound { name } if name == "delete_everything"));
    assert_eq!(error.model_message().as_deref(), Some("Error: tool delete_everything not found."));
    assert!(scope.events().is_empty());
}

#[derive(Deserialize, Serialize, JsonSchema)]
enum Shape {
    Circle { radius: u32 },
    Square(u32),
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Draw {
    shapes: Vec<Shape>,
    label: Option<String>,
}

fn draw_tool() -> loopbound::GuardedTool<Draw, common::Review> {
    ToolBuilder::new("draw", "ticket.read")
        .build(|d: Draw, _| async move { Ok::<_, String>(format!("{} shapes", d.shapes.len())) })
        .unwrap()
}

#[tokio::test]
async fn nested_enums_and_options_bind_or_fail_typed() {
    let scope = scope_with(Limits::default());
    let draw = draw_tool();
    let ok = draw.invoke_json(&scope, r#"{"shapes":[{"Circle":{"radius":2}},{"Square":3}]}"#).await;
    assert_eq!(ok.unwrap(), "2 shapes");
    for (bad, message) in [
        (r#"{"shapes":[{"Triangle":1}]}"#, "shapes[0]: unknown variant, expected one of `Circle`, `Square`"),
        (
            r#"{"shapes":[{"Circle":{"radius":-1}}]}"#,
            "shapes[0].Circle.radius: invalid value: an integer, expected u32",
        ),
        (r#"{"shapes":{}}"#, "shapes: invalid type: an object, expected a sequence"),
        (r#"{"shapes":[{"Circle":{}}]}"#, "shapes[0].Circle: missing field `radius`"),
        (
            r#"{"shapes":[{"Square":3,"Circle":{"radius":1}}]}"#,
            "shapes[0]: more elements than the input type reads",
        ),
    ] {
        let Err(ToolError::Bind(error)) = draw.invoke_json(&scope, bad).await else { panic!("{bad} bound") };
        assert_eq!((error.kind(), error.message()), (BindErrorKind::Mismatch, message), "{bad}");
    }
    // `label: None` and a missing `label` bind to the same value: one signature.
    let again =
        draw.invoke_json(&scope, r#"{"label":null,"shapes":[{"Square":3},{"Circle":{"radius":2}}]}"#).await;
    assert!(again.is_ok(), "array order is significant, so this is a new signature");
    let same = draw.invoke_json(&scope, r#"{"shapes":[{"Square":3},{"Circle":{"radius":2}}]}"#).await;
    assert!(matches!(same, Err(ToolError::Stopped(_))));
}

#[test]
fn binding_alone_counts_nothing() {
    let scope = scope_with(Limits::default());
    let tools = tools();
    assert_eq!(tools.read_ticket.bind(r#"{"input": 7}"#).unwrap(), Ticket { input: 7 });
    assert_eq!(tools.read_ticket.bind("  ").unwrap_err().kind(), BindErrorKind::Mismatch);
    assert!(scope.events().is_empty());
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Payload {
    data: serde_json::Value,
}

#[tokio::test]
async fn deep_nesting_is_a_typed_error_not_a_stack_overflow() {
    let scope = scope_with(Limits::default());
    let payload = ToolBuilder::new("payload", "ticket.read")
        .build(|_: Payload, _| async move { Ok::<_, String>("ok") })
        .unwrap();
    let deep = format!(r#"{{"data":{}{}}}"#, "[".repeat(100_000), "]".repeat(100_000));
    assert_eq!(bind_kind(&payload.invoke_json(&scope, &deep).await), Some(BindErrorKind::TooDeep));
    let shallow = format!(r#"{{"data":{}{}}}"#, "[".repeat(100), "]".repeat(100));
    assert_eq!(payload.invoke_json(&scope, &shallow).await.unwrap(), "ok");
    // The arguments' object is one level: 128 in all bind, 129 do not.
    let limit = loopbound::canonical::MAX_DEPTH;
    let deepest = format!(r#"{{"data":{}0{}}}"#, "[".repeat(limit - 1), "]".repeat(limit - 1));
    assert_eq!(payload.invoke_json(&scope, &deepest).await.unwrap(), "ok");
    let one_more = format!(r#"{{"data":{}0{}}}"#, "[".repeat(limit), "]".repeat(limit));
    let Err(ToolError::Bind(error)) = payload.invoke_json(&scope, &one_more).await else { panic!("bound") };
    assert_eq!(error.kind(), BindErrorKind::TooDeep);
    assert!(
        error.message().ends_with(": arrays and objects nest deeper than 128 levels"),
        "{}",
        error.message()
    );
    // A deep value in a field the input type ignores is skipped without recursion.
    let tools = tools();
    let ignored = format!(r#"{{"ignored":{}{},"input":1}}"#, "[".repeat(100_000), "]".repeat(100_000));
    assert!(tools.read_ticket.invoke_json(&scope, &ignored).await.is_ok());
    assert_eq!(scope.tool_calls(), 3);
}
