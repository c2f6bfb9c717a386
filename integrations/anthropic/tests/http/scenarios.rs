//! The eight review scenarios of the contract over HTTP, in both compositions and on both call
//! paths: against aimock's `/v1/messages` for the scripted replies (the same events, status,
//! text and conversation as the scripted transport), against a silent server for the deadline,
//! and against a closed port for an unreachable provider.

use std::time::Duration;

use loopbound::{Limits, Status};

use loopbound_testkit::Composition;
use loopbound_testkit::aimock::Aimock;
use loopbound_testkit::canned::{Answer, Canned};
use loopbound_testkit::scenarios::{PATHS, Scenario, compare, run, run_with};

use crate::transport_to;

async fn check(server: &Aimock, scenario: Scenario, paths: &[(Composition, bool)]) {
    compare(scenario, paths, || transport_to(&server.base_url()), || server.log()).await;
}

#[tokio::test]
async fn complete_incomplete_forbidden_repeat_and_changing_end_as_the_scripted_runs_do() {
    let Some(server) = Aimock::start() else { return };
    for scenario in
        [Scenario::Complete, Scenario::Incomplete, Scenario::Forbidden, Scenario::Repeat, Scenario::Changing]
    {
        check(&server, scenario, &PATHS).await;
    }
    let statuses: Vec<Status> =
        [Scenario::Complete, Scenario::Incomplete, Scenario::Forbidden, Scenario::Repeat, Scenario::Changing]
            .map(Scenario::status)
            .to_vec();
    assert_eq!(
        statuses,
        [
            Status::Completed,
            Status::Incomplete,
            Status::PermissionDenied,
            Status::RepeatedCall,
            Status::ToolBudget
        ]
    );
    let complete =
        run(Scenario::Complete, Composition::Harness, true, transport_to(&server.base_url())).await;
    assert_eq!(complete.outcome().text(), Some("Review finished."));
    assert_eq!((complete.model_calls, complete.tool_calls), (3, 2));
    let changing =
        run(Scenario::Changing, Composition::Simple, false, transport_to(&server.base_url())).await;
    assert_eq!((changing.model_calls, changing.tool_calls), (5, 4));
}

#[tokio::test]
async fn a_budget_of_one_model_call_refuses_the_call_that_follows_a_tool_result() {
    let Some(server) = Aimock::start() else { return };
    for (composition, streaming) in PATHS {
        let limits = Limits::default().with_model_calls(1);
        let live =
            run_with(Scenario::Complete, composition, streaming, limits, transport_to(&server.base_url()))
                .await;
        let context = format!("{composition} streaming={streaming}");
        assert_eq!(live.outcome().status(), Status::ModelBudget, "{context}");
        assert_eq!(
            live.events(),
            [
                "ModelCall model 1",
                "Middleware read_ticket 1",
                "ToolCall read_ticket 1",
                "ModelBudget model 1"
            ],
            "{context}"
        );
        assert_eq!((live.model_calls, live.tool_calls), (1, 1), "{context}");
        assert_eq!(live.outcome().text(), None);
    }
    assert_eq!(server.message_bodies().await.len(), 4, "one request per run: the refused call is never sent");
}

#[tokio::test]
async fn a_model_that_never_answers_is_cut_off_by_the_deadline() {
    for (composition, streaming) in PATHS {
        let server = Canned::start(vec![Answer::ThenHang(Vec::new())]).await;
        let limits = Limits::default().with_deadline(Duration::from_secs(1));
        let started = std::time::Instant::now();
        let live =
            run_with(Scenario::Complete, composition, streaming, limits, transport_to(&server.base_url()))
                .await;
        let context = format!("{composition} streaming={streaming}");
        assert_eq!(live.outcome().status(), Status::DeadlineExceeded, "{context}");
        assert_eq!(live.events(), ["ModelCall model 1", "DeadlineExceeded model 1"], "{context}");
        assert_eq!((live.model_calls, live.tool_calls), (1, 0), "{context}");
        assert!(started.elapsed() < Duration::from_secs(5), "{context}: {:?}", started.elapsed());
        assert_eq!(server.requests().len(), 1, "{context}");
    }
}

#[tokio::test]
async fn an_unreachable_provider_ends_the_run_as_provider_unavailable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    drop(listener);
    for (composition, streaming) in PATHS {
        let live = run(Scenario::Complete, composition, streaming, transport_to(&base)).await;
        let outcome = live.outcome();
        assert_eq!(outcome.status(), Status::ProviderUnavailable, "{composition} streaming={streaming}");
        assert_eq!(live.events(), ["ModelCall model 1"]);
        let detail = outcome.detail().expect("the transport's message is kept");
        assert!(detail.starts_with("cannot connect: ") && !detail.contains("http://"), "{detail}");
    }
}

#[tokio::test]
async fn arguments_of_the_wrong_type_become_an_error_result_for_the_model() {
    let Some(server) = Aimock::start() else { return };
    check(&server, Scenario::BadArguments, &PATHS).await;
    let bodies = server.message_bodies().await;
    let tool_result = &bodies.last().expect("requests were journaled")["messages"][2];
    assert_eq!(tool_result["role"], "tool");
    assert_eq!(tool_result["tool_call_id"], "call_bad");
    assert_eq!(
        tool_result["content"],
        "Error: invalid arguments for tool read_ticket: input: invalid type: a string, expected i64."
    );
}
