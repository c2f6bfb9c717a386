//! The speed targets, each measured in this one process and printed beside its target as a
//! ratio. Nothing here fails on a slow figure: a missed target is reported as missed.
//!
//! # Invariants
//!
//! - Every figure is a median: over batches for nanosecond operations, over runs for whole runs,
//!   over trials for the parallel measurements.
//! - Figures that are compared (canonical form and `serde_json::to_string`, one thread and two)
//!   are measured alternately, so that both see the same machine conditions.

use std::fmt::Write as _;
use std::hint::black_box;

use loopbound::canonical::{canonical_json, signature};
use loopbound_demos::scenario::Scenario;
use loopbound_testkit::Composition;
use loopbound_testkit::review::TicketInput;

use crate::fixtures::{Check, Fixture, admit};
use crate::parallel::{caller_tokens, request_rounds, shared_scope};
use crate::runs;
use crate::table::micros;
use crate::timing::{median_of, per_call, per_call_pair, per_input};
use crate::values;

/// How many samples each measurement takes.
#[derive(Clone, Copy, Debug)]
pub struct Effort {
    /// Batches per nanosecond measurement (ten times more for fresh-scope measurements).
    pub samples: usize,
    /// Timed whole runs (a tenth more as warm-up).
    pub runs: usize,
    /// Trials of each parallel measurement.
    pub trials: usize,
}

impl Effort {
    /// Enough samples for figures to report.
    pub const FULL: Self = Self { samples: 101, runs: 2000, trials: 21 };
    /// A quick look.
    pub const QUICK: Self = Self { samples: 11, runs: 300, trials: 5 };
}

/// One measured figure beside its target.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    /// What was measured.
    pub what: String,
    /// The measured figure, with its unit.
    pub measured: String,
    /// The target, in words.
    pub target: String,
    /// How far the figure is from the target: above 1 means missed.
    pub ratio: f64,
    /// Whether the target is met.
    pub met: bool,
}

impl Line {
    /// A figure that must stay at or under `target` (same unit).
    #[must_use]
    pub fn at_most(what: impl Into<String>, value: f64, target: f64, unit: &str) -> Self {
        Self {
            what: what.into(),
            measured: format!("{value:.1} {unit}"),
            target: format!("≤ {target} {unit}"),
            ratio: value / target,
            met: value <= target,
        }
    }

    /// A figure that must stay at or above `target`; `ratio` is then target ÷ figure.
    #[must_use]
    pub fn at_least(
        what: impl Into<String>,
        (value, shown): (f64, String),
        target: f64,
        target_shown: &str,
    ) -> Self {
        Self {
            what: what.into(),
            measured: shown,
            target: target_shown.to_owned(),
            ratio: target / value,
            met: value >= target,
        }
    }
}

/// Renders lines as a Markdown table.
#[must_use]
pub fn render(lines: &[Line]) -> String {
    let mut out = String::from("| measure | median | target | ÷ target | |\n|---|---:|---|---:|---|\n");
    for line in lines {
        let verdict = if line.met { "met" } else { "**missed**" };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.2} | {verdict} |",
            line.what, line.measured, line.target, line.ratio
        );
    }
    out
}

fn roomy(calls: u64) -> Fixture {
    Fixture::roomy(u32::try_from(calls).unwrap_or(u32::MAX))
}

/// Admission (≤ 250 ns) and refusal at each check (≤ 150 ns) of `read_ticket({"input":42})`.
#[must_use]
pub fn guard(effort: Effort) -> Vec<Line> {
    let mut lines = Vec::new();
    let steady = per_call(effort.samples, 10_000, roomy, |fixture| admit(fixture.read_ticket()));
    lines.push(Line::at_most(
        "admission of {\"input\":42}, scope with room (bind + signature + reserve)",
        steady,
        250.0,
        "ns",
    ));
    let fresh = effort.samples * 10;
    let first = per_input(fresh, 20, Fixture::default_limits, |fixture| admit(fixture.read_ticket()));
    lines.push(Line::at_most("admission, first call of a fresh default scope", first, 250.0, "ns"));
    let typed = per_call(effort.samples, 10_000, roomy, |fixture| {
        fixture.read_ticket().reserve(TicketInput { input: 42 }).map(|reservation| reservation.tool_count())
    });
    lines.push(Line::at_most(
        "reservation of a typed input (signature + reserve, no bind)",
        typed,
        250.0,
        "ns",
    ));
    let budgeted = per_call(
        effort.samples,
        10_000,
        |calls| Fixture::roomy_with_budgets(u32::try_from(calls).unwrap_or(u32::MAX)),
        |fixture| admit(fixture.read_ticket()),
    );
    lines.push(Line::at_most(
        "admission of {\"input\":42} under a token and a cost budget with prices",
        budgeted,
        250.0,
        "ns",
    ));
    for check in Check::ALL {
        let (what, time) = if check == Check::Halted {
            let time =
                per_call(effort.samples, 10_000, |_| check.arm(), |fixture| admit(fixture.read_ticket()));
            ("refusal after a halt (sticky: the cancellation check)".to_owned(), time)
        } else {
            let time = per_input(fresh, 20, || check.arm(), |fixture| admit(fixture.read_ticket()));
            (format!("refusal at the {} check (records the halt)", check.name()), time)
        };
        lines.push(Line::at_most(what, time, 150.0, "ns"));
    }
    lines
}

