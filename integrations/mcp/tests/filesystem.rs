//! Against the real `@modelcontextprotocol/server-filesystem` 2026.8.31 over stdio, with real
//! side effects in a temporary folder: discovery, the guard's checks, a read blocked on a FIFO
//! cut by the deadline (the server is told), a server that dies or answers garbage, and
//! destructive tools (`Ask`) decided through a journal like any other tool: proposed and
//! stopped `AwaitingApproval` before anything is sent, run once after an approval bound to the
//! proposal's digest, never after a denial. Without `node` they print SKIPPED and pass (unless
//! LOOPBOUND_REQUIRE_SERVERS=1).

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{calls, events, register, register_with, results, run, scope};
use loopbound::journal::{self, Digest, JournalError, MemoryJournal, OperationId, OperationStatus, RunId};
use loopbound::tool::{EffectKind, Policy};
use loopbound::transport::ModelReply;
use loopbound::{Limits, Message, Outcome, RunError, Runner, Status, ToolSet};
use loopbound_mcp::{Connection, Mapping};
use loopbound_testkit::mcp::{self, TempDir, WireLog};
use loopbound_testkit::refund;
use serde_json::{Value, json};

async fn connect(root: &TempDir) -> Connection {
    Connection::stdio(&mcp::filesystem(root.path()), mcp::timeouts()).await.expect("server-filesystem starts")
}

fn arguments(pairs: &[(&str, &Path)]) -> String {
    let object: serde_json::Map<String, Value> = pairs
        .iter()
        .map(|(key, path)| ((*key).to_owned(), json!(path.to_str().expect("utf-8 path"))))
        .collect();
    Value::Object(object).to_string()
}

/// A FIFO in `dir`: reading it blocks until something writes to it.
fn fifo(dir: &Path) -> PathBuf {
    let path = dir.join("pipe");
    let status = std::process::Command::new("mkfifo").arg(&path).status().expect("mkfifo runs");
    assert!(status.success());
    path
}

/// Opens the FIFO for writing (which succeeds once a reader has it open) and writes a line.
async fn feed(path: PathBuf) {
    let writing = tokio::task::spawn_blocking(move || {
        use std::io::Write as _;
        std::fs::OpenOptions::new().write(true).open(path).and_then(|mut pipe| pipe.write_all(b"late\n"))
    });
    tokio::time::timeout(Duration::from_secs(5), writing)
        .await
        .expect("the server still holds the FIFO open")
        .expect("the writer thread")
        .expect("written");
}

#[tokio::test]
async fn discovery_maps_annotations_to_effects_and_decisions() {
    if !mcp::available() {
        return;
    }
    let root = TempDir::new("fs-discovery");
    let connection = connect(&root).await;
    let (_, registered) = register(&connection);
    assert_eq!(registered.tools().len(), 14);
    assert!(registered.skipped().is_empty(), "{:?}", registered.skipped());
    let mapped = |name: &str| {
        let tool = registered.get(name).expect(name);
        (tool.capability().to_owned(), tool.effect(), tool.policy())
    };
    let capability = |name: &str| format!("mcp.filesystem.{name}");
    assert_eq!(mapped("read_text_file"), (capability("read_text_file"), EffectKind::Read, Policy::Allow));
    assert_eq!(mapped("write_file"), (capability("write_file"), EffectKind::Idempotent, Policy::Ask));
    assert_eq!(mapped("move_file"), (capability("move_file"), EffectKind::Effect, Policy::Ask));
    assert_eq!(mapped("edit_file"), (capability("edit_file"), EffectKind::Effect, Policy::Ask));
    assert_eq!(
        mapped("create_directory"),
        (capability("create_directory"), EffectKind::Idempotent, Policy::Allow)
    );
}

