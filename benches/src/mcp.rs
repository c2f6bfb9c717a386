//! The MCP adapter's own cost per call, against a trivial MCP server in the same process (no
//! child process, no pipe to the kernel: an in-memory duplex), so that what is measured is
//! ours and the SDK's, not a server's.
//!
//! Three ways to make the same call of `get-sum({"a":2,"b":40})`, side by side:
//!
//! - [`McpBench::direct`]: a guarded tool whose body answers at once (bind, guard, body);
//! - [`McpBench::raw`]: the MCP SDK's `tools/call` to the in-process server, without loopbound;
//! - [`McpBench::guarded`]: the server's tool through `loopbound-mcp` (bind, schema check,
//!   guard, `tools/call`, result rendering).
//!
//! The adapter's overhead per call is `guarded - raw`.
//!
//! # Invariants
//!
//! - The three paths return the same text (`The sum of 2 and 40 is 42.`), checked by the
//!   bench's smoke test, and run in one runtime on one thread.

use loopbound::{GuardedTool, Limits, Scope, ToolContext};
use loopbound_mcp::rmcp::model::{
    CallToolRequestParams, ClientCapabilities, Implementation, InitializeRequestParams,
};
use loopbound_mcp::rmcp::service::RunningService;
use loopbound_mcp::rmcp::{RoleClient, ServiceExt};
use loopbound_mcp::{Arguments, Connection, Mapping, Timeouts};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};

/// The arguments every path sends.
pub const ARGUMENTS: &str = r#"{"a": 2, "b": 40}"#;
/// What every path returns.
pub const ANSWER: &str = "The sum of 2 and 40 is 42.";

/// The three paths, set up once.
#[allow(missing_debug_implementations, reason = "holds a runtime and an SDK client, neither printable")]
pub struct McpBench {
    runtime: tokio::runtime::Runtime,
    scope: Scope,
    direct: GuardedTool<Arguments>,
    guarded: GuardedTool<Arguments>,
    raw: RunningService<RoleClient, InitializeRequestParams>,
    _connection: Connection,
}

/// Answers `initialize`, `tools/list` (one tool, `get-sum`) and `tools/call`, one JSON message
/// per line, until the client goes away; any other method (`server/discover`) is not found, as
/// on any 2025-06-18 server.
async fn serve(stream: DuplexStream) {
    let (read, mut write) = tokio::io::split(stream);
    let mut lines = BufReader::new(read).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(message) = serde_json::from_str::<Value>(&line) else { continue };
        let Some(id) = message.get("id").cloned() else { continue };
        let result = match message["method"].as_str() {
            Some("initialize") => json!({
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "bench", "version": "0"},
            }),
            Some("tools/list") => json!({"tools": [{
                "name": "get-sum",
                "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]},
                "annotations": {"readOnlyHint": true},
            }]}),
            Some("tools/call") => json!({"content": [{"type": "text", "text": ANSWER}]}),
            _ => {
                let error = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}});
                if write.write_all(format!("{error}\n").as_bytes()).await.is_err() {
                    return;
                }
                continue;
            }
        };
        let mut reply = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
        reply.push('\n');
        if write.write_all(reply.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// A client stream connected to a new in-process server.
fn in_process_server() -> DuplexStream {
    let (client, server) = tokio::io::duplex(64 * 1024);
    tokio::spawn(serve(server));
    client
}

impl McpBench {
    /// Starts the in-process servers and builds the three paths.
    ///
    /// # Panics
    ///
    /// If the in-process server cannot be reached (a bug here).
    #[must_use]
    pub fn new() -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        let (connection, guarded, raw) = runtime.block_on(async {
            let connection = Connection::with_transport("bench", in_process_server(), Timeouts::default())
                .await
                .expect("the in-process server answers");
            let registered = connection.register(&Mapping::new());
            let guarded = registered.get("get-sum").expect("get-sum is offered").guarded().clone();
            let config = InitializeRequestParams::new(
                ClientCapabilities::default(),
                Implementation::new("bench", "0"),
            );
            let raw = config.serve(in_process_server()).await.expect("the in-process server answers");
            (connection, guarded, raw)
        });
        let direct = loopbound::tool::ToolBuilder::new("get-sum", "mcp.bench.get-sum")
            .build(|_: Arguments, _: ToolContext| async move { Ok::<_, String>(ANSWER) })
            .expect("a valid name");
        let limits =
            Limits::default().with_tool_calls(u32::MAX).with_repetitions(u32::MAX).with_model_calls(1);
        let scope = Scope::builder().grant("mcp.bench.get-sum").limits(limits).build().expect("valid limits");
        Self { runtime, scope, direct, guarded, raw, _connection: connection }
    }

    /// A guarded tool answering at once: bind, guard, body.
    ///
    /// # Panics
    ///
    /// If the call fails (a bug here).
    #[must_use]
    pub fn direct(&self) -> String {
        self.runtime.block_on(self.direct.invoke_json(&self.scope, ARGUMENTS)).expect("answered")
    }

    /// The SDK's `tools/call`, without loopbound.
    ///
    /// # Panics
    ///
    /// If the call fails (a bug here).
    #[must_use]
    pub fn raw(&self) -> String {
        let arguments: serde_json::Map<String, Value> = serde_json::from_str(ARGUMENTS).expect("an object");
        let params = CallToolRequestParams::new("get-sum").with_arguments(arguments);
        let result = self.runtime.block_on(self.raw.peer().call_tool(params)).expect("answered");
        result
            .content
            .first()
            .and_then(|block| block.as_text())
            .map(|text| text.text.clone())
            .unwrap_or_default()
    }

    /// The server's tool through `loopbound-mcp`.
    ///
    /// # Panics
    ///
    /// If the call fails (a bug here).
    #[must_use]
    pub fn guarded(&self) -> String {
        self.runtime.block_on(self.guarded.invoke_json(&self.scope, ARGUMENTS)).expect("answered")
    }
}

impl Default for McpBench {
    fn default() -> Self {
        Self::new()
    }
}
