//! Tools whose schemas the subset checker used to refuse, registered from an in-process server:
//! offered, checked before the guard (a refusal is a binding error, nothing counted, nothing
//! sent), and the one part never checked here (a remote `$ref`) leaving its tool out, reported;
//! a name the server gives twice left out, and one the host's set has refusing that set.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use loopbound::tool::BindErrorKind;
use loopbound::{RegistrationError, Scope, ToolBuilder, ToolError, ToolSet};
use loopbound_mcp::schema::SchemaError;
use loopbound_mcp::{Connection, Mapping, SkipReason, Timeouts, Unsupported};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};

/// Two read-only tools, so that their calls run outside a journal.
fn tools() -> Value {
    json!([
        {"name": "lookup", "annotations": {"readOnlyHint": true}, "inputSchema": {
            "type": "object",
            "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}$"}},
            "required": ["code"],
            "unevaluatedProperties": false,
        }},
        {"name": "remote", "annotations": {"readOnlyHint": true}, "inputSchema": {"type": "object", "properties": {"a": {"$ref": "https://example.com/a.json"}}}},
    ])
}

/// Answers `initialize`, `tools/list` and `tools/call` (counted in `calls`), one JSON message a
/// line, until the client goes away; any other method (`server/discover`) is not found, as on
/// any 2025-06-18 server.
async fn server(stream: DuplexStream, calls: Arc<AtomicUsize>) {
    let (read, mut write) = tokio::io::split(stream);
    let mut lines = BufReader::new(read).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let message: Value = serde_json::from_str(&line).unwrap_or_default();
        let Some(id) = message.get("id") else { continue };
        let result = match message["method"].as_str().unwrap_or_default() {
            "initialize" => Some(json!({
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "schemas", "version": "0"},
            })),
            "tools/list" => Some(json!({"tools": tools()})),
            "tools/call" => {
                calls.fetch_add(1, Ordering::SeqCst);
                Some(json!({"content": [{"type": "text", "text": "found"}]}))
            }
            _ => None,
        };
        let reply = match result {
            Some(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            None => {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}})
            }
        };
        let reply = format!("{reply}\n");
        if write.write_all(reply.as_bytes()).await.is_err() {
            break;
        }
    }
}

async fn connect(calls: &Arc<AtomicUsize>) -> Connection {
    let (client, served) = tokio::io::duplex(64 * 1024);
    tokio::spawn(server(served, Arc::clone(calls)));
    Connection::with_transport("schemas", client, Timeouts::default())
        .await
        .expect("the in-process server answers")
}

#[tokio::test]
async fn a_pattern_tool_is_offered_and_checked_before_the_guard_and_a_remote_ref_tool_is_left_out() {
    let calls = Arc::new(AtomicUsize::new(0));
    let connection = connect(&calls).await;
    let registered = connection.register(&Mapping::new());
    assert_eq!(registered.tools().iter().map(|tool| tool.name()).collect::<Vec<_>>(), ["lookup"]);
    assert_eq!(registered.skipped().len(), 1);
    assert_eq!(registered.skipped()[0].remote(), "remote");
    assert_eq!(
        registered.skipped()[0].reason(),
        &SkipReason::Schema(SchemaError::Unresolved {
            reference: "https://example.com/a.json".to_owned(),
            at: "/properties/a".to_owned(),
        })
    );
    let lookup = registered.get("lookup").expect("offered").guarded().clone();
    let scope = Scope::builder().grant("mcp.schemas.lookup").build().unwrap();
    for (arguments, message) in [
        (r#"{"code": "abc"}"#, "at /code: expected a string matching the pattern `^[A-Z]{3}$`"),
        (
            r#"{"code": "ABC", "SECRET-extra": 1}"#,
            "at /: unexpected property `SECRET-extra` (`unevaluatedProperties` allows no other properties)",
        ),
    ] {
        match lookup.invoke_json(&scope, arguments).await {
            Err(ToolError::Bind(error)) => {
                assert_eq!(error.kind(), BindErrorKind::Invalid);
                assert_eq!(error.message(), message);
            }
            other => panic!("expected a binding error, got {other:?}"),
        }
    }
    assert_eq!((scope.tool_calls(), calls.load(Ordering::SeqCst)), (0, 0), "nothing counted, nothing sent");
    assert_eq!(lookup.invoke_json(&scope, r#"{"code": "ABC"}"#).await.ok().as_deref(), Some("found"));
    assert_eq!((scope.tool_calls(), calls.load(Ordering::SeqCst)), (1, 1));
}

#[tokio::test]
async fn a_remote_ref_tool_left_to_the_server_is_offered_with_the_ref_listed() {
    let calls = Arc::new(AtomicUsize::new(0));
    let connection = connect(&calls).await;
    let registered = connection.register(&Mapping::new().unsupported(Unsupported::LeaveToServer));
    assert!(registered.skipped().is_empty(), "{:?}", registered.skipped());
    let remote = registered.get("remote").expect("offered");
    assert_eq!(remote.unchecked(), ["$ref `https://example.com/a.json` at /properties/a"]);
    let scope = Scope::builder().grant("mcp.schemas.remote").build().unwrap();
    assert_eq!(remote.guarded().invoke_json(&scope, r#"{"a": [1]}"#).await.ok().as_deref(), Some("found"));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_name_given_twice_by_a_server_is_left_out_and_a_name_the_host_has_refuses_the_set() {
    let calls = Arc::new(AtomicUsize::new(0));
    let connection = connect(&calls).await;
    let mapping = Mapping::<()>::new().rename("remote", "lookup").unsupported(Unsupported::LeaveToServer);
    let registered = connection.register(&mapping);
    assert_eq!(registered.tools().iter().map(|tool| tool.remote()).collect::<Vec<_>>(), ["lookup"]);
    assert_eq!(registered.skipped().len(), 1);
    assert_eq!(registered.skipped()[0].remote(), "remote");
    assert_eq!(
        registered.skipped()[0].reason(),
        &SkipReason::Name(RegistrationError::DuplicateName("lookup".to_owned()))
    );

    let registered = connection.register(&Mapping::new().unsupported(Unsupported::LeaveToServer));
    let alone = registered.add_to(ToolSet::<()>::builder()).build().expect("the server's names are distinct");
    let names: Vec<&str> = alone.definitions().iter().map(|definition| definition.name.as_str()).collect();
    assert_eq!(names, ["lookup", "remote"], "in the server's order");
    let host = ToolBuilder::new("lookup", "orders.read")
        .build(|_: Value, _| async { Ok::<_, String>("the host's") })
        .expect("a valid name");
    let taken = registered.add_to(ToolSet::builder().add(&host)).build();
    assert_eq!(taken.unwrap_err(), RegistrationError::DuplicateName("lookup".to_owned()));
    assert_eq!(calls.load(Ordering::SeqCst), 0, "nothing sent");
}
