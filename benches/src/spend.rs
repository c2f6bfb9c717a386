//! What a spend reservation costs: a model call counted, reserved and settled through the
//! budgeted transport, on conversations of two sizes.
//!
//! # Invariants
//!
//! - Both sizes are measured alternately, each on its own long-lived run (one scope, one
//!   budgeted transport), so the incremental count is what is measured: each call adds one
//!   message to a conversation whose earlier messages were counted by earlier calls.
//! - The transport answers at once; no I/O is measured.

use std::hint::black_box;
use std::time::Instant;

use loopbound::Budgeted;
use loopbound::scripted::{Scripted, Step};
use loopbound::transport::{ChatOptions, ChatRequest, Message, ModelReply, Usage};
use loopbound::{Limits, Scope};

use crate::timing::median_of;

type Model = Scripted<fn(u32, &ChatRequest<'_>) -> Step>;

fn model() -> Model {
    Scripted::new(|_, _| Step::Reply(ModelReply::text("ok").with_usage(Usage::new(1, 1))))
}

/// A scope under a spend budget with room for every call.
fn scope() -> Scope {
    let limits = Limits::default().with_model_calls(u32::MAX).with_total_tokens(u64::MAX / 4);
    Scope::builder().limits(limits).build().expect("valid limits")
}

/// Nanoseconds per call over `calls` calls of `budgeted`, each adding one small message to
/// `conversation` first.
fn time(
    runtime: &tokio::runtime::Runtime,
    budgeted: &Budgeted<'_, Model>,
    conversation: &mut Vec<Message>,
    calls: u32,
) -> f64 {
    let options = ChatOptions::default();
    let start = Instant::now();
    runtime.block_on(async {
        for _ in 0..calls {
            conversation.push(Message::tool_result("c", "a result"));
            let reply = budgeted.complete(conversation, &[], &options).await;
            black_box(reply.is_ok());
        }
    });
    start.elapsed().as_nanos() as f64 / f64::from(calls)
}

/// Nanoseconds per reserved call on a 1 KB and on a 1 MB conversation: medians over `samples`
/// batches of `calls` calls, measured alternately on two long-lived runs, whose first call
/// (counting the whole conversation once) is not timed.
///
/// # Panics
///
/// If a current-thread tokio runtime cannot be built.
#[must_use]
pub fn reservation_pair(samples: usize, calls: u32) -> (f64, f64) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let (small_scope, large_scope, small_model, large_model) = (scope(), scope(), model(), model());
    let small = Budgeted::new(&small_scope, &small_model);
    let large = Budgeted::new(&large_scope, &large_model);
    let mut small_conversation = vec![Message::user("x".repeat(1 << 10))];
    let mut large_conversation = vec![Message::user("x".repeat(1 << 20))];
    time(&runtime, &small, &mut small_conversation, 1);
    time(&runtime, &large, &mut large_conversation, 1);
    let (mut small_times, mut large_times) = (Vec::new(), Vec::new());
    for _ in 0..samples.max(1) {
        small_times.push(time(&runtime, &small, &mut small_conversation, calls));
        large_times.push(time(&runtime, &large, &mut large_conversation, calls));
    }
    (median_of(&small_times), median_of(&large_times))
}
