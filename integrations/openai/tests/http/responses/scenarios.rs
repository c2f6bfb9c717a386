//! The review scenarios over the Responses API against aimock: the same events, status, text and
//! conversation as the scripted transport, in both compositions and on both call paths; usage
//! settled from each response's report. (Prices, injected errors, refused keys and wrong
//! arguments are the chat transport's tests, run over both APIs.)

use loopbound::transport::Usage;
use loopbound_openai::ResponsesTransport;
use loopbound_testkit::Composition;
use loopbound_testkit::aimock::Aimock;
use loopbound_testkit::scenarios::{PATHS, Scenario, compare, run};

use super::transport_to;

pub(crate) fn transport(server: &Aimock) -> ResponsesTransport {
    transport_to(&server.base_url(), "loopbound-test-model")
}

async fn check(server: &Aimock, scenario: Scenario, paths: &[(Composition, bool)]) {
    compare(scenario, paths, || transport(server), || server.log()).await;
}

#[tokio::test]
async fn the_complete_review_over_responses_matches_the_scripted_run_in_both_compositions_and_paths() {
    let Some(server) = Aimock::start() else { return };
    check(&server, Scenario::Complete, &PATHS).await;
    let live = run(Scenario::Complete, Composition::Harness, true, transport(&server)).await;
    assert_eq!(live.outcome().text(), Some("Review finished."));
    assert_eq!((live.model_calls, live.tool_calls), (3, 2));
    // Every request went to /v1/responses, none to the chat endpoint.
    assert_eq!(server.request_bodies().await.len(), 0);
    assert_eq!(server.response_bodies().await.len(), 4 * 3 + 3);
}

#[tokio::test]
async fn usage_is_settled_from_each_response_on_both_paths() {
    let Some(server) = Aimock::start() else { return };
    for streaming in [false, true] {
        let live = run(Scenario::Complete, Composition::Harness, streaming, transport(&server)).await;
        // The fixtures report 120+160+210 input and 7+9+4 output tokens for the three calls.
        assert_eq!(live.outcome().usage(), Some(Usage::new(490, 20)), "streaming={streaming}");
        assert_eq!(live.outcome().spend().settled, Usage::new(490, 20), "streaming={streaming}");
    }
}

#[tokio::test]
async fn the_other_scenarios_over_responses_match_the_scripted_runs() {
    let Some(server) = Aimock::start() else { return };
    for scenario in [Scenario::Repeat, Scenario::Changing, Scenario::Forbidden, Scenario::Incomplete] {
        check(&server, scenario, &PATHS).await;
    }
    // The wrong arguments' scenario is in the chat transport's tests, over both APIs.
}
