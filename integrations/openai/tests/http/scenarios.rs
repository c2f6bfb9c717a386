//! The review scenarios over HTTP against aimock: the same events, status, text and
//! conversation as the scripted transport, in both compositions and on both call paths.

use loopbound::transport::Usage;
use loopbound::{Composition, Status};
use loopbound_openai::{ApiKey, Config, OpenAiTransport};

use crate::SECRET;
use crate::review::{PATHS, Scenario, run};
use loopbound_testkit::aimock::Aimock;
use loopbound_testkit::review::COMPLETE_EVENTS;

pub(crate) fn transport(server: &Aimock) -> OpenAiTransport {
    let config = Config::new(&server.base_url(), "loopbound-test-model")
        .expect("the mock's URL is valid")
        .with_api_key(ApiKey::new(SECRET).expect("a valid key"));
    OpenAiTransport::new(config).expect("the client builds")
}

/// Runs `scenario` over HTTP on every path and checks it against the scripted run and the
/// expected events.
async fn check(
    server: &Aimock,
    scenario: Scenario,
    status: Status,
    events: &[&str],
    paths: &[(Composition, bool)],
) {
    for &(composition, streaming) in paths {
        let context = format!("{scenario:?} {composition} streaming={streaming}");
        let live = run(scenario, composition, streaming, transport(server)).await;
        let scripted = run(scenario, composition, streaming, scenario.scripted()).await;
        assert_eq!(live.outcome().status(), status, "{context}\n{}", server.log());
        assert_eq!(live.events(), events, "{context}");
        assert_eq!(live.events(), scripted.events(), "{context}: HTTP and scripted events differ");
        assert_eq!(live.outcome().status(), scripted.outcome().status(), "{context}");
        assert_eq!(live.outcome().text(), scripted.outcome().text(), "{context}");
        assert_eq!(live.conversation, scripted.conversation, "{context}: conversations differ");
        assert_eq!(
            (live.model_calls, live.tool_calls),
            (scripted.model_calls, scripted.tool_calls),
            "{context}"
        );
    }
}

#[tokio::test]
async fn the_complete_review_over_http_matches_the_scripted_run_in_both_compositions_and_paths() {
    let Some(server) = Aimock::start() else { return };
    let events = COMPLETE_EVENTS;
    check(&server, Scenario::Complete, Status::Completed, &events, &PATHS).await;

    let live = run(Scenario::Complete, Composition::Harness, false, transport(&server)).await;
    assert_eq!(live.outcome().text(), Some("Review finished."));
    assert_eq!((live.model_calls, live.tool_calls), (3, 2));
}

#[tokio::test]
async fn usage_is_summed_over_the_calls_on_both_paths_and_absent_when_not_asked_for() {
    let Some(server) = Aimock::start() else { return };
    // The fixtures report 120+160+210 prompt and 7+9+4 completion tokens for the three calls.
    let expected = Some(Usage::new(490, 20));
    for streaming in [false, true] {
        let live = run(Scenario::Complete, Composition::Harness, streaming, transport(&server)).await;
        assert_eq!(live.outcome().usage(), expected, "streaming={streaming}");
    }
    let quiet = Config::new(&server.base_url(), "m").unwrap().with_stream_usage(false);
    let live =
        run(Scenario::Complete, Composition::Harness, true, OpenAiTransport::new(quiet).unwrap()).await;
    assert_eq!(live.outcome().status(), Status::Completed);
    assert_eq!(live.outcome().usage(), None, "without stream_options the stream reports no usage");
}

#[tokio::test]
async fn a_model_repeating_the_same_call_over_http_is_stopped_after_one_admitted_call() {
    let Some(server) = Aimock::start() else { return };
    let events = [
        "ModelCall model 1",
        "Middleware read_ticket 1",
        "ToolCall read_ticket 1",
        "ModelCall model 2",
        "Middleware read_ticket 2",
        "RepeatedCall read_ticket 1",
    ];
    check(&server, Scenario::Repeat, Status::RepeatedCall, &events, &PATHS).await;
    let live = run(Scenario::Repeat, Composition::Harness, true, transport(&server)).await;
    assert_eq!((live.model_calls, live.tool_calls), (2, 1));
    assert_eq!(live.outcome().text(), None);
}

#[tokio::test]
async fn a_model_changing_its_arguments_over_http_is_stopped_by_the_tool_budget() {
    let Some(server) = Aimock::start() else { return };
    let mut events = Vec::new();
    for n in 1..=4 {
        events.extend([
            format!("ModelCall model {n}"),
            format!("Middleware read_ticket {n}"),
            format!("ToolCall read_ticket {n}"),
        ]);
    }
    events.extend([
        "ModelCall model 5".to_owned(),
        "Middleware read_ticket 5".to_owned(),
        "ToolBudget read_ticket 4".to_owned(),
    ]);
    let events: Vec<&str> = events.iter().map(String::as_str).collect();
    check(&server, Scenario::Changing, Status::ToolBudget, &events, &PATHS).await;
    let live = run(Scenario::Changing, Composition::Simple, false, transport(&server)).await;
    assert_eq!((live.model_calls, live.tool_calls), (5, 4));
}

#[tokio::test]
async fn a_tool_without_its_capability_over_http_is_refused_before_any_tool_runs() {
    let Some(server) = Aimock::start() else { return };
    let events = ["ModelCall model 1", "Middleware read_ticket 1", "PermissionDenied read_ticket 0"];
    check(&server, Scenario::Forbidden, Status::PermissionDenied, &events, &PATHS).await;
    let live = run(Scenario::Forbidden, Composition::Harness, false, transport(&server)).await;
    assert_eq!((live.model_calls, live.tool_calls), (1, 0));
}

#[tokio::test]
async fn claiming_done_without_the_work_over_http_is_incomplete() {
    let Some(server) = Aimock::start() else { return };
    check(&server, Scenario::Incomplete, Status::Incomplete, &["ModelCall model 1"], &PATHS).await;
}

#[tokio::test]
async fn arguments_of_the_wrong_type_over_http_become_an_error_result_for_the_model() {
    let Some(server) = Aimock::start() else { return };
    check(
        &server,
        Scenario::BadArguments,
        Status::Incomplete,
        &["ModelCall model 1", "Middleware read_ticket 1", "ModelCall model 2"],
        &PATHS[..2],
    )
    .await;
    let bodies = server.request_bodies().await;
    let tool_result = &bodies.last().expect("requests were journaled")["messages"][2];
    assert_eq!(tool_result["role"], "tool");
    assert_eq!(tool_result["tool_call_id"], "call_bad");
    let text = tool_result["content"].as_str().expect("the result is text");
    // The error names the field and the expected type, never the value sent.
    assert_eq!(
        text,
        "Error: invalid arguments for tool read_ticket: input: invalid type: a string, expected i64."
    );
}
