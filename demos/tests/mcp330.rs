//! Golden transcripts of the built `mcp330` binary against the real server-everything: one text
//! and one JSON file per scenario in `tests/golden-mcp/`, named `<scenario>.<txt|json>`, and the
//! exit codes. Without `node` the test prints SKIPPED and passes (unless
//! LOOPBOUND_REQUIRE_SERVERS=1).
//!
//! To rewrite them after an intended change, run
//! `UPDATE_GOLDEN=1 cargo test -p loopbound-demos --test mcp330` and review the diff.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::thread;

use loopbound_demos::mcp::McpScenario;
use loopbound_testkit::mcp as servers;

/// Every scenario with the exit code a reader should expect (SPEC §9).
const SCENARIOS: [(&str, i32); 6] =
    [("complete", 0), ("forbidden", 2), ("invalid", 2), ("repeat", 2), ("budget", 2), ("deadline", 2)];
const FORMATS: [(&str, Option<&str>); 2] = [("txt", None), ("json", Some("--json"))];

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("golden-mcp")
}

fn mcp330(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mcp330")).args(args).output().expect("mcp330 starts")
}

#[test]
fn the_golden_scenarios_are_the_consoles() {
    let names: Vec<&str> = McpScenario::ALL.iter().map(|s| s.name()).collect();
    let golden: Vec<&str> = SCENARIOS.iter().map(|(name, _)| *name).collect();
    assert_eq!(golden, names);
    let expected: BTreeSet<String> = SCENARIOS
        .iter()
        .flat_map(|(scenario, _)| FORMATS.iter().map(move |(format, _)| format!("{scenario}.{format}")))
        .collect();
    let found: BTreeSet<String> = fs::read_dir(golden_dir())
        .expect("tests/golden-mcp exists")
        .map(|entry| entry.expect("an entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(found, expected);
}

#[test]
fn every_run_over_the_real_server_matches_its_golden_transcript_and_exit_code() {
    if !servers::available() {
        return;
    }
    let update = std::env::var("UPDATE_GOLDEN").is_ok_and(|value| value == "1");
    let cases: Vec<(String, Vec<&str>, i32)> = SCENARIOS
        .iter()
        .flat_map(|(scenario, exit)| {
            FORMATS.iter().map(move |(format, flag)| {
                (format!("{scenario}.{format}"), std::iter::once(*scenario).chain(*flag).collect(), *exit)
            })
        })
        .collect();
    let outputs: Vec<Output> = thread::scope(|scope| {
        let handles: Vec<_> = cases.iter().map(|(_, args, _)| scope.spawn(|| mcp330(args))).collect();
        handles.into_iter().map(|handle| handle.join().expect("the run thread")).collect()
    });
    let mut failures = Vec::new();
    for ((file, args, exit), output) in cases.iter().zip(outputs) {
        let stdout = String::from_utf8(output.stdout).expect("utf-8 stdout");
        let stderr = String::from_utf8(output.stderr).expect("utf-8 stderr");
        let invocation = format!("mcp330 {}", args.join(" "));
        if output.status.code() != Some(*exit) {
            failures
                .push(format!("{invocation}: exit {:?}, expected {exit}\n{stderr}", output.status.code()));
        }
        if !stderr.is_empty() {
            failures.push(format!("{invocation}: unexpected stderr:\n{stderr}"));
        }
        let path = golden_dir().join(file);
        if update {
            fs::write(&path, &stdout).expect("golden file written");
            continue;
        }
        match fs::read_to_string(&path) {
            Ok(expected) if expected == stdout => {}
            Ok(expected) => {
                failures.push(format!(
                    "{invocation}: differs from {file}\n--- expected\n{expected}--- actual\n{stdout}"
                ));
            }
            Err(error) => failures.push(format!("{invocation}: cannot read {file}: {error}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{}\n\nIf the change is intended: UPDATE_GOLDEN=1 cargo test -p loopbound-demos --test mcp330",
        failures.join("\n\n")
    );
}

#[test]
fn bad_arguments_are_a_usage_error() {
    let output = mcp330(&["nonsense"]);
    assert_eq!(output.status.code(), Some(64));
    let stderr = String::from_utf8(output.stderr).expect("utf-8");
    assert!(stderr.contains("Usage: mcp330"), "{stderr}");
    assert!(output.stdout.is_empty());
}

#[test]
fn live_without_an_endpoint_sends_nothing_and_ends_as_provider_unavailable() {
    if !servers::available() {
        return;
    }
    let output = Command::new(env!("CARGO_BIN_EXE_mcp330"))
        .args(["complete", "--live", "--json"])
        .env_remove("LOOPBOUND_OPENAI_BASE_URL")
        .env_remove("LOOPBOUND_OPENAI_MODEL")
        .output()
        .expect("mcp330 starts");
    assert_eq!(output.status.code(), Some(2));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    assert_eq!(report["status"], "ProviderUnavailable");
    assert_eq!(report["transport"], "openai-compatible (not configured)");
}

#[test]
fn an_unconfigured_anthropic_endpoint_ends_as_provider_unavailable() {
    if !servers::available() {
        return;
    }
    let output = Command::new(env!("CARGO_BIN_EXE_mcp330"))
        .args(["complete", "--live", "--provider", "anthropic", "--json"])
        .env_remove("LOOPBOUND_ANTHROPIC_BASE_URL")
        .env_remove("LOOPBOUND_ANTHROPIC_MODEL")
        .output()
        .expect("mcp330 starts");
    assert_eq!(output.status.code(), Some(2));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    assert_eq!(report["status"], "ProviderUnavailable");
    assert_eq!(report["transport"], "anthropic-messages (not configured)");
}

#[test]
fn a_live_model_sums_with_the_real_server_over_every_provider() {
    if !servers::available() {
        return;
    }
    let Some(aimock) = loopbound_testkit::aimock::Aimock::start() else { return };
    for provider in ["openai", "anthropic", "responses"] {
        let prefix = if provider == "anthropic" { "LOOPBOUND_ANTHROPIC_" } else { "LOOPBOUND_OPENAI_" };
        let output = Command::new(env!("CARGO_BIN_EXE_mcp330"))
            .args(["complete", "--live", "--provider", provider, "--json"])
            .env(format!("{prefix}BASE_URL"), aimock.base_url())
            .env(format!("{prefix}MODEL"), "aimock-mcp")
            .env(format!("{prefix}API_KEY"), "sk-mcp-live-secret")
            .output()
            .expect("mcp330 starts");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            !stdout.contains("sk-mcp-live-secret")
                && !String::from_utf8_lossy(&output.stderr).contains("sk-mcp-live")
        );
        assert_eq!(output.status.code(), Some(0), "{provider}: {stdout}\n{}", aimock.log());
        let report: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON object");
        assert_eq!(report["status"], "Completed", "{provider}");
        assert_eq!(report["text"], "2 + 40 = 42.", "{provider}");
        assert_eq!(
            report["events"],
            serde_json::json!([
                {"kind": "ModelCall", "name": "model", "count": 1},
                {"kind": "Middleware", "name": "get-sum", "count": 1},
                {"kind": "ToolCall", "name": "get-sum", "count": 1},
                {"kind": "ModelCall", "name": "model", "count": 2},
            ]),
            "{provider}"
        );
    }
    let chat = tokio_block(aimock.request_bodies());
    let messages = tokio_block(aimock.message_bodies());
    let responses = tokio_block(aimock.response_bodies());
    assert_eq!((chat.len(), messages.len(), responses.len()), (2, 2, 2), "two calls through each API");
}

/// Runs `future` to its end on a runtime of its own (these tests are synchronous).
fn tokio_block<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime").block_on(future)
}
