//! The heartbeat: while a model call or a tool's body runs, the attempt renews its lease, so a
//! long body does not lose its run, and an attempt that cannot renew stops.
//!
//! # Invariants
//!
//! - The lease is renewed every third of its duration ([`Journal::lease`]) while the work runs;
//!   the work is polled first, so work that is ready never waits for a renewal.
//! - A renewal refused with `LeaseLost` (another attempt took the run, or the lease expired while
//!   this process was paused) drops the work at once and returns the error: the attempt runs
//!   nothing further. A renewal that fails otherwise (the storage is briefly unavailable) is
//!   retried at the next tick, until the lease would have expired by the local clock (counted
//!   from when the last successful renewal or commit started, so never later than the storage's
//!   own expiry); then the work is dropped as lost.
//! - A process that is paused (SIGSTOP, a long pause of its machine) renews nothing: its lease
//!   expires, and when it resumes, its next renewal or commit is `LeaseLost`.

use std::future::Future;
use std::pin::pin;
use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior};

use super::error::JournalError;
use super::id::RunId;
use super::store::Journal;

/// The shortest time between two renewals.
const MIN_PERIOD: Duration = Duration::from_millis(10);

/// Runs `work` while renewing the lease of `run`'s attempt `epoch`; `renewed` is when the last
/// successful renewal or commit started, and is kept up to date.
pub(crate) async fn beating<J: Journal, F: Future>(
    journal: &J,
    run: &RunId,
    epoch: u64,
    renewed: &mut Instant,
    work: F,
) -> Result<F::Output, JournalError> {
    let lease = journal.lease();
    let period = (lease / 3).max(MIN_PERIOD);
    let mut work = pin!(work);
    let mut ticks = tokio::time::interval_at(Instant::now() + period, period);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            output = &mut work => return Ok(output),
            _ = ticks.tick() => {
                let started = Instant::now();
                match journal.renew(run, epoch).await {
                    Ok(()) => *renewed = started,
                    Err(JournalError::LeaseLost) => return Err(JournalError::LeaseLost),
                    Err(_) if Instant::now() >= *renewed + lease => return Err(JournalError::LeaseLost),
                    Err(_) => {}
                }
            }
        }
    }
}
