//! Against `testkit/mcp/modern.mjs`, a server of the 2026-07-28 revision on the pinned
//! TypeScript SDK v2 (`@modelcontextprotocol/server` 2.4.0) over stdio: discovery, the choice
//! of revision, and multi-round-trip requests answered, refused, bounded in rounds, and cut by
//! the deadline and by the caller with the server told. The server records every round it
//! serves, and every cancellation it receives, in a file the tests read. Without `node` they
//! print SKIPPED and pass (unless LOOPBOUND_REQUIRE_SERVERS=1).

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{arguments, body_error, calls, cancelled_after, register, results, run, scope};
use loopbound::{Limits, Status, Stop, ToolError, ToolSet};
use loopbound_mcp::rmcp::model::{ElicitResult, ElicitationAction};
use loopbound_mcp::{
    Answer, Answerer, Answering, CallError, ConnectError, Connection, InputKind, MAX_ROUNDS, Protocol,
    Question, Registered, Revision,
};
use loopbound_testkit::mcp;
use serde_json::{Value, json};

const TOOLS: [&str; 5] = ["add", "confirm", "ask-forever", "stall", "summarize"];

async fn connect(log: &Path, protocol: Protocol) -> Connection {
    Connection::stdio(&mcp::modern(log).protocol(protocol), mcp::timeouts()).await.expect("modern.mjs starts")
}

/// A server started for one test, with the folder of its log.
struct Started {
    dir: mcp::TempDir,
    log: PathBuf,
    connection: Connection,
    tools: ToolSet,
    registered: Registered,
}

/// Starts `modern.mjs` speaking as `protocol`, its tools in a set; `None` where node is absent.
async fn start(protocol: Protocol) -> Option<Started> {
    if !mcp::available() {
        return None;
    }
    let dir = mcp::TempDir::new("modern");
    let log = dir.path().join("served.jsonl");
    let connection = connect(&log, protocol).await;
    let (tools, registered) = register(&connection);
    Some(Started { dir, log, connection, tools, registered })
}

/// What the server recorded: one `{"tool", "round", "event"}` a line.
fn served(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).expect("the server writes JSON lines"))
        .collect()
}

