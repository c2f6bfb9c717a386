//! This process's resources: CPU time so far (user and system) from `getrusage`; resident
//! memory is read by [`crate::timing::rss_kib`] and [`crate::timing::peak_rss_mib`].
//!
//! # Invariants
//!
//! - CPU time counts every thread of the process (`RUSAGE_SELF`), the runtime's workers and its
//!   blocking pool included.

use std::time::Duration;

use nix::sys::resource::{UsageWho, getrusage};
use nix::sys::time::TimeValLike;

/// User plus system CPU time of the whole process so far; zero if `getrusage` fails.
#[must_use]
pub fn cpu_time() -> Duration {
    getrusage(UsageWho::RUSAGE_SELF).map_or(Duration::ZERO, |usage| {
        let micros = usage.user_time().num_microseconds() + usage.system_time().num_microseconds();
        Duration::from_micros(u64::try_from(micros).unwrap_or(0))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_grows_with_work() {
        // Work until the process's CPU time has grown by 20 ms: on a busy machine that takes
        // longer by the wall clock, never forever (the cap is only there to end a broken count).
        let before = cpu_time();
        let mut x = 0_u64;
        let cap = std::time::Instant::now() + Duration::from_mins(1);
        while cpu_time() < before + Duration::from_millis(20) && std::time::Instant::now() < cap {
            for _ in 0..10_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
        assert!(cpu_time() >= before + Duration::from_millis(20), "{x}");
        assert!(x > 0);
    }
}
