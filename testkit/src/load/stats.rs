//! What the load server measures, per run, from its side of the wire; and the JSON shapes it
//! reports them in (`GET /__load/stats`, `GET /__load/runs`), which clients read back.
//!
//! The figure that matters is the client's **added latency per model call**: for the k-th
//! request of a run (k ≥ 1), the time from the end of the server's reply to request k−1 to the
//! arrival of the first byte of request k. The review's tools are instant, so that time is
//! what the client's framework spent between two model calls (parsing the reply, running the
//! tools, building and sending the next request), plus the loopback's own microseconds.
//!
//! # Invariants
//!
//! - A gap is recorded only when request k of a run follows the end of reply k−1 of the same
//!   run; a request that follows nothing recorded is counted as `unmatched`, never guessed.
//! - Memory is bounded: at most [`MAX_RUNS`] runs are followed and [`MAX_GAPS`] gaps kept;
//!   past either, requests are counted as `untracked` and nothing more is kept.
//! - Percentiles are nearest-rank over every kept sample.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};

/// The most runs followed at once.
pub const MAX_RUNS: usize = 1 << 20;
/// The most gaps kept.
pub const MAX_GAPS: usize = 1 << 22;

/// p50, p99 and max of a list of durations, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// How many samples.
    pub count: u64,
    /// The median (nearest-rank).
    pub p50_us: f64,
    /// The 99th percentile (nearest-rank).
    pub p99_us: f64,
    /// The largest.
    pub max_us: f64,
    /// The mean.
    pub mean_us: f64,
}

impl Summary {
    /// The summary of `samples`, in nanoseconds (sorted in place); all zero when empty.
    #[must_use]
    #[allow(clippy::cast_precision_loss, reason = "nanosecond sums stay far below 2^52 here")]
    pub fn of_ns(samples: &mut [u64]) -> Self {
        if samples.is_empty() {
            return Self::default();
        }
        samples.sort_unstable();
        let rank = |per_mille: usize| samples[(samples.len() * per_mille).div_ceil(1000).max(1) - 1];
        let us = |ns: u64| ns as f64 / 1000.0;
        let sum: u128 = samples.iter().map(|&ns| u128::from(ns)).sum();
        Self {
            count: samples.len() as u64,
            p50_us: us(rank(500)),
            p99_us: us(rank(990)),
            max_us: us(samples[samples.len() - 1]),
            mean_us: sum as f64 / samples.len() as f64 / 1000.0,
        }
    }
}

/// The server's figures since the last reset (`GET /__load/stats`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Chat-completions requests received.
    pub requests: u64,
    /// Replies whose last byte was handed to the connection.
    pub replies: u64,
    /// Requests refused as unanswerable (or in the wrong mode).
    pub bad_requests: u64,
    /// Distinct runs seen.
    pub runs: u64,
    /// Requests whose newest tool result was not the previous step's tool text.
    pub feedback_mismatches: u64,
    /// Requests with tool results that followed no recorded reply of their run.
    pub unmatched: u64,
    /// Requests carrying no run id, or beyond the bounds of what is kept.
    pub untracked: u64,
    /// Requests received whose reply has not ended yet.
    pub in_flight: u64,
    /// The most requests in flight at once.
    pub peak_in_flight: u64,
    /// First requests of runs waiting for the hold to be released.
    pub held: u64,
    /// How much longer than the latency every first call waited because of the hold, in ms.
    pub hold_extra_ms: f64,
    /// Connections accepted.
    pub connections: u64,
    /// Connections open now.
    pub open_connections: u64,
    /// The most connections open at once.
    pub peak_open_connections: u64,
    /// The client's added latency per model call: end of reply k−1 to first byte of request k.
    pub gaps: Summary,
}

/// What the server knows of one run (`GET /__load/runs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunFigures {
    /// When the first byte of its first request arrived (`CLOCK_MONOTONIC`, ns).
    pub first_arrival_ns: u64,
    /// Its requests.
    pub requests: u32,
    /// Its replies that ended.
    pub replies: u32,
}

/// Every followed run, by run id (`GET /__load/runs`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Runs {
    /// The runs, by id.
    pub runs: HashMap<String, RunFigures>,
}

#[derive(Debug, Default)]
struct Track {
    figures: Option<RunFigures>,
    /// When the last ended reply ended.
    last_end_ns: u64,
}

#[derive(Debug, Default)]
struct State {
    runs: HashMap<Box<str>, Track>,
    gaps_ns: Vec<u64>,
    unmatched: u64,
    untracked: u64,
    mismatches: u64,
}

/// The per-run bookkeeping, behind one lock held for a few hash-map operations per request.
#[derive(Debug, Default)]
pub struct Tracker {
    state: Mutex<State>,
}

