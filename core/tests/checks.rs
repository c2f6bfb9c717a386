//! A tool's own check of its bound input runs after binding and before the guard, on every path
//! (a typed call, a call by JSON, a reservation, a call by name, the loop, and a journaled run),
//! and a schema given at run time is what the model sees.

#[cfg(feature = "journal")]
use std::sync::Arc;
#[cfg(feature = "journal")]
use std::sync::atomic::{AtomicU32, Ordering};

#[cfg(feature = "journal")]
use loopbound::journal::{MemoryJournal, RunId};
use loopbound::scripted::{Step, sequence};
use loopbound::tool::{BindErrorKind, ToolBuilder};
use loopbound::transport::ModelReply;
use loopbound::{Message, Runner, Scope, ToolContext, ToolError, ToolSet};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Deserialize, Serialize, JsonSchema)]
struct Page {
    size: u32,
}

fn at_most_100(page: &Page) -> Result<(), String> {
    if page.size <= 100 { Ok(()) } else { Err("at /size: expected at most 100".to_owned()) }
}

fn scope() -> Scope {
    Scope::builder().grant("items.read").build().unwrap()
}

fn refused_kind(result: Result<impl Sized, ToolError>) -> Option<(BindErrorKind, String)> {
    match result {
        Err(ToolError::Bind(error)) => Some((error.kind(), error.message().to_owned())),
        _ => None,
    }
}

