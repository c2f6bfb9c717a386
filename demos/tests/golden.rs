//! Golden transcripts of the built `demo330` binary: one text and one JSON file per scenario and
//! composition in `tests/golden/`, named `<scenario>.<harness|simple>.<txt|json>`.
//!
//! To rewrite them after an intended change, run
//! `UPDATE_GOLDEN=1 cargo test -p loopbound-demos --test golden` and review the diff.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::thread;

use loopbound_demos::scenario::Scenario;

/// Every scenario with the exit code a reader should expect (SPEC §9): 0 only when the run
/// completed, `retry` among them; 2 for `NoProgress` as for every other controlled stop.
const SCENARIOS: [(&str, i32); 12] = [
    ("complete", 0),
    ("incomplete", 2),
    ("forbidden", 2),
    ("repeat", 2),
    ("changing", 2),
    ("budget", 2),
    ("deadline", 2),
    ("unavailable", 2),
    ("retry", 0),
    ("cycle", 2),
    ("streak", 2),
    ("nudge", 2),
];
const COMPOSITIONS: [(&str, Option<&str>); 2] = [("harness", None), ("simple", Some("--simple"))];
const FORMATS: [(&str, Option<&str>); 2] = [("txt", None), ("json", Some("--json"))];

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("golden")
}

/// Whether this run rewrites the golden files (`UPDATE_GOLDEN=1`).
fn updating() -> bool {
    std::env::var("UPDATE_GOLDEN").is_ok_and(|value| value == "1")
}

fn demo330(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_demo330")).args(args).output().expect("demo330 starts")
}

struct Case {
    file: String,
    args: Vec<&'static str>,
    exit: i32,
}

fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for (scenario, exit) in SCENARIOS {
        for (composition, composition_flag) in COMPOSITIONS {
            for (format, format_flag) in FORMATS {
                let args = std::iter::once(scenario).chain(composition_flag).chain(format_flag).collect();
                cases.push(Case { file: format!("{scenario}.{composition}.{format}"), args, exit });
            }
        }
    }
    cases
}

#[test]
fn the_golden_scenarios_are_the_librarys() {
    let names: Vec<&str> = Scenario::ALL.iter().map(|s| s.name()).collect();
    let golden: Vec<&str> = SCENARIOS.iter().map(|(name, _)| *name).collect();
    assert_eq!(golden, names);
}

#[test]
fn every_run_matches_its_golden_transcript_and_exit_code() {
    let update = updating();
    let cases = cases();
    // The runs are independent processes; running them together keeps `deadline` to one second.
    let outputs: Vec<Output> = thread::scope(|scope| {
        let handles: Vec<_> = cases.iter().map(|case| scope.spawn(|| demo330(&case.args))).collect();
        handles.into_iter().map(|handle| handle.join().expect("the run thread")).collect()
    });

    let mut failures = Vec::new();
    for (case, output) in cases.iter().zip(outputs) {
        let stdout = String::from_utf8(output.stdout).expect("utf-8 stdout");
        let stderr = String::from_utf8(output.stderr).expect("utf-8 stderr");
        let invocation = format!("demo330 {}", case.args.join(" "));
        if output.status.code() != Some(case.exit) {
            failures.push(format!("{invocation}: exit {:?}, expected {}", output.status.code(), case.exit));
        }
        if !stderr.is_empty() {
            failures.push(format!("{invocation}: unexpected stderr:\n{stderr}"));
        }
        let path = golden_dir().join(&case.file);
        if update {
            fs::write(&path, &stdout).expect("golden file written");
            continue;
        }
        match fs::read_to_string(&path) {
            Ok(expected) if expected == stdout => {}
            Ok(expected) => failures.push(format!(
                "{invocation}: differs from {}\n--- expected\n{expected}--- actual\n{stdout}",
                case.file
            )),
            Err(error) => failures.push(format!("{invocation}: cannot read {}: {error}", case.file)),
        }
    }
    assert!(
        failures.is_empty(),
        "{}\n\nIf the change is intended: UPDATE_GOLDEN=1 cargo test -p loopbound-demos --test golden",
        failures.join("\n\n")
    );
}

#[test]
fn every_golden_file_belongs_to_a_scenario() {
    let expected: BTreeSet<String> = cases().into_iter().map(|case| case.file).collect();
    let found: BTreeSet<String> = fs::read_dir(golden_dir())
        .expect("tests/golden exists")
        .map(|entry| entry.expect("a directory entry").file_name().to_string_lossy().into_owned())
        .collect();
    let stale: Vec<&String> = found.difference(&expected).collect();
    if updating() {
        // Blessing removes the transcripts of scenarios that no longer exist; the other test
        // writes the current ones.
        for file in stale {
            fs::remove_file(golden_dir().join(file)).expect("stale golden file removed");
        }
        return;
    }
    let missing: Vec<&String> = expected.difference(&found).collect();
    assert!(stale.is_empty(), "golden files with no scenario: {stale:?}");
    assert!(missing.is_empty(), "scenarios with no golden file: {missing:?}");
    assert_eq!(found.len(), 48);
}

#[test]
fn complete_and_complete_simple_report_the_same_events_and_status() {
    let parse = |args: &[&str]| -> serde_json::Value {
        let output = demo330(args);
        assert_eq!(output.status.code(), Some(0), "{args:?}");
        serde_json::from_slice(&output.stdout).expect("one JSON object")
    };
    let harness = parse(&["complete", "--json"]);
    let simple = parse(&["complete", "--simple", "--json"]);
    assert_eq!(simple["events"], harness["events"]);
    assert_eq!(simple["status"], harness["status"]);
    assert_eq!(simple["text"], harness["text"]);
    assert_eq!(harness["status"], "Completed");
    assert_eq!(harness["events"].as_array().map(Vec::len), Some(7));
    assert_ne!(simple["agent"], harness["agent"], "the compositions differ, the control does not");
}
