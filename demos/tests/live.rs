//! `demo330 --live` over real HTTP on loopback, against the scripted aimock server: the review
//! really goes through the OpenAI-compatible transport (or, with `--provider anthropic`, the
//! Messages API transport; with `--provider responses`, the Responses API transport), with the
//! worked example in the conversation, and gives the same events and status as the scripted
//! `complete` scenario. The progress scenarios (`retry`, `cycle`, `streak`, `nudge`) go through it
//! too, each against a mock model of its own name, and end as their scripted runs do.

use std::process::Command;

use loopbound_testkit::aimock::Aimock;
use serde_json::{Value, json};

const COMPLETE_EVENTS: [(&str, &str, u32); 7] = [
    ("ModelCall", "model", 1),
    ("Middleware", "read_ticket", 1),
    ("ToolCall", "read_ticket", 1),
    ("ModelCall", "model", 2),
    ("Middleware", "finish_review", 2),
    ("ToolCall", "finish_review", 2),
    ("ModelCall", "model", 3),
];

/// `demo330 ARGS --live`, configured for `server` through the provider `args` name.
fn live_command(server: &Aimock, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_demo330"));
    command.args(args).arg("--live");
    if args.contains(&"anthropic") {
        command
            .env("LOOPBOUND_ANTHROPIC_BASE_URL", server.base_url())
            .env("LOOPBOUND_ANTHROPIC_MODEL", "aimock-review")
            .env("LOOPBOUND_ANTHROPIC_API_KEY", "sk-demo-live-secret")
            .env("LOOPBOUND_ANTHROPIC_TIMEOUT_SECS", "10")
            // The OpenAI variables point nowhere: the Anthropic run must not read them.
            .env("LOOPBOUND_OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
            .env("LOOPBOUND_OPENAI_MODEL", "unused");
    } else {
        command
            .env("LOOPBOUND_OPENAI_BASE_URL", server.base_url())
            .env("LOOPBOUND_OPENAI_MODEL", "aimock-review")
            .env("LOOPBOUND_OPENAI_API_KEY", "sk-demo-live-secret")
            .env("LOOPBOUND_OPENAI_TIMEOUT_SECS", "10");
    }
    command
}

fn live_run(server: &Aimock, args: &[&str]) -> (Option<i32>, Value) {
    let output = live_command(server, args).arg("--json").output().expect("demo330 starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!stdout.contains("sk-demo-live-secret"), "the API key leaked: {stdout}");
    assert!(!String::from_utf8_lossy(&output.stderr).contains("sk-demo-live-secret"));
    let report = serde_json::from_str(&stdout).unwrap_or_else(|error| {
        panic!("one JSON object on stdout ({error}): {stdout}\nserver log:\n{}", server.log())
    });
    (output.status.code(), report)
}

/// Runs `complete --live` with `extra` arguments in both compositions and on both paths: each
/// run is Completed with the scripted run's events, over the transport the header calls `label`.
fn completes_on_every_path(server: &Aimock, extra: &[&str], label: &str) {
    let expected: Vec<Value> = COMPLETE_EVENTS
        .iter()
        .map(|(kind, name, count)| json!({"kind": kind, "name": name, "count": count}))
        .collect();
    for flags in [&[][..], &["--simple"], &["--stream"], &["--simple", "--stream"]] {
        let args: Vec<&str> = ["complete"].iter().chain(flags).chain(extra).copied().collect();
        let (code, report) = live_run(server, &args);
        assert_eq!(code, Some(0), "{args:?}: {report}");
        assert_eq!(report["status"], "Completed", "{args:?}");
        assert_eq!(report["text"], "Review finished.", "{args:?}");
        assert_eq!(report["events"], Value::Array(expected.clone()), "{args:?}");
        let transport = report["transport"].as_str().unwrap_or_default();
        let prefix = format!("{label}, model aimock-review at http://127.0.0.1:");
        assert!(transport.starts_with(&prefix), "{transport}");
    }
}

#[tokio::test]
async fn complete_over_http_matches_the_scripted_run_in_both_compositions_and_paths() {
    let Some(server) = Aimock::start() else { return };
    completes_on_every_path(&server, &[], "openai-compatible");
    // The first request of a run carries the instructions and the worked example before the
    // real request, and the tool definitions with their schemas.
    let bodies = server.request_bodies().await;
    assert_eq!(bodies.len(), 12, "three requests per run");
    let first = &bodies[0];
    let roles: Vec<&str> =
        first["messages"].as_array().into_iter().flatten().filter_map(|m| m["role"].as_str()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "assistant", "tool", "assistant", "user"]);
    assert_eq!(first["messages"][7]["content"], "Review ticket 42.");
    assert_eq!(first["max_completion_tokens"], 800);
    assert_eq!(first.get("max_tokens"), None);
    let tools: Vec<&str> = first["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert_eq!(tools, ["read_ticket", "finish_review"]);
}

#[tokio::test]
async fn complete_over_the_messages_api_matches_the_scripted_run_in_both_compositions_and_paths() {
    let Some(server) = Aimock::start() else { return };
    completes_on_every_path(&server, &["--provider", "anthropic"], "anthropic-messages");
    // Every request went to /v1/messages, none to the chat endpoint.
    assert_eq!(server.request_bodies().await.len(), 0);
    the_worked_example_came_first_with_the_cap(&server.message_bodies().await);
}

#[tokio::test]
async fn complete_over_the_responses_api_matches_the_scripted_run_in_both_compositions_and_paths() {
    let Some(server) = Aimock::start() else { return };
    completes_on_every_path(&server, &["--provider", "responses"], "openai-responses");
    // Every request went to /v1/responses, none to the chat endpoint; aimock reads the cap sent
    // as `max_output_tokens` into `max_tokens`.
    assert_eq!(server.request_bodies().await.len(), 0);
    the_worked_example_came_first_with_the_cap(&server.response_bodies().await);
}

/// Twelve requests (three per run) whose first, as aimock's journal shows it in the chat shape,
/// has the system prompt and the worked example before the real request, and the cap of 800.
fn the_worked_example_came_first_with_the_cap(bodies: &[Value]) {
    assert_eq!(bodies.len(), 12, "three requests per run");
    let roles: Vec<&str> =
        bodies[0]["messages"].as_array().into_iter().flatten().filter_map(|m| m["role"].as_str()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "assistant", "tool", "assistant", "user"]);
    assert_eq!(bodies[0]["max_tokens"], 800);
}

#[tokio::test]
async fn watching_a_live_run_prints_each_update_through_every_provider() {
    let Some(server) = Aimock::start() else { return };
    for provider in ["openai", "anthropic", "responses"] {
        let output = live_command(&server, &["complete", "--watch", "--provider", provider])
            .output()
            .expect("demo330 starts");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(0), "{provider}: {stdout}");
        assert!(!stdout.contains("sk-demo-live-secret"), "the API key leaked: {stdout}");
        let live: Vec<&str> = stdout
            .lines()
            .skip_while(|line| !line.starts_with("live "))
            .take_while(|line| !line.is_empty())
            .collect();
        assert_eq!(
            live,
            [
                "live          updates as they happen",
                "  event       ModelCall model 1",
                "  call        read_ticket call_demo_read (reply 1, call 1)",
                "  event       Middleware read_ticket 1",
                "  event       ToolCall read_ticket 1",
                "  result      call_demo_read \"Ticket 42: Login returns HTTP 401 for a known account. No changes requested.\"",
                "  event       ModelCall model 2",
                "  call        finish_review call_demo_finish (reply 2, call 1)",
                "  event       Middleware finish_review 2",
                "  event       ToolCall finish_review 2",
                "  result      call_demo_finish \"Review completed. No business write performed.\"",
                "  event       ModelCall model 3",
                "  text        \"Review finished.\"",
                "  outcome     Completed",
            ],
            "{provider}: {stdout}"
        );
        // Watching a live model streams it.
        assert!(stdout.contains(", streaming\n"), "{provider}: {stdout}");
    }
}

