//! The durable scenarios as a newcomer runs them: each flow is a sequence of `demo330` commands
//! on one journal file in a fresh directory; each step's stdout is compared with its golden
//! transcript in `tests/golden-durable/<flow>.<n>-<command>.txt`, and its exit (code or signal)
//! and stderr are asserted. The payments file is checked after each flow: the refund ran
//! exactly once, or never.
//!
//! To rewrite the transcripts after an intended change:
//! `UPDATE_GOLDEN=1 cargo test -p loopbound-demos --test durable`, then review the diff.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use loopbound_testkit::{golden, scratch};

const DIGEST: &str = "dcd523ad94b9a9e318efc2b5ca6a9521fd36c13d58ff6cfc10a252e60f445cbb";
const OTHER: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// How a step must end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Exit {
    Code(i32),
    Killed,
}

struct Step {
    name: &'static str,
    args: Vec<&'static str>,
    exit: Exit,
    /// What stderr must be (exactly).
    stderr: &'static str,
}

fn step(name: &'static str, args: &[&'static str], exit: Exit, stderr: &'static str) -> Step {
    Step { name, args: args.to_vec(), exit, stderr }
}

fn flows() -> Vec<(&'static str, Vec<Step>, usize)> {
    let approve =
        ["approve", "--journal", "runs.db", "refund-42/op/2", "--digest", DIGEST, "--approver", "alice"];
    let wrong =
        ["approve", "--journal", "runs.db", "refund-42/op/2", "--digest", OTHER, "--approver", "mallory"];
    let deny = ["deny", "--journal", "runs.db", "refund-42/op/2", "--digest", DIGEST, "--approver", "bob"];
    let resume_refund = ["resume", "--journal", "runs.db", "refund-42"];
    let resume_crash = ["resume", "--journal", "runs.db", "crash-42"];
    let mismatch =
        "demo330: refused: the approval is for other arguments than the proposal's; refused (exit 74)\n";
    let finished = "demo330: the run already ended with Completed; no outcome (exit 74)\n";
    vec![
        (
            "approval",
            vec![
                step("refund", &["refund", "--journal", "runs.db"], Exit::Code(2), ""),
                step(
                    "runs-awaiting",
                    &["runs", "--journal", "runs.db", "--state", "awaiting"],
                    Exit::Code(0),
                    "",
                ),
                step("inspect", &["inspect", "--journal", "runs.db", "refund-42"], Exit::Code(0), ""),
                step("approve-other-digest", &wrong, Exit::Code(74), mismatch),
                step("approve", &approve, Exit::Code(0), ""),
                step("resume", &resume_refund, Exit::Code(0), ""),
                step("resume-again", &resume_refund, Exit::Code(74), finished),
                step("runs", &["runs", "--journal", "runs.db"], Exit::Code(0), ""),
            ],
            1,
        ),
        (
            "denial",
            vec![
                step("refund", &["refund", "--journal", "runs.db"], Exit::Code(2), ""),
                step("deny", &deny, Exit::Code(0), ""),
                step("resume", &resume_refund, Exit::Code(2), ""),
            ],
            0,
        ),
        (
            "crash",
            vec![
                step("crash", &["crash", "--journal", "runs.db"], Exit::Killed, ""),
                step("resume", &resume_crash, Exit::Code(2), ""),
                step(
                    "runs-ambiguous",
                    &["runs", "--journal", "runs.db", "--state", "ambiguous"],
                    Exit::Code(0),
                    "",
                ),
                step("inspect", &["inspect", "--journal", "runs.db", "crash-42"], Exit::Code(0), ""),
                step(
                    "reconcile",
                    &["reconcile", "--journal", "runs.db", "crash-42/op/2", "--not-run", "--by", "ops"],
                    Exit::Code(0),
                    "",
                ),
                step("resume-after", &resume_crash, Exit::Code(0), ""),
            ],
            1,
        ),
    ]
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("golden-durable")
}

fn file_of(flow: &str, number: usize, step: &Step) -> String {
    format!("{flow}.{number}-{}.txt", step.name)
}

#[test]
fn every_durable_flow_matches_its_transcripts_exits_and_effects() {
    let update = golden::updating();
    let mut failures = Vec::new();
    for (flow, steps, refunds) in flows() {
        let dir = scratch::dir(&format!("durable-{flow}"));
        for (number, step) in (1..).zip(&steps) {
            let output = Command::new(env!("CARGO_BIN_EXE_demo330"))
                .args(&step.args)
                .current_dir(&dir)
                .output()
                .expect("demo330 starts");
            let stdout = String::from_utf8(output.stdout).expect("utf-8 stdout");
            let stderr = String::from_utf8(output.stderr).expect("utf-8 stderr");
            let invocation = format!("{flow} step {number}: demo330 {}", step.args.join(" "));
            let exit = match (output.status.code(), output.status.signal()) {
                (Some(code), _) => Exit::Code(code),
                (None, Some(9)) => Exit::Killed,
                other => panic!("{invocation}: ended by {other:?}"),
            };
            if exit != step.exit {
                failures.push(format!("{invocation}: {exit:?}, expected {:?}\n{stdout}{stderr}", step.exit));
            }
            if stderr != step.stderr {
                failures.push(format!("{invocation}: stderr {stderr:?}, expected {:?}", step.stderr));
            }
            let path = golden_dir().join(file_of(flow, number, step));
            if let Err(difference) = golden::compare(&path, &stdout, update) {
                failures.push(format!("{invocation}: {difference}"));
            }
        }
        let ledger = fs::read_to_string(dir.join("runs.db.refunds")).unwrap_or_default();
        let lines: Vec<&str> = ledger.lines().collect();
        assert_eq!(lines.len(), refunds, "{flow}: refunds applied: {lines:?}");
        assert!(
            lines.iter().all(|line| line.starts_with("refund ") && line.ends_with("-42/op/2")),
            "{lines:?}"
        );
    }
    assert!(
        failures.is_empty(),
        "{}\n\nIf the change is intended: UPDATE_GOLDEN=1 cargo test -p loopbound-demos --test durable",
        failures.join("\n\n")
    );
}

#[test]
fn every_durable_golden_file_belongs_to_a_step() {
    let expected: BTreeSet<String> = flows()
        .iter()
        .flat_map(|(flow, steps, _)| {
            (1..).zip(steps).map(|(n, step)| file_of(flow, n, step)).collect::<Vec<_>>()
        })
        .collect();
    if golden::updating() {
        return;
    }
    let found: BTreeSet<String> = fs::read_dir(golden_dir())
        .expect("tests/golden-durable exists")
        .map(|entry| entry.expect("an entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(found, expected);
}
