//! Tool calls a server runs as tasks (the Tasks extension of 2026-07-28), against an
//! in-process server of the test's own: the TypeScript SDK v2 serves discovery and
//! multi-round-trip requests (see `modern.rs`) but not the Tasks extension, and no published
//! server does, so this one speaks it by hand, one JSON message a line. It records every
//! request it receives, which is how the tests know the server was told.
//!
//! Its tools: `slow` ends after three polls, `endless` never ends, `failing` fails, `asking`
//! asks a question then ends with the answer, `asking-forever` asks a new question every
//! poll; `eager` suggests polling every 0 ms and `lazy` every minute.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use common::{arguments, body_error, calls, cancelled_after, register, results, run, scope};
use loopbound::{Limits, Status, Stop, ToolError};
use loopbound_mcp::task::{MAX_POLL_INTERVAL, MIN_POLL_INTERVAL};
use loopbound_mcp::{CallError, Connection, MAX_QUESTIONS, MAX_ROUNDS, Timeouts};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};

mod common;

const TOOLS: [&str; 8] =
    ["slow", "endless", "failing", "asking", "asking-forever", "flooding", "eager", "lazy"];

/// Every request the server received, in order.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<Value>>>);

impl Received {
    fn push(&self, request: Value) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).push(request);
    }

    fn all(&self) -> Vec<Value> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The requests of `method`.
    fn of(&self, method: &str) -> Vec<Value> {
        self.all().into_iter().filter(|request| request["method"] == method).collect()
    }

    /// The task ids sent `tasks/cancel`, once there are `count` (or after 2 s).
    async fn cancelled(&self, count: usize) -> Vec<Value> {
        let started = Instant::now();
        loop {
            let ids: Vec<Value> =
                self.of("tasks/cancel").iter().map(|request| request["params"]["taskId"].clone()).collect();
            if ids.len() >= count || started.elapsed() > Duration::from_secs(2) {
                return ids;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

fn tool(name: &str) -> Value {
    json!({"name": name, "annotations": {"readOnlyHint": true}, "inputSchema": {"type": "object"}})
}

/// A task in `status`, with the fields every task carries.
fn task(id: &str, status: &str, poll_ms: u64) -> Value {
    json!({
        "taskId": id, "status": status, "createdAt": "2026-07-28T00:00:00Z",
        "lastUpdatedAt": "2026-07-28T00:00:00Z", "ttlMs": null, "pollIntervalMs": poll_ms,
    })
}

fn with(mut value: Value, extra: Value) -> Value {
    if let (Some(object), Value::Object(extra)) = (value.as_object_mut(), extra) {
        object.extend(extra);
    }
    value
}

fn text(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

/// The answer to `tasks/get` for the task of `tool`, polled for the `poll`-th time.
fn status(tool: &str, poll: usize, updates: &[Value]) -> Value {
    let id = format!("t-{tool}");
    let elicit = |key: String| {
        json!({key: {"method": "elicitation/create", "params": {
            "mode": "form", "message": "Go on?",
            "requestedSchema": {"type": "object", "properties": {"go": {"type": "boolean"}}},
        }}})
    };
    match tool {
        "slow" if poll >= 3 => {
            with(task(&id, "completed", 50), json!({"result": text("done after 3 polls")}))
        }
        "failing" => with(task(&id, "failed", 50), json!({"error": {"code": -32603, "message": "boom"}})),
        "asking" => match updates.last() {
            Some(update) => {
                let answer = update["params"]["inputResponses"]["go"].to_string();
                with(task(&id, "completed", 50), json!({"result": text(&answer)}))
            }
            None => with(task(&id, "input_required", 50), json!({"inputRequests": elicit("go".into())})),
        },
        "asking-forever" => {
            with(task(&id, "input_required", 50), json!({"inputRequests": elicit(format!("q{poll}"))}))
        }
        // One question more than a round may ask, in one answer.
        "flooding" => {
            let questions: serde_json::Map<String, Value> = (0..=MAX_QUESTIONS)
                .flat_map(|n| elicit(format!("q{n}")).as_object().cloned().unwrap_or_default())
                .collect();
            with(task(&id, "input_required", 50), json!({"inputRequests": questions}))
        }
        "eager" => task(&id, "working", 0),
        "lazy" if poll >= 2 => with(task(&id, "completed", 60_000), json!({"result": text("done")})),
        "lazy" => task(&id, "working", 60_000),
        _ => task(&id, "working", 50),
    }
}

/// Serves 2026-07-28 by hand: `server/discover`, `tools/list`, `tools/call` (every call
/// becomes a task `t-<tool>`), `tasks/get`, `tasks/update` and `tasks/cancel`.
async fn server(stream: DuplexStream, received: Received) {
    let (read, mut write) = tokio::io::split(stream);
    let mut lines = BufReader::new(read).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let request: Value = serde_json::from_str(&line).unwrap_or_default();
        received.push(request.clone());
        let Some(id) = request.get("id") else { continue };
        let params = &request["params"];
        let result = match request["method"].as_str().unwrap_or_default() {
            "server/discover" => json!({
                "supportedVersions": ["2026-07-28"], "resultType": "complete", "ttlMs": 0, "cacheScope": "private",
                "capabilities": {"tools": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}},
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "tasks", "version": "0"}},
            }),
            "tools/list" => json!({"tools": TOOLS.map(tool), "resultType": "complete"}),
            "tools/call" => {
                let name = params["name"].as_str().unwrap_or_default();
                with(task(&format!("t-{name}"), "working", 50), json!({"resultType": "task"}))
            }
            "tasks/get" => {
                let task_id = params["taskId"].as_str().unwrap_or_default().to_owned();
                let same = |request: &Value| request["params"]["taskId"] == task_id.as_str();
                let polls = received.of("tasks/get").iter().filter(|request| same(request)).count();
                let updates: Vec<Value> = received.of("tasks/update").into_iter().filter(same).collect();
                with(
                    status(task_id.trim_start_matches("t-"), polls, &updates),
                    json!({"resultType": "complete"}),
                )
            }
            _ => json!({"resultType": "complete"}),
        };
        let reply = format!("{}\n", json!({"jsonrpc": "2.0", "id": id, "result": result}));
        if write.write_all(reply.as_bytes()).await.is_err() {
            break;
        }
    }
}

