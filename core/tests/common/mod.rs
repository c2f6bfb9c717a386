//! Shared fixtures of the core integration tests: the review task's two tools and small helpers.

#![allow(dead_code, unreachable_pub, reason = "each test file uses a different part of the fixtures")]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use loopbound::{GuardedTool, Limits, Scope};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The review task's input: `{"input": <ticket id>}`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub struct Ticket {
    pub input: i64,
}

/// Host-side state of the review task.
#[derive(Debug, Default)]
pub struct Review {
    pub read: AtomicBool,
    pub completed: AtomicBool,
    pub bodies_run: AtomicU32,
}

impl Review {
    pub fn completed(&self) -> bool {
        self.completed.load(Ordering::SeqCst)
    }

    pub fn bodies_run(&self) -> u32 {
        self.bodies_run.load(Ordering::SeqCst)
    }
}

pub struct Tools {
    pub read_ticket: GuardedTool<Ticket>,
    pub finish_review: GuardedTool<Ticket>,
    pub review: Arc<Review>,
}

/// Registers `read_ticket` (`ticket.read`) and `finish_review` (`review.finish`) in `scope`.
pub fn review_tools(scope: &Scope) -> Tools {
    let review = Arc::new(Review::default());
    let state = Arc::clone(&review);
    let read_ticket = scope
        .tool("read_ticket", "ticket.read")
        .description("Read one ticket by its id.")
        .build(move |ticket: Ticket, _cancel| {
            let state = Arc::clone(&state);
            async move {
                state.bodies_run.fetch_add(1, Ordering::SeqCst);
                if ticket.input != 42 {
                    return Ok::<_, String>("NotFound: only ticket 42 is in scope.".to_owned());
                }
                state.read.store(true, Ordering::SeqCst);
                Ok("Ticket 42: Login returns HTTP 401 for a known account.".to_owned())
            }
        })
        .expect("read_ticket registers");
    let state = Arc::clone(&review);
    let finish_review = scope
        .tool("finish_review", "review.finish")
        .description("Complete the review of a ticket that was read.")
        .build(move |ticket: Ticket, _cancel| {
            let state = Arc::clone(&state);
            async move {
                state.bodies_run.fetch_add(1, Ordering::SeqCst);
                if !state.read.load(Ordering::SeqCst) || ticket.input != 42 {
                    return Err("Read ticket 42 before completing review.".to_owned());
                }
                state.completed.store(true, Ordering::SeqCst);
                Ok("Review completed. No business write performed.".to_owned())
            }
        })
        .expect("finish_review registers");
    Tools { read_ticket, finish_review, review }
}

/// A scope with both review capabilities and `limits`.
pub fn scope_with(limits: Limits) -> Scope {
    Scope::builder().grant("ticket.read").grant("review.finish").limits(limits).build().expect("valid limits")
}

/// The events as `Kind name count` lines.
pub fn lines(scope: &Scope) -> Vec<String> {
    scope.events().iter().map(ToString::to_string).collect()
}
