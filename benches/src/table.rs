//! The comparison tables, in Markdown: time per `complete` run beside the reference framework,
//! and what each framework does when the model repeats the same call.
//!
//! # Invariants
//!
//! - Per framework, the round with the lowest median is shown (other work on a shared machine
//!   only ever adds time), and every round's median is listed beside it, as the peers'
//!   `make_table.py` does. The reference is treated the same way.
//! - Ratios are the framework's figure divided by the reference's figure of the same kind
//!   (median by median, p99 by p99), so "×120" reads "120 times the reference's time".

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::peers::{Report, Round};

/// Formats microseconds with three significant figures where they matter.
#[must_use]
pub fn micros(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0}")
    } else if value >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}

/// The reports of one framework, best round first.
struct Framework<'a> {
    best: &'a Report,
    medians: Vec<f64>,
}

/// The frameworks whose reports are of tool mode `tools`, plus `reference` in whatever mode it
/// ran (loopbound's tool bodies are always async functions, run inline).
fn frameworks<'a>(rounds: &'a [Round], reference: &str, tools: &str) -> Vec<Framework<'a>> {
    let mut by_peer: BTreeMap<&str, Vec<&'a Round>> = BTreeMap::new();
    for round in rounds.iter().filter(|round| round.report.tools == tools || round.report.peer == reference) {
        by_peer.entry(round.report.peer.as_str()).or_default().push(round);
    }
    let mut out: Vec<Framework<'a>> = by_peer
        .into_values()
        .filter_map(|mut rounds| {
            rounds.sort_by_key(|round| round.round);
            let medians: Vec<f64> = rounds.iter().map(|round| round.report.complete.median_us).collect();
            let best = rounds
                .iter()
                .min_by(|a, b| a.report.complete.median_us.total_cmp(&b.report.complete.median_us))?;
            Some(Framework { best: &best.report, medians })
        })
        .collect();
    out.sort_by(|a, b| a.best.complete.median_us.total_cmp(&b.best.complete.median_us));
    out
}

fn versions(report: &Report) -> String {
    report.versions.iter().map(|(name, version)| format!("{name} {version}")).collect::<Vec<_>>().join(", ")
}

/// The timing table of the `complete` scenario, with ratios to `reference` (a peer name), for
/// the reports of tool mode `tools`. `None` if the reference has no report.
#[must_use]
pub fn timing(rounds: &[Round], reference: &str, tools: &str) -> Option<String> {
    let all = frameworks(rounds, reference, tools);
    let base = all.iter().find(|framework| framework.best.peer == reference)?.best;
    let mut out = String::from(
        "| framework | version | complete median µs | p99 µs | peak RSS MiB | median ÷ loopbound | p99 ÷ loopbound | medians of all rounds µs |\n\
         |---|---|---:|---:|---:|---:|---:|---|\n",
    );
    for framework in &all {
        let run = &framework.best.complete;
        let rss = run.peak_rss_mib.map_or_else(|| "-".to_owned(), |mib| format!("{mib:.1}"));
        let rounds = framework.medians.iter().map(|&median| micros(median)).collect::<Vec<_>>().join(" / ");
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {rss} | ×{:.0} | ×{:.0} | {rounds} |",
            framework.best.peer,
            versions(framework.best),
            micros(run.median_us),
            micros(run.p99_us),
            run.median_us / base.complete.median_us,
            run.p99_us / base.complete.p99_us,
        );
    }
    Some(out)
}

/// The `repeat` table: for each framework (best round) and limit setting, the calls made and how
/// the run ended. The setting named `limits` comes first.
#[must_use]
pub fn repeat(rounds: &[Round], reference: &str, tools: &str) -> String {
    let mut out = String::from(
        "| framework | limit setting | model calls | tool calls | how the run ended |\n|---|---|---:|---:|---|\n",
    );
    for framework in frameworks(rounds, reference, tools) {
        let mut labels: Vec<&String> = framework.best.repeat.keys().collect();
        labels.sort_by_key(|label| (label.as_str() != "limits", label.as_str()));
        for label in labels {
            let row = &framework.best.repeat[label];
            let outcome = row.outcome.replace('|', "\\|");
            let _ = writeln!(
                out,
                "| {} | {label} | {} | {} | {outcome} |",
                framework.best.peer, row.model_calls, row.tool_calls
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peers::{Complete, Repeat};

    fn round(peer: &str, round: u32, median_us: f64, p99_us: f64) -> Round {
        let mut repeat = BTreeMap::new();
        for (label, model_calls) in [("defaults", 50), ("limits", 5)] {
            repeat.insert(
                label.to_owned(),
                Repeat { model_calls, tool_calls: 4, outcome: "raised X | Y".to_owned(), wall_ms: None },
            );
        }
        Round {
            round,
            report: Report {
                peer: peer.to_owned(),
                tools: "async".to_owned(),
                versions: BTreeMap::from([(peer.to_owned(), "1.0".to_owned())]),
                import_ms: None,
                complete: Complete {
                    runs: 2000,
                    median_us,
                    p99_us,
                    mean_us: median_us,
                    peak_rss_mib: Some(40.0),
                },
                repeat,
                notes: String::new(),
            },
        }
    }

    #[test]
    fn timing_keeps_each_frameworks_best_round_and_divides_by_the_reference() {
        let rounds = [
            round("slow", 1, 900.0, 1500.0),
            round("slow", 2, 780.0, 1482.0),
            round("loopbound", 1, 7.8, 14.82),
        ];
        let table = timing(&rounds, "loopbound", "async").expect("the reference has a report");
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[2], "| loopbound | loopbound 1.0 | 7.80 | 14.8 | 40.0 | ×1 | ×1 | 7.80 |");
        assert_eq!(lines[3], "| slow | slow 1.0 | 780 | 1482 | 40.0 | ×100 | ×100 | 900 / 780 |");
        assert_eq!(timing(&rounds, "absent", "async"), None);
    }

    #[test]
    fn repeat_puts_the_limits_row_first_and_escapes_pipes() {
        let mut sync = round("loopbound", 1, 1.0, 1.0);
        sync.report.tools = "sync".to_owned();
        let table = repeat(&[round("peer", 1, 900.0, 900.0), sync], "loopbound", "async");
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 6, "the reference is listed whatever its tool mode");
        assert_eq!(lines[2], "| loopbound | limits | 5 | 4 | raised X \\| Y |");
        assert_eq!(lines[4], "| peer | limits | 5 | 4 | raised X \\| Y |");
        assert_eq!(lines[5], "| peer | defaults | 50 | 4 | raised X \\| Y |");
    }
}
