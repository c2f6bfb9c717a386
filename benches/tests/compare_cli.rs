//! The `compare` binary end to end: a short `run` writes a report in the peers' shape, and
//! `table` reads it back beside a peer's report.

use std::path::PathBuf;
use std::process::Command;

use loopbound_benches::peers::Report;

/// A fresh folder under the system's temporary directory, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let path = std::env::temp_dir().join(format!("loopbound-compare-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("a temporary folder");
        Self(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn compare(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_compare")).args(args).output().expect("the compare binary runs")
}

const PEER: &str = r#"{"peer": "agent_framework", "tools": "async",
  "versions": {"agent-framework-core": "1.23.0"},
  "complete": {"runs": 2000, "median_us": 780.0, "p99_us": 1482.0, "peak_rss_mib": 39.0},
  "repeat": {"limits": {"model_calls": 5, "tool_calls": 4, "outcome": "returned normally, text='...'"}}}"#;

#[test]
fn run_writes_a_peer_shaped_report_that_table_compares() {
    let dir = TempDir::new("run");
    let out = dir.0.to_str().expect("a UTF-8 path");
    let run = compare(&["run", "--runs", "20", "--warmup", "2", "--round", "3", "--out", out]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));

    let written = std::fs::read_to_string(dir.0.join("loopbound.async.r3.json")).expect("the report file");
    let report: Report = serde_json::from_str(&written).expect("the peers' shape");
    assert_eq!(report.peer, "loopbound");
    assert_eq!(report.complete.runs, 20);
    assert!(report.complete.median_us > 0.0 && report.complete.p99_us >= report.complete.median_us);
    let repeat = &report.repeat["limits"];
    assert_eq!((repeat.model_calls, repeat.tool_calls), (2, 1));
    assert!(
        repeat.outcome.starts_with("returned Outcome RepeatedCall (exit code 2, no text)"),
        "{}",
        repeat.outcome
    );
    assert_eq!(String::from_utf8_lossy(&run.stdout).trim(), written.trim());

    std::fs::write(dir.0.join("agent_framework.async.r1.json"), PEER).expect("a peer report");
    let table = compare(&["table", out]);
    assert!(table.status.success(), "{}", String::from_utf8_lossy(&table.stderr));
    let text = String::from_utf8_lossy(&table.stdout);
    let rows: Vec<&str> = text.lines().filter(|line| line.starts_with("| loopbound |")).collect();
    assert_eq!(rows.len(), 2, "one timing row and one repeat row: {text}");
    assert!(rows[0].contains("| ×1 | ×1 |"), "{}", rows[0]);
    assert!(text.contains("| agent_framework | limits | 5 | 4 | returned normally"), "{text}");
}

#[test]
fn table_without_a_loopbound_report_fails_with_a_message() {
    let dir = TempDir::new("empty");
    let table = compare(&["table", dir.0.to_str().expect("a UTF-8 path")]);
    assert_eq!(table.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&table.stderr).starts_with("compare: no loopbound report in "));
}
