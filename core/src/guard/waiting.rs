//! How long a run waits on its store: the one bound every store call of a run goes through (a
//! journal's acquisition, commit and cancel check; a pool's reservation, settlement and
//! release), so that the deadline and the caller's cancellation hold whatever the store does.
//!
//! # Invariants
//!
//! - A store call returns, or is given up, no later than [`STORE_GRACE`] after the run's stop
//!   instant: the deadline, or the moment the caller's cancellation was first seen here,
//!   whichever comes first. A store that stops answering (a frozen server, a file whose write
//!   lock another process holds) cannot keep the run past that.
//! - The grace lets a call already in flight when the stop comes finish on a healthy store
//!   (its write then holds), and bounds it on a stuck one. A call that starts after the stop
//!   gets what is left of the same grace, never a new one: a run's store calls all end by one
//!   instant.
//! - A halt does not cut a store call: a halted run still records how it ended, within its
//!   deadline.
//! - A call that is given up is dropped where it stands: whether a write it carried was
//!   committed is unknown, and its caller must treat it so (the journal reports the end
//!   [`Unconfirmed`](crate::EndRecord::Unconfirmed); a pool's hold is charged whole once its
//!   lease expires).
//! - A call that is ready at once costs no timer.

use std::time::Duration;
#[cfg(any(feature = "journal", feature = "pools"))]
use std::{
    future::{Future, poll_fn},
    pin::pin,
    task::Poll,
};

#[cfg(any(feature = "journal", feature = "pools"))]
use tokio::time::Instant;

#[cfg(any(feature = "journal", feature = "pools"))]
use super::{Activity, Guard, Stop};

/// How long a store call may go on once the run's deadline has passed or its caller cancelled:
/// 80 ms. A healthy store finishes a commit well within it; a stuck one is given up at its end,
/// so an attempt returns within about this long of its deadline whatever its store does.
pub const STORE_GRACE: Duration = Duration::from_millis(80);

/// A run has a store only with the journal or the pools.
#[cfg(any(feature = "journal", feature = "pools"))]
impl Guard {
    /// Waits for `future`, a store call, until the run's stop instant plus [`STORE_GRACE`]
    /// (see the module's invariants). Given up, it is dropped and the run's stop is returned:
    /// the caller's cancellation, else the deadline (recorded as the run's halt unless another
    /// stop came first), else the halt in force.
    pub(crate) async fn on_store<F: Future>(&self, future: F) -> Result<F::Output, Stop> {
        let mut future = pin!(future);
        if let Poll::Ready(output) = poll_fn(|cx| Poll::Ready(future.as_mut().poll(cx))).await {
            return Ok(output);
        }
        if !self.caller_view.is_cancelled() && Instant::now() < self.deadline {
            tokio::select! {
                biased;
                () = self.caller_view.cancelled() => {}
                () = tokio::time::sleep_until(self.deadline) => {}
                output = &mut future => return Ok(output),
            }
        }
        match tokio::time::timeout_at(self.store_limit(), future).await {
            Ok(output) => Ok(output),
            Err(_) => Err(self.expire(Activity::Store)),
        }
    }

    /// The instant every store call of the run ends by: the stop instant plus the grace.
    fn store_limit(&self) -> Instant {
        let stopped = if self.caller_view.is_cancelled() {
            *self.cancel_seen.lock().get_or_insert_with(Instant::now)
        } else {
            self.deadline
        };
        stopped.min(self.deadline) + STORE_GRACE
    }
}
