//! One connection to one server: the handshake (`server/discover` on 2026-07-28,
//! `initialize` on 2025-06-18, see [`revision`](crate::revision)), the tools listed once, the
//! calls, and the server's end.
//!
//! # Invariants
//!
//! - Tools are listed once per connection, when it is made; the list never changes after
//!   (a `notifications/tools/list_changed` from the server is ignored: a new list needs a new
//!   connection, and new tools a new `ToolSet`).
//! - A connection that saw its server go away remembers it: the first call that finds the
//!   server gone reports it once (a `warn` event of `tracing`), and every later call fails at
//!   once with [`CallError::Closed`], without sending anything.
//! - No child process outlives its connection: the process is killed when the connection (and
//!   every tool that holds it) is dropped, or when [`Connection::close`] is called.
//! - A call future dropped before its answer (the scope's deadline, a halt, the caller's
//!   cancellation, the call timeout) sends `notifications/cancelled` for its request id, and
//!   an answer that still arrives is discarded; a call that became a task sends `tasks/cancel`
//!   for it ([`task`](crate::task)).
//! - The call timeout bounds the whole call: every round of a multi-round-trip request
//!   ([`rounds`](crate::rounds)) and the wait for a task.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{
    CallToolResult, ClientCapabilities, Implementation, InitializeRequestParams, PaginatedRequestParams,
    ProtocolVersion, RequestMetaObject, TASKS_EXTENSION_ID, Tool,
};
use rmcp::service::{ClientInitializeError, ClientLifecycleMode, ClientServiceExt, Peer, RunningService};
use rmcp::transport::common::client_side_sse::ExponentialBackoff;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{IntoTransport, StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceError};
use serde_json::{Map, Value, json};

use crate::annotations::Hints;
use crate::answer::Answerer;
use crate::error::{CallError, ConnectError, cut, name};
use crate::revision::{Protocol, Revision};
use crate::rounds;
use crate::server::{HttpServer, StdioServer, Timeouts};

/// Most tools one connection accepts from a server.
pub const MAX_TOOLS: usize = 1024;
/// Most pages of `tools/list` one connection reads.
pub const MAX_LIST_PAGES: usize = 64;
/// How long [`Connection::close`] waits for the server to end before killing it.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

type Service = RunningService<RoleClient, InitializeRequestParams>;

/// A connection to one MCP server, with the tools it listed. Cheap to clone; every clone is
/// the same connection.
///
/// ```no_run
/// use loopbound::ToolSet;
/// use loopbound_mcp::{Connection, Mapping, StdioServer, Timeouts};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let server = StdioServer::new("everything", "node").arg("server-everything/dist/index.js").arg("stdio");
/// let connection = Connection::stdio(&server, Timeouts::default()).await?;
/// let registered = connection.register(&Mapping::new());
/// for tool in registered.tools() {
///     println!("{} needs {}", tool.name(), tool.capability());
/// }
/// let tools = registered.add_to(ToolSet::<()>::builder()).build()?;
/// # let _ = tools;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Connection {
    inner: Arc<Inner>,
}

/// What every call of a connection shares.
pub(crate) struct Inner {
    pub(crate) name: String,
    pub(crate) peer: Peer<RoleClient>,
    service: Mutex<Option<Service>>,
    tools: Vec<RemoteTool>,
    timeouts: Timeouts,
    closed: AtomicBool,
    process_id: Option<u32>,
    /// The protocol version the server and the client agreed on.
    version: ProtocolVersion,
    /// The client's context sent with every request, on a 2026-07-28 connection.
    pub(crate) meta: Option<RequestMetaObject>,
    pub(crate) answerer: Arc<dyn Answerer>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("server", &self.inner.name)
            .field("version", &self.inner.version.as_str())
            .field("tools", &self.inner.tools.len())
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

/// One tool as the server listed it.
#[derive(Clone, Debug, PartialEq)]
pub struct RemoteTool {
    name: String,
    description: String,
    input_schema: Value,
    hints: Hints,
}

impl RemoteTool {
    fn of(tool: Tool) -> Self {
        Self {
            hints: Hints::of(tool.annotations.as_ref()),
            name: tool.name.into_owned(),
            description: tool.description.map(std::borrow::Cow::into_owned).unwrap_or_default(),
            input_schema: Value::Object(Arc::unwrap_or_clone(tool.input_schema)),
        }
    }

