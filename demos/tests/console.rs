//! The console's library side: arguments, what goes to stdout and stderr, and exit codes.

use std::time::Duration;

use clap::Parser;
use loopbound_demos::console::{Cli, EXIT_USAGE, execute, parse_error};
use loopbound_demos::report::render_json;
use loopbound_demos::scenario::Scenario;
use loopbound_demos::session::run_scenario;
use loopbound_demos::text::render_text;
use loopbound_fixtures::Composition;
use tokio_util::sync::CancellationToken;

fn cli(args: &[&str]) -> Cli {
    Cli::try_parse_from(std::iter::once("demo330").chain(args.iter().copied())).expect("valid arguments")
}

struct Printed {
    code: i32,
    out: String,
    err: String,
}

async fn console(args: &[&str], caller: CancellationToken) -> Printed {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = execute(&cli(args), caller, &mut out, &mut err).await;
    Printed {
        code,
        out: String::from_utf8(out).expect("utf-8 stdout"),
        err: String::from_utf8(err).expect("utf-8 stderr"),
    }
}

#[test]
fn the_defaults_are_complete_on_the_harness_without_streaming() {
    let defaults = cli(&[]);
    assert_eq!(defaults.scenario, Scenario::Complete);
    assert_eq!(defaults.composition(), Composition::Harness);
    assert!(!defaults.json && !defaults.endpoint.live && !defaults.stream);
    let flags = cli(&["--simple", "repeat", "--stream", "--json"]);
    assert_eq!(flags.scenario, Scenario::Repeat);
    assert_eq!(flags.composition(), Composition::Simple);
    assert!(flags.json && flags.stream);
}

#[test]
fn bad_arguments_are_usage_errors_and_help_is_not() {
    for args in
        [&["demo330", "nonsense"][..], &["demo330", "--frobnicate"], &["demo330", "complete", "repeat"]]
    {
        let error = Cli::try_parse_from(args).expect_err("bad arguments");
        let (mut out, mut err) = (Vec::new(), Vec::new());
        assert_eq!(parse_error(&error, &mut out, &mut err), EXIT_USAGE, "{args:?}");
        let err = String::from_utf8(err).expect("utf-8");
        assert_eq!(err.matches("Usage: demo330 [OPTIONS] [SCENARIO]").count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}");
    }
    for args in [&["demo330", "--help"][..], &["demo330", "--version"]] {
        let error = Cli::try_parse_from(args).expect_err("help and version are reported as errors");
        let (mut out, mut err) = (Vec::new(), Vec::new());
        assert_eq!(parse_error(&error, &mut out, &mut err), 0, "{args:?}");
        assert!(!out.is_empty(), "{args:?}");
        assert!(err.is_empty(), "{args:?}");
    }
}

#[tokio::test]
async fn the_text_transcript_is_the_rendered_report() {
    let printed = console(&["complete"], CancellationToken::new()).await;
    let report = run_scenario(Scenario::Complete, Composition::Harness, false, CancellationToken::new())
        .await
        .expect("a report");
    assert_eq!(printed.code, 0);
    assert_eq!(printed.out, render_text(&report));
    assert_eq!(printed.err, "");
}

#[tokio::test]
async fn json_prints_one_object_with_exactly_the_contracts_keys() {
    let printed = console(&["incomplete", "--json", "--simple"], CancellationToken::new()).await;
    assert_eq!(printed.code, 2);
    assert_eq!(printed.err, "");
    assert_eq!(printed.out.lines().count(), 1);
    let value: serde_json::Value = serde_json::from_str(&printed.out).expect("one JSON value");
    let object = value.as_object().expect("an object");
    let keys: Vec<&str> = object.keys().map(String::as_str).collect();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        [
            "agent",
            "capabilities",
            "detail",
            "events",
            "limits",
            "operation",
            "partial_text",
            "pending",
            "spend",
            "status",
            "text",
            "transport",
            "usage"
        ]
    );
    assert_eq!(value["status"], "Incomplete");
    assert_eq!(
        (&value["usage"], &value["detail"], &value["operation"], &value["pending"]),
        (
            &serde_json::Value::Null,
            &serde_json::Value::Null,
            &serde_json::Value::Null,
            &serde_json::Value::Null
        )
    );
    assert_eq!(value["text"], "Review finished.");
    assert_eq!(value["transport"], "scripted");
    assert_eq!(value["events"], serde_json::json!([{"kind": "ModelCall", "name": "model", "count": 1}]));

    let report = run_scenario(Scenario::Incomplete, Composition::Simple, false, CancellationToken::new())
        .await
        .expect("a report");
    assert_eq!(printed.out, format!("{}\n", render_json(&report).expect("serialisable")));
}

#[tokio::test]
async fn a_stop_keeps_no_text_in_either_form() {
    let text = console(&["repeat"], CancellationToken::new()).await;
    assert_eq!(text.code, 2);
    assert!(text.out.contains("status        RepeatedCall (exit 2)"), "{}", text.out);
    assert!(!text.out.contains("\ntext "), "{}", text.out);
    let json = console(&["repeat", "--json"], CancellationToken::new()).await;
    let value: serde_json::Value = serde_json::from_str(&json.out).expect("one JSON value");
    assert_eq!(value["text"], serde_json::Value::Null);
}

#[tokio::test]
async fn an_incomplete_text_is_flagged_as_not_a_completed_task() {
    let printed = console(&["incomplete"], CancellationToken::new()).await;
    let tail: Vec<&str> = printed.out.lines().rev().take(2).collect();
    assert_eq!(
        tail,
        [
            "              NOT a completed task: the model's words only, the host's condition does not hold",
            "text          \"Review finished.\"",
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_run_prints_the_header_and_no_status() {
    let caller = CancellationToken::new();
    let canceller = caller.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        canceller.cancel();
    });
    let printed = console(&["deadline"], caller).await;
    assert_eq!(printed.code, 130);
    assert!(printed.out.starts_with("agent "), "{}", printed.out);
    assert!(!printed.out.contains("status"), "{}", printed.out);
    assert!(!printed.out.contains("events"), "{}", printed.out);
    assert_eq!(printed.err, "demo330: the run was cancelled by its caller; no outcome (exit 130)\n");
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_json_run_prints_nothing_on_stdout() {
    let caller = CancellationToken::new();
    caller.cancel();
    let printed = console(&["deadline", "--json"], caller).await;
    assert_eq!(printed.code, 130);
    assert_eq!(printed.out, "");
}
