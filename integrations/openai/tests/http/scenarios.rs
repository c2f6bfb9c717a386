//! The review scenarios over HTTP against aimock: the same events, status, text and
//! conversation as the scripted transport, in both compositions and on both call paths.

use loopbound::spend::{Micros, Price, Prices};
use loopbound::transport::{Transport, Usage};
use loopbound::{Limits, Status};
use loopbound_openai::{ApiKey, Config, OpenAiTransport};
use loopbound_testkit::Composition;
use serde_json::Value;

use crate::SECRET;
use loopbound_testkit::aimock::Aimock;
use loopbound_testkit::scenarios::{PATHS, Scenario, compare, run, run_priced};

pub(crate) fn transport(server: &Aimock) -> OpenAiTransport {
    let config = Config::new(&server.base_url(), "loopbound-test-model")
        .expect("the mock's URL is valid")
        .with_api_key(ApiKey::new(SECRET).expect("a valid key"));
    OpenAiTransport::new(config).expect("the client builds")
}

/// Runs `scenario` over HTTP on `paths` and checks it against the scripted run and the
/// scenario's status and events.
async fn check(server: &Aimock, scenario: Scenario, paths: &[(Composition, bool)]) {
    compare(scenario, paths, || transport(server), || server.log()).await;
}

#[tokio::test]
async fn the_complete_review_over_http_matches_the_scripted_run_in_both_compositions_and_paths() {
    let Some(server) = Aimock::start() else { return };
    check(&server, Scenario::Complete, &PATHS).await;

    let live = run(Scenario::Complete, Composition::Harness, false, transport(&server)).await;
    assert_eq!(live.outcome().text(), Some("Review finished."));
    assert_eq!((live.model_calls, live.tool_calls), (3, 2));
}

#[tokio::test]
async fn the_complete_review_through_reqwests_pool_matches_the_scripted_run_on_both_paths() {
    let Some(server) = Aimock::start() else { return };
    let pooled = || {
        let config = Config::new(&server.base_url(), "loopbound-test-model")
            .expect("the mock's URL is valid")
            .with_api_key(ApiKey::new(SECRET).expect("a valid key"))
            .with_direct(false);
        assert!(!config.connection().direct());
        OpenAiTransport::new(config).expect("the client builds")
    };
    compare(Scenario::Complete, &PATHS, pooled, || server.log()).await;
    let live = run(Scenario::Complete, Composition::Harness, true, pooled()).await;
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

/// Runs the complete review under a cost budget on both paths, over the transports `make`
/// makes: each call is priced by the configured model, from the usage each reply reports.
async fn priced_on_both_paths<T: Transport>(make: impl Fn() -> T) {
    assert_eq!(make().model(), Some("loopbound-test-model"));
    assert_eq!(make().provider_name(), "openai");
    for streaming in [false, true] {
        // 1 unit of money per million input tokens, 2 per million output tokens (micro-units).
        let prices = Prices::new()
            .model("loopbound-test-model", Price::per_million(Micros(1_000_000), Micros(2_000_000)));
        let limits = Limits::default().with_cost(Micros(100_000));
        let live =
            run_priced(Scenario::Complete, Composition::Harness, streaming, limits, prices, make()).await;
        assert_eq!(live.outcome().status(), Status::Completed, "streaming={streaming}");
        // The fixtures' 490 input and 20 output tokens.
        assert_eq!(live.outcome().spend().cost, Micros(490 + 2 * 20), "streaming={streaming}");
        assert_eq!(live.outcome().spend().settled, Usage::new(490, 20), "streaming={streaming}");
    }
}

#[tokio::test]
async fn a_cost_budget_prices_each_call_by_the_configured_model_on_both_paths_of_both_apis() {
    let Some(server) = Aimock::start() else { return };
    priced_on_both_paths(|| transport(&server)).await;
    priced_on_both_paths(|| crate::responses::scenarios::transport(&server)).await;
}

#[tokio::test]
async fn a_model_repeating_the_same_call_over_http_is_stopped_after_one_admitted_call() {
    let Some(server) = Aimock::start() else { return };
    check(&server, Scenario::Repeat, &PATHS).await;
    assert_eq!(Scenario::Repeat.status(), Status::RepeatedCall);
    let live = run(Scenario::Repeat, Composition::Harness, true, transport(&server)).await;
    assert_eq!((live.model_calls, live.tool_calls), (2, 1));
    assert_eq!(live.outcome().text(), None);
}

#[tokio::test]
async fn a_model_changing_its_arguments_over_http_is_stopped_by_the_tool_budget() {
    let Some(server) = Aimock::start() else { return };
    check(&server, Scenario::Changing, &PATHS).await;
    assert_eq!(Scenario::Changing.status(), Status::ToolBudget);
    let live = run(Scenario::Changing, Composition::Simple, false, transport(&server)).await;
    assert_eq!((live.model_calls, live.tool_calls), (5, 4));
}

#[tokio::test]
async fn a_tool_without_its_capability_over_http_is_refused_before_any_tool_runs() {
    let Some(server) = Aimock::start() else { return };
    check(&server, Scenario::Forbidden, &PATHS).await;
    assert_eq!(Scenario::Forbidden.status(), Status::PermissionDenied);
    let live = run(Scenario::Forbidden, Composition::Harness, false, transport(&server)).await;
    assert_eq!((live.model_calls, live.tool_calls), (1, 0));
}

#[tokio::test]
async fn claiming_done_without_the_work_over_http_is_incomplete() {
    let Some(server) = Aimock::start() else { return };
    check(&server, Scenario::Incomplete, &PATHS).await;
    assert_eq!(Scenario::Incomplete.events(), ["ModelCall model 1"]);
}

#[tokio::test]
async fn arguments_of_the_wrong_type_over_http_become_an_error_result_for_the_model() {
    let Some(server) = Aimock::start() else { return };
    check(&server, Scenario::BadArguments, &PATHS[..2]).await;
    assert_the_last_result_names_the_field(&server.request_bodies().await);
    compare(
        Scenario::BadArguments,
        &PATHS[..2],
        || crate::responses::scenarios::transport(&server),
        || server.log(),
    )
    .await;
    assert_the_last_result_names_the_field(&server.response_bodies().await);
}

/// The last of `bodies` (as aimock journals them) answers the bad call with an error that names
/// the field and the expected type, never the value sent.
fn assert_the_last_result_names_the_field(bodies: &[Value]) {
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
