//! Errors inside a Responses stream or body, and cut streams, from a canned server: each ends the
//! run as the chat transport's equivalent does.

use loopbound::transport::{TransportError, TransportErrorKind};
use loopbound::{RunError, Status};
use loopbound_testkit::Composition;
use loopbound_testkit::canned::{Answer, Canned, event_stream, json};
use loopbound_testkit::scenarios::{Scenario, run};

use super::transport_to;

const DELTA: &str = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"delta\":\"Hel\"}\n\n";

#[tokio::test]
async fn a_failed_response_inside_a_stream_ends_the_run_as_provider_unavailable() {
    let failed = format!(
        "{DELTA}event: response.failed\ndata: {{\"type\":\"response.failed\",\"response\":{{\"status\":\"failed\",\"error\":{{\"code\":\"server_error\",\"message\":\"The model failed\"}}}}}}\n\n"
    );
    let overloaded = format!(
        "{DELTA}event: error\ndata: {{\"type\":\"error\",\"code\":\"rate_limit_exceeded\",\"message\":\"Slow down\"}}\n\n"
    );
    let server =
        Canned::start(vec![Answer::Bytes(event_stream(&failed)), Answer::Bytes(event_stream(&overloaded))])
            .await;
    for detail in
        ["the provider reported an error: The model failed", "the provider reported an error: Slow down"]
    {
        let live =
            run(Scenario::Complete, Composition::Harness, true, transport_to(&server.base_url(), "m")).await;
        assert_eq!(live.outcome().status(), Status::ProviderUnavailable);
        assert_eq!(live.outcome().detail(), Some(detail));
        assert_eq!(live.events(), ["ModelCall model 1"]);
    }
}

#[tokio::test]
async fn an_error_object_in_a_whole_reply_is_mapped_by_its_code() {
    let unavailable = r#"{"error":{"code":500,"message":"the model produced output that does not match","type":"server_error"}}"#;
    let refused = r#"{"status":"failed","error":{"code":"invalid_prompt","message":"refused"},"output":[]}"#;
    let server = Canned::start(vec![Answer::Bytes(json(unavailable)), Answer::Bytes(json(refused))]).await;
    let live =
        run(Scenario::Complete, Composition::Harness, false, transport_to(&server.base_url(), "m")).await;
    assert_eq!(live.outcome().status(), Status::ProviderUnavailable);
    assert_eq!(
        live.outcome().detail(),
        Some("the provider reported an error: the model produced output that does not match")
    );
    let live =
        run(Scenario::Complete, Composition::Harness, false, transport_to(&server.base_url(), "m")).await;
    assert_eq!(
        live.result,
        Err(RunError::Provider(TransportError::other("the provider reported an error: refused")))
    );
}

#[tokio::test]
async fn a_stream_cut_before_its_completed_event_is_a_malformed_reply() {
    let server = Canned::start(vec![Answer::Bytes(event_stream(DELTA))]).await;
    let live =
        run(Scenario::Complete, Composition::Harness, true, transport_to(&server.base_url(), "m")).await;
    let Err(RunError::Provider(error)) = &live.result else { panic!("a provider error: {:?}", live.result) };
    assert_eq!(
        (error.kind(), error.message()),
        (
            TransportErrorKind::Malformed,
            "the stream ended before response.completed; the reply may be incomplete"
        )
    );
}
