//! Shared helpers of the core integration tests, over the one review-task fixture
//! (`loopbound-fixtures`).

#![allow(
    dead_code,
    unreachable_pub,
    unused_imports,
    reason = "each test file uses a different part of the helpers"
)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use loopbound::transport::{ChatRequest, ModelReply, ReplyChunk, Transport, TransportError};
use loopbound::{Limits, Scope};
pub use loopbound_fixtures::review::{
    BOTH_CAPABILITIES, NOT_FOUND, READ_FIRST, REVIEW_DONE, Review, ReviewTools, TICKET_TEXT,
    TicketInput as Ticket, tools,
};

/// A scope with both review capabilities and `limits`.
pub fn scope_with(limits: Limits) -> Scope<Review> {
    loopbound_fixtures::review::scope(BOTH_CAPABILITIES, limits).expect("valid limits")
}

/// A scope granting only `capabilities`, with the default limits.
pub fn scope_granting(capabilities: &[&str]) -> Scope<Review> {
    loopbound_fixtures::review::scope(capabilities.iter().copied(), Limits::default()).expect("valid limits")
}

/// The events as `Kind name count` lines.
pub fn lines<S>(scope: &Scope<S>) -> Vec<String> {
    scope.events().iter().map(ToString::to_string).collect()
}

/// A transport that answers after `delay` and counts the calls in flight at once: calls of
/// parallel siblings overlap on it.
pub struct Slow<T> {
    pub inner: T,
    delay: Duration,
    /// The calls sent.
    pub sent: AtomicU32,
    in_flight: AtomicU32,
    /// The most calls in flight at once.
    pub most: AtomicU32,
}

impl<T> Slow<T> {
    pub fn new(inner: T, delay: Duration) -> Self {
        Self { inner, delay, sent: AtomicU32::new(0), in_flight: AtomicU32::new(0), most: AtomicU32::new(0) }
    }
}

impl<T: Transport> Transport for Slow<T> {
    async fn complete<'a>(&'a self, request: ChatRequest<'a>) -> Result<ModelReply, TransportError> {
        self.sent.fetch_add(1, Ordering::SeqCst);
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(self.delay).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.inner.complete(request).await
    }

    async fn stream<'a>(
        &'a self,
        request: ChatRequest<'a>,
    ) -> Result<
        impl futures_core::Stream<Item = Result<ReplyChunk, TransportError>> + Send + 'a,
        TransportError,
    > {
        self.inner.stream(request).await
    }
}