    /// The server's name for the tool.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The server's description of the tool (empty when it gave none).
    #[must_use]
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The tool's input schema, as the server sent it.
    #[must_use]
    pub fn input_schema(&self) -> &Value {
        &self.input_schema
    }

    /// The tool's annotations.
    #[must_use]
    pub fn hints(&self) -> Hints {
        self.hints
    }
}

/// The client's name and version, as servers see it.
fn implementation() -> Implementation {
    Implementation::new("loopbound-mcp", env!("CARGO_PKG_VERSION"))
}

/// What the client says about itself in the handshake: no capability (see
/// [`revision`](crate::revision)), and 2025-06-18 when it greets with `initialize`.
fn client_config() -> InitializeRequestParams {
    InitializeRequestParams::new(ClientCapabilities::default(), implementation())
        .with_protocol_version(ProtocolVersion::V_2025_06_18)
}

/// How the SDK opens the connection for `revision`.
fn lifecycle(revision: Revision) -> ClientLifecycleMode {
    match revision {
        Revision::V2025_06_18 => ClientLifecycleMode::Initialize,
        Revision::V2026_07_28 => {
            ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] }
        }
        Revision::Newest => ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::V_2025_06_18),
        },
    }
}

/// The client's context on every 2026-07-28 request: elicitation and roots (the answerer
/// answers both, if only by declining), sampling when the answerer samples, and the tasks
/// extension.
fn modern_meta(version: ProtocolVersion, answerer: &dyn Answerer) -> RequestMetaObject {
    let mut capabilities = json!({"elicitation": {}, "roots": {}, "extensions": {TASKS_EXTENSION_ID: {}}});
    if answerer.samples() {
        capabilities["sampling"] = json!({});
    }
    let capabilities = serde_json::from_value(capabilities).unwrap_or_default();
    RequestMetaObject::with_client_context(version, implementation(), capabilities)
}

/// The connection error of a failed opening.
fn opening_failed(server: String, revision: Revision, error: ClientInitializeError) -> ConnectError {
    match error {
        ClientInitializeError::JsonRpcError(_)
        | ClientInitializeError::NoCompatibleProtocolVersion { .. }
            if revision == Revision::V2026_07_28 =>
        {
            ConnectError::RevisionUnsupported { server, revision }
        }
        error => ConnectError::Initialize { server, detail: error.to_string() },
    }
}

impl Connection {
    /// Starts `server` as a child process and connects to it over its stdin and stdout: the
    /// handshake, then `tools/list`, each within its timeout.
    ///
    /// # Errors
    ///
    /// A [`ConnectError`]; the process, if it started, is killed.
    pub async fn stdio(server: &StdioServer, timeouts: Timeouts) -> Result<Self, ConnectError> {
        let mut command = tokio::process::Command::new(&server.program);
        command.args(&server.args).envs(server.env.iter().map(|(k, v)| (k, v))).kill_on_drop(true);
        if let Some(dir) = &server.current_dir {
            command.current_dir(dir);
        }
        let stderr =
            if server.inherit_stderr { std::process::Stdio::inherit() } else { std::process::Stdio::null() };
        let (transport, _) = TokioChildProcess::builder(command)
            .stderr(stderr)
            .spawn()
            .map_err(|source| ConnectError::Spawn { server: server.name.clone(), source })?;
        let process_id = transport.id();
        Self::establish(server.name.clone(), transport, timeouts, process_id, &server.protocol).await
    }

