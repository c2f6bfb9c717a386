//! Deadline, caller cancellation and futures that ignore their token.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{Review, Ticket, lines, scope_with, tools};
use loopbound::scripted::{Scripted, Step, sequence};
use loopbound::transport::ModelReply;
use loopbound::{Limits, RunError, Runner, Scope, Status, ToolBuilder, ToolContext, ToolSet};
use loopbound_fixtures::Composition;
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
    let tools = tools();
    for streaming in [false, true] {
        let scope = scope_with(Limits::default().with_deadline(Duration::from_secs(1)));
        let started = Instant::now();
        let hang = Scripted::new(|_, _| Step::Hang);
        let runtime = Runner::new(&tools.set, hang).streaming(streaming);
        let outcome = runtime.run(&scope, &mut Vec::new(), |_| true).await.unwrap();
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

/// The state of a request whose body must be dropped: the flag its guard sets.
#[derive(Default)]
struct Dropped(Arc<AtomicBool>);

#[tokio::test(start_paused = true)]
async fn a_body_that_ignores_its_token_is_dropped_at_the_deadline() {
    let wait = ToolBuilder::new("wait", "ticket.read")
        .build(|wait: Wait, call: ToolContext<Dropped>| {
            let guard = DropFlag(Arc::clone(&call.state().0));
            async move {
                tokio::time::sleep(Duration::from_secs(wait.seconds)).await;
                drop(guard);
                Ok::<_, String>("waited")
            }
        })
        .unwrap();
    let tools = ToolSet::builder().add(&wait).build().unwrap();
    let scope = Scope::builder()
        .grant("ticket.read")
        .limits(Limits::default().with_deadline(Duration::from_secs(5)))
        .state(Dropped::default())
        .build()
        .unwrap();
    let model = sequence(vec![Step::Reply(ModelReply::call("w", "wait", r#"{"seconds":3600}"#))]);
    let started = Instant::now();
    let outcome =
        Composition::Simple.runner(&tools, model).run(&scope, &mut Vec::new(), |_| true).await.unwrap();
    assert_eq!(outcome.status(), Status::DeadlineExceeded);
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    assert!(scope.state().0.load(Ordering::SeqCst), "the body's future was dropped");
    assert_eq!(
        lines(&scope),
        ["ModelCall model 1", "Middleware wait 1", "ToolCall wait 1", "DeadlineExceeded wait 1"]
    );
}

#[tokio::test(start_paused = true)]
async fn the_caller_cancelling_during_a_hang_is_an_error_not_a_status() {
    let caller = CancellationToken::new();
    let scope = Scope::builder().caller(caller.clone()).state(Review::default()).build().unwrap();
    let cancel = caller.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        cancel.cancel();
    });
    let started = Instant::now();
    let runtime = Runner::new(&tools().set, Scripted::new(|_, _| Step::Hang));
    let result = runtime.run(&scope, &mut Vec::new(), |_| true).await;
    assert_eq!(result, Err(RunError::Cancelled));
    assert_eq!(started.elapsed(), Duration::from_millis(200));
    assert_eq!(lines(&scope), ["ModelCall model 1"], "caller cancellation records no halt");
}

/// A request whose `trigger` body reaches other tools of the same request through its call.
struct Triggering {
    finish: loopbound::GuardedTool<Ticket, Triggering>,
    caller: CancellationToken,
}

#[tokio::test]
async fn the_caller_wins_a_race_with_a_halt() {
    // The body of `trigger` first makes the scope halt (it invokes a tool whose capability is not
    // granted), then the caller cancels: both happen before the run concludes.
    let finish = ToolBuilder::new("finish_review", "review.finish")
        .build(|_: Ticket, _: ToolContext<Triggering>| async { Ok::<_, String>("finished") })
        .unwrap();
    let trigger = ToolBuilder::new("trigger", "ticket.read")
        .build(|_: Ticket, call: ToolContext<Triggering>| async move {
            let _refused = call.state().finish.invoke(call.scope(), Ticket { input: 42 }).await;
            call.state().caller.cancel();
            Ok::<_, String>("done")
        })
        .unwrap();
    let tools = ToolSet::builder().add(&finish).add(&trigger).build().unwrap();
    let caller = CancellationToken::new();
    let scope = Scope::builder()
        .grant("ticket.read")
        .caller(caller.clone())
        .state(Triggering { finish, caller })
        .build()
        .unwrap();
    let model = sequence(vec![Step::Reply(ModelReply::call("t", "trigger", r#"{"input":1}"#))]);
    let result = Runner::new(&tools, model).run(&scope, &mut Vec::new(), |_| true).await;
    assert_eq!(scope.stop_reason(), Some(loopbound::HaltReason::PermissionDenied));
    assert_eq!(result, Err(RunError::Cancelled));
}
