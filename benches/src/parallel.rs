//! Admissions from several threads: all on one shared scope (contention on its lock), or spread
//! over many independent scopes (scaling with cores).
//!
//! # Invariants
//!
//! - Tools are built before the threads start, and scopes before the barrier: the shared scope
//!   by the main thread, independent scopes by the thread that uses them (as each request's task
//!   makes its own scope in a service, so neighbouring allocations belong to one thread). Every
//!   thread waits at one barrier and times itself from there, so neither thread start-up nor
//!   scope construction is measured.
//! - The reported time is the slowest thread's: the wall time until every admission is done.
//! - Every call is counted as admitted or not; a measurement whose calls were refused says so
//!   instead of reporting a time for refusals.

use std::hint::black_box;
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use crate::fixtures::{Fixture, admit};

/// What a parallel measurement saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parallel {
    /// Wall time from the common start to the last thread's end.
    pub wall: Duration,
    /// Calls admitted, over all threads.
    pub admitted: u64,
    /// Calls made, over all threads.
    pub calls: u64,
}

impl Parallel {
    /// Whether every call was admitted.
    #[must_use]
    pub fn all_admitted(&self) -> bool {
        self.admitted == self.calls
    }
}

/// `threads` threads each admit `per_thread` calls of `read_ticket(42)` on one shared scope
/// with room for all of them.
#[must_use]
pub fn shared_scope(threads: usize, per_thread: u32) -> Parallel {
    let room = u32::try_from(threads).unwrap_or(u32::MAX).saturating_mul(per_thread);
    let fixture = Fixture::roomy(room);
    let barrier = Barrier::new(threads);
    let results: Vec<(Duration, u64)> = thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    let start = Instant::now();
                    let mut admitted = 0;
                    for _ in 0..per_thread {
                        admitted += u64::from(black_box(admit(fixture.read_ticket())).is_ok());
                    }
                    (start.elapsed(), admitted)
                })
            })
            .collect();
        workers.into_iter().filter_map(|worker| worker.join().ok()).collect()
    });
    collect(&results, threads as u64 * u64::from(per_thread))
}

/// `threads` threads admit `per_scope` calls on each of `scopes` independent scopes: thread `t`
/// makes scopes `t`, `t + threads`, … itself, then calls them round-robin, one call per scope per
/// round, as concurrent requests would.
#[must_use]
pub fn independent_scopes(threads: usize, scopes: usize, per_scope: u32) -> Parallel {
    spread(threads, scopes, per_scope, || Fixture::roomy(per_scope))
}

/// As [`independent_scopes`], with scopes whose caller's token is one token shared by every
/// scope (`shared`) or a token of each scope's own: what one cancellation token handed to every
/// request of a service costs the admissions.
#[must_use]
pub fn caller_tokens(threads: usize, scopes: usize, per_scope: u32, shared: bool) -> Parallel {
    let common = tokio_util::sync::CancellationToken::new();
    spread(threads, scopes, per_scope, || {
        let token = if shared { common.clone() } else { tokio_util::sync::CancellationToken::new() };
        Fixture::roomy_with_caller(per_scope, token)
    })
}

/// The scopes made by `make`, spread over `threads` threads that make their own, then admit
/// `per_scope` calls on each, round-robin.
fn spread(threads: usize, scopes: usize, per_scope: u32, make: impl Fn() -> Fixture + Sync) -> Parallel {
    let barrier = Barrier::new(threads);
    let results: Vec<(Duration, u64)> = thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|first| {
                let (barrier, make) = (&barrier, &make);
                s.spawn(move || {
                    // Each thread makes the scopes of its own requests, as a service's tasks do.
                    let mine: Vec<Fixture> = (first..scopes).step_by(threads).map(|_| make()).collect();
                    barrier.wait();
                    let start = Instant::now();
                    let mut admitted = 0;
                    for _ in 0..per_scope {
                        for fixture in &mine {
                            admitted += u64::from(black_box(admit(fixture.read_ticket())).is_ok());
                        }
                    }
                    (start.elapsed(), admitted)
                })
            })
            .collect();
        workers.into_iter().filter_map(|worker| worker.join().ok()).collect()
    });
    collect(&results, scopes as u64 * u64::from(per_scope))
}

/// Scopes per round of [`request_rounds`].
pub const ROUND_SCOPES: usize = 1000;
/// Admissions per scope in [`request_rounds`]: the default tool budget.
pub const CALLS_PER_SCOPE: u32 = 4;

/// Rounds of [`independent_scopes`] over [`ROUND_SCOPES`] fresh scopes with room for
/// [`CALLS_PER_SCOPE`] calls each, as many concurrent requests would be, until at least `calls`
/// calls were made. Scopes are built before each round, outside the timed region; the walls of
/// the rounds add up.
#[must_use]
pub fn request_rounds(threads: usize, calls: u64) -> Parallel {
    let per_round = ROUND_SCOPES as u64 * u64::from(CALLS_PER_SCOPE);
    let mut total = Parallel { wall: Duration::ZERO, admitted: 0, calls: 0 };
    for _ in 0..calls.div_ceil(per_round).max(1) {
        let round = independent_scopes(threads, ROUND_SCOPES, CALLS_PER_SCOPE);
        total = Parallel {
            wall: total.wall + round.wall,
            admitted: total.admitted + round.admitted,
            calls: total.calls + round.calls,
        };
    }
    total
}

fn collect(results: &[(Duration, u64)], calls: u64) -> Parallel {
    Parallel {
        wall: results.iter().map(|(elapsed, _)| *elapsed).max().unwrap_or_default(),
        admitted: results.iter().map(|(_, admitted)| admitted).sum(),
        calls,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_threads_on_one_scope_get_every_call_admitted_and_no_more() {
        let seen = shared_scope(2, 500);
        assert_eq!((seen.admitted, seen.calls), (1000, 1000));
        assert!(seen.all_admitted());
    }

    #[test]
    fn request_rounds_make_whole_rounds_of_fresh_scopes() {
        let seen = request_rounds(2, 4001);
        assert_eq!((seen.admitted, seen.calls), (8000, 8000));
    }

    #[test]
    fn independent_scopes_admit_each_call_once() {
        let seen = independent_scopes(2, 10, 3);
        assert_eq!((seen.admitted, seen.calls), (30, 30));
    }
}
