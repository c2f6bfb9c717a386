//! Every scenario, in both compositions and on both transport paths, produces the status, tool
//! calls and model calls of the contract's table (SPEC §11). Time is tokio's paused clock, so
//! the one-second deadline passes at once.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use loopbound::scripted::{Scripted, Step};
use loopbound::transport::{ChatRequest, ModelReply};
use loopbound::{EventKind, Message, Outcome, RunError, Runner, Scope, Status};
use loopbound_demos::scenario::{Expected, Scenario};
use loopbound_demos::session::{DemoError, Session, run_scenario};
use loopbound_demos::vocabulary::{error_exit_code, status_exit_code};
use loopbound_fixtures::Composition;
use loopbound_fixtures::review::{
    self, COMPLETE_EVENTS, FINISH_CAPABILITY, INSTRUCTIONS, PROMPT, READ_CAPABILITY, REVIEW_DONE, Review,
    TICKET_TEXT,
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
            ("retry", Status::Completed, 3, 4),
            ("cycle", Status::NoProgress, 5, 6),
            ("streak", Status::NoProgress, 3, 3),
            ("nudge", Status::RepeatedCall, 1, 3),
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
        (Scenario::Cycle, "NoProgress finish_review 5"),
        (Scenario::Streak, "NoProgress finish_review 3"),
        (Scenario::Nudge, "RepeatedCall read_ticket 1"),
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
    assert_eq!(scope.limits(), &Scenario::Complete.limits());
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

/// Runs `scenario`'s script in a scope with its capabilities and limits but exact repetition,
/// as a host without a progress policy would: what the policy changes, by contrast.
async fn without_policy(scenario: Scenario) -> Outcome {
    let tools = review::tools();
    let scope =
        review::scope(scenario.capabilities().iter().copied(), scenario.limits()).expect("valid limits");
    Runner::new(&tools.set, scenario.transport())
        .observe(loopbound::Middleware)
        .run(&scope, &mut review::conversation(), |ended| Review::completed(ended.state()))
        .await
        .expect("an outcome")
}

/// Plays `scenario` in its session (its progress policy included), recording what the model was
/// sent on each call: the outcome, the scope (whose state is the review's), and the requests.
async fn recorded(
    scenario: Scenario,
    composition: Composition,
) -> (Outcome, Scope<Review>, Vec<Vec<Message>>) {
    let session = Session::new(&review::tools().set, scenario, composition, CancellationToken::new())
        .expect("valid scenario");
    let scope = session.scope().clone();
    let sent = Sent::default();
    let outcome = session.run(recording(scenario, &sent), false).await.expect("an outcome");
    let requests = sent.lock().expect("not poisoned").clone();
    (outcome, scope, requests)
}

#[tokio::test]
async fn retry_completes_because_finish_review_is_judged_by_its_result() {
    let (outcome, scope, sent) = recorded(Scenario::Retry, Composition::Harness).await;
    assert_eq!(outcome.status(), Status::Completed);
    assert_eq!(outcome.text(), Some("Review finished."));
    assert!(scope.state().completed());
    assert_eq!(scope.state().bodies_run(), 3);
    assert_eq!(
        sent[1].last(),
        Some(&Message::tool_error(
            "call-1",
            "Error: tool finish_review failed: Read ticket 42 before completing review."
        ))
    );
    assert_eq!(sent[3].last(), Some(&Message::tool_result("call-3", REVIEW_DONE)));

    let exact = without_policy(Scenario::Retry).await;
    assert_eq!(exact.status(), Status::RepeatedCall, "exact repetition refuses the retry");
    let last = exact.events().last().map(ToString::to_string);
    assert_eq!(last.as_deref(), Some("RepeatedCall finish_review 1"));
}

#[tokio::test]
async fn cycle_and_streak_name_what_went_round_or_failed_in_the_detail() {
    let cycle = outcome(Scenario::Cycle, Composition::Simple, false).await;
    assert_eq!(
        cycle.detail(),
        Some("no progress: the cycle read_ticket → finish_review came round 3 times with no new result")
    );
    assert_eq!(cycle.text(), None);
    let streak = outcome(Scenario::Streak, Composition::Harness, true).await;
    assert_eq!(streak.detail(), Some("no progress: 3 tool calls in a row failed"));
    assert_eq!(status_exit_code(streak.status()), 2);

    // Without a policy, the oscillation runs until the model budget, the failures until the tool
    // budget.
    let cycle = without_policy(Scenario::Cycle).await;
    assert_eq!(cycle.status(), Status::ModelBudget);
    assert_eq!(count(&cycle, EventKind::ToolCall), 6);
    let streak = without_policy(Scenario::Streak).await;
    assert_eq!(streak.status(), Status::ToolBudget);
    assert_eq!(count(&streak, EventKind::ToolCall), 4);
}

#[tokio::test]
async fn nudge_tells_the_model_what_it_repeated_without_running_the_body() {
    let (outcome, scope, sent) = recorded(Scenario::Nudge, Composition::Simple).await;
    assert_eq!(outcome.status(), Status::RepeatedCall);
    assert_eq!(scope.state().bodies_run(), 1, "the nudged call did not run");
    assert_eq!(sent.len(), 3);
    assert_eq!(
        sent[2].last(),
        Some(&Message::tool_error(
            "call-2",
            "Error: no progress: read_ticket was called again with the same arguments after 1 \
             attempt(s) that got the same result; this call was not run. Use the result you have \
             or change course: the next repeat ends the run."
        ))
    );
    let kinds: Vec<String> = outcome.events().iter().map(ToString::to_string).collect();
    assert_eq!(kinds.iter().filter(|event| event.starts_with("Nudged ")).count(), 1, "{kinds:?}");
}