#[tokio::test]
async fn a_visible_write_without_its_capability_halts_and_writes_nothing() {
    if !mcp::available() {
        return;
    }
    let root = TempDir::new("fs-forbidden");
    let connection = connect(&root).await;
    let (tools, _) = register_with(&connection, &Mapping::new().policy("write_file", Policy::Allow));
    let scope = scope(&["mcp.filesystem.read_text_file"], Limits::default());
    let file = root.path().join("note.txt");
    let write = format!(r#"{{"path": {}, "content": "x"}}"#, json!(file));
    let (outcome, _) = run(&tools, &scope, calls(&[("write_file", &write)])).await;
    assert_eq!(outcome.status(), Status::PermissionDenied);
    assert_eq!(root.files(), Vec::<String>::new());
}

#[tokio::test]
async fn arguments_that_break_the_schema_are_refused_before_the_guard() {
    if !mcp::available() {
        return;
    }
    let root = TempDir::new("fs-schema");
    let connection = connect(&root).await;
    let (tools, _) = register(&connection);
    let granted = ["mcp.filesystem.read_text_file", "mcp.filesystem.read_multiple_files"];
    let scope = scope(&granted, Limits::default());
    let steps = calls(&[
        ("read_text_file", r#"{"path": 5}"#),
        ("read_multiple_files", r#"{"paths": []}"#),
        ("read_multiple_files", r#"{"paths": ["a", 7]}"#),
    ]);
    let (outcome, conversation) = run(&tools, &scope, steps).await;
    assert_eq!(outcome.status(), Status::Completed);
    assert_eq!(
        results(&conversation),
        [
            "Error: invalid arguments for tool read_text_file: at /path: expected a string.",
            "Error: invalid arguments for tool read_multiple_files: at /paths: expected an array of at least 1 items.",
            "Error: invalid arguments for tool read_multiple_files: at /paths/1: expected a string.",
        ]
    );
    assert_eq!(scope.tool_calls(), 0);
}

#[tokio::test]
async fn two_spellings_of_the_same_arguments_are_one_signature() {
    if !mcp::available() {
        return;
    }
    let root = TempDir::new("fs-repeat");
    std::fs::write(root.path().join("a.txt"), "one\ntwo\n").unwrap();
    let connection = connect(&root).await;
    let (tools, _) = register(&connection);
    let scope = scope(&["mcp.filesystem.read_text_file"], Limits::default());
    let path = json!(root.path().join("a.txt"));
    let first = format!(r#"{{"path": {path}, "head": 1}}"#);
    let second = format!(r#"{{"head": 1.0, "path": {path}}}"#);
    let (outcome, conversation) =
        run(&tools, &scope, calls(&[("read_text_file", &first), ("read_text_file", &second)])).await;
    assert_eq!(outcome.status(), Status::RepeatedCall);
    assert_eq!(results(&conversation), ["one"]);
    assert_eq!(events(&outcome).last().map(String::as_str), Some("RepeatedCall read_text_file 1"));
}

#[tokio::test]
async fn the_tool_budget_counts_calls_across_tools() {
    if !mcp::available() {
        return;
    }
    let root = TempDir::new("fs-budget");
    std::fs::write(root.path().join("a.txt"), "a").unwrap();
    let connection = connect(&root).await;
    let (tools, _) = register(&connection);
    let granted =
        ["mcp.filesystem.list_directory", "mcp.filesystem.get_file_info", "mcp.filesystem.read_text_file"];
    let scope = scope(&granted, Limits::default().with_tool_calls(2));
    let dir = arguments(&[("path", root.path())]);
    let file = arguments(&[("path", &root.path().join("a.txt"))]);
    let steps = calls(&[("list_directory", &dir), ("read_text_file", &file), ("get_file_info", &file)]);
    let (outcome, conversation) = run(&tools, &scope, steps).await;
    assert_eq!(outcome.status(), Status::ToolBudget);
    assert_eq!(results(&conversation), ["[FILE] a.txt", "a"]);
    assert_eq!(events(&outcome).last().map(String::as_str), Some("ToolBudget get_file_info 2"));
}

#[tokio::test]
async fn the_deadline_cuts_a_blocked_read_and_the_server_receives_the_cancellation() {
    if !mcp::available() {
        return;
    }
    let root = TempDir::new("fs-deadline");
    let pipe = fifo(root.path());
    let root_arg = root.path().to_str().expect("utf-8 path");
    let (connection, log, _) =
        mcp::recorded("filesystem", &mcp::filesystem_js(), &[root_arg], mcp::timeouts()).await.unwrap();
    let (tools, _) = register(&connection);
    let granted = ["mcp.filesystem.read_text_file"];
    let scope = scope(&granted, Limits::default().with_deadline(Duration::from_secs(1)));
    let started = Instant::now();
    let (outcome, conversation) =
        run(&tools, &scope, calls(&[("read_text_file", &arguments(&[("path", &pipe)]))])).await;
    assert_eq!(outcome.status(), Status::DeadlineExceeded);
    assert!(
        started.elapsed() < Duration::from_millis(1800),
        "returned {:?} after it started",
        started.elapsed()
    );
    assert!(results(&conversation).is_empty());

    let sent = log.sent("tools/call");
    assert_eq!(sent.len(), 1);
    let id = sent[0]["id"].clone();
    let started = Instant::now();
    while log.sent("notifications/cancelled").is_empty() && started.elapsed() < Duration::from_secs(2) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let cancelled = log.sent("notifications/cancelled");
    assert_eq!(cancelled.len(), 1);
    assert_eq!(cancelled[0]["params"]["requestId"], id);
    // The read completes on the server once something is written; having received the
    // cancellation, the server never answers it (without one, it does: see
    // `without_a_cancellation_the_same_blocked_read_is_answered`).
    feed(pipe).await;
    let control = common::scope(&["mcp.filesystem.list_allowed_directories"], Limits::default());
    let listed = tools.invoke(&control, "list_allowed_directories", "{}").await.unwrap();
    assert_eq!(listed, format!("Allowed directories:\n{root_arg}"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(log.responses_for(&id), Vec::<Value>::new(), "no answer for the cancelled read");
}

#[tokio::test]
async fn without_a_cancellation_the_same_blocked_read_is_answered() {
    if !mcp::available() {
        return;
    }
    let root = TempDir::new("fs-control");
    let pipe = fifo(root.path());
    let connection = connect(&root).await;
    let (tools, _) = register(&connection);
    let scope = scope(&["mcp.filesystem.read_text_file"], Limits::default());
    let reading = {
        let (tools, scope, arguments) = (tools.clone(), scope.clone(), arguments(&[("path", &pipe)]));
        tokio::spawn(async move { tools.invoke(&scope, "read_text_file", &arguments).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    feed(pipe).await;
    assert_eq!(reading.await.unwrap().unwrap(), "late\n");
}

#[tokio::test]
async fn a_server_killed_mid_call_ends_that_call_with_a_typed_error_and_the_run_goes_on() {
    if !mcp::available() {
        return;
    }
    let root = TempDir::new("fs-kill");
    let pipe = fifo(root.path());
    let connection = connect(&root).await;
    let pid = connection.process_id().expect("a child process");
    let (tools, _) = register(&connection);
    let scope = scope(&["mcp.filesystem.read_text_file", "mcp.filesystem.list_directory"], Limits::default());
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(700)).await;
        mcp::kill(pid);
    });
    let steps = calls(&[
        ("read_text_file", &arguments(&[("path", &pipe)])),
        ("list_directory", &arguments(&[("path", root.path())])),
    ]);
    let (outcome, conversation) = run(&tools, &scope, steps).await;
    assert_eq!(outcome.status(), Status::Completed);
    let closed = "MCP server filesystem is closed (its process ended or its connection broke); no call to its \
                  tools is sent any more";
    assert_eq!(
        results(&conversation),
        [
            format!("Error: tool read_text_file failed: {closed}"),
            format!("Error: tool list_directory failed: {closed}")
        ]
    );
    assert!(mcp::gone_within(pid, Duration::from_secs(5)).await);
}

#[tokio::test]
async fn garbage_on_stdout_is_skipped_or_a_typed_error() {
    if !mcp::available() {
        return;
    }
    let root = TempDir::new("fs-garbage");
    std::fs::write(root.path().join("a.txt"), "a").unwrap();
    let root_arg = root.path().to_str().expect("utf-8 path");
    let file = arguments(&[("path", &root.path().join("a.txt"))]);

    let lines = mcp::with_garbage("filesystem", &mcp::filesystem_js(), &[root_arg], "lines");
    let connection = Connection::stdio(&lines, mcp::timeouts()).await.expect("connects despite the garbage");
    let (tools, _) = register(&connection);
    let scope = scope(&["mcp.filesystem.read_text_file"], Limits::default());
    assert_eq!(tools.invoke(&scope, "read_text_file", &file).await.unwrap(), "a");

    let text = mcp::with_garbage("filesystem", &mcp::filesystem_js(), &[root_arg], "call-text");
    let timeouts = mcp::timeouts().with_call(Duration::from_secs(2));
    let connection = Connection::stdio(&text, timeouts).await.expect("connects");
    let (tools, _) = register(&connection);
    let scope = common::scope(&["mcp.filesystem.read_text_file"], Limits::default());
    let (outcome, conversation) = run(&tools, &scope, calls(&[("read_text_file", &file)])).await;
    assert_eq!(outcome.status(), Status::Completed);
    assert_eq!(
        results(&conversation),
        [
            "Error: tool read_text_file failed: MCP server filesystem did not answer within 2000 ms; the call was cancelled"
        ]
    );
}

/// server-filesystem over a recording transport: every message sent to it is in the log.
async fn recorded(root: &TempDir) -> (Connection, WireLog) {
    let root_arg = root.path().to_str().expect("utf-8 path");
    let (connection, log, _) =
        mcp::recorded("filesystem", &mcp::filesystem_js(), &[root_arg], mcp::timeouts()).await.unwrap();
    (connection, log)
}

/// One attempt of the journaled run `run`: a fresh scope granting `granted`, a scripted model
/// answering step n of `script` when the conversation holds n - 1 assistant messages (so a
/// resume that replays recorded replies asks it only for the next one).
async fn attempt(
    journal: &MemoryJournal,
    tools: &ToolSet,
    run: &str,
    granted: &[&str],
    script: &[ModelReply],
) -> (Result<Outcome, RunError>, Vec<Message>) {
    let model = refund::model(script.to_vec(), |_| ());
    let mut conversation = vec![Message::user("Use the tools.")];
    let run = RunId::new(run).expect("a valid run id");
    let outcome = Runner::new(tools, model)
        .observe(loopbound::Middleware)
        .run_journaled(journal, &run, &scope(granted, Limits::default()), &mut conversation, |_| true)
        .await;
    (outcome, conversation)
}

/// The tool calls the server was sent, by tool name.
fn sent_calls(log: &WireLog) -> Vec<String> {
    log.sent("tools/call")
        .iter()
        .map(|message| message["params"]["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn an_approved_move_runs_once_and_its_file_exists_exactly_once() {
    if !mcp::available() {
        return;
    }
    let root = TempDir::new("fs-approve");
    let (source, destination, note) =
        (root.path().join("a.txt"), root.path().join("b.txt"), root.path().join("note.txt"));
    std::fs::write(&source, "content").unwrap();
    let (connection, log) = recorded(&root).await;
    let (tools, registered) = register(&connection);
    assert_eq!(
        registered.get("move_file").map(|t| (t.effect(), t.policy())),
        Some((EffectKind::Effect, Policy::Ask))
    );
    let moved = arguments(&[("source", &source), ("destination", &destination)]);
    let write = format!(r#"{{"content": "x", "path": {}}}"#, json!(note));
    let script = [
        ModelReply::call("c1", "move_file", &moved),
        ModelReply::call("c2", "write_file", &write),
        ModelReply::text("done"),
    ];
    let granted = ["mcp.filesystem.move_file", "mcp.filesystem.write_file"];
    let journal = MemoryJournal::default();

    // The move is proposed; the run stops before anything is sent.
    let (first, _) = attempt(&journal, &tools, "fs-approve", &granted, &script).await;
    let first = first.unwrap();
    assert_eq!(first.status(), Status::AwaitingApproval);
    assert_eq!(first.operation(), Some("fs-approve/op/1"));
    assert_eq!(
        events(&first),
        [
            "ModelCall model 1",
            "Middleware move_file 1",
            "ToolCall move_file 1",
            "Proposed move_file 1 fs-approve/op/1",
            "AwaitingApproval move_file 1 fs-approve/op/1",
        ]
    );
    assert_eq!(sent_calls(&log), Vec::<String>::new());
    assert_eq!(root.files(), ["a.txt"]);

    // The proposal names the operation and holds the canonical arguments, keys in order.
    let record = journal::inspect(&journal, &RunId::new("fs-approve").unwrap()).await.unwrap();
    let operation = record.operation(1).unwrap();
    assert_eq!(operation.status(), OperationStatus::AwaitingDecision);
    let proposal = operation.proposal().clone();
    assert_eq!(
        (proposal.tool(), proposal.capability(), proposal.effect()),
        ("move_file", "mcp.filesystem.move_file", EffectKind::Effect)
    );
    assert_eq!(
        proposal.arguments(),
        format!(r#"{{"destination":{},"source":{}}}"#, json!(destination), json!(source))
    );

    // An approval presented for other arguments is refused and decides nothing.
    let id = OperationId::parse("fs-approve/op/1").unwrap();
    let other =
        Digest::of(&format!(r#"move_file:{{"destination":{},"source":{}}}"#, json!(note), json!(source)));
    assert_eq!(
        journal::approve(&journal, journal::ProposalKey::new(&id, &other), "mallory").await.err(),
        Some(JournalError::SignatureMismatch)
    );
    let record = journal::inspect(&journal, &RunId::new("fs-approve").unwrap()).await.unwrap();
    assert_eq!(record.operation(1).unwrap().status(), OperationStatus::AwaitingDecision);
    assert_eq!(root.files(), ["a.txt"]);

    // Approved: the resume sends the move once, then stops on the write (idempotent, still Ask).
    assert_eq!(
        journal::approve(&journal, journal::ProposalKey::new(&id, &proposal.digest()), "alice")
            .await
            .unwrap(),
        proposal
    );
    let (second, conversation) = attempt(&journal, &tools, "fs-approve", &granted, &script).await;
    let second = second.unwrap();
    assert_eq!(second.status(), Status::AwaitingApproval);
    assert_eq!(second.operation(), Some("fs-approve/op/2"));
    assert_eq!(
        events(&second).split_off(5),
        [
            "Resumed run 2",
            "Allowed move_file 1 fs-approve/op/1 by approver alice",
            "EffectStarted move_file 1 fs-approve/op/1",
            "EffectRecorded move_file 1 fs-approve/op/1",
            "ModelCall model 2",
            "Middleware write_file 2",
            "ToolCall write_file 2",
            "Proposed write_file 2 fs-approve/op/2",
            "AwaitingApproval write_file 2 fs-approve/op/2",
        ]
    );
    let moved_text = format!("Successfully moved {} to {}", source.display(), destination.display());
    assert_eq!(results(&conversation), std::slice::from_ref(&moved_text));
    assert_eq!(sent_calls(&log), ["move_file"]);
    assert_eq!(root.files(), ["b.txt"]);
    assert_eq!(std::fs::read_to_string(&destination).unwrap(), "content");

    // Approved too, as the outcome hands it out: the resume replays the recorded move (not sent
    // again) and sends the write.
    let pending = second.pending().expect("the write waits");
    assert_eq!(pending.tool(), "write_file");
    journal::approve(&journal, pending, "alice").await.unwrap();
    let (third, conversation) = attempt(&journal, &tools, "fs-approve", &granted, &script).await;
    let third = third.unwrap();
    assert_eq!(third.status(), Status::Completed);
    assert_eq!(results(&conversation), [moved_text, format!("Successfully wrote to {}", note.display())]);
    assert_eq!(sent_calls(&log), ["move_file", "write_file"]);
    // MCP has no idempotency key field: the write is sent with its arguments and nothing else.
    let sent = log.sent("tools/call");
    assert_eq!(sent[1]["params"]["arguments"], json!({"content": "x", "path": note}));
    assert_eq!(root.files(), ["b.txt", "note.txt"]);
    assert_eq!(std::fs::read_to_string(&destination).unwrap(), "content");
    assert_eq!(std::fs::read_to_string(&note).unwrap(), "x");

    // The run has ended: resuming it again is refused and sends nothing.
    let (again, _) = attempt(&journal, &tools, "fs-approve", &granted, &script).await;
    assert_eq!(again.err(), Some(RunError::Journal(JournalError::Finished(Status::Completed))));
    assert_eq!(sent_calls(&log), ["move_file", "write_file"]);
    assert_eq!(root.files(), ["b.txt", "note.txt"]);
}

#[tokio::test]
async fn a_denied_move_halts_denied_and_leaves_the_file_untouched() {
    if !mcp::available() {
        return;
    }
    let root = TempDir::new("fs-deny");
    let (source, destination) = (root.path().join("a.txt"), root.path().join("b.txt"));
    std::fs::write(&source, "content").unwrap();
    let (connection, log) = recorded(&root).await;
    let (tools, _) = register(&connection);
    let script = [
        ModelReply::call("c1", "move_file", arguments(&[("source", &source), ("destination", &destination)])),
        ModelReply::text("done"),
    ];
    let granted = ["mcp.filesystem.move_file"];
    let journal = MemoryJournal::default();
    let (first, _) = attempt(&journal, &tools, "fs-deny", &granted, &script).await;
    assert_eq!(first.unwrap().status(), Status::AwaitingApproval);

    let record = journal::inspect(&journal, &RunId::new("fs-deny").unwrap()).await.unwrap();
    let digest = record.operation(1).unwrap().proposal().digest();
    let id = OperationId::parse("fs-deny/op/1").unwrap();
    journal::deny(&journal, journal::ProposalKey::new(&id, &digest), "bob").await.unwrap();
    let (second, conversation) = attempt(&journal, &tools, "fs-deny", &granted, &script).await;
    let second = second.unwrap();
    assert_eq!(second.status(), Status::Denied);
    assert_eq!(second.operation(), Some("fs-deny/op/1"));
    assert_eq!(
        events(&second).split_off(5),
        ["Resumed run 2", "Denied move_file 1 fs-deny/op/1 by approver bob"]
    );
    assert_eq!(results(&conversation), Vec::<String>::new());
    assert_eq!(sent_calls(&log), Vec::<String>::new());
    assert_eq!(root.files(), ["a.txt"]);
    assert_eq!(std::fs::read_to_string(&source).unwrap(), "content");
    let (again, _) = attempt(&journal, &tools, "fs-deny", &granted, &script).await;
    assert_eq!(again.err(), Some(RunError::Journal(JournalError::Finished(Status::Denied))));
    assert_eq!(root.files(), ["a.txt"]);
}

#[tokio::test]
async fn outside_a_journal_an_ask_tool_fails_closed_and_an_allowed_one_runs_once() {
    if !mcp::available() {
        return;
    }
    let root = TempDir::new("fs-plain");
    let (source, destination) = (root.path().join("a.txt"), root.path().join("b.txt"));
    std::fs::write(&source, "content").unwrap();
    let connection = connect(&root).await;
    let moved = arguments(&[("source", &source), ("destination", &destination)]);

    let (asking, _) = register(&connection);
    let ungranted = scope(&["mcp.filesystem.read_text_file"], Limits::default());
    let (outcome, _) = run(&asking, &ungranted, calls(&[("move_file", &moved)])).await;
    assert_eq!(outcome.status(), Status::PermissionDenied);
    assert_eq!(root.files(), ["a.txt"]);

    let granted = scope(&["mcp.filesystem.move_file"], Limits::default());
    let (outcome, conversation) = run(&asking, &granted, calls(&[("move_file", &moved)])).await;
    assert_eq!(outcome.status(), Status::Denied, "no journal can record a decision: fail closed");
    assert_eq!(outcome.operation(), None);
    assert_eq!(
        events(&outcome),
        [
            "ModelCall model 1",
            "Middleware move_file 1",
            "ToolCall move_file 1",
            "Denied move_file 1 by policy ask, no journal"
        ]
    );
    assert_eq!(results(&conversation), Vec::<String>::new());
    assert_eq!(root.files(), ["a.txt"]);

    let (allowed, _) = register_with(&connection, &Mapping::new().policy("move_file", Policy::Allow));
    let granted = scope(&["mcp.filesystem.move_file"], Limits::default());
    let (outcome, conversation) =
        run(&allowed, &granted, calls(&[("move_file", &moved), ("move_file", &moved)])).await;
    assert_eq!(outcome.status(), Status::RepeatedCall, "the same move again is refused before it is sent");
    assert_eq!(
        results(&conversation),
        [format!("Successfully moved {} to {}", source.display(), destination.display())]
    );
    assert_eq!(root.files(), ["b.txt"]);
    assert_eq!(std::fs::read_to_string(&destination).unwrap(), "content");
}
