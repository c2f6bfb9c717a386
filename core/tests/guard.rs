//! The guard through the public API: check order, reservations, stickiness, direct calls.

mod common;

use common::{Ticket, lines, review_tools, scope_with};
use loopbound::{HaltReason, Limits, RegistrationError, Scope, Stop, ToolError};

fn stopped(result: Result<String, ToolError>) -> Option<Stop> {
    match result {
        Err(ToolError::Stopped(stop)) => Some(stop),
        _ => None,
    }
}

#[tokio::test]
async fn a_direct_call_without_the_capability_is_refused_before_the_body() {
    let scope = Scope::builder().grant("review.finish").build().unwrap();
    let tools = review_tools(&scope);
    let result = tools.read_ticket.invoke(Ticket { input: 42 }).await;
    assert_eq!(stopped(result), Some(Stop::Halted(HaltReason::PermissionDenied)));
    assert_eq!(tools.review.bodies_run(), 0);
    assert_eq!(scope.tool_calls(), 0);
    assert_eq!(lines(&scope), ["PermissionDenied read_ticket 0"]);
}

#[tokio::test]
async fn permission_is_checked_before_the_tool_budget() {
    let scope =
        Scope::builder().grant("review.finish").limits(Limits::default().with_tool_calls(0)).build().unwrap();
    let tools = review_tools(&scope);
    let result = tools.read_ticket.invoke(Ticket { input: 1 }).await;
    assert_eq!(stopped(result), Some(Stop::Halted(HaltReason::PermissionDenied)));
}

#[tokio::test]
async fn the_tool_budget_is_checked_before_repetition() {
    let scope = scope_with(Limits::default().with_tool_calls(1));
    let tools = review_tools(&scope);
    assert!(tools.read_ticket.invoke(Ticket { input: 42 }).await.is_ok());
    // Same signature again: both the budget and the repetition limit would refuse; the budget wins.
    let result = tools.read_ticket.invoke(Ticket { input: 42 }).await;
    assert_eq!(stopped(result), Some(Stop::Halted(HaltReason::ToolBudget)));
    assert_eq!(lines(&scope), ["ToolCall read_ticket 1", "ToolBudget read_ticket 1"]);
}