/// A model call's reservation (count the request, reserve, settle) when the conversation is
/// 1 KB against 1 MB, one new message a call: the count is incremental, so the two cost the
/// same (≤ 1.5×).
#[must_use]
pub fn reservation(effort: Effort) -> Vec<Line> {
    let (small, large) = crate::spend::reservation_pair(effort.samples, 2_000);
    vec![Line {
        what: format!(
            "model call reserved and settled, 1 MB conversation vs 1 KB, one new message a call: {large:.0} ns vs {small:.0} ns"
        ),
        measured: format!("{:.2}×", large / small),
        target: "≤ 1.5× (O(new bytes))".to_owned(),
        ratio: large / small / 1.5,
        met: large / small <= 1.5,
    }]
}

/// Canonical form throughput as a share of `serde_json::to_string`'s on the same value (≥ 50 %),
/// for JSON values and for typed values (`signature`).
#[must_use]
pub fn canonical(effort: Effort) -> Vec<Line> {
    const TARGET: &str = "≥ 50 % of serde_json::to_string";
    let mut lines = Vec::new();
    for sample in values::samples() {
        let batch = (1_000_000 / sample.bytes.max(1)).clamp(1, 10_000) as u64;
        let (canonical, serde) = per_call_pair(
            effort.samples,
            batch,
            || canonical_json(black_box(&sample.value)),
            || serde_json::to_string(black_box(&sample.value)),
        );
        let share = serde / canonical;
        let mib_s = |ns: f64| sample.bytes as f64 / ns * 1e9 / (1024.0 * 1024.0);
        let shown = format!("{:.0} % ({:.0} vs {:.0} MiB/s)", share * 100.0, mib_s(canonical), mib_s(serde));
        lines.push(Line::at_least(
            format!("canonical_json throughput, {} ({} B)", sample.name, sample.bytes),
            (share, shown),
            0.5,
            TARGET,
        ));
    }
    let ticket = TicketInput { input: 42 };
    lines.push(typed_line(effort.samples, 10_000, "signature of TicketInput {input: 42}", &ticket));
    let records = values::typed_records(100);
    lines.push(typed_line(effort.samples, 100, "signature of 100 typed records (~11 KB)", &records));
    lines
}

/// `signature` of a typed value as a share of `serde_json::to_string`'s speed on it.
fn typed_line<T: serde::Serialize>(samples: usize, batch: u64, what: &str, value: &T) -> Line {
    let (sign, plain) = per_call_pair(
        samples,
        batch,
        || signature("tool", black_box(value)),
        || serde_json::to_string(black_box(value)),
    );
    let shown = format!("{:.0} % ({sign:.0} vs {plain:.0} ns)", plain / sign * 100.0);
    Line::at_least(what, (plain / sign, shown), 0.5, "≥ 50 % of serde_json::to_string")
}