#[tokio::test]
async fn forbidden_over_http_is_refused_inside_the_tool_boundary() {
    let Some(server) = Aimock::start() else { return };
    let (code, report) = live_run(&server, &["forbidden"]);
    assert_eq!(code, Some(2));
    assert_eq!(report["status"], "PermissionDenied");
    assert_eq!(report["capabilities"], json!(["review.finish"]));
    assert_eq!(
        report["events"],
        json!([
            {"kind": "ModelCall", "name": "model", "count": 1},
            {"kind": "Middleware", "name": "read_ticket", "count": 1},
            {"kind": "PermissionDenied", "name": "read_ticket", "count": 0},
        ])
    );
}

/// The progress scenarios over HTTP. aimock plays, under a model name of its own for each, the
/// calls of the scenario's scripted model after the worked example (its fixtures sit with the
/// review's); each run ends as the scripted run does: its status, exit code, events, detail and
/// text are the scripted golden transcript's, in both compositions and on both paths.
#[tokio::test]
async fn each_progress_scenario_over_http_ends_as_its_scripted_run() {
    let Some(server) = Aimock::start() else { return };
    // Each scenario, its exit code, and how many requests a run sends.
    let cases = [("retry", 0, 4), ("cycle", 2, 6), ("streak", 2, 3), ("nudge", 2, 3)];
    let mut sent = 0;
    for (scenario, exit, requests) in cases {
        let golden = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/golden")
            .join(format!("{scenario}.harness.json"));
        let scripted: Value =
            serde_json::from_str(&std::fs::read_to_string(&golden).expect("the golden file"))
                .expect("the golden file is JSON");
        let model = format!("aimock-{scenario}");
        for flags in [&[][..], &["--simple"], &["--stream"], &["--simple", "--stream"]] {
            let args: Vec<&str> = [scenario].iter().chain(flags).copied().collect();
            let mut command = live_command(&server, &args);
            let output =
                command.env("LOOPBOUND_OPENAI_MODEL", &model).arg("--json").output().expect("demo330 starts");
            let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
                panic!("{args:?}: one JSON object ({error}); server log:\n{}", server.log())
            });
            assert_eq!(output.status.code(), Some(exit), "{args:?}: {report}");
            for key in ["status", "events", "detail", "text", "progress", "limits"] {
                assert_eq!(report[key], scripted[key], "{args:?}: {key}");
            }
            let transport = report["transport"].as_str().unwrap_or_default();
            let prefix = format!("openai-compatible, model {model} at http://127.0.0.1:");
            assert!(transport.starts_with(&prefix), "{transport}");
            sent += requests;
        }
    }
    let bodies = server.request_bodies().await;
    assert_eq!(bodies.len(), sent, "every request of every run reached the server");
    // The nudge went over the wire as the error result of the repeated call: the last request of
    // each nudge run carries it, and the run's next repeat halted.
    let nudged: Vec<&Value> = bodies
        .iter()
        .filter_map(|body| body["messages"].as_array()?.last())
        .filter(|last| last["tool_call_id"] == "call_nudge_2")
        .collect();
    assert_eq!(nudged.len(), 4, "one per nudge run");
    for message in nudged {
        assert_eq!(message["role"], "tool");
        let content = message["content"].as_str().unwrap_or_default();
        assert!(
            content.starts_with("Error: no progress: read_ticket was called again with the same arguments"),
            "{content}"
        );
    }
}
