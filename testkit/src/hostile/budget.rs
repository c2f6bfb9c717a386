//! The budget that bounds every response of a [`HostileServer`](crate::hostile::HostileServer).
//!
//! # Invariants
//!
//! - Every connection ends at most `max_time` after it was accepted, whatever the behaviour and
//!   whatever the client does (reads nothing, sends nothing, never closes).
//! - Every response writes at most `max_bytes` body bytes; the write that would pass the limit is
//!   cut to land on it exactly, and the connection is then closed.

use std::time::Duration;

/// What one connection may cost before the server closes it: it ends when EITHER limit is reached.
///
/// Endless behaviours rely on it to stop; whole replies are cut by it too, so a budget smaller
/// than a reply yields a truncated reply (a short body under its `Content-Length`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// The most body bytes one response writes (framing and headers are not counted).
    pub max_bytes: u64,
    /// The longest one connection lives, counted from its accept.
    pub max_time: Duration,
}

impl Budget {
    /// The default limit on body bytes: 256 MiB.
    pub const DEFAULT_MAX_BYTES: u64 = 256 * 1024 * 1024;
    /// The default limit on a connection's life: 30 s.
    pub const DEFAULT_MAX_TIME: Duration = Duration::from_secs(30);

    /// A budget of `max_bytes` body bytes and `max_time` per connection.
    #[must_use]
    pub const fn new(max_bytes: u64, max_time: Duration) -> Self {
        Self { max_bytes, max_time }
    }
}

impl Default for Budget {
    /// 256 MiB and 30 s.
    fn default() -> Self {
        Self::new(Self::DEFAULT_MAX_BYTES, Self::DEFAULT_MAX_TIME)
    }
}
