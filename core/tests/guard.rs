//! The guard through the public API: check order, reservations, stickiness, direct calls.

mod common;

use common::{Ticket, lines, scope_granting, scope_with, tools};
use loopbound::{HaltReason, Limits, RegistrationError, Scope, Stop, ToolBuilder, ToolError, ToolSet};

fn stopped(result: Result<String, ToolError>) -> Option<Stop> {
    match result {
        Err(ToolError::Stopped(stop)) => Some(stop),
        _ => None,
    }
}

#[tokio::test]
async fn a_direct_call_without_the_capability_is_refused_before_the_body() {
    let scope = scope_granting(&["review.finish"]);
    let tools = tools();
    let result = tools.read_ticket.invoke(&scope, Ticket { input: 42 }).await;
    assert_eq!(stopped(result), Some(Stop::Halted(HaltReason::PermissionDenied)));
    assert_eq!(scope.state().bodies_run(), 0);
    assert_eq!(scope.tool_calls(), 0);
    assert_eq!(lines(&scope), ["PermissionDenied read_ticket 0"]);
}

#[tokio::test]
async fn permission_is_checked_before_the_tool_budget() {
    let scope =
        loopbound_fixtures::review::scope(["review.finish"], Limits::default().with_tool_calls(0)).unwrap();
    let tools = tools();
    let result = tools.read_ticket.invoke(&scope, Ticket { input: 1 }).await;
    assert_eq!(stopped(result), Some(Stop::Halted(HaltReason::PermissionDenied)));
}

#[tokio::test]
async fn the_tool_budget_is_checked_before_repetition() {
    let scope = scope_with(Limits::default().with_tool_calls(1));
    let tools = tools();
    assert!(tools.read_ticket.invoke(&scope, Ticket { input: 42 }).await.is_ok());
    // Same signature again: both the budget and the repetition limit would refuse; the budget wins.
    let result = tools.read_ticket.invoke(&scope, Ticket { input: 42 }).await;
    assert_eq!(stopped(result), Some(Stop::Halted(HaltReason::ToolBudget)));
    assert_eq!(lines(&scope), ["ToolCall read_ticket 1", "ToolBudget read_ticket 1"]);
}

