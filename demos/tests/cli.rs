//! The built `demo330` binary as a user meets it: bad arguments, help, `--live`, and Ctrl-C.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::Duration;

use loopbound_demos::scenario::Scenario;

fn demo330(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_demo330")).args(args).output().expect("demo330 starts")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("utf-8 output")
}

#[test]
fn bad_arguments_exit_64_with_a_usage_message_and_no_panic() {
    let cases: [(&[&str], &str); 4] = [
        (&["nonsense"], "invalid value 'nonsense'"),
        (&["--frobnicate"], "unexpected argument '--frobnicate'"),
        (&["complete", "repeat"], "unexpected argument 'repeat'"),
        (&["Complete"], "invalid value 'Complete'"),
    ];
    for (args, problem) in cases {
        let output = demo330(args);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(64), "{args:?}: {stderr}");
        assert!(stderr.contains(problem), "{args:?}: {stderr}");
        assert!(stderr.contains("Usage: demo330"), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(text(&output.stdout), "", "{args:?}");
    }
}

#[test]
fn an_unknown_scenario_lists_the_known_ones() {
    let stderr = text(&demo330(&["loop"]).stderr);
    for scenario in Scenario::ALL {
        assert!(stderr.contains(scenario.name()), "{scenario} missing from:\n{stderr}");
    }
}

#[test]
fn help_lists_every_scenario_with_what_it_demonstrates_and_exits_0() {
    let output = demo330(&["--help"]);
    assert_eq!(output.status.code(), Some(0));
    let stdout = text(&output.stdout);
    for scenario in Scenario::ALL {
        let listed = stdout.lines().any(|line| {
            line.trim_start()
                .strip_prefix(&format!("- {}:", scenario.name()))
                .is_some_and(|rest| rest.trim_start() == scenario.demonstrates())
        });
        assert!(listed, "{scenario} and what it demonstrates missing from:\n{stdout}");
    }
    for flag in ["--simple", "--live", "--provider", "--json", "--stream", "LOOPBOUND_ANTHROPIC_BASE_URL"] {
        assert!(stdout.contains(flag), "{flag} missing from:\n{stdout}");
    }
    assert!(stdout.contains("130  cancelled by the caller (Ctrl-C)"), "{stdout}");
    assert_eq!(text(&output.stderr), "");
}

#[test]
fn version_prints_the_package_version_and_exits_0() {
    let output = demo330(&["--version"]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(text(&output.stdout), format!("demo330 {}\n", env!("CARGO_PKG_VERSION")));
}

#[test]
fn live_without_an_endpoint_sends_nothing_and_ends_provider_unavailable() {
    for (provider, label) in
        [(&[][..], "openai-compatible"), (&["--provider", "responses"], "openai-responses")]
    {
        let output = Command::new(env!("CARGO_BIN_EXE_demo330"))
            .args(["complete", "--live", "--json"])
            .args(provider)
            .env_remove("LOOPBOUND_OPENAI_BASE_URL")
            .env_remove("LOOPBOUND_OPENAI_MODEL")
            .env_remove("LOOPBOUND_OPENAI_API_KEY")
            .output()
            .expect("demo330 starts");
        assert_eq!(output.status.code(), Some(2));
        let stderr = text(&output.stderr);
        assert!(
            stderr.starts_with("demo330: --live needs an endpoint: set LOOPBOUND_OPENAI_BASE_URL"),
            "{stderr}"
        );
        assert!(
            stderr.ends_with("(LOOPBOUND_OPENAI_BASE_URL is not set (or is empty))\n"),
            "the message names the missing variable: {stderr}"
        );
        let report: serde_json::Value = serde_json::from_str(&text(&output.stdout)).expect("one JSON object");
        assert_eq!(report["status"], "ProviderUnavailable");
        assert_eq!(report["transport"], format!("{label} (not configured)"));
        assert_eq!(report["text"], serde_json::Value::Null);
        assert_eq!(report["events"], serde_json::json!([{"kind": "ModelCall", "name": "model", "count": 1}]));
    }
}

#[test]
fn an_unconfigured_anthropic_endpoint_is_named_and_never_falls_back_to_the_openai_one() {
    let output = Command::new(env!("CARGO_BIN_EXE_demo330"))
        .args(["complete", "--live", "--provider", "anthropic", "--json"])
        .env("LOOPBOUND_OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        .env("LOOPBOUND_OPENAI_MODEL", "m")
        .env_remove("LOOPBOUND_ANTHROPIC_BASE_URL")
        .env_remove("LOOPBOUND_ANTHROPIC_MODEL")
        .output()
        .expect("demo330 starts");
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    assert!(
        stderr.starts_with("demo330: --live needs an endpoint: set LOOPBOUND_ANTHROPIC_BASE_URL"),
        "{stderr}"
    );
    assert!(stderr.ends_with("(LOOPBOUND_ANTHROPIC_BASE_URL is not set (or is empty))\n"), "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&text(&output.stdout)).expect("one JSON object");
    assert_eq!(report["status"], "ProviderUnavailable");
    assert_eq!(report["transport"], "anthropic-messages (not configured)");
}

#[test]
fn a_provider_without_live_or_an_unknown_one_is_a_usage_error() {
    for args in [&["--provider", "anthropic"][..], &["--live", "--provider", "bedrock"]] {
        let output = demo330(args);
        assert_eq!(output.status.code(), Some(64), "{args:?}");
        assert!(text(&output.stderr).contains("Usage: demo330"), "{args:?}");
        assert!(output.stdout.is_empty());
    }
}

#[test]
fn the_default_run_is_complete_on_the_harness() {
    let default = demo330(&[]);
    let explicit = demo330(&["complete"]);
    assert_eq!(default.status.code(), Some(0));
    assert_eq!(text(&default.stdout), text(&explicit.stdout));
    assert!(text(&default.stdout).starts_with("agent         harness loop"));
}

#[test]
fn streaming_changes_the_transport_line_only() {
    let whole = text(&demo330(&["changing"]).stdout);
    let streamed = demo330(&["changing", "--stream"]);
    assert_eq!(streamed.status.code(), Some(2));
    let streamed = text(&streamed.stdout);
    assert!(streamed.contains("transport     scripted, streaming\n"), "{streamed}");
    assert_eq!(streamed.replace("scripted, streaming", "scripted"), whole);
}

#[test]
fn sigint_during_a_run_exits_130_without_an_outcome() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_demo330"))
        .arg("deadline")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("demo330 starts");
    let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
    // The first line is printed once the Ctrl-C handler is in place and the run is starting.
    let mut first = String::new();
    stdout.read_line(&mut first).expect("the header's first line");
    assert!(first.starts_with("agent "), "{first}");
    thread::sleep(Duration::from_millis(200));
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("the kill command (procps) runs");
    assert!(kill.success());

    let status = child.wait().expect("demo330 ends");
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).expect("the rest of stdout");
    let mut stderr = String::new();
    child.stderr.take().expect("piped stderr").read_to_string(&mut stderr).expect("stderr");

    assert_eq!(status.code(), Some(130), "stdout:\n{first}{rest}\nstderr:\n{stderr}");
    assert!(!rest.contains("status"), "{rest}");
    assert!(!rest.contains("DeadlineExceeded"), "{rest}");
    assert!(!rest.contains("Completed"), "{rest}");
    assert!(!rest.contains("\ntext "), "{rest}");
    assert_eq!(stderr, "demo330: the run was cancelled by its caller; no outcome (exit 130)\n");
}
