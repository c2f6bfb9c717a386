//! The one clock of the load server and of its clients: `CLOCK_MONOTONIC` in nanoseconds.
//!
//! # Invariants
//!
//! - Every process on the machine reads the same clock, so a time stamped by the server and one
//!   stamped by a client (Rust or Python's `time.clock_gettime_ns(time.CLOCK_MONOTONIC)`) can be
//!   subtracted: that is how a client measures the time from a run's start to the arrival of its
//!   first request.
//! - It never goes backwards and does not jump with the wall clock.

use nix::time::{ClockId, clock_gettime};

/// Now, in nanoseconds of `CLOCK_MONOTONIC`.
///
/// # Panics
///
/// If `CLOCK_MONOTONIC` cannot be read, which POSIX and Linux rule out.
#[must_use]
pub fn monotonic_ns() -> u64 {
    let now = clock_gettime(ClockId::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC is always readable");
    let seconds = u64::try_from(now.tv_sec()).unwrap_or(0);
    let nanos = u64::try_from(now.tv_nsec()).unwrap_or(0);
    seconds.saturating_mul(1_000_000_000).saturating_add(nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_advances_with_a_sleep_and_never_backwards() {
        let before = monotonic_ns();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let after = monotonic_ns();
        assert!(after >= before + 5_000_000, "{before} then {after}");
    }
}
