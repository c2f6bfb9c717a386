//! Deadline, caller cancellation and futures that ignore their token.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{Ticket, lines, review_tools, scope_with};
use loopbound::scripted::{Scripted, Step, sequence};
use loopbound::{Limits, ModelReply, RunError, Runtime, Scope, Status};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Sets its flag when dropped: proves a future was dropped rather than awaited to the end.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[tokio::test(start_paused = true)]
async fn a_transport_that_never_answers_ends_at_the_deadline_exactly() {
    for streaming in [false, true] {
        let scope = scope_with(Limits::default().with_deadline(Duration::from_secs(1)));
        let started = Instant::now();
        let hang = Scripted::new(|_, _| Step::Hang);
        let outcome =
            Runtime::harness(&scope, hang).streaming(streaming).run(&mut Vec::new(), || true).await.unwrap();
        assert_eq!(outcome.status(), Status::DeadlineExceeded);
        assert_eq!(outcome.text(), None);
        assert_eq!(started.elapsed(), Duration::from_secs(1));
        assert_eq!(lines(&scope), ["ModelCall model 1", "DeadlineExceeded model 1"]);
        assert!(scope.token().is_cancelled());
    }
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Wait {
    seconds: u64,
}

#[tokio::test(start_paused = true)]
async fn a_body_that_ignores_its_token_is_dropped_at_the_deadline() {
    let scope = scope_with(Limits::default().with_deadline(Duration::from_secs(5)));
    let dropped = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&dropped);
    scope
        .tool("wait", "ticket.read")
        .build(move |wait: Wait, _ignored_token| {
            let guard = DropFlag(Arc::clone(&flag));
            async move {
                tokio::time::sleep(Duration::from_secs(wait.seconds)).await;
                drop(guard);
                Ok::<_, String>("waited")
            }
        })
        .unwrap();
    let model = sequence(vec![Step::Reply(ModelReply::call("w", "wait", r#"{"seconds":3600}"#))]);
    let started = Instant::now();
    let outcome = Runtime::simple(&scope, model).run(&mut Vec::new(), || true).await.unwrap();
    assert_eq!(outcome.status(), Status::DeadlineExceeded);
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    assert!(dropped.load(Ordering::SeqCst), "the body's future was dropped");
    assert_eq!(
        lines(&scope),
        ["ModelCall model 1", "Middleware wait 1", "ToolCall wait 1", "DeadlineExceeded wait 1"]
    );
}

#[tokio::test(start_paused = true)]
async fn the_caller_cancelling_during_a_hang_is_an_error_not_a_status() {
    let caller = CancellationToken::new();
    let scope = Scope::builder().caller(caller.clone()).build().unwrap();
    let cancel = caller.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        cancel.cancel();
    });
    let started = Instant::now();
    let result =
        Runtime::harness(&scope, Scripted::new(|_, _| Step::Hang)).run(&mut Vec::new(), || true).await;
    assert_eq!(result, Err(RunError::Cancelled));
    assert_eq!(started.elapsed(), Duration::from_millis(200));
    assert_eq!(lines(&scope), ["ModelCall model 1"], "caller cancellation records no halt");
}

#[tokio::test]
async fn the_caller_wins_a_race_with_a_halt() {
    // The body of `trigger` first makes the scope halt (it invokes a tool whose capability is not
    // granted), then the caller cancels: both happen before the run concludes.
    let caller = CancellationToken::new();
    let scope = Scope::builder().grant("ticket.read").caller(caller.clone()).build().unwrap();
    let tools = review_tools(&scope);
    let finish = tools.finish_review.clone();
    scope
        .tool("trigger", "ticket.read")
        .build(move |_: Ticket, _| {
            let finish = finish.clone();
            let caller = caller.clone();
            async move {
                let _refused = finish.invoke(Ticket { input: 42 }).await;
                caller.cancel();
                Ok::<_, String>("done")
            }
        })
        .unwrap();
    let model = sequence(vec![Step::Reply(ModelReply::call("t", "trigger", r#"{"input":1}"#))]);
    let result = Runtime::harness(&scope, model).run(&mut Vec::new(), || true).await;
    assert_eq!(scope.stop_reason(), Some(loopbound::HaltReason::PermissionDenied));
    assert_eq!(result, Err(RunError::Cancelled));
}