/// Whole `complete` runs (≤ 10 µs), timed the peers' way, as whole requests in both
/// compositions and with the scope and tools built beforehand.
#[must_use]
pub fn complete(effort: Effort) -> Vec<Line> {
    let runtime = runs::runtime();
    let counts = (effort.runs / 10, effort.runs);
    let line = |what: &str, timed: Result<crate::timing::Summary, runs::RunFailure>| match timed {
        Ok(summary) => {
            Line::at_most(format!("{what}; p99 {} µs", micros(summary.p99_us)), summary.median_us, 10.0, "µs")
        }
        Err(error) => Line::at_most(format!("{what} failed: {error}"), f64::NAN, 10.0, "µs"),
    };
    let mut lines: Vec<Line> = [Composition::Harness, Composition::Simple]
        .into_iter()
        .map(|composition| {
            let timed = runs::time_scenario(&runtime, (Scenario::Complete, composition), counts, false);
            line(&format!("complete request, {composition} (scope + tools + run)"), timed)
        })
        .collect();
    let timed = runs::time_scenario(&runtime, (Scenario::Complete, Composition::Harness), counts, true);
    lines.push(line("complete run, harness, scope and tools built beforehand", timed));
    lines
}

/// Two threads admitting on one scope (≤ 2× the time per call of one thread alone), and 1000
/// independent scopes on 2 threads vs 1 (scaling with the cores: at least 90 % of linear).
#[must_use]
pub fn parallel(effort: Effort) -> Vec<Line> {
    let per_thread = 20_000;
    let (mut alone, mut contended) = (Vec::new(), Vec::new());
    for _ in 0..effort.trials {
        for (threads, times) in [(1, &mut alone), (2, &mut contended)] {
            let seen = shared_scope(threads, per_thread);
            if seen.all_admitted() {
                times.push(seen.wall.as_nanos() as f64 / f64::from(per_thread));
            }
        }
    }
    let (alone, contended) = (median_of(&alone), median_of(&contended));
    let contention = Line {
        what: format!("2 threads on one scope: per-call time {contended:.0} ns vs {alone:.0} ns alone"),
        measured: format!("{:.2}×", contended / alone),
        target: "≤ 2×".to_owned(),
        ratio: contended / alone / 2.0,
        met: contended / alone <= 2.0,
    };

    let (mut one, mut two) = (Vec::new(), Vec::new());
    for _ in 0..effort.trials {
        for (threads, rates) in [(1, &mut one), (2, &mut two)] {
            let seen = request_rounds(threads, 40_000);
            if seen.all_admitted() {
                rates.push(seen.calls as f64 / seen.wall.as_secs_f64());
            }
        }
    }
    let (one, two) = (median_of(&one), median_of(&two));
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let scaling = Line::at_least(
        format!(
            "rounds of 1000 fresh scopes, 4 admissions each: {:.1} M admissions/s on 2 threads vs {:.1} M on 1 ({cores} cores)",
            two / 1e6,
            one / 1e6
        ),
        (two / one, format!("{:.2}×", two / one)),
        // Scaling "with the cores": at least 90 % of linear, on at most 2 threads.
        0.9 * 2.0_f64.min(cores as f64),
        "≥ 1.8× on 2 cores (90 % of linear)",
    );
    vec![contention, scaling, shared_caller(effort)]
}

/// 64 requests on 2 threads whose scopes share one caller's token, against the same requests
/// with a token each (≤ 1.1×: sharing a token must not make requests queue on it).
fn shared_caller(effort: Effort) -> Line {
    let (scopes, per_scope) = (64, 1000);
    let (mut own, mut shared) = (Vec::new(), Vec::new());
    for _ in 0..effort.trials {
        for (common, times) in [(false, &mut own), (true, &mut shared)] {
            let seen = caller_tokens(2, scopes, per_scope, common);
            if seen.all_admitted() {
                times.push(seen.wall.as_nanos() as f64 / seen.calls as f64);
            }
        }
    }
    let (own, shared) = (median_of(&own), median_of(&shared));
    Line {
        what: format!(
            "64 requests on 2 threads, one caller token shared by all: {shared:.0} ns per admission vs {own:.0} ns with a token each"
        ),
        measured: format!("{:.2}×", shared / own),
        target: "≤ 1.1×".to_owned(),
        ratio: shared / own / 1.1,
        met: shared / own <= 1.1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_met_on_the_right_side_of_its_target() {
        assert!(Line::at_most("t", 250.0, 250.0, "ns").met);
        assert!(!Line::at_most("t", 251.0, 250.0, "ns").met);
        let share = Line::at_least("c", (0.4, "40 %".to_owned()), 0.5, "≥ 50 %");
        assert!(!share.met);
        assert!((share.ratio - 1.25).abs() < 1e-12);
        let table = render(&[share]);
        assert_eq!(table.lines().nth(2), Some("| c | 40 % | ≥ 50 % | 1.25 | **missed** |"));
    }
}