#[tokio::test]
async fn repetition_counts_the_signature_of_the_bound_value() {
    let scope = scope_with(Limits::default());
    let tools = tools();
    assert!(tools.read_ticket.invoke_json(&scope, r#"{"input":42}"#).await.is_ok());
    // Different JSON text, unknown field ignored by the input type: the same bound value.
    let result = tools.read_ticket.invoke_json(&scope, r#"{ "note": "again", "input" : 42 }"#).await;
    assert_eq!(stopped(result), Some(Stop::Halted(HaltReason::RepeatedCall)));
    assert_eq!(lines(&scope), ["ToolCall read_ticket 1", "RepeatedCall read_ticket 1"]);
    assert_eq!(scope.state().bodies_run(), 1);
}

#[tokio::test]
async fn distinct_signatures_are_admitted_up_to_the_budget() {
    let scope = scope_with(Limits::default().with_repetitions(2));
    let tools = tools();
    for id in [1, 2, 1, 2] {
        assert!(tools.read_ticket.invoke(&scope, Ticket { input: id }).await.is_ok());
    }
    let result = tools.read_ticket.invoke(&scope, Ticket { input: 3 }).await;
    assert_eq!(stopped(result), Some(Stop::Halted(HaltReason::ToolBudget)));
    assert_eq!(scope.tool_calls(), 4);
}

#[tokio::test]
async fn a_reservation_is_kept_when_the_body_fails() {
    let scope = scope_with(Limits::default());
    let tools = tools();
    let result = tools.finish_review.invoke(&scope, Ticket { input: 42 }).await;
    assert!(matches!(&result, Err(ToolError::Failed { tool, .. }) if &**tool == "finish_review"));
    assert_eq!(
        result.unwrap_err().model_message().as_deref(),
        Some("Error: tool finish_review failed: Read ticket 42 before completing review.")
    );
    assert_eq!(scope.tool_calls(), 1);
    assert_eq!(scope.stop_reason(), None, "a body error is not a halt");
    // The failed attempt still counts against the repetition limit.
    let again = tools.finish_review.invoke(&scope, Ticket { input: 42 }).await;
    assert_eq!(stopped(again), Some(Stop::Halted(HaltReason::RepeatedCall)));
}

#[tokio::test]
async fn an_unrun_reservation_is_not_given_back() {
    let scope = scope_with(Limits::default().with_tool_calls(1));
    let tools = tools();
    let reservation = tools.read_ticket.reserve(&scope, Ticket { input: 7 }).unwrap();
    assert_eq!(reservation.tool_count(), 1);
    drop(reservation);
    assert_eq!(scope.state().bodies_run(), 0);
    let result = tools.read_ticket.invoke(&scope, Ticket { input: 8 }).await;
    assert_eq!(stopped(result), Some(Stop::Halted(HaltReason::ToolBudget)));
}

#[tokio::test]
async fn halts_are_sticky_and_the_first_wins() {
    let scope = scope_with(Limits::default().with_model_calls(1));
    let tools = tools();
    assert_eq!(scope.admit_model(), Ok(1));
    assert_eq!(scope.admit_model(), Err(Stop::Halted(HaltReason::ModelBudget)));
    assert!(scope.token().is_cancelled(), "a halt cancels the scope's token");
    // Nothing is admitted after the halt, and no second halt is recorded.
    let result = tools.read_ticket.invoke(&scope, Ticket { input: 42 }).await;
    assert_eq!(stopped(result), Some(Stop::Halted(HaltReason::ModelBudget)));
    assert_eq!(scope.check(), Err(Stop::Halted(HaltReason::ModelBudget)));
    assert_eq!(scope.state().bodies_run(), 0);
    assert_eq!(lines(&scope), ["ModelCall model 1", "ModelBudget model 1"]);
}

#[tokio::test]
async fn the_caller_wins_over_an_existing_halt() {
    let caller = tokio_util::sync::CancellationToken::new();
    let scope = Scope::builder().caller(caller.clone()).state(common::Review::default()).build().unwrap();
    let tools = tools();
    let _ = tools.read_ticket.invoke(&scope, Ticket { input: 42 }).await;
    assert_eq!(scope.stop_reason(), Some(HaltReason::PermissionDenied));
    caller.cancel();
    assert_eq!(scope.check(), Err(Stop::Cancelled));
    assert_eq!(scope.admit_model(), Err(Stop::Cancelled));
    let result = tools.finish_review.invoke(&scope, Ticket { input: 42 }).await;
    assert_eq!(stopped(result), Some(Stop::Cancelled));
}

#[test]
fn a_name_is_defined_once_per_set() {
    let read =
        ToolBuilder::new("read_ticket", "ticket.read").build(|_: Ticket, _| async { Ok::<_, String>("") });
    let again =
        ToolBuilder::new("read_ticket", "ticket.read").build(|_: Ticket, _| async { Ok::<_, String>("") });
    let finish =
        ToolBuilder::new("finish", "review.finish").build(|_: Ticket, _| async { Ok::<_, String>("") });
    let (read, again, finish) = (read.unwrap(), again.unwrap(), finish.unwrap());
    // Two definitions of one name, in a chain whose later duplicates are ignored: the first
    // duplicate name is reported, and no set is built.
    let twice = ToolSet::<()>::builder().add(&read).add(&finish).add(&again).add(&finish).build();
    assert_eq!(twice.unwrap_err(), RegistrationError::DuplicateName("read_ticket".into()));
    // The same definition may belong to another set, once.
    let shared = tools();
    let other = ToolSet::builder().add(&shared.read_ticket).add(&shared.read_ticket).build();
    assert_eq!(other.unwrap_err(), RegistrationError::DuplicateName("read_ticket".into()));
    let other = ToolSet::builder().add(&shared.finish_review).add(&shared.read_ticket).build().unwrap();
    let names: Vec<&str> = other.definitions().iter().map(|definition| definition.name.as_str()).collect();
    assert_eq!(names, ["finish_review", "read_ticket"], "in the order of addition");
}

#[test]
fn tool_names_must_fit_tool_calling_apis() {
    for name in ["", "has space", "dot.ted", &"x".repeat(65), "é"] {
        let result =
            ToolBuilder::<()>::new(name, "ticket.read").build(|_: Ticket, _| async { Ok::<_, String>("") });
        assert_eq!(result.unwrap_err(), RegistrationError::InvalidName(name.to_owned()));
    }
    for name in ["model", "run"] {
        let result =
            ToolBuilder::<()>::new(name, "ticket.read").build(|_: Ticket, _| async { Ok::<_, String>("") });
        assert_eq!(result.unwrap_err(), RegistrationError::ReservedName(name.to_owned()));
    }
    let valid = ToolBuilder::<()>::new("a-b_C9", "x").build(|_: Ticket, _| async { Ok::<_, String>("") });
    assert_eq!(valid.unwrap().name(), "a-b_C9");
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
    let tools = tools();
    let definitions = tools.set.definitions();
    let names: Vec<_> = definitions.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["read_ticket", "finish_review"]);
    let schema = &definitions[0].parameters;
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["properties"]["input"]["type"], "integer");
    assert_eq!(schema["required"], serde_json::json!(["input"]));
    assert!(schema.get("$schema").is_none());
}

/// SPEC §4 step 3: an admitted call whose run stopped before its body started never starts it,
/// and its reservation stays counted.
#[tokio::test(start_paused = true)]
async fn a_reservation_run_after_a_stop_never_starts_its_body() {
    use std::time::Duration;
    type StopIt = fn(&Scope<common::Review>, &tokio_util::sync::CancellationToken);
    let stops: [(&str, StopIt); 3] = [
        ("caller", |_, caller| caller.cancel()),
        ("halt", |scope, _| {
            let _ = scope.admit_model();
            let _ = scope.admit_model();
        }),
        ("deadline", |_, _| {}),
    ];
    for (name, stop) in stops {
        let caller = tokio_util::sync::CancellationToken::new();
        let scope = Scope::builder()
            .grants(common::BOTH_CAPABILITIES)
            .limits(Limits::default().with_model_calls(1).with_deadline(Duration::from_secs(1)))
            .caller(caller.clone())
            .state(common::Review::default())
            .build()
            .unwrap();
        let tools = tools();
        let reservation = tools.read_ticket.reserve(&scope, Ticket { input: 42 }).unwrap();
        stop(&scope, &caller);
        if name == "deadline" {
            tokio::time::advance(Duration::from_secs(2)).await;
        }
        let result = reservation.run().await;
        assert!(stopped(result).is_some(), "{name}: the body must not start");
        assert_eq!(scope.state().bodies_run(), 0, "{name}");
        assert_eq!(scope.tool_calls(), 1, "{name}: the reservation stays counted");
    }
}
