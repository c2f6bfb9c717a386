//! Timing methods: the peers' per-run method, and batch medians for nanosecond operations.
//!
//! # Invariants
//!
//! - [`Summary`] follows the peers' `common.py`: the median is Python's `statistics.median`
//!   (the mean of the two middle samples for an even count) and p99 is the nearest rank,
//!   `sorted[ceil(0.99 n) - 1]`.
//! - Setup and the drop of what an operation returns happen outside the timed region; the
//!   operations' results go through [`black_box`].
//! - Reported per-operation times are medians over samples, never means: a shared machine only
//!   ever adds time, and the median ignores the samples it hit.

use std::future::Future;
use std::hint::black_box;
use std::time::{Duration, Instant};

use serde::Serialize;

/// The peers' summary of timed runs, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// Timed runs.
    pub runs: usize,
    /// Median run time.
    pub median_us: f64,
    /// Mean run time.
    pub mean_us: f64,
    /// Nearest-rank 99th percentile.
    pub p99_us: f64,
    /// Fastest run.
    pub min_us: f64,
    /// Slowest run.
    pub max_us: f64,
}

impl Summary {
    /// Summarises run times given in nanoseconds; `None` for no sample.
    #[must_use]
    pub fn of_nanos(samples: &[u64]) -> Option<Self> {
        let mut sorted = samples.to_vec();
        sorted.sort_unstable();
        let n = sorted.len();
        let (first, last) = (*sorted.first()?, *sorted.last()?);
        let micros = |nanos: u64| nanos as f64 / 1000.0;
        // Nearest rank: the smallest sample with at least 99% of the samples at or below it.
        let rank = (99 * n).div_ceil(100).max(1);
        let total: u128 = sorted.iter().map(|&nanos| u128::from(nanos)).sum();
        Some(Self {
            runs: n,
            median_us: median(&sorted) / 1000.0,
            mean_us: total as f64 / n as f64 / 1000.0,
            p99_us: micros(sorted[rank - 1]),
            min_us: micros(first),
            max_us: micros(last),
        })
    }
}

/// The median of sorted samples, as Python's `statistics.median`.
fn median(sorted: &[u64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2] as f64
    } else {
        f64::midpoint(sorted[n / 2 - 1] as f64, sorted[n / 2] as f64)
    }
}

/// The median of `values` (any order); `NaN` for none.
#[must_use]
pub fn median_of(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => f64::midpoint(sorted[n / 2 - 1], sorted[n / 2]),
    }
}

/// Times `run` the peers' way: `warmup` runs, then `runs` timed runs, each a single `.await`
/// inside one `block_on`. Before each run, `prepare` makes its input outside the timed region
/// (return `()` to time the whole request). Every result is checked by `check` outside the timed
/// region; the first failure ends the measurement.
///
/// # Errors
///
/// The first error of `prepare`, `run` or `check`.
pub fn time_runs<S, F, Fut, T, E>(
    runtime: &tokio::runtime::Runtime,
    (warmup, runs): (usize, usize),
    mut prepare: impl FnMut() -> Result<S, E>,
    mut run: F,
    check: impl Fn(&T) -> Result<(), E>,
) -> Result<Vec<u64>, E>
where
    F: FnMut(S) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    runtime.block_on(async {
        for _ in 0..warmup {
            check(&run(prepare()?).await?)?;
        }
        let mut samples = Vec::with_capacity(runs);
        for _ in 0..runs {
            let input = prepare()?;
            let start = Instant::now();
            let output = run(input).await;
            let elapsed = start.elapsed();
            check(&output?)?;
            samples.push(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX));
        }
        Ok(samples)
    })
}

/// Times `calls` calls of `op` and returns the time spent in them only.
///
/// Inputs are made by `setup` in groups of `inputs` before each group is timed, and each input
/// serves `calls_per_input` consecutive calls (`setup` is told how many, so a scope can be
/// given room for exactly those). What `op` returns is kept until the group's timer has
/// stopped, then dropped with the inputs. This is the shape of criterion's `iter_custom`.
pub fn timed<S, T>(
    calls: u64,
    (inputs, calls_per_input): (usize, u64),
    mut setup: impl FnMut(u64) -> S,
    mut op: impl FnMut(&S) -> T,
) -> Duration {
    let calls_per_input = calls_per_input.max(1);
    let mut outputs = Vec::new();
    let mut total = Duration::ZERO;
    let mut left = calls;
    while left > 0 {
        let mut group = Vec::with_capacity(inputs);
        let mut planned = 0;
        while group.len() < inputs.max(1) && planned < left {
            let serves = calls_per_input.min(left - planned);
            group.push((setup(serves), serves));
            planned += serves;
        }
        outputs.reserve(usize::try_from(planned).unwrap_or(usize::MAX));
        let start = Instant::now();
        for (input, serves) in &group {
            for _ in 0..*serves {
                outputs.push(op(black_box(input)));
            }
        }
        total += start.elapsed();
        black_box(&outputs);
        outputs.clear();
        drop(group);
        left -= planned;
    }
    total
}

