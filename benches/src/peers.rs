//! The reports that the comparison reads and writes: one JSON object per framework and round,
//! in the shape of the peers' `common.py` `report()`.
//!
//! # Invariants
//!
//! - Our report uses the peers' field names and units (`complete.median_us`, `p99_us`,
//!   `peak_rss_mib`, `repeat.<label>.{model_calls, tool_calls, outcome}`), so one reader serves
//!   every framework, and fields a reader does not know are ignored.
//! - Reports are read from files named `<peer>.<tools>.r<round>.json`, as the peers' scripts
//!   write them with `PEER_OUT`; other files in the folder are ignored.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// One framework's report for one round.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The framework's short name (`pydantic_ai`, `loopbound`).
    pub peer: String,
    /// `async` or `sync` tool bodies.
    #[serde(default)]
    pub tools: String,
    /// Versions of the measured packages, by package name.
    #[serde(default)]
    pub versions: BTreeMap<String, String>,
    /// Import time of the framework, where measured (Python only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub import_ms: Option<f64>,
    /// The timed `complete` runs.
    pub complete: Complete,
    /// The `repeat` scenario under each limit setting, by label.
    #[serde(default)]
    pub repeat: BTreeMap<String, Repeat>,
    /// Free-form notes.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub notes: String,
}

/// The timed `complete` runs of one report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Complete {
    /// Timed runs.
    pub runs: usize,
    /// Median per run, µs.
    pub median_us: f64,
    /// Nearest-rank p99 per run, µs.
    pub p99_us: f64,
    /// Mean per run, µs.
    #[serde(default)]
    pub mean_us: f64,
    /// Peak RSS right after the timed runs, MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_mib: Option<f64>,
}

/// What one `repeat` run did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Repeat {
    /// Model calls made.
    pub model_calls: u64,
    /// Tool bodies run.
    pub tool_calls: u64,
    /// How the run ended: returned what, or raised what.
    pub outcome: String,
    /// Wall time of the run, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_ms: Option<f64>,
}

/// A report and the round it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Round {
    /// The round number from the file name.
    pub round: u32,
    /// The report.
    pub report: Report,
}

/// The round number in a report file name `<peer>.<tools>.r<round>.json`.
#[must_use]
pub fn round_of(file_name: &str) -> Option<u32> {
    let stem = file_name.strip_suffix(".json")?;
    let (_, last) = stem.rsplit_once('.')?;
    last.strip_prefix('r')?.parse().ok()
}

/// Reads every report in `dir`, sorted by peer, tools and round.
///
/// # Errors
///
/// An I/O error reading the folder or a file, or a report that is not valid JSON of this shape
/// (as [`io::ErrorKind::InvalidData`], naming the file).
pub fn read_dir(dir: &Path) -> io::Result<Vec<Round>> {
    let mut rounds = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        let Some(round) = path.file_name().and_then(|name| name.to_str()).and_then(round_of) else {
            continue;
        };
        let text = fs::read_to_string(&path)?;
        let report: Report = serde_json::from_str(&text).map_err(|error| {
            io::Error::new(io::ErrorKind::InvalidData, format!("{}: {error}", path.display()))
        })?;
        rounds.push(Round { round, report });
    }
    rounds.sort_by(|a, b| {
        (&a.report.peer, &a.report.tools, a.round).cmp(&(&b.report.peer, &b.report.tools, b.round))
    });
    Ok(rounds)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape the peers' `common.py` writes, trimmed to what the reader needs and one field
    /// it does not know.
    const PEER: &str = r#"{
      "peer": "pydantic_ai", "tools": "async",
      "versions": {"pydantic-ai-slim": "2.68.0", "pydantic": "2.14.4"},
      "python": "3.11.7", "import_ms": 605.1,
      "complete": {"runs": 2000, "median_us": 6335.2, "mean_us": 6400.0, "p99_us": 7984.0,
                   "min_us": 6000.0, "max_us": 9000.0, "cpu_median_us": 6335.0,
                   "loadavg_1m_start_end": [1.0, 1.1], "peak_rss_mib": 67.2},
      "repeat": {"limits": {"model_calls": 5, "tool_calls": 4,
                            "outcome": "raised pydantic_ai.exceptions.UsageLimitExceeded: x", "wall_ms": 10.0}},
      "peak_rss_mib_end": 67.5, "notes": ""
    }"#;

    #[test]
    fn a_peer_report_reads_with_its_figures_and_repeat_rows() {
        let report: Report = serde_json::from_str(PEER).expect("the peers' shape");
        assert_eq!(report.peer, "pydantic_ai");
        assert_eq!(report.versions["pydantic-ai-slim"], "2.68.0");
        assert_eq!(report.complete.runs, 2000);
        assert!((report.complete.median_us - 6335.2).abs() < 1e-9);
        assert_eq!(report.complete.peak_rss_mib, Some(67.2));
        assert_eq!(report.repeat["limits"].model_calls, 5);
        assert_eq!(report.repeat["limits"].tool_calls, 4);
    }

    #[test]
    fn rounds_come_from_the_file_name() {
        assert_eq!(round_of("pydantic_ai.async.r3.json"), Some(3));
        assert_eq!(round_of("loopbound.async.r12.json"), Some(12));
        assert_eq!(round_of("pydantic_ai.import.jsonl"), None);
        assert_eq!(round_of("langgraph.async.r1.stderr"), None);
        assert_eq!(round_of("notes.json"), None);
    }
}
