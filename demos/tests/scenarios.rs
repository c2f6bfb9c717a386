//! Every scenario, in both compositions and on both transport paths, produces the status, tool
//! calls and model calls of the contract's table (SPEC §11). Time is tokio's paused clock, so
//! the one-second deadline passes at once.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use loopbound::scripted::{Scripted, Step};
use loopbound::transport::{ChatRequest, ModelReply};
use loopbound::{Composition, EventKind, Message, Outcome, RunError, Status};
use loopbound_demos::scenario::{Expected, Scenario};
use loopbound_demos::session::{DemoError, Session, run_scenario};
use loopbound_demos::vocabulary::{error_exit_code, status_exit_code};
use loopbound_fixtures::review::{
    self, COMPLETE_EVENTS, FINISH_CAPABILITY, INSTRUCTIONS, PROMPT, READ_CAPABILITY, REVIEW_DONE, TICKET_TEXT,
};
use tokio_util::sync::CancellationToken;

const COMPOSITIONS: [Composition; 2] = [Composition::Harness, Composition::Simple];

async fn outcome(scenario: Scenario, composition: Composition, streaming: bool) -> Outcome {
    match run_scenario(scenario, composition, streaming, CancellationToken::new()).await {
        Ok(report) => report.outcome,
        Err(error) => panic!("{scenario} {composition} streaming={streaming}: {error}"),
    }
}

fn count(outcome: &Outcome, kind: EventKind) -> u32 {
    u32::try_from(outcome.events().iter().filter(|event| event.kind() == kind).count()).unwrap_or(u32::MAX)
}

