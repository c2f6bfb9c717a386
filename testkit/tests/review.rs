//! The review task's tools behave as SPEC §11 says, through the guard, on one request's state.

use loopbound::{HaltReason, Limits, Message, RegistrationError, Scope, Status, ToolError, ToolSet};
use loopbound_testkit::review::{
    self, BOTH_CAPABILITIES, FINISH_CAPABILITY, INSTRUCTIONS, NOT_FOUND, PROMPT, READ_FIRST, REVIEW_DONE,
    Review, TICKET_TEXT, TicketInput,
};

fn scope(capabilities: &[&str]) -> Scope<Review> {
    review::scope(capabilities.iter().copied(), Limits::default().with_repetitions(2)).expect("valid limits")
}

#[tokio::test]
async fn read_ticket_returns_not_found_for_any_other_id_and_marks_nothing() {
    let (tools, scope) = (review::tools(), scope(&BOTH_CAPABILITIES));
    assert_eq!(
        tools.read_ticket.invoke(&scope, TicketInput { input: 7 }).await.expect("admitted"),
        NOT_FOUND
    );
    assert!(!scope.state().ticket_read());
    assert_eq!(
        tools.read_ticket.invoke(&scope, TicketInput { input: 42 }).await.expect("admitted"),
        TICKET_TEXT
    );
    assert!(scope.state().ticket_read());
    assert!(!scope.state().completed());
    assert_eq!(scope.state().bodies_run(), 2);
}

#[tokio::test]
async fn finish_review_fails_before_the_ticket_is_read_and_completes_after() {
    let (tools, scope) = (review::tools(), scope(&BOTH_CAPABILITIES));
    let early = tools.finish_review.invoke(&scope, TicketInput { input: 42 }).await;
    match early {
        Err(ToolError::Failed { source, .. }) => assert_eq!(source.to_string(), READ_FIRST),
        other => panic!("expected a body error, got {other:?}"),
    }
    assert!(!scope.state().completed());
    tools.read_ticket.invoke(&scope, TicketInput { input: 42 }).await.expect("admitted");
    let wrong_id = tools.finish_review.invoke(&scope, TicketInput { input: 41 }).await;
    assert!(matches!(wrong_id, Err(ToolError::Failed { .. })), "{wrong_id:?}");
    assert!(!scope.state().completed());
    let done = tools.finish_review.invoke(&scope, TicketInput { input: 42 }).await.expect("admitted");
    assert_eq!(done, REVIEW_DONE);
    assert!(scope.state().completed());
    assert_eq!(scope.stop_reason(), None);
}

#[tokio::test]
async fn a_tool_without_its_capability_is_refused_before_its_body_runs() {
    let (tools, scope) = (review::tools(), scope(&[FINISH_CAPABILITY]));
    let refused = tools.read_ticket.invoke(&scope, TicketInput { input: 42 }).await;
    assert!(matches!(refused, Err(ToolError::Stopped(_))), "{refused:?}");
    assert!(!scope.state().ticket_read());
    assert_eq!(scope.stop_reason(), Some(HaltReason::PermissionDenied));
    assert_eq!(scope.stop_reason().map(Status::from), Some(Status::PermissionDenied));
}

#[tokio::test]
async fn two_requests_share_the_tools_but_not_their_state() {
    let tools = review::tools();
    let (first, second) = (scope(&BOTH_CAPABILITIES), scope(&BOTH_CAPABILITIES));
    tools.read_ticket.invoke(&first, TicketInput { input: 42 }).await.expect("admitted");
    tools.finish_review.invoke(&first, TicketInput { input: 42 }).await.expect("admitted");
    assert!(first.state().completed());
    assert!(!second.state().ticket_read(), "the second request's state is its own");
    let early = tools.finish_review.invoke(&second, TicketInput { input: 42 }).await;
    assert!(matches!(early, Err(ToolError::Failed { .. })));
    assert_eq!((first.tool_calls(), second.tool_calls()), (2, 1));
}

#[test]
fn the_set_holds_both_tools_once_in_order() {
    let tools = review::tools();
    let names: Vec<&str> = tools.set.definitions().iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["read_ticket", "finish_review"]);
    let mut again = ToolSet::builder();
    again.add(&tools.read_ticket).expect("a new set");
    assert!(matches!(again.add(&tools.read_ticket), Err(RegistrationError::DuplicateName(_))));
}

#[test]
fn the_conversation_holds_the_instructions_then_the_request() {
    assert_eq!(review::conversation(), [Message::system(INSTRUCTIONS), Message::user(PROMPT)]);
    assert_eq!(review::options().max_output_tokens, Some(800));
    assert_eq!(review::live_conversation().last(), Some(&Message::user(PROMPT)));
}
