//! Against the real `@modelcontextprotocol/server-everything` 2026.8.31 over stdio: discovery,
//! the guard's checks, cancellation the server receives, and a server that dies or answers
//! garbage. Each test starts its own server; without `node` they print SKIPPED and pass
//! (unless LOOPBOUND_REQUIRE_SERVERS=1).

mod common;

use std::time::{Duration, Instant};

use common::{Warnings, arguments, body_error, calls, events, register, results, run, scope};
use loopbound::tool::{EffectKind, Policy};
use loopbound::{HaltReason, Limits, Status, Stop, ToolError};
use loopbound_mcp::{CallError, Connection};
use loopbound_testkit::mcp;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const TOOLS: [&str; 13] = [
    "echo",
    "get-annotated-message",
    "get-env",
    "get-resource-links",
    "get-resource-reference",
    "get-structured-content",
    "get-sum",
    "get-tiny-image",
    "gzip-file-as-resource",
    "toggle-simulated-logging",
    "toggle-subscriber-updates",
    "trigger-long-running-operation",
    "simulate-research-query",
];

async fn connect() -> Connection {
    Connection::stdio(&mcp::everything(), mcp::timeouts()).await.expect("server-everything starts")
}

#[tokio::test]
async fn discovery_offers_every_tool_with_its_schema_capability_and_hints() {
    if !mcp::available() {
        return;
    }
    let connection = connect().await;
    let (tools, registered) = register(&connection);
    let names: Vec<&str> = registered.tools().iter().map(|tool| tool.name()).collect();
    assert_eq!(names, TOOLS);
    assert!(registered.skipped().is_empty(), "{:?}", registered.skipped());
    assert_eq!(tools.definitions().len(), 13);

    let sum = registered.get("get-sum").expect("get-sum");
    assert_eq!(sum.capability(), "mcp.everything.get-sum");
    assert_eq!((sum.effect(), sum.policy()), (EffectKind::Read, Policy::Allow));
    let parameters = &sum.guarded().definition().parameters;
    assert_eq!(parameters["required"], json!(["a", "b"]));
    assert_eq!(parameters["properties"]["a"]["type"], "number");
    assert_eq!(parameters.get("$schema"), None);
    let mut served = connection.tools()[6].input_schema().clone();
    served.as_object_mut().map(|schema| schema.remove("$schema"));
    assert_eq!(*parameters, served);

    let toggle = registered.get("toggle-simulated-logging").expect("toggle");
    assert_eq!((toggle.effect(), toggle.policy()), (EffectKind::Effect, Policy::Allow));
    let gzip = registered.get("gzip-file-as-resource").expect("gzip");
    assert_eq!((gzip.effect(), gzip.policy()), (EffectKind::Idempotent, Policy::Allow));
    connection.close().await;
}

