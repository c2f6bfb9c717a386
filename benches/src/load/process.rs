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
        let before = cpu_time();
        let mut x = 0_u64;
        let spin = std::time::Instant::now();
        while spin.elapsed() < Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(cpu_time() >= before + Duration::from_millis(20), "{x}");
    }
}