async fn connect(timeouts: Timeouts) -> (Connection, Received) {
    let received = Received::default();
    let (client, served) = tokio::io::duplex(64 * 1024);
    tokio::spawn(server(served, received.clone()));
    let connection =
        Connection::with_transport("tasks", client, timeouts).await.expect("the in-process server answers");
    (connection, received)
}

fn granted(tool: &str) -> loopbound::Scope {
    scope(&[&format!("mcp.tasks.{tool}")], Limits::default())
}

#[tokio::test]
async fn a_task_is_polled_to_its_result_with_the_tasks_extension_declared() {
    let (connection, received) = connect(Timeouts::default()).await;
    assert_eq!(connection.protocol_version(), "2026-07-28");
    let (tools, _) = register(&connection);
    let answer = tools.invoke(&granted("slow"), "slow", "{}").await.expect("answered");
    assert_eq!(answer, "done after 3 polls");
    assert_eq!(received.of("tasks/get").len(), 3);
    assert_eq!(received.of("tasks/cancel"), Vec::<Value>::new(), "a task that ended is not cancelled");
    let call = &received.of("tools/call")[0];
    let context = &call["params"]["_meta"];
    assert_eq!(context["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
    let capabilities = &context["io.modelcontextprotocol/clientCapabilities"];
    assert_eq!(capabilities["extensions"]["io.modelcontextprotocol/tasks"], json!({}));
    assert_eq!(capabilities["elicitation"], json!({}));
    assert_eq!(capabilities.get("sampling"), None, "the default answerer does not sample");
}

#[tokio::test]
async fn the_deadline_cuts_a_task_that_never_ends_and_the_server_is_told() {
    let (connection, received) = connect(Timeouts::default()).await;
    let (tools, _) = register(&connection);
    let scope = scope(&["mcp.tasks.endless"], Limits::default().with_deadline(Duration::from_secs(1)));
    let started = Instant::now();
    let (outcome, conversation) = run(&tools, &scope, calls(&[("endless", "{}")])).await;
    let elapsed = started.elapsed();
    assert_eq!(outcome.status(), Status::DeadlineExceeded);
    assert!(elapsed < Duration::from_millis(1500), "the run returned {elapsed:?} after it started");
    assert!(results(&conversation).is_empty());
    assert_eq!(received.cancelled(1).await, [json!("t-endless")]);
    assert!(received.of("tasks/get").len() >= 10, "polled every 50 ms while it waited");
}

#[tokio::test]
async fn the_callers_cancellation_cuts_a_task_and_the_server_is_told() {
    let (connection, received) = connect(Timeouts::default()).await;
    let (_, registered) = register(&connection);
    let endless = registered.get("endless").expect("endless").guarded().clone();
    let scope = cancelled_after("mcp.tasks.endless", Duration::from_millis(300));
    let started = Instant::now();
    let result = endless.invoke(&scope, arguments(json!({}))).await;
    let elapsed = started.elapsed();
    assert!(matches!(result, Err(ToolError::Stopped(Stop::Cancelled))), "{result:?}");
    assert!(elapsed < Duration::from_millis(800), "the call returned {elapsed:?} after it started");
    assert_eq!(received.cancelled(1).await, [json!("t-endless")]);
}

#[tokio::test]
async fn the_call_timeout_cuts_a_task_and_the_server_is_told() {
    let (connection, received) = connect(Timeouts::default().with_call(Duration::from_millis(400))).await;
    let (tools, _) = register(&connection);
    let started = Instant::now();
    let error = body_error(tools.invoke(&granted("endless"), "endless", "{}").await);
    assert_eq!(error, CallError::Timeout { server: "tasks".into(), after: Duration::from_millis(400) });
    assert!(started.elapsed() < Duration::from_millis(900), "{:?}", started.elapsed());
    assert_eq!(received.cancelled(1).await, [json!("t-endless")]);
}

#[tokio::test]
async fn a_failed_task_is_a_typed_error_and_is_not_cancelled() {
    let (connection, received) = connect(Timeouts::default()).await;
    let (tools, _) = register(&connection);
    let error = body_error(tools.invoke(&granted("failing"), "failing", "{}").await);
    assert_eq!(error, CallError::TaskFailed { code: -32603, message: "boom".into() });
    assert_eq!(received.of("tasks/cancel"), Vec::<Value>::new());
}

#[tokio::test]
async fn a_tasks_question_is_answered_once_and_one_that_asks_forever_is_given_up_and_cancelled() {
    let (connection, received) = connect(Timeouts::default()).await;
    let (tools, _) = register(&connection);
    let answer = tools.invoke(&granted("asking"), "asking", "{}").await.expect("answered");
    assert_eq!(answer, r#"{"action":"decline"}"#);
    assert_eq!(received.of("tasks/update").len(), 1);

    let error = body_error(tools.invoke(&granted("asking-forever"), "asking-forever", "{}").await);
    assert_eq!(error, CallError::TooManyRounds { server: "tasks".into(), limit: MAX_ROUNDS });
    let updates = received.of("tasks/update");
    assert_eq!(updates.len(), 1 + MAX_ROUNDS, "one answer per question, at most MAX_ROUNDS");
    assert_eq!(received.cancelled(1).await, [json!("t-asking-forever")]);
}

#[tokio::test]
async fn a_round_of_more_questions_than_allowed_is_refused_unanswered_and_its_task_cancelled() {
    let (connection, received) = connect(Timeouts::default()).await;
    let (tools, _) = register(&connection);
    let error = body_error(tools.invoke(&granted("flooding"), "flooding", "{}").await);
    assert_eq!(error, CallError::TooManyQuestions { server: "tasks".into(), limit: MAX_QUESTIONS });
    assert_eq!(received.of("tasks/update"), Vec::<Value>::new(), "nothing answered");
    assert_eq!(received.cancelled(1).await, [json!("t-flooding")]);
}

#[tokio::test]
async fn polling_is_spaced_within_its_bounds_whatever_the_server_suggests() {
    assert_eq!((MIN_POLL_INTERVAL, MAX_POLL_INTERVAL), (Duration::from_millis(50), Duration::from_secs(1)));
    let (connection, received) = connect(Timeouts::default().with_call(Duration::from_millis(500))).await;
    let (tools, _) = register(&connection);
    // `eager` suggests 0 ms: at most one poll every 50 ms within the 500 ms call timeout.
    let error = body_error(tools.invoke(&granted("eager"), "eager", "{}").await);
    assert!(matches!(error, CallError::Timeout { .. }), "{error:?}");
    let polls = received.of("tasks/get").len();
    assert!((5..=10).contains(&polls), "{polls} polls in 500 ms");
    assert_eq!(received.cancelled(1).await, [json!("t-eager")]);

    // `lazy` suggests a minute after its first poll (at 50 ms): polled again a second later,
    // which ends it.
    let (connection, _) = connect(Timeouts::default()).await;
    let (tools, _) = register(&connection);
    let started = Instant::now();
    assert_eq!(tools.invoke(&granted("lazy"), "lazy", "{}").await.expect("answered"), "done");
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_secs(1) && elapsed < Duration::from_millis(1600), "{elapsed:?}");
}