#[tokio::test]
async fn a_call_goes_through_the_guard_and_returns_the_servers_text() {
    if !mcp::available() {
        return;
    }
    let connection = connect().await;
    let (tools, _) = register(&connection);
    let scope = scope(&["mcp.everything.get-sum"], Limits::default());
    let (outcome, conversation) = run(&tools, &scope, calls(&[("get-sum", r#"{"a": 2, "b": 40}"#)])).await;
    assert_eq!(outcome.status(), Status::Completed);
    assert_eq!(results(&conversation), ["The sum of 2 and 40 is 42."]);
    assert_eq!(
        events(&outcome),
        ["ModelCall model 1", "Middleware get-sum 1", "ToolCall get-sum 1", "ModelCall model 2"]
    );
}

#[tokio::test]
async fn a_visible_tool_without_its_capability_halts_before_anything_is_sent() {
    if !mcp::available() {
        return;
    }
    let (connection, log, _) =
        mcp::recorded("everything", &mcp::everything_js(), &["stdio"], mcp::timeouts()).await.unwrap();
    let (tools, _) = register(&connection);
    assert!(tools.contains("get-env"), "the model can see it");
    let scope = scope(&["mcp.everything.echo"], Limits::default());
    let (outcome, conversation) = run(&tools, &scope, calls(&[("get-env", "{}")])).await;
    assert_eq!(outcome.status(), Status::PermissionDenied);
    assert_eq!(events(&outcome), ["ModelCall model 1", "Middleware get-env 1", "PermissionDenied get-env 0"]);
    assert!(results(&conversation).is_empty());
    assert!(log.sent("tools/call").is_empty(), "nothing reached the server");
}

#[tokio::test]
async fn arguments_that_break_the_schema_are_refused_before_the_guard() {
    if !mcp::available() {
        return;
    }
    let (connection, log, _) =
        mcp::recorded("everything", &mcp::everything_js(), &["stdio"], mcp::timeouts()).await.unwrap();
    let (tools, _) = register(&connection);
    let scope =
        scope(&["mcp.everything.get-sum", "mcp.everything.get-structured-content"], Limits::default());
    let steps = calls(&[
        ("get-sum", r#"{"a": "two", "b": 40}"#),
        ("get-sum", r#"{"a": 2}"#),
        ("get-structured-content", r#"{"location": "Paris"}"#),
        ("get-sum", r#"{"a": 2, "b": 40}"#),
    ]);
    let (outcome, conversation) = run(&tools, &scope, steps).await;
    assert_eq!(outcome.status(), Status::Completed);
    assert_eq!(
        results(&conversation),
        [
            "Error: invalid arguments for tool get-sum: at /a: expected a number.",
            "Error: invalid arguments for tool get-sum: at /: missing required property `b`.",
            "Error: invalid arguments for tool get-structured-content: at /location: expected one of \"New York\", \
             \"Chicago\", \"Los Angeles\".",
            "The sum of 2 and 40 is 42.",
        ]
    );
    assert_eq!(scope.tool_calls(), 1, "the refusals counted nothing");
    assert_eq!(log.sent("tools/call").len(), 1, "only the valid call was sent");
}

#[tokio::test]
async fn a_journaled_run_validates_arguments_before_the_guard_and_proposes_nothing_invalid() {
    if !mcp::available() {
        return;
    }
    let (connection, log, _) =
        mcp::recorded("everything", &mcp::everything_js(), &["stdio"], mcp::timeouts()).await.unwrap();
    let (tools, _) = register(&connection);
    let scope = scope(&["mcp.everything.get-sum"], Limits::default());
    let model = loopbound::scripted::sequence(calls(&[
        ("get-sum", r#"{"a": "two", "b": 40}"#),
        ("get-sum", r#"{"a": 2, "b": 40}"#),
    ]));
    let journal = loopbound::journal::MemoryJournal::default();
    let run = loopbound::journal::RunId::new("sum-journaled").unwrap();
    let mut conversation = vec![loopbound::Message::user("Use the tools.")];
    let outcome = loopbound::Runner::new(&tools, model)
        .observe(loopbound::Middleware)
        .run_journaled(&journal, &run, &scope, &mut conversation, |_| true)
        .await
        .unwrap();
    assert_eq!(outcome.status(), Status::Completed);
    let answers = results(&conversation);
    assert!(answers[0].starts_with("Error: invalid arguments for tool get-sum: at /a"), "{answers:?}");
    assert_eq!(answers[1], "The sum of 2 and 40 is 42.");
    assert_eq!(
        events(&outcome),
        [
            "ModelCall model 1",
            "Middleware get-sum 1",
            "ModelCall model 2",
            "Middleware get-sum 2",
            "ToolCall get-sum 1",
            "Proposed get-sum 1 sum-journaled/op/1",
            "Allowed get-sum 1 sum-journaled/op/1 by policy",
            "ModelCall model 3",
        ],
        "the invalid call was neither counted nor proposed"
    );
    assert_eq!(scope.tool_calls(), 1);
    assert_eq!(log.sent("tools/call").len(), 1, "only the valid call was sent");
    let record = loopbound::journal::inspect(&journal, &run).await.unwrap();
    assert_eq!(record.operations().count(), 1, "one proposal, for the valid call");
}

#[tokio::test]
async fn two_spellings_of_the_same_arguments_are_one_signature() {
    if !mcp::available() {
        return;
    }
    let (connection, log, _) =
        mcp::recorded("everything", &mcp::everything_js(), &["stdio"], mcp::timeouts()).await.unwrap();
    let (tools, _) = register(&connection);
    let scope = scope(&["mcp.everything.get-sum"], Limits::default());
    let steps = calls(&[("get-sum", r#"{"a": 2, "b": 40}"#), ("get-sum", r#"{ "b": 4e1, "a": 2.0 }"#)]);
    let (outcome, _) = run(&tools, &scope, steps).await;
    assert_eq!(outcome.status(), Status::RepeatedCall);
    assert_eq!(events(&outcome).last().map(String::as_str), Some("RepeatedCall get-sum 1"));
    let sent = log.sent("tools/call");
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["params"]["arguments"], json!({"a": 2, "b": 40}));
}

#[tokio::test]
async fn the_tool_budget_counts_calls_across_tools() {
    if !mcp::available() {
        return;
    }
    let (connection, log, _) =
        mcp::recorded("everything", &mcp::everything_js(), &["stdio"], mcp::timeouts()).await.unwrap();
    let (tools, _) = register(&connection);
    let granted = ["mcp.everything.echo", "mcp.everything.get-sum", "mcp.everything.get-env"];
    let scope = scope(&granted, Limits::default().with_tool_calls(2));
    let steps =
        calls(&[("echo", r#"{"message": "hi"}"#), ("get-sum", r#"{"a": 1, "b": 2}"#), ("get-env", "{}")]);
    let (outcome, conversation) = run(&tools, &scope, steps).await;
    assert_eq!(outcome.status(), Status::ToolBudget);
    assert_eq!(events(&outcome).last().map(String::as_str), Some("ToolBudget get-env 2"));
    assert_eq!(results(&conversation), ["Echo: hi", "The sum of 1 and 2 is 3."]);
    assert_eq!(log.sent("tools/call").len(), 2);
}

/// The request id and progress token of the only `trigger-long-running-operation` call sent.
fn long_call(log: &mcp::WireLog) -> (Value, Value) {
    let sent: Vec<Value> = log
        .sent("tools/call")
        .into_iter()
        .filter(|call| call["params"]["name"] == "trigger-long-running-operation")
        .collect();
    assert_eq!(sent.len(), 1, "{sent:?}");
    (sent[0]["id"].clone(), sent[0]["params"]["_meta"]["progressToken"].clone())
}

#[tokio::test]
async fn the_deadline_cuts_a_long_operation_and_the_server_receives_the_cancellation() {
    if !mcp::available() {
        return;
    }
    let (connection, log, _) =
        mcp::recorded("everything", &mcp::everything_js(), &["stdio"], mcp::timeouts()).await.unwrap();
    let (tools, _) = register(&connection);
    let granted = ["mcp.everything.trigger-long-running-operation"];
    let scope = scope(&granted, Limits::default().with_deadline(Duration::from_secs(1)));
    let started = Instant::now();
    let steps = calls(&[("trigger-long-running-operation", r#"{"duration": 3, "steps": 3}"#)]);
    let (outcome, conversation) = run(&tools, &scope, steps).await;
    let elapsed = started.elapsed();
    assert_eq!(outcome.status(), Status::DeadlineExceeded);
    assert!(elapsed < Duration::from_millis(1800), "the run returned {elapsed:?} after it started");
    assert!(results(&conversation).is_empty(), "no result was handed on");
    let (id, token) = long_call(&log);

    // The server received the cancellation for that request id (sent by the connection's task
    // once the call was dropped)...
    let cancelled = cancellations_within(&log, 1, Duration::from_secs(2)).await;
    assert_eq!(cancelled.len(), 1, "{cancelled:?}");
    assert_eq!(cancelled[0]["params"]["requestId"], id);
    // ...and acted on it: the operation ran on (its progress kept coming) past the point where
    // it would have answered, and the server never sent the answer.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert!(log.progress_for(&token) >= 2, "the operation kept running on the server");
    assert_eq!(log.responses_for(&id), Vec::<Value>::new());

    // Control: the same operation, not cancelled, is answered.
    let control = common::scope(&["mcp.everything.trigger-long-running-operation"], Limits::default());
    let answer =
        tools.invoke(&control, "trigger-long-running-operation", r#"{"duration": 1, "steps": 1}"#).await;
    assert!(answer.expect("answered").starts_with("Long running operation completed."));
}

/// The `notifications/cancelled` written to the server, once there are `count` of them (or
/// after `limit`).
async fn cancellations_within(log: &mcp::WireLog, count: usize, limit: Duration) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let cancelled = log.sent("notifications/cancelled");
        if cancelled.len() >= count || started.elapsed() > limit {
            return cancelled;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_halt_or_the_callers_cancellation_cancels_the_call_in_flight() {
    if !mcp::available() {
        return;
    }
    let (connection, log, _) =
        mcp::recorded("everything", &mcp::everything_js(), &["stdio"], mcp::timeouts()).await.unwrap();
    let (tools, registered) = register(&connection);
    let long =
        registered.get("trigger-long-running-operation").expect("the long operation").guarded().clone();

    // The caller cancels while the call is in flight.
    let caller = CancellationToken::new();
    let cancelled_scope = loopbound::Scope::builder()
        .grant("mcp.everything.trigger-long-running-operation")
        .caller(caller.clone())
        .build()
        .unwrap();
    let cancel = caller.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        cancel.cancel();
    });
    let result = long.invoke(&cancelled_scope, arguments(json!({"duration": 3, "steps": 3}))).await;
    assert!(matches!(result, Err(ToolError::Stopped(Stop::Cancelled))), "{result:?}");

    // A halt recorded by another call of the same request stops this one.
    let halted_scope = scope(&["mcp.everything.trigger-long-running-operation"], Limits::default());
    let in_flight = {
        let (long, scope) = (long.clone(), halted_scope.clone());
        tokio::spawn(async move { long.invoke(&scope, arguments(json!({"duration": 3, "steps": 6}))).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let refused = tools.invoke(&halted_scope, "get-env", "{}").await;
    assert!(matches!(refused, Err(ToolError::Stopped(Stop::Halted(HaltReason::PermissionDenied)))));
    let result = in_flight.await.unwrap();
    assert!(
        matches!(result, Err(ToolError::Stopped(Stop::Halted(HaltReason::PermissionDenied)))),
        "{result:?}"
    );

    let calls: Vec<Value> = log.sent("tools/call").iter().map(|call| call["id"].clone()).collect();
    let cancellations: Vec<Value> = cancellations_within(&log, 2, Duration::from_secs(2))
        .await
        .iter()
        .map(|c| c["params"]["requestId"].clone())
        .collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(cancellations, calls, "each call in flight was cancelled at the server");
    tokio::time::sleep(Duration::from_millis(3500)).await;
    for id in &calls {
        assert_eq!(log.responses_for(id), Vec::<Value>::new(), "no answer for a cancelled call");
    }
}

#[tokio::test]
async fn a_server_killed_mid_call_ends_that_call_with_a_typed_error_and_the_run_goes_on() {
    if !mcp::available() {
        return;
    }
    let warnings = Warnings::default();
    let _reporting = warnings.install();
    let connection = connect().await;
    let pid = connection.process_id().expect("a child process");
    let (tools, _) = register(&connection);
    let granted = ["mcp.everything.trigger-long-running-operation", "mcp.everything.echo"];
    let scope = scope(&granted, Limits::default());
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(700)).await;
        mcp::kill(pid);
    });
    let steps = calls(&[
        ("trigger-long-running-operation", r#"{"duration": 3, "steps": 3}"#),
        ("echo", r#"{"message": "still there?"}"#),
        ("echo", r#"{"message": "and now?"}"#),
    ]);
    let started = Instant::now();
    let (outcome, conversation) = run(&tools, &scope, steps).await;
    assert!(started.elapsed() < Duration::from_secs(3), "the call ended when the server died");
    assert_eq!(outcome.status(), Status::Completed, "the run went on as for a body error");
    assert_eq!(outcome.text(), Some("done"));
    let closed = "MCP server everything is closed (its process ended or its connection broke); no call to its \
                  tools is sent any more";
    assert_eq!(
        results(&conversation),
        [
            format!("Error: tool trigger-long-running-operation failed: {closed}"),
            format!("Error: tool echo failed: {closed}"),
            format!("Error: tool echo failed: {closed}"),
        ]
    );
    assert_eq!(scope.tool_calls(), 3);
    assert!(connection.is_closed());
    assert_eq!(warnings.count(), 1, "the dead server was reported once");
}

#[tokio::test]
async fn lines_of_garbage_between_messages_are_skipped() {
    if !mcp::available() {
        return;
    }
    let server = mcp::with_garbage("everything", &mcp::everything_js(), &["stdio"], "lines");
    let connection = Connection::stdio(&server, mcp::timeouts()).await.expect("connects despite the garbage");
    assert_eq!(connection.tools().len(), 13);
    let (tools, _) = register(&connection);
    let scope = scope(&["mcp.everything.get-sum"], Limits::default());
    assert_eq!(
        tools.invoke(&scope, "get-sum", r#"{"a": 1, "b": 1}"#).await.unwrap(),
        "The sum of 1 and 1 is 2."
    );
}

#[tokio::test]
async fn garbage_instead_of_a_result_is_a_typed_error_and_the_run_goes_on() {
    if !mcp::available() {
        return;
    }
    for (mode, expected) in [
        ("call-text", CallError::Timeout { server: "everything".into(), after: Duration::from_secs(2) }),
        ("call-shape", CallError::Malformed { server: "everything".into() }),
    ] {
        let server = mcp::with_garbage("everything", &mcp::everything_js(), &["stdio"], mode);
        let timeouts = mcp::timeouts().with_call(Duration::from_secs(2));
        let connection = Connection::stdio(&server, timeouts).await.expect("connects");
        let (tools, registered) = register(&connection);
        let scope = scope(&["mcp.everything.get-sum", "mcp.everything.echo"], Limits::default());
        let sum = registered.get("get-sum").unwrap().guarded();
        let error = body_error(sum.invoke(&scope, arguments(json!({"a": 1, "b": 1}))).await);
        assert_eq!(error, expected, "{mode}");
        let steps = calls(&[("echo", r#"{"message": "x"}"#)]);
        let (outcome, conversation) = run(&tools, &scope, steps).await;
        assert_eq!(outcome.status(), Status::Completed, "{mode}");
        assert_eq!(results(&conversation), [format!("Error: tool echo failed: {expected}")], "{mode}");
        assert!(!connection.is_closed(), "{mode}: a server that answers garbage is not dead");
    }
}

#[tokio::test]
async fn no_child_outlives_its_connection() {
    if !mcp::available() {
        return;
    }
    let connection = connect().await;
    let pid = connection.process_id().expect("a child process");
    assert!(mcp::running(pid));
    let (tools, _) = register(&connection);
    drop(connection);
    assert!(mcp::running(pid), "the tools still hold the connection");
    drop(tools);
    assert!(mcp::gone_within(pid, Duration::from_secs(5)).await, "the server outlived its connection");

    let closed = connect().await;
    let pid = closed.process_id().expect("a child process");
    closed.close().await;
    assert!(mcp::gone_within(pid, Duration::from_secs(5)).await, "close() ended the server");
    assert!(closed.is_closed());
}