/// What the server recorded, once `done` holds of it (or after 3 s).
async fn served_once(log: &Path, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let lines = served(log);
        if done(&lines) || started.elapsed() > Duration::from_secs(3) {
            return lines;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn line(tool: &str, round: u64, event: &str) -> Value {
    json!({"tool": tool, "round": round, "event": event})
}

#[tokio::test]
async fn discovery_speaks_2026_07_28_and_the_tools_run_under_the_guard() {
    let Some(server) = start(Protocol::default()).await else { return };
    assert_eq!(server.connection.protocol_version(), "2026-07-28");
    assert!(server.connection.is_stateless());
    let names: Vec<&str> = server.registered.tools().iter().map(|tool| tool.name()).collect();
    assert_eq!(names, TOOLS);
    assert!(server.registered.skipped().is_empty(), "{:?}", server.registered.skipped());

    let scope = scope(&["mcp.modern.add"], Limits::default());
    let (outcome, conversation) = run(&server.tools, &scope, calls(&[("add", r#"{"a": 2, "b": 40}"#)])).await;
    assert_eq!(outcome.status(), Status::Completed);
    assert_eq!(results(&conversation), ["42"]);
    assert_eq!(served(&server.log), [line("add", 1, "call")]);
    server.connection.close().await;
}

#[tokio::test]
async fn a_pinned_2025_06_18_greets_the_same_server_with_initialize() {
    let Some(server) = start(Protocol::default().revision(Revision::V2025_06_18)).await else { return };
    assert_eq!(server.connection.protocol_version(), "2025-06-18");
    assert!(!server.connection.is_stateless());
    let scope = scope(&["mcp.modern.add"], Limits::default());
    assert_eq!(server.tools.invoke(&scope, "add", r#"{"a": 1, "b": 2}"#).await.expect("answered"), "3");
    server.connection.close().await;
}

#[tokio::test]
async fn a_2025_server_is_spoken_to_in_2025_06_18_unless_2026_07_28_is_pinned() {
    if !mcp::available() {
        return;
    }
    let connection =
        Connection::stdio(&mcp::everything(), mcp::timeouts()).await.expect("server-everything starts");
    assert_eq!(connection.protocol_version(), "2025-06-18");
    assert!(!connection.is_stateless());
    connection.close().await;

    let pinned = mcp::everything().protocol(Protocol::default().revision(Revision::V2026_07_28));
    match Connection::stdio(&pinned, mcp::timeouts()).await {
        Err(ConnectError::RevisionUnsupported { server, revision }) => {
            assert_eq!((server.as_str(), revision), ("everything", Revision::V2026_07_28));
        }
        other => panic!("expected RevisionUnsupported, got {other:?}"),
    }
}

#[tokio::test]
async fn by_default_a_question_is_declined_and_the_call_goes_on() {
    let Some(server) = start(Protocol::default()).await else { return };
    let scope = scope(&["mcp.modern.confirm"], Limits::default());
    let answer = server.tools.invoke(&scope, "confirm", r#"{"action": "deploy"}"#).await.expect("answered");
    assert_eq!(answer, r#"deploy: {"kind":"elicit","action":"decline"}"#);
    assert_eq!(served(&server.log), [line("confirm", 1, "call"), line("confirm", 2, "call")]);
    server.connection.close().await;
}

/// Accepts every confirmation with `{"confirm": true}`; says it samples, but answers nothing
/// else.
struct Confirm;

impl Answerer for Confirm {
    fn answer<'a>(&'a self, question: Question<'a>) -> Answering<'a> {
        assert_eq!(question.server(), "modern");
        Box::pin(async move {
            (question.kind() == InputKind::Elicitation).then(|| {
                Answer::Elicitation(
                    ElicitResult::new(ElicitationAction::Accept).with_content(json!({"confirm": true})),
                )
            })
        })
    }

    fn samples(&self) -> bool {
        true
    }
}

#[tokio::test]
async fn a_hosts_answerer_answers_and_what_it_cannot_answer_ends_the_call() {
    let Some(server) = start(Protocol::default().answerer(Arc::new(Confirm))).await else { return };
    let granted = scope(&["mcp.modern.confirm"], Limits::default());
    let answer = server.tools.invoke(&granted, "confirm", r#"{"action": "deploy"}"#).await.expect("answered");
    assert_eq!(answer, r#"deploy: {"kind":"elicit","action":"accept","content":{"confirm":true}}"#);

    // It declares sampling but does not answer one: the call ends after the first round, typed.
    let granted = scope(&["mcp.modern.summarize"], Limits::default());
    let error = body_error(server.tools.invoke(&granted, "summarize", r#"{"text": "a long text"}"#).await);
    assert_eq!(error, CallError::Unanswered { server: "modern".into(), kind: InputKind::Sampling });
    let rounds = [line("confirm", 1, "call"), line("confirm", 2, "call"), line("summarize", 1, "call")];
    assert_eq!(served(&server.log), rounds);
    server.connection.close().await;

    // The default answerer does not declare sampling: the server refuses to ask for one
    // (-32021, a capability the client lacks), and nothing more is sent.
    let log = server.dir.path().join("sampling.jsonl");
    let connection = connect(&log, Protocol::default()).await;
    let (tools, _) = register(&connection);
    let granted = scope(&["mcp.modern.summarize"], Limits::default());
    let error = body_error(tools.invoke(&granted, "summarize", r#"{"text": "a long text"}"#).await);
    assert!(matches!(error, CallError::Protocol { code: -32021, .. }), "{error:?}");
    assert_eq!(served(&log), [line("summarize", 1, "call")]);
    connection.close().await;
}

#[tokio::test]
async fn a_server_that_asks_forever_is_given_up_after_max_rounds() {
    let Some(server) = start(Protocol::default()).await else { return };
    let scope = scope(&["mcp.modern.ask-forever"], Limits::default());
    let error = body_error(server.tools.invoke(&scope, "ask-forever", "{}").await);
    assert_eq!(error, CallError::TooManyRounds { server: "modern".into(), limit: MAX_ROUNDS });
    let rounds: Vec<Value> = (1..=10).map(|round| line("ask-forever", round, "call")).collect();
    assert_eq!(MAX_ROUNDS, 10);
    assert_eq!(served(&server.log), rounds);
    server.connection.close().await;
}

/// What the server records of a `stall` call cut in its second round.
fn stalled() -> [Value; 3] {
    [line("stall", 1, "call"), line("stall", 2, "call"), line("stall", 2, "cancelled")]
}

#[tokio::test]
async fn the_deadline_cuts_a_round_in_flight_and_the_server_is_told() {
    let Some(server) = start(Protocol::default()).await else { return };
    let scope = scope(&["mcp.modern.stall"], Limits::default().with_deadline(Duration::from_secs(1)));
    let started = Instant::now();
    let (outcome, conversation) = run(&server.tools, &scope, calls(&[("stall", "{}")])).await;
    let elapsed = started.elapsed();
    assert_eq!(outcome.status(), Status::DeadlineExceeded);
    assert!(elapsed < Duration::from_millis(1500), "the run returned {elapsed:?} after it started");
    assert!(results(&conversation).is_empty(), "no result was handed on");
    assert_eq!(served_once(&server.log, |lines| lines.len() >= 3).await, stalled());
    server.connection.close().await;
}

#[tokio::test]
async fn the_callers_cancellation_cuts_a_round_in_flight_and_the_server_is_told() {
    let Some(server) = start(Protocol::default()).await else { return };
    let stall = server.registered.get("stall").expect("stall").guarded().clone();
    let scope = cancelled_after("mcp.modern.stall", Duration::from_millis(500));
    let started = Instant::now();
    let result = stall.invoke(&scope, arguments(json!({}))).await;
    let elapsed = started.elapsed();
    assert!(matches!(result, Err(ToolError::Stopped(Stop::Cancelled))), "{result:?}");
    assert!(elapsed < Duration::from_millis(1000), "the call returned {elapsed:?} after it started");
    assert_eq!(served_once(&server.log, |lines| lines.len() >= 3).await, stalled());
    server.connection.close().await;
}
