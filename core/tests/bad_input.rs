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
    let cases: Vec<(String, BindErrorKind)> = vec![
        ("42".into(), BindErrorKind::NotAnObject),
        ("[42]".into(), BindErrorKind::NotAnObject),
        ("\"input\"".into(), BindErrorKind::NotAnObject),
        (deep.clone(), BindErrorKind::NotAnObject),
        (format!(r#"{{"input":{deep}}}"#), BindErrorKind::Mismatch),
        (r#"{"input":"42"}"#.into(), BindErrorKind::Mismatch),
        (r#"{"input":42.5}"#.into(), BindErrorKind::Mismatch),
        (r#"{"input":42.0}"#.into(), BindErrorKind::Mismatch),
        (r#"{"input":1e400}"#.into(), BindErrorKind::Mismatch),
        (r#"{"input":null}"#.into(), BindErrorKind::Mismatch),
        ("{}".into(), BindErrorKind::Mismatch),
        ("".into(), BindErrorKind::Mismatch),
        (r#"{"input":99999999999999999999999}"#.into(), BindErrorKind::Mismatch),
        (r#"{"input":42"#.into(), BindErrorKind::InvalidJson),
        (r#"{"input":42}}"#.into(), BindErrorKind::InvalidJson),
        ("{input:42}".into(), BindErrorKind::InvalidJson),
    ];
    for (arguments, expected) in cases {
        let result = tools.read_ticket.invoke_json(&scope, &arguments).await;
        let shown = &arguments[..arguments.len().min(40)];
        assert_eq!(bind_kind(&result), Some(expected), "{shown}");
        let message = result.unwrap_err().model_message().unwrap_or_default();
        assert!(message.starts_with("Error: invalid arguments for tool read_ticket: "), "{message}");
    }
    assert_eq!(scope.tool_calls(), 0);
    assert!(scope.events().is_empty());
    assert_eq!(scope.state().bodies_run(), 0);
}

#[tokio::test]
async fn a_huge_string_is_refused_with_a_short_message() {
    let scope = scope_with(Limits::default());
    let tools = tools();
    let huge = format!(r#"{{"input":"{}"}}"#, "é".repeat(1_000_000));
    let result = tools.read_ticket.invoke_json(&scope, &huge).await;
    let Err(ToolError::Bind(error)) = result else { panic!("expected a binding error") };
    assert_eq!(error.kind(), BindErrorKind::Mismatch);
    assert!(error.message().len() <= MAX_MESSAGE_LEN);
    assert!(error.message().starts_with("invalid type: string"), "{}", error.message());
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

#[tokio::test]
async fn nested_enums_and_options_bind_or_fail_typed() {
    let scope = scope_with(Limits::default());
    let draw = ToolBuilder::new("draw", "ticket.read")
        .build(|d: Draw, _| async move { Ok::<_, String>(format!("{} shapes", d.shapes.len())) })
        .unwrap();
    let ok = draw.invoke_json(&scope, r#"{"shapes":[{"Circle":{"radius":2}},{"Square":3}]}"#).await;
    assert_eq!(ok.unwrap(), "2 shapes");
    for bad in
        [r#"{"shapes":[{"Triangle":1}]}"#, r#"{"shapes":[{"Circle":{"radius":-1}}]}"#, r#"{"shapes":{}}"#]
    {
        assert_eq!(bind_kind(&draw.invoke_json(&scope, bad).await), Some(BindErrorKind::Mismatch), "{bad}");
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
    // A deep value in a field the input type ignores is skipped without recursion.
    let tools = tools();
    let ignored = format!(r#"{{"ignored":{}{},"input":1}}"#, "[".repeat(100_000), "]".repeat(100_000));
    assert!(tools.read_ticket.invoke_json(&scope, &ignored).await.is_ok());
    assert_eq!(scope.tool_calls(), 2);
}
