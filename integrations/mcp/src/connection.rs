//! One connection to one server: the handshake, the tools listed once, the calls, and the
//! server's end.
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
//!   an answer that still arrives is discarded.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, Implementation, InitializeRequestParams,
    PaginatedRequestParams, Tool,
};
use rmcp::service::{Peer, RunningService};
use rmcp::transport::common::client_side_sse::ExponentialBackoff;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{IntoTransport, StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceError, ServiceExt};
use serde_json::{Map, Value};

use crate::annotations::Hints;
use crate::error::{CallError, ConnectError, cut, name};
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
/// let mut tools = ToolSet::<()>::builder();
/// let registered = connection.register(&mut tools, &Mapping::new());
/// for tool in registered.tools() {
///     println!("{} needs {}", tool.name(), tool.capability());
/// }
/// let tools = tools.build();
/// # let _ = tools;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Connection {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    peer: Peer<RoleClient>,
    service: Mutex<Option<Service>>,
    tools: Vec<RemoteTool>,
    timeouts: Timeouts,
    closed: AtomicBool,
    process_id: Option<u32>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("server", &self.inner.name)
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

/// What the client says about itself in the handshake.
fn client_config() -> InitializeRequestParams {
    InitializeRequestParams::new(
        ClientCapabilities::default(),
        Implementation::new("loopbound-mcp", env!("CARGO_PKG_VERSION")),
    )
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
        Self::establish(server.name.clone(), transport, timeouts, process_id).await
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
        Self::establish(server.name.clone(), transport, timeouts, None).await
    }

    /// Connects over any transport of the MCP SDK (`rmcp`, re-exported as
    /// [`loopbound_mcp::rmcp`](crate::rmcp)): an HTTP client with TLS, an in-process pipe, a
    /// transport that records what it carries.
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
        Self::establish(server.into(), transport, timeouts, None).await
    }

    async fn establish<T, E, A>(
        server: String,
        transport: T,
        timeouts: Timeouts,
        process_id: Option<u32>,
    ) -> Result<Self, ConnectError>
    where
        T: IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let service =
            match tokio::time::timeout(timeouts.initialize(), client_config().serve(transport)).await {
                Ok(Ok(service)) => service,
                Ok(Err(error)) => return Err(ConnectError::Initialize { server, detail: error.to_string() }),
                Err(_) => {
                    return Err(ConnectError::Timeout {
                        server,
                        step: "initialize",
                        after: timeouts.initialize(),
                    });
                }
            };
        let peer = service.peer().clone();
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

    /// Calls the server's tool `tool` with `arguments`, within the call timeout.
    pub(crate) async fn call(
        &self,
        tool: &str,
        arguments: Map<String, Value>,
    ) -> Result<CallToolResult, CallError> {
        let inner = &self.inner;
        if inner.closed.load(Ordering::SeqCst) || inner.peer.is_transport_closed() {
            return Err(self.closed());
        }
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        match tokio::time::timeout(inner.timeouts.call(), inner.peer.call_tool(params)).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(ServiceError::TransportClosed | ServiceError::TransportSend(_))) => Err(self.closed()),
            Ok(Err(ServiceError::McpError(error))) => {
                Err(CallError::Protocol { code: error.code.0, message: cut(&error.message) })
            }
            Ok(Err(_)) => Err(CallError::Malformed { server: name(&inner.name) }),
            Err(_) => Err(CallError::Timeout { server: name(&inner.name), after: inner.timeouts.call() }),
        }
    }

    /// Records that the server is gone, reports it the first time, and returns the error every
    /// call gets from now on.
    fn closed(&self) -> CallError {
        let inner = &self.inner;
        if !inner.closed.swap(true, Ordering::SeqCst) {
            tracing::warn!(
                server = %inner.name,
                "MCP server closed: its process ended or its connection broke; calls to its tools now fail at once"
            );
        }
        CallError::Closed { server: name(&inner.name) }
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
