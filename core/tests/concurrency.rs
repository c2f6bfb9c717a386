//! Concurrent invocations take the same guard as sequential ones.

mod common;

use std::sync::Arc;

use common::{Ticket, scope_with, tools};
use loopbound::{HaltReason, Limits, Stop, ToolError};
use tokio::sync::Barrier;

const TASKS: usize = 64;

/// Starts `TASKS` invocations of `read_ticket` at once on a multi-thread runtime, with the input
/// given by `input_of(task)`; returns how many returned a result and how many were stopped.
async fn race(limits: Limits, input_of: fn(usize) -> i64) -> (usize, usize, u32, u32, Option<HaltReason>) {
    let scope = scope_with(limits);
    let tools = tools();
    let barrier = Arc::new(Barrier::new(TASKS));
    let mut handles = Vec::with_capacity(TASKS);
    for task in 0..TASKS {
        let tool = tools.read_ticket.clone();
        let (scope, barrier) = (scope.clone(), Arc::clone(&barrier));
        handles.push(tokio::spawn(async move {
            barrier.wait().await;
            tool.invoke(&scope, Ticket { input: input_of(task) }).await
        }));
    }
    let (mut ok, mut refused) = (0, 0);
    for handle in handles {
        match handle.await.expect("no task panics") {
            Ok(_) => ok += 1,
            Err(ToolError::Stopped(Stop::Halted(_))) => refused += 1,
            Err(other) => panic!("unexpected error: {other}"),
        }
    }
    (ok, refused, scope.tool_calls(), scope.state().bodies_run(), scope.stop_reason())
}

/// A body runs at most once per admission: an admitted call whose scope was halted by a later
/// refusal before its body started never starts it (SPEC §4 step 3; its reservation stays
/// counted), and one halted while its body ran does not return the body's result (step 4). So
/// every call that returned a result ran its body, and no more bodies ran than were admitted.
fn assert_bodies_follow_admissions(ok: usize, refused: usize, admitted: u32, bodies: u32) {
    assert_eq!(ok + refused, TASKS, "every call either returned or was refused");
    let bodies = usize::try_from(bodies).expect("small");
    assert!(ok <= bodies, "a call returned without its body: {ok} results, {bodies} bodies");
    assert!(bodies <= usize::try_from(admitted).expect("small"), "{bodies} bodies > {admitted} admissions");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_signature_is_admitted_exactly_repetitions_times() {
    for repetitions in [1, 3] {
        let limits = Limits::default().with_repetitions(repetitions).with_tool_calls(100);
        let (ok, refused, admitted, bodies, stop) = race(limits, |_| 42).await;
        assert_eq!(admitted, repetitions);
        assert_bodies_follow_admissions(ok, refused, admitted, bodies);
        assert_eq!(stop, Some(HaltReason::RepeatedCall));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn distinct_signatures_are_admitted_exactly_tool_calls_times() {
    let limits = Limits::default().with_tool_calls(4);
    let task_id = |task: usize| i64::try_from(task).expect("small");
    let (ok, refused, admitted, bodies, stop) = race(limits, task_id).await;
    assert_eq!(admitted, 4);
    assert_bodies_follow_admissions(ok, refused, admitted, bodies);
    assert_eq!(stop, Some(HaltReason::ToolBudget));
}
