//! The bounds on one reply, through the whole loop: too many tool calls halt the run before any
//! of them is seen, too many bytes are a provider error, and both hold on either call path and
//! whatever the transport is.

mod common;

use common::{lines, scope_with, tools};
use loopbound::scripted::{Scripted, Step, sequence};
use loopbound::transport::{ModelReply, ToolCall, TransportError};
use loopbound::{HaltReason, Limits, Message, RunError, Runner, Status};

/// A reply of `n` calls to `name`, each with its own arguments.
fn flood(n: usize, name: &str) -> ModelReply {
    ModelReply::calls(
        (0..n).map(|i| ToolCall::new(format!("c{i}"), name, format!(r#"{{"input":{i}}}"#))).collect(),
    )
}

#[tokio::test]
async fn a_reply_over_the_call_bound_halts_before_any_call_is_seen() {
    for streaming in [false, true] {
        for name in ["read_ticket", "no_such_tool"] {
            let scope = scope_with(Limits::default().with_calls_per_reply(3));
            let tools = tools();
            let runtime =
                Runner::new(&tools.set, sequence(vec![Step::Reply(flood(4, name))])).streaming(streaming);
            let mut conversation = vec![Message::user("Review ticket 42.")];
            let outcome =
                runtime.run(&scope, &mut conversation, |ended| ended.state().completed()).await.unwrap();
            let case = format!("streaming={streaming} {name}");
            assert_eq!(outcome.status(), Status::TooManyCalls, "{case}");
            assert_eq!(outcome.text(), None, "{case}");
            assert_eq!(lines(&scope), ["ModelCall model 1", "TooManyCalls model 1"], "{case}");
            assert_eq!(scope.stop_reason(), Some(HaltReason::TooManyCalls), "{case}");
            assert_eq!(conversation, [Message::user("Review ticket 42.")], "nothing of the reply: {case}");
            assert_eq!(scope.tool_calls(), 0, "{case}");
            assert!(!scope.state().completed(), "{case}");
        }
    }
}

#[tokio::test]
async fn unknown_names_and_binding_failures_count_towards_the_call_bound() {
    let mixed = ModelReply::calls(vec![
        ToolCall::new("a", "no_such_tool", "{}"),
        ToolCall::new("b", "read_ticket", "not json"),
        ToolCall::new("c", "read_ticket", r#"{"input":"forty-two"}"#),
    ]);
    let scope = scope_with(Limits::default().with_calls_per_reply(2));
    let tools = tools();
    let runtime = Runner::new(&tools.set, sequence(vec![Step::Reply(mixed)]));
    let outcome = runtime.run(&scope, &mut vec![Message::user("Review.")], |_| false).await.unwrap();
    assert_eq!(outcome.status(), Status::TooManyCalls);
    assert_eq!(lines(&scope), ["ModelCall model 1", "TooManyCalls model 1"]);
}

#[tokio::test]
async fn a_reply_at_the_call_bound_runs_and_every_reply_is_bounded_in_events() {
    // Every reply asks for exactly the bound of calls, with new arguments each time: the events
    // stay within model calls × (2 × calls per reply + 2).
    let (model_calls, per_reply) = (3_u32, 4_usize);
    let limits = Limits::default()
        .with_model_calls(model_calls)
        .with_calls_per_reply(4)
        .with_tool_calls(100)
        .with_repetitions(100);
    let scope = scope_with(limits);
    let tools = tools();
    let model = Scripted::new(move |n, _| {
        let calls = (0..per_reply)
            .map(|i| {
                ToolCall::new(
                    format!("c{n}-{i}"),
                    "read_ticket",
                    format!(r#"{{"input":{}}}"#, 100 * n as usize + i),
                )
            })
            .collect();
        Step::Reply(ModelReply::calls(calls))
    });
    let runtime = Runner::new(&tools.set, model);
    let mut conversation = vec![Message::user("Review.")];
    let outcome = runtime.run(&scope, &mut conversation, |_| false).await.unwrap();
    assert_eq!(outcome.status(), Status::ModelBudget);
    let events = lines(&scope);
    assert_eq!(events.len(), 3 * (1 + 4) + 1);
    assert!(events.len() <= (model_calls as usize) * (per_reply + 2));
    assert_eq!(scope.tool_calls(), 12);
    // Each accepted reply entered the conversation with one result per call.
    assert_eq!(conversation.len(), 1 + 3 * (1 + per_reply));
}

#[tokio::test]
async fn a_reply_over_the_byte_bound_is_a_provider_error_on_either_path() {
    for streaming in [false, true] {
        let scope = scope_with(Limits::default().with_reply_bytes(64));
        let tools = tools();
        let text = "x".repeat(65);
        let runtime =
            Runner::new(&tools.set, sequence(vec![Step::Reply(ModelReply::text(text))])).streaming(streaming);
        let mut conversation = vec![Message::user("Review.")];
        let error = runtime.run(&scope, &mut conversation, |_| false).await.unwrap_err();
        assert_eq!(
            error,
            RunError::Provider(TransportError::malformed("the reply is longer than 64 bytes")),
            "streaming={streaming}"
        );
        assert_eq!(lines(&scope), ["ModelCall model 1"], "streaming={streaming}");
        assert_eq!(conversation.len(), 1, "streaming={streaming}");
    }
    // Exactly the bound is accepted.
    let scope = scope_with(Limits::default().with_reply_bytes(64));
    let tools = tools();
    let runtime = Runner::new(&tools.set, sequence(vec![Step::Reply(ModelReply::text("x".repeat(64)))]));
    let outcome = runtime.run(&scope, &mut vec![Message::user("Review.")], |_| false).await.unwrap();
    assert_eq!(outcome.status(), Status::Incomplete);
}

#[tokio::test]
async fn a_transport_that_reports_too_many_calls_halts_the_run() {
    let scope = scope_with(Limits::default());
    let tools = tools();
    let model = sequence(vec![Step::Fail(TransportError::too_many_calls(16))]);
    let outcome = Runner::new(&tools.set, model).run(&scope, &mut vec![], |_| false).await.unwrap();
    assert_eq!(outcome.status(), Status::TooManyCalls);
    assert_eq!(lines(&scope), ["ModelCall model 1", "TooManyCalls model 1"]);
}

#[tokio::test]
async fn the_caller_wins_over_a_reply_refused_for_its_calls() {
    let caller = tokio_util::sync::CancellationToken::new();
    let scope = loopbound::Scope::builder()
        .grants(common::BOTH_CAPABILITIES)
        .caller(caller.clone())
        .state(common::Review::default())
        .build()
        .expect("valid limits");
    let tools = tools();
    let cancelling = caller.clone();
    let model = Scripted::new(move |_, _| {
        cancelling.cancel();
        Step::Reply(flood(17, "read_ticket"))
    });
    let result = Runner::new(&tools.set, model).run(&scope, &mut vec![], |_| false).await;
    assert_eq!(result, Err(RunError::Cancelled));
    assert_eq!(lines(&scope), ["ModelCall model 1"]);
}
