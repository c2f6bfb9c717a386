//! The figures of one load, in the JSON shape that loopbound's `load` command and the Python
//! peers' load scripts (`benches/peers-load/`) all write, and as text.
//!
//! # Invariants
//!
//! - Every figure says its unit in its name. Memory per waiting run is the resident set's growth
//!   from before the runs started to the moment all of them waited on their first model call,
//!   divided by the number of runs; CPU per run is the process's whole CPU time over the load
//!   divided by the number of runs.
//! - Throughput leaves out the time the hold added to every first call (`hold_extra_ms`, the
//!   same for every run), so it is the rate the runs would have had without the memory sample.
//!   With the release spread over a window (`release_over_ms`), the runs are paced by it: the
//!   throughput is then the arrival rate the window set, not the most the process can do.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use loopbound_testkit::load::Summary;
use serde::{Deserialize, Serialize};

/// One load's figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Who ran: `loopbound`, `agent_framework`, `pydantic_ai`.
    pub peer: String,
    /// Versions of what ran.
    pub versions: BTreeMap<String, String>,
    /// Concurrent runs.
    pub runs: u64,
    /// The server's latency per reply.
    pub latency_ms: f64,
    /// Whether model calls were streamed.
    pub stream: bool,
    /// Whether a watcher read every run's live stream (loopbound's `--watch`).
    #[serde(default)]
    pub watched: bool,
    /// The journal, if the runs were journaled (`sqlite`).
    pub journal: Option<String>,
    /// Whether each journaled run recorded its stream (loopbound's `--record-stream`).
    #[serde(default)]
    pub recorded_stream: bool,
    /// The HTTP version of the model calls: `1.1`, or `2` over `http2_connections`
    /// connections. The peers' scripts leave it out (their clients speak HTTP/1.1).
    #[serde(default)]
    pub http2_connections: Option<u64>,
    /// `pooled` when the calls went through `reqwest`'s pooled client rather than the
    /// connections the transport drives itself (absent then).
    #[serde(default)]
    pub http_client: Option<String>,
    /// Runs that did exactly the review.
    pub completed: u64,
    /// Up to ten descriptions of runs that did not.
    pub failures: Vec<String>,
    /// Wall time from the first run's start to the last run's end, in seconds.
    pub wall_s: f64,
    /// The extra wait the hold gave every first call, in milliseconds.
    pub hold_extra_ms: f64,
    /// The window the held first calls were answered evenly over, in milliseconds (0: all at
    /// once). The peers' scripts leave it out (they release at once).
    #[serde(default)]
    pub release_over_ms: f64,
    /// The window the runs were started evenly over, in milliseconds (0: all at once). The
    /// peers' scripts leave it out (they start every run at once).
    #[serde(default)]
    pub start_over_ms: f64,
    /// Runs per second, with the hold's extra wait left out.
    pub throughput_runs_per_s: f64,
    /// The client's added latency per model call, measured by the server.
    pub added_latency_us: Summary,
    /// From each run's start to the arrival of its first request.
    pub start_to_first_request_us: Summary,
    /// Resident set before the runs started, in MiB.
    pub rss_before_mib: f64,
    /// Resident set while every run waited on its first model call, in MiB.
    pub rss_waiting_mib: f64,
    /// Resident memory per waiting run, in KiB.
    pub memory_per_waiting_run_kib: f64,
    /// Peak resident set of the process, in MiB.
    pub peak_rss_mib: f64,
    /// CPU time of the process over the load, in seconds.
    pub cpu_s: f64,
    /// CPU time per run, in microseconds.
    pub cpu_per_run_us: f64,
    /// CPU time of the journal's database server (its processes) over the load, in seconds,
    /// where the command started the server (`--journal postgres`).
    #[serde(default)]
    pub store_server_cpu_s: Option<f64>,
    /// The time per journaled effect, from its `started` commit to its result commit.
    pub journal_effect_us: Option<Summary>,
    /// The calls that reached the journal's store during the measured runs (acquisitions,
    /// commits, renewals, reads, cancel queries; one query for many runs counts one).
    #[serde(default)]
    pub store_calls: Option<u64>,
    /// Those calls per second of the measured runs' wall time.
    #[serde(default)]
    pub store_calls_per_s: Option<f64>,
    /// Connections the server accepted.
    pub connections: u64,
    /// The most connections open at once on the server.
    pub peak_open_connections: u64,
}

