//! The heartbeat: while a model call or a tool's body runs, the attempt renews its lease, so a
//! long body does not lose its run, and an attempt that cannot renew stops.
//!
//! # Invariants
//!
//! - The lease is renewed every third of its duration ([`Journal::lease`]) while the work runs.
//!   A renewal runs **beside** the work: the work (and, inside it, the deadline and the caller's
//!   cancellation) is polled first on every wake-up, whether or not a renewal is in flight, so a
//!   store that stops answering never holds the work up. One renewal is in flight at a time;
//!   when the work ends, a renewal still in flight is dropped.
//! - A renewal refused with `LeaseLost` (another attempt took the run, or the lease expired while
//!   this process was paused) drops the work at once and returns the error: the attempt runs
//!   nothing further. A renewal that fails otherwise (the storage is briefly unavailable) is
//!   retried at the next tick.
//! - Once the lease would have expired by the local clock (counted from when the last
//!   successful renewal or commit started, so never later than the storage's own expiry)
//!   without a renewal confirmed, the work is dropped as lost: a renewal that hangs cannot keep
//!   the work running past its lease.
//! - A process that is paused (SIGSTOP, a long pause of its machine) renews nothing: its lease
//!   expires, and when it resumes, its next renewal or commit is `LeaseLost`.

use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::task::Poll;
use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior};

use super::bound::Store;
use super::error::JournalError;
use super::id::RunId;
use super::store::Journal;

/// The shortest time between two renewals.
const MIN_PERIOD: Duration = Duration::from_millis(10);

/// A renewal in flight.
type Renewal<'j> = Pin<Box<dyn Future<Output = Result<(), JournalError>> + Send + 'j>>;

/// What woke the heartbeat.
enum Beat<T> {
    /// The work is done.
    Done(T),
    /// The renewal that started at this instant answered.
    Renewed(Instant, Result<(), JournalError>),
    /// The lease would have expired by the local clock.
    Expired,
    /// Time for a renewal.
    Tick,
}

/// Runs `work` while renewing the lease of `run`'s attempt `epoch`; `renewed` is when the last
/// successful renewal or commit started, and is kept up to date.
pub(crate) async fn beating<J: Journal, F: Future>(
    store: &Store<'_, J>,
    run: &RunId,
    epoch: u64,
    renewed: &mut Instant,
    work: F,
) -> Result<F::Output, JournalError> {
    let lease = store.lease();
    let period = (lease / 3).max(MIN_PERIOD);
    let mut work = pin!(work);
    let mut ticks = tokio::time::interval_at(Instant::now() + period, period);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut expiry = pin!(tokio::time::sleep_until(*renewed + lease));
    // Boxed: one renewal every third of a lease, and the work's future stays as small as it was.
    let mut renewal: Option<(Instant, Renewal<'_>)> = None;
    loop {
        let beat = poll_fn(|cx| {
            if let Poll::Ready(output) = work.as_mut().poll(cx) {
                return Poll::Ready(Beat::Done(output));
            }
            if let Some((started, renewing)) = &mut renewal
                && let Poll::Ready(result) = renewing.as_mut().poll(cx)
            {
                return Poll::Ready(Beat::Renewed(*started, result));
            }
            if expiry.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Beat::Expired);
            }
            if renewal.is_none() && ticks.poll_tick(cx).is_ready() {
                return Poll::Ready(Beat::Tick);
            }
            Poll::Pending
        })
        .await;
        match beat {
            Beat::Done(output) => return Ok(output),
            Beat::Renewed(started, result) => {
                renewal = None;
                match result {
                    Ok(()) => {
                        *renewed = started;
                        expiry.as_mut().reset(started + lease);
                    }
                    Err(JournalError::LeaseLost) => return Err(JournalError::LeaseLost),
                    Err(_) => {}
                }
            }
            Beat::Expired => return Err(JournalError::LeaseLost),
            Beat::Tick => renewal = Some((Instant::now(), Box::pin(store.renewal(run, epoch)))),
        }
    }
}
