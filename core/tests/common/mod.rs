//! Shared helpers of the core integration tests, over the one review-task fixture of the testkit.

#![allow(
    dead_code,
    unreachable_pub,
    unused_imports,
    reason = "each test file uses a different part of the helpers"
)]

use loopbound::{Limits, Scope};
pub use loopbound_testkit::review::{
    BOTH_CAPABILITIES, NOT_FOUND, READ_FIRST, REVIEW_DONE, Review, ReviewTools, TICKET_TEXT,
    TicketInput as Ticket, tools,
};

/// A scope with both review capabilities and `limits`.
pub fn scope_with(limits: Limits) -> Scope<Review> {
    loopbound_testkit::review::scope(BOTH_CAPABILITIES, limits).expect("valid limits")
}

/// A scope granting only `capabilities`, with the default limits.
pub fn scope_granting(capabilities: &[&str]) -> Scope<Review> {
    loopbound_testkit::review::scope(capabilities.iter().copied(), Limits::default()).expect("valid limits")
}

/// The events as `Kind name count` lines.
pub fn lines<S>(scope: &Scope<S>) -> Vec<String> {
    scope.events().iter().map(ToString::to_string).collect()
}