    /// Connects to `server` over streamable HTTP (`http://` only, see
    /// [`server`](crate::server)). Lost SSE streams are retried twice, 200 ms apart, then the
    /// server is taken as gone.
    ///
    /// # Errors
    ///
    /// A [`ConnectError`]; for an `https://` URL, [`ConnectError::HttpsUnsupported`] before
    /// anything is sent.
    pub async fn http(server: &HttpServer, timeouts: Timeouts) -> Result<Self, ConnectError> {
        let scheme = server.url.get(..8).map(str::to_ascii_lowercase).unwrap_or_default();
        if scheme == "https://" {
            return Err(ConnectError::HttpsUnsupported { server: server.name.clone() });
        }
        if !scheme.starts_with("http://") {
            return Err(ConnectError::InvalidUrl { server: server.name.clone() });
        }
        let mut config = StreamableHttpClientTransportConfig::with_uri(server.url.as_str());
        let mut retries = ExponentialBackoff::default();
        retries.max_times = Some(2);
        retries.base_duration = Duration::from_millis(200);
        config.retry_config = Arc::new(retries);
        let transport = StreamableHttpClientTransport::from_config(config);
        Self::establish(server.name.clone(), transport, timeouts, None, &server.protocol).await
    }

    /// Connects over any transport of the MCP SDK (`rmcp`, re-exported as
    /// [`loopbound_mcp::rmcp`](crate::rmcp)): an HTTP client with TLS, an in-process pipe, a
    /// transport that records what it carries. The default [`Protocol`].
    ///
    /// # Errors
    ///
    /// A [`ConnectError`].
    pub async fn with_transport<T, E, A>(
        server: impl Into<String>,
        transport: T,
        timeouts: Timeouts,
    ) -> Result<Self, ConnectError>
    where
        T: IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        Self::establish(server.into(), transport, timeouts, None, &Protocol::default()).await
    }

    /// As [`Connection::with_transport`], speaking as `protocol` says.
    ///
    /// # Errors
    ///
    /// A [`ConnectError`].
    pub async fn with_transport_and_protocol<T, E, A>(
        server: impl Into<String>,
        transport: T,
        timeouts: Timeouts,
        protocol: &Protocol,
    ) -> Result<Self, ConnectError>
    where
        T: IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        Self::establish(server.into(), transport, timeouts, None, protocol).await
    }

    async fn establish<T, E, A>(
        server: String,
        transport: T,
        timeouts: Timeouts,
        process_id: Option<u32>,
        protocol: &Protocol,
    ) -> Result<Self, ConnectError>
    where
        T: IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let revision = protocol.revision;
        let opening = client_config().serve_with_lifecycle(transport, lifecycle(revision));
        let service = match tokio::time::timeout(timeouts.initialize(), opening).await {
            Ok(Ok(service)) => service,
            Ok(Err(error)) => return Err(opening_failed(server, revision, error)),
            Err(_) => {
                let step = match revision {
                    Revision::V2025_06_18 => "initialize",
                    Revision::V2026_07_28 => "server/discover",
                    _ => "server/discover then initialize",
                };
                return Err(ConnectError::Timeout { server, step, after: timeouts.initialize() });
            }
        };
        let peer = service.peer().clone();
        let version =
            peer.peer_info().map_or(ProtocolVersion::V_2025_06_18, |info| info.protocol_version.clone());
        let answerer = Arc::clone(&protocol.answerer);
        let meta =
            (version >= ProtocolVersion::V_2026_07_28).then(|| modern_meta(version.clone(), &*answerer));
        let tools = match tokio::time::timeout(timeouts.list(), list_tools(&peer, &server)).await {
            Ok(Ok(tools)) => tools,
            Ok(Err(error)) => return Err(error),
            Err(_) => {
                return Err(ConnectError::Timeout { server, step: "tools/list", after: timeouts.list() });
            }
        };
        Ok(Self {
            inner: Arc::new(Inner {
                name: server,
                peer,
                service: Mutex::new(Some(service)),
                tools,
                timeouts,
                closed: AtomicBool::new(false),
                process_id,
                version,
                meta,
                answerer,
            }),
        })
    }

    /// The host's name for the server.
    #[must_use]
    pub fn server(&self) -> &str {
        &self.inner.name
    }

    /// The tools the server listed when the connection was made.
    #[must_use]
    pub fn tools(&self) -> &[RemoteTool] {
        &self.inner.tools
    }

    /// The protocol version the server and the client agreed on: `2026-07-28`, `2025-06-18`,
    /// or an older one a 2025-era server chose.
    #[must_use]
    pub fn protocol_version(&self) -> &str {
        self.inner.version.as_str()
    }

    /// Whether the connection speaks the stateless 2026-07-28 revision (multi-round-trip
    /// requests, tasks).
    #[must_use]
    pub fn is_stateless(&self) -> bool {
        self.inner.meta.is_some()
    }

    /// The timeouts of this connection.
    #[must_use]
    pub fn timeouts(&self) -> Timeouts {
        self.inner.timeouts
    }

    /// The server's process id, for a stdio server.
    #[must_use]
    pub fn process_id(&self) -> Option<u32> {
        self.inner.process_id
    }

    /// Whether the server is known to be gone, or the connection was closed.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::SeqCst)
    }

    /// Ends the connection: closes the transport, waits up to 5 s for the server to end, and
    /// kills it if it has not. Later calls fail with [`CallError::Closed`].
    pub async fn close(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        let service = self.inner.service.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(mut service) = service {
            let _ = service.close_with_timeout(CLOSE_WAIT).await;
        }
    }

    /// Calls the server's tool `tool` with `arguments`, within the call timeout: every round of
    /// a multi-round-trip request and the wait for a task included.
    pub(crate) async fn call(
        &self,
        tool: &str,
        arguments: Map<String, Value>,
    ) -> Result<CallToolResult, CallError> {
        let inner = &*self.inner;
        if inner.closed.load(Ordering::SeqCst) || inner.peer.is_transport_closed() {
            return Err(inner.closed());
        }
        match tokio::time::timeout(inner.timeouts.call(), rounds::call(inner, tool, arguments)).await {
            Ok(outcome) => outcome,
            Err(_) => Err(CallError::Timeout { server: name(&inner.name), after: inner.timeouts.call() }),
        }
    }
}