#[tokio::test]
async fn repetition_counts_the_signature_of_the_bound_value() {
    let scope = scope_with(Limits::default());
    let tools = review_tools(&scope);
    assert!(tools.read_ticket.invoke_json(r#"{"input":42}"#).await.is_ok());
    // Different JSON text, unknown field ignored by the input type: the same bound value.
    let result = tools.read_ticket.invoke_json(r#"{ "note": "again", "input" : 42 }"#).await;
    assert_eq!(stopped(result), Some(Stop::Halted(HaltReason::RepeatedCall)));
    assert_eq!(lines(&scope), ["ToolCall read_ticket 1", "RepeatedCall read_ticket 1"]);
    assert_eq!(tools.review.bodies_run(), 1);
}

#[tokio::test]
async fn distinct_signatures_are_admitted_up_to_the_budget() {
    let scope = scope_with(Limits::default().with_repetitions(2));
    let tools = review_tools(&scope);
    for id in [1, 2, 1, 2] {
        assert!(tools.read_ticket.invoke(Ticket { input: id }).await.is_ok());
    }
    let result = tools.read_ticket.invoke(Ticket { input: 3 }).await;
    assert_eq!(stopped(result), Some(Stop::Halted(HaltReason::ToolBudget)));
    assert_eq!(scope.tool_calls(), 4);
}

#[tokio::test]
async fn a_reservation_is_kept_when_the_body_fails() {
    let scope = scope_with(Limits::default());
    let tools = review_tools(&scope);
    let result = tools.finish_review.invoke(Ticket { input: 42 }).await;
    assert!(matches!(&result, Err(ToolError::Failed { tool, .. }) if &**tool == "finish_review"));
    assert_eq!(
        result.unwrap_err().model_message().as_deref(),
        Some("Error: tool finish_review failed: Read ticket 42 before completing review.")
    );
    assert_eq!(scope.tool_calls(), 1);
    assert_eq!(scope.stop_reason(), None, "a body error is not a halt");
    // The failed attempt still counts against the repetition limit.
    let again = tools.finish_review.invoke(Ticket { input: 42 }).await;
    assert_eq!(stopped(again), Some(Stop::Halted(HaltReason::RepeatedCall)));
}

#[tokio::test]
async fn an_unrun_reservation_is_not_given_back() {
    let scope = scope_with(Limits::default().with_tool_calls(1));
    let tools = review_tools(&scope);
    let reservation = tools.read_ticket.reserve(Ticket { input: 7 }).unwrap();
    assert_eq!(reservation.tool_count(), 1);
    drop(reservation);
    assert_eq!(tools.review.bodies_run(), 0);
    let result = tools.read_ticket.invoke(Ticket { input: 8 }).await;
    assert_eq!(stopped(result), Some(Stop::Halted(HaltReason::ToolBudget)));
}

#[tokio::test]
async fn halts_are_sticky_and_the_first_wins() {
    let scope = scope_with(Limits::default().with_model_calls(1));
    let tools = review_tools(&scope);
    assert_eq!(scope.admit_model(), Ok(1));
    assert_eq!(scope.admit_model(), Err(Stop::Halted(HaltReason::ModelBudget)));
    assert!(scope.token().is_cancelled(), "a halt cancels the scope's token");
    // Nothing is admitted after the halt, and no second halt is recorded.
    let result = tools.read_ticket.invoke(Ticket { input: 42 }).await;
    assert_eq!(stopped(result), Some(Stop::Halted(HaltReason::ModelBudget)));
    assert_eq!(scope.check(), Err(Stop::Halted(HaltReason::ModelBudget)));
    assert_eq!(tools.review.bodies_run(), 0);
    assert_eq!(lines(&scope), ["ModelCall model 1", "ModelBudget model 1"]);
}

#[tokio::test]
async fn the_caller_wins_over_an_existing_halt() {
    let caller = tokio_util::sync::CancellationToken::new();
    let scope = Scope::builder().caller(caller.clone()).build().unwrap();
    let tools = review_tools(&scope);
    let _ = tools.read_ticket.invoke(Ticket { input: 42 }).await;
    assert_eq!(scope.stop_reason(), Some(HaltReason::PermissionDenied));
    caller.cancel();
    assert_eq!(scope.check(), Err(Stop::Cancelled));
    assert_eq!(scope.admit_model(), Err(Stop::Cancelled));
    let result = tools.finish_review.invoke(Ticket { input: 42 }).await;
    assert_eq!(stopped(result), Some(Stop::Cancelled));
}

#[tokio::test]
async fn a_name_registers_once_per_scope() {
    let scope = scope_with(Limits::default());
    let _tools = review_tools(&scope);
    let again = scope.tool("read_ticket", "ticket.read").build(|_: Ticket, _| async { Ok::<_, String>("") });
    assert_eq!(again.unwrap_err(), RegistrationError::DuplicateName("read_ticket".into()));
    let other = scope_with(Limits::default());
    assert!(
        other.tool("read_ticket", "ticket.read").build(|_: Ticket, _| async { Ok::<_, String>("") }).is_ok()
    );
}

#[test]
fn tool_names_must_fit_tool_calling_apis() {
    let scope = scope_with(Limits::default());
    for name in ["", "has space", "dot.ted", &"x".repeat(65), "é"] {
        let result = scope.tool(name, "ticket.read").build(|_: Ticket, _| async { Ok::<_, String>("") });
        assert_eq!(result.unwrap_err(), RegistrationError::InvalidName(name.to_owned()));
    }
    assert!(scope.tool("a-b_C9", "x").build(|_: Ticket, _| async { Ok::<_, String>("") }).is_ok());
}

#[test]
fn invalid_limits_are_rejected_before_anything_runs() {
    use loopbound::LimitsError;
    use std::time::Duration;
    let build = |limits| Scope::builder().limits(limits).build().map(|_| ());
    assert_eq!(build(Limits::default().with_model_calls(0)), Err(LimitsError::ZeroModelCalls));
    assert_eq!(build(Limits::default().with_repetitions(0)), Err(LimitsError::ZeroRepetitions));
    assert_eq!(build(Limits::default().with_deadline(Duration::ZERO)), Err(LimitsError::ZeroDeadline));
    assert_eq!(build(Limits::default().with_deadline(Duration::MAX)), Err(LimitsError::DeadlineOutOfRange));
    assert_eq!(build(Limits::default().with_tool_calls(0)), Ok(()));
}

#[test]
fn tool_definitions_carry_the_input_schema() {
    let scope = scope_with(Limits::default());
    let _tools = review_tools(&scope);
    let definitions = scope.tool_definitions();
    let names: Vec<_> = definitions.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["read_ticket", "finish_review"]);
    let schema = &definitions[0].parameters;
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["properties"]["input"]["type"], "integer");
    assert_eq!(schema["required"], serde_json::json!(["input"]));
    assert!(schema.get("$schema").is_none());
}