#[tokio::test]
async fn a_refused_input_is_a_binding_error_on_every_path_and_counts_nothing() {
    let list = ToolBuilder::new("list", "items.read")
        .validate(at_most_100)
        .build(|page: Page, _call| async move { Ok::<_, String>(format!("{} items", page.size)) })
        .unwrap();
    let set = ToolSet::builder().add(&list).build().unwrap();
    let scope = scope();
    let expected = Some((BindErrorKind::Invalid, "at /size: expected at most 100".to_owned()));

    assert_eq!(refused_kind(list.bind(r#"{"size":101}"#).map_err(ToolError::from)), expected);
    assert_eq!(refused_kind(list.invoke_json(&scope, r#"{"size":101}"#).await), expected);
    assert_eq!(refused_kind(list.invoke(&scope, Page { size: 101 }).await), expected);
    assert_eq!(refused_kind(list.reserve(&scope, Page { size: 101 })), expected);
    assert_eq!(refused_kind(set.invoke(&scope, "list", r#"{"size":101}"#).await), expected);
    assert_eq!(scope.tool_calls(), 0);
    assert!(scope.events().is_empty());

    // A type error is still the binding's own, before the check runs.
    let mismatch = list.invoke_json(&scope, r#"{"size":"big"}"#).await;
    assert_eq!(refused_kind(mismatch).map(|(kind, _)| kind), Some(BindErrorKind::Mismatch));
    assert_eq!(list.invoke_json(&scope, r#"{"size":100}"#).await.unwrap(), "100 items");
    assert_eq!(scope.tool_calls(), 1);
}

#[tokio::test]
async fn the_loop_hands_a_refusal_to_the_model_and_goes_on() {
    let list = ToolBuilder::new("list", "items.read")
        .validate(at_most_100)
        .build(|page: Page, _call| async move { Ok::<_, String>(format!("{} items", page.size)) })
        .unwrap();
    let model = sequence(vec![
        Step::Reply(ModelReply::call("c1", "list", r#"{"size":5000}"#)),
        Step::Reply(ModelReply::call("c2", "list", r#"{"size":5}"#)),
        Step::Reply(ModelReply::text("done")),
    ]);
    let scope = scope();
    let mut conversation = vec![Message::user("list")];
    let outcome = Runner::new(&ToolSet::builder().add(&list).build().unwrap(), model)
        .run(&scope, &mut conversation, |_| true)
        .await
        .unwrap();
    assert_eq!(outcome.text(), Some("done"));
    assert_eq!(scope.tool_calls(), 1);
    let results: Vec<String> = conversation
        .iter()
        .filter_map(|message| match message {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        ["Error: invalid arguments for tool list: at /size: expected at most 100.", "5 items"]
    );
}

#[tokio::test]
async fn a_schema_given_at_run_time_replaces_the_derived_one() {
    let schema = json!({"type": "object", "properties": {"size": {"type": "integer", "maximum": 100}}});
    let list = ToolBuilder::new("list", "items.read")
        .parameters(schema.clone())
        .description("List items.")
        .build(
            |page: Page, _call: ToolContext| async move { Ok::<_, String>(format!("{} items", page.size)) },
        )
        .unwrap();
    assert_eq!(list.definition().parameters, schema);
    assert_eq!(list.definition().description, "List items.");

    let derived = ToolBuilder::new("list", "items.read")
        .build(
            |page: Page, _call: ToolContext| async move { Ok::<_, String>(format!("{} items", page.size)) },
        )
        .unwrap();
    assert_eq!(derived.definition().parameters["properties"]["size"]["type"], "integer");
    assert_eq!(derived.definition().parameters["properties"]["size"].get("maximum"), None);
}

/// A refund tool whose check refuses amounts above 100, with a counter of the bodies it ran.
#[cfg(feature = "journal")]
fn refund_tools(bodies: &Arc<AtomicU32>) -> ToolSet {
    #[derive(Deserialize, Serialize, JsonSchema)]
    struct Refund {
        amount: u32,
    }
    let ran = Arc::clone(bodies);
    let refund = ToolBuilder::new("refund", "payments.refund")
        .validate(|refund: &Refund| {
            if refund.amount <= 100 { Ok(()) } else { Err("at /amount: expected at most 100".to_owned()) }
        })
        .build(move |refund: Refund, _call| {
            ran.fetch_add(1, Ordering::SeqCst);
            async move { Ok::<_, String>(format!("refunded {}", refund.amount)) }
        })
        .unwrap();
    ToolSet::builder().add(&refund).build().unwrap()
}

#[cfg(feature = "journal")]
fn tool_results(conversation: &[Message]) -> Vec<String> {
    conversation
        .iter()
        .filter_map(|message| match message {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect()
}

#[cfg(feature = "journal")]
#[tokio::test]
async fn a_journaled_run_checks_the_input_before_the_guard_and_proposes_nothing() {
    let bodies = Arc::new(AtomicU32::new(0));
    let tools = refund_tools(&bodies);
    let model = sequence(vec![
        Step::Reply(ModelReply::call("c1", "refund", r#"{"amount":1000}"#)),
        Step::Reply(ModelReply::text("I could not refund that.")),
    ]);
    let journal = MemoryJournal::default();
    let scope = Scope::builder().grant("payments.refund").build().unwrap();
    let mut conversation = vec![Message::user("Refund 1000.")];
    let outcome = Runner::new(&tools, model)
        .run_journaled(&journal, &RunId::new("big-refund").unwrap(), &scope, &mut conversation, |_| false)
        .await
        .unwrap();

    assert_eq!(bodies.load(Ordering::SeqCst), 0, "the refund of 1000 never ran");
    assert_eq!(scope.tool_calls(), 0, "nothing was counted");
    let events: Vec<String> = outcome.events().iter().map(ToString::to_string).collect();
    assert_eq!(events, ["ModelCall model 1", "ModelCall model 2"], "no proposal");
    assert_eq!(
        tool_results(&conversation),
        ["Error: invalid arguments for tool refund: at /amount: expected at most 100."]
    );
    // The stored run proposes nothing either.
    let stored = loopbound::journal::inspect(&journal, &RunId::new("big-refund").unwrap()).await.unwrap();
    assert_eq!(stored.operations().count(), 0);
}

#[cfg(feature = "journal")]
#[tokio::test]
async fn a_journaled_run_runs_an_input_that_passes_its_check() {
    let bodies = Arc::new(AtomicU32::new(0));
    let tools = refund_tools(&bodies);
    let model = sequence(vec![
        Step::Reply(ModelReply::call("c1", "refund", r#"{"amount":40}"#)),
        Step::Reply(ModelReply::text("Refunded.")),
    ]);
    let journal = MemoryJournal::default();
    let scope = Scope::builder().grant("payments.refund").build().unwrap();
    let mut conversation = vec![Message::user("Refund 40.")];
    let outcome = Runner::new(&tools, model)
        .run_journaled(&journal, &RunId::new("small-refund").unwrap(), &scope, &mut conversation, |_| true)
        .await
        .unwrap();
    assert_eq!(outcome.status(), loopbound::Status::Completed);
    assert_eq!(bodies.load(Ordering::SeqCst), 1);
    assert_eq!(tool_results(&conversation), ["refunded 40"]);
}
