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

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use loopbound::transport::TransportError;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

/// Work on more bytes than this (parsing a whole reply, decoding what a large piece of a stream
/// completes) runs on the runtime's blocking pool.
pub const INLINE_WORK: usize = 256 << 10;

/// Runs `call` unless `cancel` fires first, in which case the call is dropped.
///
/// The call is kept once, in place: an `async fn` would keep it twice (the argument, then the
/// local it awaits), and a waiting call keeps this future for as long as it waits.
///
/// # Errors
///
/// The call's error, or [`TransportError::cancelled`].
pub fn until_cancelled<T, F>(cancel: &CancellationToken, call: F) -> UntilCancelled<'_, F>
where
    F: Future<Output = Result<T, TransportError>>,
{
    UntilCancelled { cancelled: cancel.cancelled(), call }
}

pin_project_lite::pin_project! {
    /// A call raced against its cancellation ([`until_cancelled`]): the cancellation is looked
    /// at first, so a call that completes as the token fires still ends cancelled.
    #[must_use = "futures do nothing unless polled"]
    pub struct UntilCancelled<'a, F> {
        #[pin]
        cancelled: WaitForCancellationFuture<'a>,
        #[pin]
        call: F,
    }
}

impl<T, F> Future for UntilCancelled<'_, F>
where
    F: Future<Output = Result<T, TransportError>>,
{
    type Output = Result<T, TransportError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if this.cancelled.poll(cx).is_ready() {
            return Poll::Ready(Err(TransportError::cancelled()));
        }
        this.call.poll(cx)
    }
}

impl<F> fmt::Debug for UntilCancelled<'_, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UntilCancelled").finish_non_exhaustive()
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

#[cfg(test)]
mod tests {
    use std::mem::size_of_val;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    /// Sets its flag when dropped.
    struct Dropped(Arc<AtomicBool>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn a_call_that_is_not_cancelled_gives_its_own_result() {
        let token = CancellationToken::new();
        assert_eq!(until_cancelled(&token, async { Ok::<_, TransportError>(7) }).await, Ok(7));
        let failed = until_cancelled(&token, async { Err::<u8, _>(TransportError::other("no")) }).await;
        assert_eq!(failed, Err(TransportError::other("no")));
    }

    #[tokio::test]
    async fn a_token_already_cancelled_wins_over_a_call_that_is_ready() {
        let token = CancellationToken::new();
        token.cancel();
        let ended = until_cancelled(&token, async { Ok::<_, TransportError>(7) }).await;
        assert_eq!(ended, Err(TransportError::cancelled()));
    }

    #[tokio::test]
    async fn a_cancellation_while_the_call_waits_ends_it_and_drops_the_call() {
        let token = CancellationToken::new();
        let dropped = Arc::new(AtomicBool::new(false));
        let guard = Dropped(Arc::clone(&dropped));
        let call = async move {
            let _guard = guard;
            std::future::pending::<Result<u8, TransportError>>().await
        };
        let canceller = token.clone();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            canceller.cancel();
        });
        assert_eq!(until_cancelled(&token, call).await, Err(TransportError::cancelled()));
        assert!(dropped.load(Ordering::SeqCst), "the call is dropped with the race");
    }

    #[test]
    fn the_race_keeps_its_call_once() {
        let token = CancellationToken::new();
        let call = async {
            let kept = [0_u8; 1024];
            tokio::task::yield_now().await;
            Ok::<_, TransportError>(kept.len())
        };
        let call_size = size_of_val(&call);
        let waiter_size = size_of_val(&token.cancelled());
        let raced = until_cancelled(&token, call);
        // The call and the cancellation's waiter, side by side: never a second copy of the call.
        assert!(size_of_val(&raced) <= call_size + waiter_size + 8, "{} bytes", size_of_val(&raced));
        drop(raced);
    }
}