impl Tracker {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A request of `run` carrying `tool_results` tool results, whose first byte arrived at
    /// `first_byte_ns`.
    pub fn request(&self, run: Option<&str>, tool_results: u32, feedback_ok: bool, first_byte_ns: u64) {
        let mut state = self.state();
        if !feedback_ok {
            state.mismatches += 1;
        }
        let Some(run) = run else {
            state.untracked += 1;
            return;
        };
        if !state.runs.contains_key(run) && state.runs.len() >= MAX_RUNS {
            state.untracked += 1;
            return;
        }
        let state = &mut *state;
        let track = state.runs.entry(Box::from(run)).or_default();
        let figures = track.figures.get_or_insert(RunFigures {
            first_arrival_ns: first_byte_ns,
            requests: 0,
            replies: 0,
        });
        if tool_results == 0 && figures.requests > 0 {
            // The id is used again for a new run: follow the new one.
            *figures = RunFigures { first_arrival_ns: first_byte_ns, requests: 0, replies: 0 };
        }
        figures.requests = figures.requests.saturating_add(1);
        if tool_results == 0 {
            return;
        }
        if figures.replies != tool_results {
            state.unmatched += 1;
        } else if state.gaps_ns.len() < MAX_GAPS {
            state.gaps_ns.push(first_byte_ns.saturating_sub(track.last_end_ns));
        } else {
            state.untracked += 1;
        }
    }

    /// The reply to the request of `run` that carried `tool_results` tool results ended at
    /// `end_ns`.
    pub fn reply_ended(&self, run: &str, tool_results: u32, end_ns: u64) {
        let mut state = self.state();
        let Some(track) = state.runs.get_mut(run) else { return };
        let Some(figures) = track.figures.as_mut() else { return };
        if figures.replies == tool_results {
            figures.replies += 1;
            track.last_end_ns = end_ns;
        }
    }

    /// Forgets everything.
    pub fn reset(&self) {
        *self.state() = State::default();
    }

    /// The figures of every run followed.
    #[must_use]
    pub fn runs(&self) -> Runs {
        let state = self.state();
        let runs = state
            .runs
            .iter()
            .filter_map(|(id, track)| track.figures.map(|figures| (id.to_string(), figures)))
            .collect();
        Runs { runs }
    }

    /// Fills the tracked part of `snapshot`.
    pub fn fill(&self, snapshot: &mut Snapshot) {
        let mut gaps = {
            let state = self.state();
            snapshot.runs = state.runs.len() as u64;
            snapshot.unmatched = state.unmatched;
            snapshot.untracked = state.untracked;
            snapshot.feedback_mismatches = state.mismatches;
            state.gaps_ns.clone()
        };
        snapshot.gaps = Summary::of_ns(&mut gaps);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(tracker: &Tracker) -> Snapshot {
        let mut snapshot = Snapshot::default();
        tracker.fill(&mut snapshot);
        snapshot
    }

    #[test]
    fn a_gap_runs_from_the_end_of_a_reply_to_the_next_requests_first_byte() {
        let tracker = Tracker::default();
        tracker.request(Some("a"), 0, true, 1_000);
        tracker.reply_ended("a", 0, 5_000);
        tracker.request(Some("a"), 1, true, 7_000);
        tracker.reply_ended("a", 1, 9_000);
        tracker.request(Some("a"), 2, true, 13_000);
        tracker.reply_ended("a", 2, 14_000);
        let figures = snapshot(&tracker);
        assert_eq!((figures.runs, figures.unmatched, figures.untracked), (1, 0, 0));
        assert_eq!(figures.gaps.count, 2);
        assert!((figures.gaps.p50_us - 2.0).abs() < 1e-9, "{:?}", figures.gaps);
        assert!((figures.gaps.max_us - 4.0).abs() < 1e-9, "{:?}", figures.gaps);
        let runs = tracker.runs();
        assert_eq!(runs.runs["a"], RunFigures { first_arrival_ns: 1_000, requests: 3, replies: 3 });
    }

    #[test]
    fn a_request_that_follows_no_ended_reply_is_unmatched_not_guessed() {
        let tracker = Tracker::default();
        tracker.request(Some("b"), 1, true, 7_000);
        tracker.request(Some("c"), 0, true, 1_000);
        tracker.request(Some("c"), 1, true, 2_000);
        tracker.request(None, 0, false, 3_000);
        let figures = snapshot(&tracker);
        assert_eq!((figures.gaps.count, figures.unmatched, figures.untracked), (0, 2, 1));
        assert_eq!(figures.feedback_mismatches, 1);
        tracker.reset();
        assert_eq!(snapshot(&tracker), Snapshot::default());
    }

    #[test]
    fn a_reused_run_id_starts_a_new_run() {
        let tracker = Tracker::default();
        tracker.request(Some("d"), 0, true, 1_000);
        tracker.reply_ended("d", 0, 2_000);
        tracker.request(Some("d"), 0, true, 9_000);
        assert_eq!(tracker.runs().runs["d"], RunFigures { first_arrival_ns: 9_000, requests: 1, replies: 0 });
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut samples: Vec<u64> = (1..=1000).rev().map(|us| us * 1000).collect();
        let summary = Summary::of_ns(&mut samples);
        assert_eq!(summary.count, 1000);
        assert!((summary.p50_us - 500.0).abs() < 1e-9);
        assert!((summary.p99_us - 990.0).abs() < 1e-9);
        assert!((summary.max_us - 1000.0).abs() < 1e-9);
        assert!((summary.mean_us - 500.5).abs() < 1e-9);
        assert_eq!(Summary::of_ns(&mut []), Summary::default());
    }
}
