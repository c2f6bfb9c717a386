//! The tool-calling loop, both compositions, both call paths.

mod common;

use common::{REVIEW_DONE, TICKET_TEXT, lines, scope_with, tools};
use loopbound::scripted::{Scripted, Step, sequence};
use loopbound::transport::{ChatOptions, ModelReply, ToolCall, TransportError, Usage};
use loopbound::{Limits, Message, RunError, Runner, Status};
use loopbound_fixtures::Composition;
use loopbound_fixtures::review::COMPLETE_EVENTS;

fn complete_script() -> Vec<Step> {
    vec![
        Step::Reply(ModelReply::call("call-1", "read_ticket", r#"{"input":42}"#)),
        Step::Reply(ModelReply::call("call-2", "finish_review", r#"{"input":42}"#)),
        Step::Reply(ModelReply::text("Review finished.")),
    ]
}

#[tokio::test]
async fn complete_gives_the_same_outcome_in_both_compositions_and_both_paths() {
    for composition in [Composition::Harness, Composition::Simple] {
        for streaming in [false, true] {
            let scope = scope_with(Limits::default());
            let tools = tools();
            let runtime = composition.runner(&tools.set, sequence(complete_script())).streaming(streaming);
            let mut conversation = vec![Message::user("Review ticket 42.")];
            let outcome =
                runtime.run(&scope, &mut conversation, |ended| ended.state().completed()).await.unwrap();
            let case = format!("{composition} streaming={streaming}");
            assert_eq!(outcome.status(), Status::Completed, "{case}");
            assert_eq!(outcome.text(), Some("Review finished."), "{case}");
            assert_eq!(lines(&scope), COMPLETE_EVENTS, "{case}");
            assert_eq!(runtime.transport().calls(), 3, "{case}");
            // Each tool result went back to the model with its call id.
            assert_eq!(
                conversation[1..],
                [
                    Message::assistant_parts(
                        None,
                        vec![ToolCall::new("call-1", "read_ticket", r#"{"input":42}"#)]
                    ),
                    Message::tool_result("call-1", TICKET_TEXT),
                    Message::assistant_parts(
                        None,
                        vec![ToolCall::new("call-2", "finish_review", r#"{"input":42}"#)]
                    ),
                    Message::tool_result("call-2", REVIEW_DONE),
                ],
                "{case}"
            );
        }
    }
}

#[tokio::test]
async fn the_model_saying_done_is_not_completion() {
    let scope = scope_with(Limits::default());
    let tools = tools();
    let model = sequence(vec![Step::Reply(ModelReply::text("Review finished."))]);
    let outcome = Runner::new(&tools.set, model)
        .run(&scope, &mut Vec::new(), |ended| ended.state().completed())
        .await
        .unwrap();
    assert_eq!(outcome.status(), Status::Incomplete);
    assert_eq!(outcome.text(), Some("Review finished."));
    assert_eq!(lines(&scope), ["ModelCall model 1"]);
}

#[tokio::test]
async fn unknown_tools_bad_arguments_and_body_errors_go_back_to_the_model() {
    let scope = scope_with(Limits::default());
    let tools = tools();
    let model = sequence(vec![
        Step::Reply(ModelReply::calls(vec![
            ToolCall::new("a", "delete_ticket", r#"{"input":42}"#),
            ToolCall::new("b", "read_ticket", r#"{"input":"42"}"#),
            ToolCall::new("c", "finish_review", r#"{"input":42}"#),
        ])),
        Step::Reply(ModelReply::text("I could not finish.")),
    ]);
    let mut conversation = Vec::new();
    let outcome = Composition::Simple
        .runner(&tools.set, model)
        .run(&scope, &mut conversation, |ended| ended.state().completed())
        .await
        .unwrap();
    assert_eq!(outcome.status(), Status::Incomplete);
    assert_eq!(
        lines(&scope),
        [
            "ModelCall model 1",
            "Middleware read_ticket 1",
            "Middleware finish_review 2",
            "ToolCall finish_review 1",
            "ModelCall model 2"
        ]
    );
    let results: Vec<_> = conversation
        .iter()
        .filter_map(|message| match message {
            Message::Tool { call_id, content, is_error, .. } => {
                Some((call_id.as_str(), content.as_str(), *is_error))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        [
            ("a", "Error: tool delete_ticket not found.", true),
            (
                "b",
                "Error: invalid arguments for tool read_ticket: input: invalid type: a string, expected i64.",
                true
            ),
            ("c", "Error: tool finish_review failed: Read ticket 42 before completing review.", true),
        ]
    );
}

#[tokio::test]
async fn repeat_changing_and_budget_stop_where_the_contract_says() {
    let repeat = Scripted::new(|n, _| {
        Step::Reply(ModelReply::call(format!("c{n}"), "read_ticket", r#"{"input":42}"#))
    });
    let changing = Scripted::new(|n, _| {
        Step::Reply(ModelReply::call(format!("c{n}"), "read_ticket", format!(r#"{{"input":{n}}}"#)))
    });

    let tools = tools();
    let scope = scope_with(Limits::default());
    let outcome = Runner::new(&tools.set, &repeat)
        .run(&scope, &mut Vec::new(), |ended| ended.state().completed())
        .await
        .unwrap();
    assert_eq!((outcome.status(), scope.tool_calls(), scope.model_calls()), (Status::RepeatedCall, 1, 2));
    assert_eq!(outcome.text(), None);
    assert_eq!(lines(&scope).last().map(String::as_str), Some("RepeatedCall read_ticket 1"));

    let scope = scope_with(Limits::default());
    let outcome = Runner::new(&tools.set, &changing)
        .run(&scope, &mut Vec::new(), |ended| ended.state().completed())
        .await
        .unwrap();
    assert_eq!((outcome.status(), scope.tool_calls(), scope.model_calls()), (Status::ToolBudget, 4, 5));
    assert_eq!(lines(&scope).last().map(String::as_str), Some("ToolBudget read_ticket 4"));

    let scope = scope_with(Limits::default().with_model_calls(1));
    let outcome = Runner::new(&tools.set, &changing)
        .run(&scope, &mut Vec::new(), |ended| ended.state().completed())
        .await
        .unwrap();
    assert_eq!((outcome.status(), scope.tool_calls(), scope.model_calls()), (Status::ModelBudget, 1, 1));
    assert_eq!(lines(&scope).last().map(String::as_str), Some("ModelBudget model 1"));
}

#[tokio::test]
async fn the_harness_cap_lets_the_model_budget_fire_first() {
    // A model that only ever asks for a tool that does not exist: no tool counter moves.
    let lost = || Scripted::new(|n, _| Step::Reply(ModelReply::call(format!("c{n}"), "nope", "{}")));
    let tools = tools();
    let scope = scope_with(Limits::default());
    let outcome = Runner::new(&tools.set, lost()).run(&scope, &mut Vec::new(), |_| false).await.unwrap();
    assert_eq!(outcome.status(), Status::ModelBudget);
    assert_eq!(scope.model_calls(), 6);
    assert_eq!(Composition::Harness.max_iterations(scope.limits()), 7);

    // The simple loop's own cap (40) ends a run whose model budget is larger.
    let scope = scope_with(Limits::default().with_model_calls(100));
    let transport = lost();
    let outcome = Composition::Simple
        .runner(&tools.set, &transport)
        .run(&scope, &mut Vec::new(), |_| false)
        .await
        .unwrap();
    assert_eq!(outcome.status(), Status::Incomplete);
    assert_eq!(outcome.text(), None);
    assert_eq!(transport.calls(), 40);
}

#[tokio::test]
async fn a_hosts_iteration_cap_replaces_the_compositions() {
    let lost = Scripted::new(|n, _| Step::Reply(ModelReply::call(format!("c{n}"), "nope", "{}")));
    let tools = tools();
    let scope = scope_with(Limits::default());
    let outcome = Runner::new(&tools.set, &lost)
        .max_iterations(3)
        .run(&scope, &mut Vec::new(), |_| true)
        .await
        .unwrap();
    assert_eq!((outcome.status(), outcome.text()), (Status::Completed, None));
    assert_eq!(lost.calls(), 3, "three iterations, then the loop's own cap");
    assert_eq!(scope.model_calls(), 3);
}

#[tokio::test]
async fn an_unreachable_provider_is_a_status_and_other_provider_errors_are_errors() {
    let tools = tools();
    let scope = scope_with(Limits::default());
    let model = sequence(vec![Step::Fail(TransportError::unavailable("connection refused"))]);
    let outcome = Runner::new(&tools.set, model).run(&scope, &mut Vec::new(), |_| false).await.unwrap();
    assert_eq!(outcome.status(), Status::ProviderUnavailable);
    assert_eq!(outcome.detail(), Some("connection refused"));
    assert_eq!(outcome.text(), None);
    assert_eq!(lines(&scope), ["ModelCall model 1"]);

    for error in
        [TransportError::authentication("401"), TransportError::malformed("eof"), TransportError::cancelled()]
    {
        let scope = scope_with(Limits::default());
        let model = sequence(vec![Step::Fail(error.clone())]);
        let result = Runner::new(&tools.set, model).run(&scope, &mut Vec::new(), |_| false).await;
        assert_eq!(result, Err(RunError::Provider(error)));
        assert_eq!(scope.stop_reason(), None, "a provider's own cancellation is not a deadline");
    }
}

#[tokio::test]
async fn usage_is_summed_over_the_calls_that_report_it() {
    let scope = scope_with(Limits::default());
    let tools = tools();
    let usage = |p, c| Usage::new(p, c);
    let model = sequence(vec![
        Step::Reply(ModelReply::call("1", "read_ticket", r#"{"input":42}"#).with_usage(usage(10, 2))),
        Step::Reply(ModelReply::call("2", "finish_review", r#"{"input":42}"#)),
        Step::Reply(ModelReply::text("Review finished.").with_usage(usage(30, 5))),
    ]);
    let runtime = Runner::new(&tools.set, model).options(ChatOptions::default().with_max_output_tokens(800));
    let outcome = runtime
        .streaming(true)
        .run(&scope, &mut Vec::new(), |ended| ended.state().completed())
        .await
        .unwrap();
    assert_eq!(outcome.usage(), Some(usage(40, 7)));
}

#[tokio::test]
async fn requests_carry_the_definitions_the_options_and_the_conversation() {
    let scope = scope_with(Limits::default());
    let tools = tools();
    let model = Scripted::new(|_, request| {
        let names: Vec<_> = request.tools.iter().map(|t| t.name.as_str()).collect();
        let ok = names == ["read_ticket", "finish_review"]
            && request.options.max_output_tokens == Some(800)
            && request.messages == [Message::system("Be brief."), Message::user("Review.")];
        Step::Reply(ModelReply::text(if ok { "as expected" } else { "unexpected request" }))
    });
    let runtime = Composition::Simple
        .runner(&tools.set, model)
        .options(ChatOptions::default().with_max_output_tokens(800));
    let mut conversation = vec![Message::system("Be brief."), Message::user("Review.")];
    let outcome = runtime.run(&scope, &mut conversation, |_| false).await.unwrap();
    assert_eq!(outcome.text(), Some("as expected"));
}

#[test]
fn the_compositions_caps_follow_the_contract() {
    assert_eq!(Composition::Harness.max_iterations(&Limits::default()), 7);
    assert_eq!(Composition::Harness.max_iterations(&Limits::default().with_model_calls(u32::MAX)), u32::MAX);
    assert_eq!(Composition::Simple.max_iterations(&Limits::default()), 40);
    assert!(Composition::Harness.telemetry() && !Composition::Simple.telemetry());
}

#[test]
fn a_run_can_be_spawned_on_a_multi_thread_runtime() {
    fn assert_send<T: Send>(_: &T) {}
    fn assert_shareable<T: Send + Sync + Clone>(_: &T) {}
    let tools = tools();
    assert_shareable(&tools.set);
    assert_shareable(&tools.read_ticket);
    let scope = scope_with(Limits::default());
    let runtime = Runner::new(&tools.set, sequence(complete_script()));
    let mut conversation = Vec::new();
    let run = runtime.run(&scope, &mut conversation, |_| false);
    assert_send(&run);
    assert_send(&runtime);
    assert_send(&scope);
}

/// A scripted model that, like a provider without a seed, refuses every seeded request.
struct Seedless(Scripted<fn(u32, &loopbound::transport::ChatRequest<'_>) -> Step>);

impl loopbound::transport::Transport for Seedless {
    async fn complete<'a>(
        &'a self,
        request: loopbound::transport::ChatRequest<'a>,
    ) -> Result<ModelReply, TransportError> {
        self.check_options(request.options)?;
        self.0.complete(request).await
    }

    fn check_options(&self, options: &ChatOptions) -> Result<(), TransportError> {
        match options.seed() {
            Some(_) => Err(TransportError::unsupported("Seedless cannot send seed")),
            None => Ok(()),
        }
    }
}

#[tokio::test]
async fn options_the_transport_cannot_send_refuse_the_run_before_any_call() {
    fn reply(_: u32, _: &loopbound::transport::ChatRequest<'_>) -> Step {
        Step::Reply(ModelReply::text("Hi."))
    }
    for composition in [Composition::Harness, Composition::Simple] {
        for streaming in [false, true] {
            let scope = scope_with(Limits::default());
            let tools = tools();
            let model =
                Seedless(Scripted::new(reply as fn(u32, &loopbound::transport::ChatRequest<'_>) -> Step));
            let runtime = composition
                .runner(&tools.set, model)
                .options(ChatOptions::default().with_seed(3))
                .streaming(streaming);
            let result = runtime.run(&scope, &mut vec![Message::user("Hi")], |_| true).await;
            let refused = TransportError::unsupported("Seedless cannot send seed");
            assert_eq!(result, Err(RunError::Unsupported(refused)), "{composition} streaming={streaming}");
            assert_eq!((scope.model_calls(), runtime.transport().0.calls()), (0, 0));
            assert_eq!(lines(&scope), Vec::<String>::new());
        }
    }
    let error = RunError::Unsupported(TransportError::unsupported("Seedless cannot send seed"));
    assert_eq!(error.kind(), loopbound::RunErrorKind::Configuration);
    assert_eq!(error.to_string(), "unsupported request option: Seedless cannot send seed; nothing ran");
}