/// Nanoseconds per call of `op`, as the median over `samples` batches of `batch` calls on one
/// input each (made by `setup`, told the batch size, before the batch is timed).
pub fn per_call<S, T>(
    samples: usize,
    batch: u64,
    mut setup: impl FnMut(u64) -> S,
    mut op: impl FnMut(&S) -> T,
) -> f64 {
    let times: Vec<f64> = (0..samples)
        .map(|_| timed(batch, (1, batch), &mut setup, &mut op).as_nanos() as f64 / batch as f64)
        .collect();
    median_of(&times)
}

/// Nanoseconds per call of `op`, as the median over `samples` batches of `batch` calls, each
/// call on its own input (made by `setup` before the batch is timed, dropped after it).
pub fn per_input<S, T>(
    samples: usize,
    batch: usize,
    mut setup: impl FnMut() -> S,
    mut op: impl FnMut(&S) -> T,
) -> f64 {
    let calls = batch as u64;
    let times: Vec<f64> = (0..samples)
        .map(|_| timed(calls, (batch, 1), |_| setup(), &mut op).as_nanos() as f64 / calls as f64)
        .collect();
    median_of(&times)
}

/// Nanoseconds per call of `a` and of `b`, as medians over `samples` batches of `batch` calls
/// each, alternating `a` and `b` batch by batch so that both see the same machine conditions.
pub fn per_call_pair<A, B>(
    samples: usize,
    batch: u64,
    mut a: impl FnMut() -> A,
    mut b: impl FnMut() -> B,
) -> (f64, f64) {
    let mut times = (Vec::with_capacity(samples), Vec::with_capacity(samples));
    for _ in 0..samples {
        times.0.push(per_call(1, batch, |_| (), |()| a()));
        times.1.push(per_call(1, batch, |_| (), |()| b()));
    }
    (median_of(&times.0), median_of(&times.1))
}

/// The process's peak resident set size so far, in MiB: `VmHWM` of `/proc/self/status`, the
/// value `getrusage`'s `ru_maxrss` reports on Linux. `None` where that file does not exist.
#[must_use]
pub fn peak_rss_mib() -> Option<f64> {
    status_kib("VmHWM").map(|kib| kib as f64 / 1024.0)
}

/// The process's resident set size now, in KiB: `VmRSS` of `/proc/self/status`.
#[must_use]
pub fn rss_kib() -> Option<u64> {
    status_kib("VmRSS")
}

/// A field of `/proc/self/status` given in kB, such as `VmRSS` or `VmHWM`.
fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))?;
    line.trim().trim_end_matches("kB").trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_uses_pythons_median_and_the_nearest_rank_p99() {
        let samples: Vec<u64> = (1..=200).map(|i| i * 1000).collect();
        let summary = Summary::of_nanos(&samples).expect("samples");
        assert_eq!(summary.runs, 200);
        assert!((summary.median_us - 100.5).abs() < 1e-9, "{summary:?}");
        // ceil(0.99 * 200) = 198, so the 198th smallest sample.
        assert!((summary.p99_us - 198.0).abs() < 1e-9, "{summary:?}");
        assert!((summary.min_us - 1.0).abs() < 1e-9 && (summary.max_us - 200.0).abs() < 1e-9);
        let odd = Summary::of_nanos(&[3000, 1000, 2000]).expect("samples");
        assert!((odd.median_us - 2.0).abs() < 1e-9 && (odd.p99_us - 3.0).abs() < 1e-9, "{odd:?}");
        assert_eq!(Summary::of_nanos(&[]), None);
    }

    #[test]
    fn median_of_sorts_and_averages_the_middle_pair() {
        assert!((median_of(&[4.0, 1.0, 3.0, 2.0]) - 2.5).abs() < 1e-12);
        assert!(median_of(&[]).is_nan());
    }

    #[test]
    fn timed_makes_one_input_per_group_of_calls_and_runs_each_call_once() {
        let mut served = Vec::new();
        let mut calls = 0;
        let elapsed = timed(
            10,
            (2, 3),
            |serves| {
                served.push(serves);
                serves
            },
            |_| calls += 1,
        );
        assert_eq!(served, [3, 3, 3, 1]);
        assert_eq!(calls, 10);
        assert!(elapsed > Duration::ZERO);
    }

    #[test]
    fn peak_rss_is_read_from_proc_on_linux() {
        let peak = peak_rss_mib().expect("Linux has /proc/self/status");
        assert!(peak > 0.0, "{peak}");
    }
}
