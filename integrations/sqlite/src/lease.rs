//! The leases' clock: the system's, in microseconds since the Unix epoch, which every process on
//! the machine shares.
//!
//! # Invariants
//!
//! - A lease is live while its expiry is later than now; an expired lease is taken over by the
//!   next acquisition, whoever held it.
//! - Times out of range (a clock before 1970, an expiry beyond `i64` microseconds) are typed
//!   errors or clamp to the range, never a panic.

use std::time::{Duration, SystemTime};

use loopbound::journal::{JournalError, Lease};

/// Now, in microseconds since the Unix epoch.
pub(crate) fn now_micros() -> Result<i64, JournalError> {
    let since = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_err(|_| JournalError::storage("the system clock is before 1970"))?;
    i64::try_from(since.as_micros()).map_err(|_| JournalError::storage("the system clock is out of range"))
}

/// A lease duration in microseconds, at least one.
pub(crate) fn micros(duration: Duration) -> i64 {
    i64::try_from(duration.as_micros()).unwrap_or(i64::MAX).max(1)
}

/// The stored lease `(holder, until)` as of `now`.
pub(crate) fn lease(
    holder: Option<String>,
    until: Option<i64>,
    now: i64,
) -> Result<Option<Lease>, JournalError> {
    match (holder, until) {
        (None, None) => Ok(None),
        (Some(holder), Some(until)) => {
            let at = SystemTime::UNIX_EPOCH
                .checked_add(Duration::from_micros(until.max(0).unsigned_abs()))
                .ok_or_else(|| JournalError::Corrupt("the lease's expiry out of range".into()))?;
            let remaining = Duration::from_micros(until.saturating_sub(now).max(0).unsigned_abs());
            Ok(Some(Lease { holder, until: at, remaining }))
        }
        _ => Err(JournalError::Corrupt("a lease with a holder and no expiry, or the reverse".into())),
    }
}
