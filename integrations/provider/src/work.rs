//! Keeping a run's task responsive: a call dropped when its cancellation fires, and long work
//! moved to the blocking pool.
//!
//! # Invariants
//!
//! - [`until_cancelled`] returns [`TransportError::cancelled`] as soon as the token fires, and
//!   drops the call (its connection closes with it).
//! - Work on more than [`INLINE_WORK`] bytes runs on tokio's blocking pool ([`off_the_task`]), so
//!   a deadline or a cancellation is noticed while it runs; less costs well under a millisecond
//!   and runs in place.

use std::future::Future;
use std::pin::pin;

use futures_util::future::{Either, select};
use loopbound::transport::TransportError;
use tokio_util::sync::CancellationToken;

/// Work on more bytes than this (parsing a whole reply, decoding what a large piece of a stream
/// completes) runs on the runtime's blocking pool.
pub const INLINE_WORK: usize = 256 << 10;

/// Runs `call` unless `cancel` fires first, in which case the call is dropped.
///
/// # Errors
///
/// The call's error, or [`TransportError::cancelled`].
pub async fn until_cancelled<T>(
    cancel: &CancellationToken,
    call: impl Future<Output = Result<T, TransportError>>,
) -> Result<T, TransportError> {
    match select(pin!(cancel.cancelled()), pin!(call)).await {
        Either::Left(((), _)) => Err(TransportError::cancelled()),
        Either::Right((result, _)) => result,
    }
}

/// Runs `work` on the runtime's blocking pool. If the call is dropped meanwhile (the deadline, a
/// halt, the caller), the work finishes on its own and its result is dropped. Dropping the
/// runtime waits for it (tokio's rule for blocking work): a process that exits right after a run
/// shuts its runtime down with `shutdown_background` instead.
///
/// # Errors
///
/// [`TransportError::other`] if the work panicked.
pub async fn off_the_task<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, TransportError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|_| TransportError::other("decoding the reply failed unexpectedly"))
}