impl Report {
    /// Whether every run did exactly the review.
    #[must_use]
    pub fn passed(&self) -> bool {
        self.completed == self.runs && self.failures.is_empty()
    }

    /// The figures as text, one per line.
    #[must_use]
    pub fn render(&self) -> String {
        let mode = match (self.stream, self.watched) {
            (true, true) => "streamed, each run watched",
            (true, false) => "streamed",
            (false, true) => "whole replies, each run watched",
            (false, false) => "whole replies",
        };
        let recorded = if self.recorded_stream { ", streams recorded" } else { "" };
        let journal = self
            .journal
            .as_deref()
            .map_or_else(String::new, |name| format!(", journaled on {name}{recorded}"));
        let client =
            if self.http_client.as_deref() == Some("pooled") { ", reqwest's pooled client" } else { "" };
        let http =
            self.http2_connections.map_or_else(String::new, |n| format!(", HTTP/2 over {n} connections"))
                + client;
        let release = if self.release_over_ms > 0.0 {
            format!(", first calls answered over {:.0} ms", self.release_over_ms)
        } else {
            String::new()
        };
        let start = if self.start_over_ms > 0.0 {
            format!(", started over {:.0} ms", self.start_over_ms)
        } else {
            String::new()
        };
        let summary =
            |s: &Summary| format!("p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs", s.p50_us, s.p99_us, s.max_us);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{}: {} concurrent runs, {} ms per reply, {mode}{journal}{http}{start}{release}",
            self.peer, self.runs, self.latency_ms
        );
        let _ = writeln!(out, "  completed as the review must:  {} of {}", self.completed, self.runs);
        let _ = writeln!(
            out,
            "  throughput:                    {:.0} runs/s ({:.2} s wall, hold added {:.0} ms to each first call)",
            self.throughput_runs_per_s, self.wall_s, self.hold_extra_ms
        );
        let _ = writeln!(out, "  added latency per model call:  {}", summary(&self.added_latency_us));
        let _ =
            writeln!(out, "  run start to first request:    {}", summary(&self.start_to_first_request_us));
        let _ = writeln!(
            out,
            "  memory per waiting run:        {:.1} KiB ({:.1} MiB before, {:.1} MiB with all runs waiting)",
            self.memory_per_waiting_run_kib, self.rss_before_mib, self.rss_waiting_mib
        );
        let _ = writeln!(out, "  peak RSS:                      {:.1} MiB", self.peak_rss_mib);
        let _ = writeln!(
            out,
            "  CPU per run:                   {:.0} µs ({:.2} s in all)",
            self.cpu_per_run_us, self.cpu_s
        );
        if let Some(effects) = &self.journal_effect_us {
            let _ = writeln!(
                out,
                "  journal effect (2 commits):    {} over {} effects",
                summary(effects),
                effects.count
            );
        }
        if let Some(server) = self.store_server_cpu_s {
            let per_run = server * 1e6 / (self.runs.max(1) as f64);
            let _ = writeln!(out, "  store server CPU:              {server:.2} s ({per_run:.0} µs per run)");
        }
        if let (Some(calls), Some(per_s)) = (self.store_calls, self.store_calls_per_s) {
            let _ = writeln!(out, "  journal store calls:           {per_s:.0} per second ({calls} in all)");
        }
        let _ = writeln!(
            out,
            "  server connections:            {} accepted, at most {} open",
            self.connections, self.peak_open_connections
        );
        for failure in &self.failures {
            let _ = writeln!(out, "  FAILED: {failure}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_passes_only_when_every_run_completed_and_nothing_failed() {
        let mut report = Report { runs: 2, completed: 2, ..Report::default() };
        assert!(report.passed());
        report.failures.push("run 1: ModelBudget".to_owned());
        assert!(!report.passed());
        assert!(report.render().contains("  FAILED: run 1: ModelBudget\n"));
        let short = Report { runs: 2, completed: 1, ..Report::default() };
        assert!(!short.passed());
    }

    #[test]
    fn a_report_reads_back_from_its_json() {
        let report = Report {
            peer: "loopbound".to_owned(),
            runs: 3,
            journal: Some("sqlite".to_owned()),
            journal_effect_us: Some(Summary { count: 6, p99_us: 1.5, ..Summary::default() }),
            store_calls: Some(40),
            store_calls_per_s: Some(20.0),
            ..Report::default()
        };
        let text = serde_json::to_string(&report).unwrap();
        assert_eq!(serde_json::from_str::<Report>(&text).unwrap(), report);
    }
}
