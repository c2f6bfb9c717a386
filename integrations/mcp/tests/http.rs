//! Against the real `server-everything` over streamable HTTP on loopback: discovery and calls,
//! cancellation the server receives, a server killed mid-call, and URLs the built-in transport
//! refuses. Without `node` they print SKIPPED and pass (unless LOOPBOUND_REQUIRE_SERVERS=1).

mod common;

use std::time::{Duration, Instant};

use common::{calls, register, results, run, scope};
use loopbound::{Limits, Status};
use loopbound_mcp::rmcp::transport::StreamableHttpClientTransport;
use loopbound_mcp::{ConnectError, Connection, HttpServer, Timeouts};
use loopbound_testkit::mcp::{self, HttpEverything, Recording, WireLog};
use serde_json::Value;

#[tokio::test]
async fn urls_other_than_http_are_refused_before_anything_is_sent() {
    let https =
        Connection::http(&HttpServer::new("remote", "https://127.0.0.1:9/mcp"), Timeouts::default()).await;
    assert!(
        matches!(&https, Err(ConnectError::HttpsUnsupported { server }) if server == "remote"),
        "{https:?}"
    );
    let ftp = Connection::http(&HttpServer::new("remote", "ftp://127.0.0.1/mcp"), Timeouts::default()).await;
    assert!(matches!(&ftp, Err(ConnectError::InvalidUrl { server }) if server == "remote"), "{ftp:?}");
    let message = https.unwrap_err().to_string();
    assert_eq!(
        message,
        "MCP server remote: https is not supported by the built-in HTTP transport; nothing was sent (use \
         Connection::with_transport with a TLS-capable transport)"
    );
}

#[tokio::test]
async fn nobody_listening_is_a_typed_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let refused = Connection::http(&HttpServer::new("absent", url), mcp::timeouts()).await;
    assert!(
        matches!(&refused, Err(ConnectError::Initialize { server, .. }) if server == "absent"),
        "{refused:?}"
    );
}

#[tokio::test]
async fn tools_over_http_are_guarded_like_any_other() {
    if !mcp::available() {
        return;
    }
    let server = HttpEverything::start();
    let connection =
        Connection::http(&HttpServer::new("everything", server.url()), mcp::timeouts()).await.unwrap();
    let (tools, registered) = register(&connection);
    assert_eq!(registered.tools().len(), 13);
    let scope = scope(&["mcp.everything.get-sum"], Limits::default());
    let steps = calls(&[("get-sum", r#"{"a": 2, "b": 40}"#), ("get-sum", r#"{"b": 40, "a": 2}"#)]);
    let (outcome, conversation) = run(&tools, &scope, steps).await;
    assert_eq!(outcome.status(), Status::RepeatedCall);
    assert_eq!(results(&conversation), ["The sum of 2 and 40 is 42."]);
}

#[tokio::test]
async fn the_deadline_cancels_a_call_over_http_and_the_server_receives_it() {
    if !mcp::available() {
        return;
    }
    let server = HttpEverything::start();
    let log = WireLog::default();
    let transport = Recording::new(StreamableHttpClientTransport::from_uri(server.url()), log.clone());
    let connection = Connection::with_transport("everything", transport, mcp::timeouts()).await.unwrap();
    let (tools, _) = register(&connection);
    let granted = ["mcp.everything.trigger-long-running-operation"];
    let scope = scope(&granted, Limits::default().with_deadline(Duration::from_secs(1)));
    let steps = calls(&[("trigger-long-running-operation", r#"{"duration": 3, "steps": 3}"#)]);
    let (outcome, _) = run(&tools, &scope, steps).await;
    assert_eq!(outcome.status(), Status::DeadlineExceeded);
    let id = log.sent("tools/call")[0]["id"].clone();
    let started = Instant::now();
    while log.sent("notifications/cancelled").is_empty() && started.elapsed() < Duration::from_secs(3) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Recorded once the server accepted the POST that carried it.
    let cancelled = log.sent("notifications/cancelled");
    assert_eq!(cancelled.len(), 1);
    assert_eq!(cancelled[0]["params"]["requestId"], id);
    tokio::time::sleep(Duration::from_millis(3000)).await;
    assert_eq!(log.responses_for(&id), Vec::<Value>::new(), "no answer for the cancelled call");
}

#[tokio::test]
async fn a_server_killed_mid_call_over_http_is_a_typed_error_and_later_calls_fail_at_once() {
    if !mcp::available() {
        return;
    }
    let mut server = HttpEverything::start();
    let connection =
        Connection::http(&HttpServer::new("everything", server.url()), mcp::timeouts()).await.unwrap();
    let (tools, _) = register(&connection);
    let scope =
        scope(&["mcp.everything.trigger-long-running-operation", "mcp.everything.echo"], Limits::default());
    let in_flight = {
        let (tools, scope) = (tools.clone(), scope.clone());
        tokio::spawn(async move {
            tools.invoke(&scope, "trigger-long-running-operation", r#"{"duration": 5, "steps": 5}"#).await
        })
    };
    tokio::time::sleep(Duration::from_millis(700)).await;
    let started = Instant::now();
    server.kill();
    let error = in_flight.await.unwrap().unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the call ended {:?} after the kill",
        started.elapsed()
    );
    let closed = "MCP server everything is closed (its process ended or its connection broke); no call to its \
                  tools is sent any more";
    let cause = |error: &loopbound::ToolError| std::error::Error::source(error).map(ToString::to_string);
    assert_eq!(error.to_string(), "tool trigger-long-running-operation failed");
    assert_eq!(cause(&error).as_deref(), Some(closed));
    let later = tools.invoke(&scope, "echo", r#"{"message": "x"}"#).await.unwrap_err();
    assert_eq!((later.to_string(), cause(&later)), ("tool echo failed".to_owned(), Some(closed.to_owned())));
    assert!(connection.is_closed());
}