impl Inner {
    /// The call error of a request that failed in the SDK.
    pub(crate) fn failed(&self, error: ServiceError) -> CallError {
        match error {
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => self.closed(),
            ServiceError::McpError(error) => {
                CallError::Protocol { code: error.code.0, message: cut(&error.message) }
            }
            _ => CallError::Malformed { server: name(&self.name) },
        }
    }

    /// Records that the server is gone, reports it the first time, and returns the error every
    /// call gets from now on.
    fn closed(&self) -> CallError {
        if !self.closed.swap(true, Ordering::SeqCst) {
            tracing::warn!(
                server = %self.name,
                "MCP server closed: its process ended or its connection broke; calls to its tools now fail at once"
            );
        }
        CallError::Closed { server: name(&self.name) }
    }
}

/// Reads every page of `tools/list`, within the connection's bounds.
async fn list_tools(peer: &Peer<RoleClient>, server: &str) -> Result<Vec<RemoteTool>, ConnectError> {
    let mut tools = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_LIST_PAGES {
        let params = cursor.take().map(|cursor| PaginatedRequestParams::default().with_cursor(Some(cursor)));
        let page = peer
            .list_tools(params)
            .await
            .map_err(|error| ConnectError::List { server: server.to_owned(), detail: error.to_string() })?;
        if tools.len() + page.tools.len() > MAX_TOOLS {
            return Err(ConnectError::TooManyTools { server: server.to_owned(), limit: MAX_TOOLS });
        }
        tools.extend(page.tools.into_iter().map(RemoteTool::of));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(tools),
        }
    }
    Err(ConnectError::TooManyTools { server: server.to_owned(), limit: MAX_LIST_PAGES })
}
