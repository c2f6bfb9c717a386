//! Replays every committed fuzz input under plain `cargo test`, on stable: each file of
//! `fuzz/seeds/<target>/` and `fuzz/regressions/<target>/` goes through the same check function
//! the fuzz target calls.

use std::path::{Path, PathBuf};

use loopbound_proptests::harness;

/// The files of `fuzz/<kind>/<target>/`, sorted, README files excluded.
fn inputs(kind: &str, target: &str) -> Vec<PathBuf> {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz").join(kind).join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&folder)
        .unwrap_or_else(|error| panic!("reading {}: {error}", folder.display()))
        .map(|entry| entry.unwrap_or_else(|error| panic!("listing {}: {error}", folder.display())).path())
        .filter(|path| {
            path.is_file() && !path.file_name().is_some_and(|n| n.to_string_lossy().starts_with("README"))
        })
        .collect();
    files.sort();
    files
}

/// Runs `check` on every seed and regression of `target`; returns how many inputs ran.
fn replay(target: &str, check: fn(&[u8])) -> usize {
    let mut count = 0;
    for kind in ["seeds", "regressions"] {
        for path in inputs(kind, target) {
            let data =
                std::fs::read(&path).unwrap_or_else(|error| panic!("reading {}: {error}", path.display()));
            eprintln!("replaying {}", path.display());
            check(&data);
            count += 1;
        }
    }
    count
}

#[test]
fn every_canonical_seed_and_regression_holds() {
    assert!(replay("canonical", harness::canonical) > 0, "the canonical corpus is empty");
}

#[test]
fn every_json_read_seed_and_regression_holds() {
    assert!(replay("json_read", harness::json_read) > 0, "the json_read corpus is empty");
}

#[test]
fn every_bind_guard_seed_and_regression_holds() {
    assert!(replay("bind_guard", harness::bind_guard) > 0, "the bind_guard corpus is empty");
}

#[test]
fn every_openai_parse_seed_and_regression_holds() {
    assert!(replay("openai_parse", harness::openai_parse) > 0, "the openai_parse corpus is empty");
}

#[test]
fn every_anthropic_parse_seed_and_regression_holds() {
    assert!(replay("anthropic_parse", harness::anthropic_parse) > 0, "the anthropic_parse corpus is empty");
}

#[test]
fn every_responses_parse_seed_and_regression_holds() {
    assert!(replay("responses_parse", harness::responses_parse) > 0, "the responses_parse corpus is empty");
}

#[test]
fn every_run_seed_and_regression_holds() {
    assert!(replay("run", harness::run) > 0, "the run corpus is empty");
}

#[test]
fn every_mcp_arguments_seed_and_regression_holds() {
    assert!(replay("mcp_arguments", harness::mcp_arguments) > 0, "the mcp_arguments corpus is empty");
}

#[test]
fn every_journal_rows_seed_and_regression_holds() {
    assert!(replay("journal_rows", harness::journal_rows) > 0, "the journal_rows corpus is empty");
}

#[test]
fn every_progress_seed_and_regression_holds() {
    assert!(replay("progress", harness::progress) > 0, "the progress corpus is empty");
}