#[test]
fn the_expected_table_is_the_contracts() {
    let table: Vec<(&str, Status, u32, u32)> = Scenario::ALL
        .iter()
        .map(|s| {
            let Expected { status, tool_calls, model_calls } = s.expected();
            (s.name(), status, tool_calls, model_calls)
        })
        .collect();
    assert_eq!(
        table,
        [
            ("complete", Status::Completed, 2, 3),
            ("incomplete", Status::Incomplete, 0, 1),
            ("forbidden", Status::PermissionDenied, 0, 1),
            ("repeat", Status::RepeatedCall, 1, 2),
            ("changing", Status::ToolBudget, 4, 5),
            ("budget", Status::ModelBudget, 1, 1),
            ("deadline", Status::DeadlineExceeded, 0, 1),
            ("unavailable", Status::ProviderUnavailable, 0, 1),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn every_scenario_gives_its_status_and_counts_in_both_compositions_and_paths() {
    for scenario in Scenario::ALL {
        for composition in COMPOSITIONS {
            for streaming in [false, true] {
                let outcome = outcome(scenario, composition, streaming).await;
                let expected = scenario.expected();
                let case = format!("{scenario} {composition} streaming={streaming}");
                assert_eq!(outcome.status(), expected.status, "{case}");
                assert_eq!(count(&outcome, EventKind::ToolCall), expected.tool_calls, "{case}");
                assert_eq!(count(&outcome, EventKind::ModelCall), expected.model_calls, "{case}");
                assert_eq!(outcome.text().is_some(), expected.status.keeps_text(), "{case}");
            }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn the_streaming_path_gives_the_same_outcome_as_the_non_streaming_one() {
    for scenario in Scenario::ALL {
        for composition in COMPOSITIONS {
            let whole = outcome(scenario, composition, false).await;
            let streamed = outcome(scenario, composition, true).await;
            assert_eq!(streamed, whole, "{scenario} {composition}");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn harness_and_simple_give_the_same_outcome_for_every_scenario() {
    for scenario in Scenario::ALL {
        let harness = outcome(scenario, Composition::Harness, false).await;
        let simple = outcome(scenario, Composition::Simple, false).await;
        assert_eq!(simple, harness, "{scenario}");
    }
}

#[tokio::test]
async fn complete_runs_both_tools_and_the_host_condition_decides() {
    let outcome = outcome(Scenario::Complete, Composition::Harness, false).await;
    let events: Vec<String> = outcome.events().iter().map(ToString::to_string).collect();
    assert_eq!(events, COMPLETE_EVENTS);
    assert_eq!(outcome.text(), Some("Review finished."));
    assert_eq!(status_exit_code(outcome.status()), 0);
}

#[tokio::test]
async fn each_halt_is_recorded_once_with_its_tool_and_count() {
    let cases = [
        (Scenario::Forbidden, "PermissionDenied read_ticket 0"),
        (Scenario::Repeat, "RepeatedCall read_ticket 1"),
        (Scenario::Changing, "ToolBudget read_ticket 4"),
        (Scenario::Budget, "ModelBudget model 1"),
    ];
    for (scenario, halt) in cases {
        let outcome = outcome(scenario, Composition::Harness, false).await;
        let last = outcome.events().last().map(ToString::to_string);
        assert_eq!(last.as_deref(), Some(halt), "{scenario}");
        let halts = outcome.events().iter().filter(|e| matches!(e.kind(), EventKind::Halt(_))).count();
        assert_eq!(halts, 1, "{scenario}");
    }
}

#[tokio::test(start_paused = true)]
async fn the_deadline_ends_a_model_that_never_answers_after_one_second() {
    let started = tokio::time::Instant::now();
    let outcome = outcome(Scenario::Deadline, Composition::Harness, false).await;
    assert_eq!(started.elapsed(), Duration::from_secs(1));
    let events: Vec<String> = outcome.events().iter().map(ToString::to_string).collect();
    assert_eq!(events, ["ModelCall model 1", "DeadlineExceeded model 1"]);
}

#[tokio::test]
async fn an_unavailable_provider_keeps_its_message_as_detail_and_no_text() {
    let outcome = outcome(Scenario::Unavailable, Composition::Simple, true).await;
    assert_eq!(outcome.status(), Status::ProviderUnavailable);
    assert_eq!(outcome.detail(), Some("scripted transport: connection refused"));
    assert_eq!(outcome.text(), None);
    assert_eq!(status_exit_code(outcome.status()), 2);
}

#[tokio::test]
async fn the_incomplete_model_claims_success_but_the_review_is_not_done() {
    let session = Session::new(
        &review::tools().set,
        Scenario::Incomplete,
        Composition::Harness,
        CancellationToken::new(),
    )
    .expect("valid scenario");
    let scope = session.scope().clone();
    let outcome = session.run(Scenario::Incomplete.transport(), false).await.expect("an outcome");
    let state = scope.state();
    assert_eq!(outcome.status(), Status::Incomplete);
    assert_eq!(outcome.text(), Some("Review finished."));
    assert!(!state.ticket_read());
    assert!(!state.completed());
}

/// What the scripted model was sent on each call.
type Sent = Arc<Mutex<Vec<Vec<Message>>>>;

fn recording(
    scenario: Scenario,
    sent: &Sent,
) -> Scripted<impl Fn(u32, &ChatRequest<'_>) -> Step + Send + Sync> {
    let sent = Arc::clone(sent);
    Scripted::new(move |call, request: &ChatRequest<'_>| {
        sent.lock().expect("not poisoned").push(request.messages.to_vec());
        assert_eq!(request.options.max_output_tokens, Some(800));
        scenario.step(call)
    })
}

#[tokio::test]
async fn the_ticket_text_reaches_the_model_only_as_a_tool_result_and_changes_no_bound() {
    let session = Session::new(
        &review::tools().set,
        Scenario::Complete,
        Composition::Harness,
        CancellationToken::new(),
    )
    .expect("valid scenario");
    let scope = session.scope().clone();
    let sent = Sent::default();
    let outcome = session.run(recording(Scenario::Complete, &sent), false).await.expect("an outcome");
    let state = scope.state();
    assert_eq!(outcome.status(), Status::Completed);
    assert!(state.completed());

    let sent = sent.lock().expect("not poisoned").clone();
    assert_eq!(sent.len(), 3);
    assert_eq!(sent[0], [Message::system(INSTRUCTIONS), Message::user(PROMPT)]);
    let carrying: Vec<&Message> = sent[2]
        .iter()
        .filter(|m| serde_json::to_string(m).unwrap_or_default().contains("Login returns"))
        .collect();
    assert_eq!(carrying, [&Message::tool_result("call-1", TICKET_TEXT)]);
    assert_eq!(sent[2].last(), Some(&Message::tool_result("call-2", REVIEW_DONE)));

    let capabilities: Vec<&str> = scope.capabilities().collect();
    assert_eq!(capabilities, [FINISH_CAPABILITY, READ_CAPABILITY]);
    assert_eq!(scope.limits(), Scenario::Complete.limits());
}

#[tokio::test]
async fn finish_review_before_reading_is_a_body_error_the_model_sees_not_a_halt() {
    let session =
        Session::new(&review::tools().set, Scenario::Complete, Composition::Simple, CancellationToken::new())
            .expect("valid scenario");
    let scope = session.scope().clone();
    let sent = Sent::default();
    let recorder = Arc::clone(&sent);
    let model = Scripted::new(move |call, request: &ChatRequest<'_>| {
        recorder.lock().expect("not poisoned").push(request.messages.to_vec());
        match call {
            1 => Step::Reply(ModelReply::call("early", "finish_review", r#"{"input":42}"#)),
            _ => Step::Reply(ModelReply::text("Review finished.")),
        }
    });
    let outcome = session.run(model, false).await.expect("an outcome");
    assert_eq!(outcome.status(), Status::Incomplete);
    assert!(!scope.state().completed());
    let sent = sent.lock().expect("not poisoned").clone();
    assert_eq!(
        sent[1].last(),
        Some(&Message::tool_error(
            "early",
            "Error: tool finish_review failed: Read ticket 42 before completing review."
        ))
    );
}

#[tokio::test(start_paused = true)]
async fn the_callers_cancellation_ends_a_hanging_run_as_an_error() {
    let caller = CancellationToken::new();
    let canceller = caller.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        canceller.cancel();
    });
    let result = run_scenario(Scenario::Deadline, Composition::Harness, false, caller).await;
    match result {
        Err(DemoError::Run(error)) => {
            assert_eq!(error, RunError::Cancelled);
            assert_eq!(error_exit_code(&error), 130);
        }
        other => panic!("expected a cancellation, got {other:?}"),
    }
}

#[tokio::test]
async fn a_caller_that_cancelled_before_the_run_gets_no_outcome() {
    let caller = CancellationToken::new();
    caller.cancel();
    let result = run_scenario(Scenario::Complete, Composition::Simple, true, caller).await;
    assert!(matches!(result, Err(DemoError::Run(RunError::Cancelled))), "{result:?}");
}
