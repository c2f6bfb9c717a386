//! The two pinned reference MCP servers (`@modelcontextprotocol/server-everything` and
//! `server-filesystem`, 2026.8.31, speaking 2025-06-18) and `modern.mjs` (2026-07-28, on the
//! pinned TypeScript SDK v2), installed by `testkit/mcp/setup.sh` and started by the tests
//! as child processes; a recording transport that proves what reached a server; temporary
//! folders for the filesystem server. Where the servers are and how they start is
//! `loopbound_fixtures::mcp_servers`, which the consoles use too; this module re-exports it.
//!
//! Where `node` is absent, [`available`] prints `SKIPPED` and the calling test passes, unless
//! `LOOPBOUND_REQUIRE_SERVERS=1` is set (as `.ci/run` does): then it fails (see [`crate::skip`]).

use std::future::Future;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use loopbound_fixtures::mcp_servers::install_dir as package_dir;
pub use loopbound_fixtures::mcp_servers::{
    everything, everything_js, filesystem, filesystem_js, modern, modern_js,
};
use loopbound_mcp::rmcp::RoleClient;
use loopbound_mcp::rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use loopbound_mcp::rmcp::transport::{TokioChildProcess, Transport};
use loopbound_mcp::{ConnectError, Connection, StdioServer, Timeouts};
use serde_json::Value;

/// The preload script that corrupts a server's stdout (`LOOPBOUND_GARBAGE` = `lines`,
/// `call-text` or `call-shape`).
#[must_use]
pub fn garbage_js() -> PathBuf {
    package_dir().join("garbage.cjs")
}

/// Whether the servers can run here: `node` is present and the pinned packages are installed
/// (installing them if needed). Prints `SKIPPED` and returns `false` where `node` is absent,
/// unless `LOOPBOUND_REQUIRE_SERVERS` is `1`, which panics instead ([`crate::skip`]).
///
/// # Panics
///
/// If `node` is absent while servers are required, or if the setup script fails.
#[must_use]
pub fn available() -> bool {
    match Command::new("node").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status() {
        Ok(status) if status.success() => {}
        Ok(status) => panic!("`node --version` failed with {status}"),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            crate::skip::skip(format_args!("node is not installed, so the MCP servers cannot run ({error})"));
            return false;
        }
        Err(error) => panic!("`node` could not be started: {error}"),
    }
    ensure_installed();
    true
}

/// Installs the pinned packages once per test binary, or fails loudly.
fn ensure_installed() {
    static INSTALL: Mutex<()> = Mutex::new(());
    let _guard = INSTALL.lock().unwrap_or_else(PoisonError::into_inner);
    let installed = || {
        everything_js().is_file()
            && filesystem_js().is_file()
            && package_dir().join("node_modules/@modelcontextprotocol/server/package.json").is_file()
    };
    if installed() {
        return;
    }
    let output = Command::new("bash")
        .arg(package_dir().join("setup.sh"))
        .output()
        .expect("bash must be able to run testkit/mcp/setup.sh");
    assert!(
        output.status.success() && installed(),
        "testkit/mcp/setup.sh failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `server` with the garbage preload in `mode` (see [`garbage_js`]). The server must be a node
/// script started as `node SCRIPT ...`.
#[must_use]
pub fn with_garbage(name: &str, script: &Path, args: &[&str], mode: &str) -> StdioServer {
    StdioServer::new(name, "node")
        .arg("-r")
        .arg(garbage_js())
        .arg(script)
        .args(args.iter().copied())
        .env("LOOPBOUND_GARBAGE", mode)
}

/// Short timeouts for tests: 20 s to start (node is slow on a loaded machine), 5 s per call.
#[must_use]
pub fn timeouts() -> Timeouts {
    Timeouts::default()
        .with_initialize(Duration::from_secs(20))
        .with_list(Duration::from_secs(20))
        .with_call(Duration::from_secs(5))
}

/// Which way a message went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// From the client to the server: written to the server's stdin.
    Out,
    /// From the server, decoded by the client.
    In,
}

/// Every JSON-RPC message a [`Recording`] transport carried, in order.
#[derive(Clone, Debug, Default)]
pub struct WireLog(Arc<Mutex<Vec<(Direction, Value)>>>);

impl WireLog {
    fn push(&self, direction: Direction, message: Value) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).push((direction, message));
    }

    /// Every message so far.
    #[must_use]
    pub fn messages(&self) -> Vec<(Direction, Value)> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The messages written to the server whose `method` is `method`.
    #[must_use]
    pub fn sent(&self, method: &str) -> Vec<Value> {
        self.messages()
            .into_iter()
            .filter(|(direction, message)| *direction == Direction::Out && message["method"] == method)
            .map(|(_, message)| message)
            .collect()
    }

    /// The responses (results or errors) received for request `id`.
    #[must_use]
    pub fn responses_for(&self, id: &Value) -> Vec<Value> {
        self.messages()
            .into_iter()
            .filter(|(direction, message)| {
                *direction == Direction::In && message.get("method").is_none() && message["id"] == *id
            })
            .map(|(_, message)| message)
            .collect()
    }

    /// The progress notifications received for `token`.
    #[must_use]
    pub fn progress_for(&self, token: &Value) -> usize {
        self.messages()
            .iter()
            .filter(|(direction, message)| {
                *direction == Direction::In
                    && message["method"] == "notifications/progress"
                    && message["params"]["progressToken"] == *token
            })
            .count()
    }
}

/// A transport that records every message it carries: an outgoing one once it has been
/// written to the server (for a child process, into its stdin), an incoming one once decoded.
#[derive(Debug)]
pub struct Recording<T> {
    inner: T,
    log: WireLog,
}

impl<T> Recording<T> {
    /// Records what `inner` carries into `log`.
    pub fn new(inner: T, log: WireLog) -> Self {
        Self { inner, log }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Recording<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let message = serde_json::to_value(&item).unwrap_or(Value::Null);
        let log = self.log.clone();
        let sent = self.inner.send(item);
        async move {
            let outcome = sent.await;
            if outcome.is_ok() {
                log.push(Direction::Out, message);
            }
            outcome
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        let log = self.log.clone();
        let received = self.inner.receive();
        async move {
            let message = received.await;
            if let Some(message) = &message {
                log.push(Direction::In, serde_json::to_value(message).unwrap_or(Value::Null));
            }
            message
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// Starts `node SCRIPT ARGS…` directly (killed on drop) and connects to it through a
/// [`Recording`] transport. Returns the connection, the log and the process id.
///
/// # Errors
///
/// As [`Connection::with_transport`]; a process that cannot start is a
/// [`ConnectError::Spawn`].
pub async fn recorded(
    name: &str,
    script: &Path,
    args: &[&str],
    timeouts: Timeouts,
) -> Result<(Connection, WireLog, u32), ConnectError> {
    let mut command = tokio::process::Command::new("node");
    command.arg(script).args(args).kill_on_drop(true);
    let (child, _) = TokioChildProcess::builder(command)
        .stderr(Stdio::null())
        .spawn()
        .map_err(|source| ConnectError::Spawn { server: name.to_owned(), source })?;
    let pid = child.id().unwrap_or_default();
    let log = WireLog::default();
    let connection = Connection::with_transport(name, Recording::new(child, log.clone()), timeouts).await?;
    Ok((connection, log, pid))
}

/// Kills process `pid` with SIGKILL, as a crash would.
///
/// # Panics
///
/// If `kill` cannot run.
pub fn kill(pid: u32) {
    let status = Command::new("kill").arg("-9").arg(pid.to_string()).status().expect("kill runs");
    assert!(status.success(), "kill -9 {pid} failed");
}

/// Whether process `pid` is still running (a zombie, already dead, counts as gone).
#[must_use]
pub fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.rsplit_once(')').map(|(_, rest)| rest.trim_start().starts_with('Z')))
        .is_some_and(|zombie| !zombie)
}

/// Waits up to `limit` for process `pid` to be gone; returns whether it is.
pub async fn gone_within(pid: u32, limit: Duration) -> bool {
    let start = Instant::now();
    while running(pid) {
        if start.elapsed() > limit {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

/// A temporary folder, removed with everything in it on drop. Its path is canonical (the
/// filesystem server compares resolved paths).
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// A new, empty folder under the system's temporary folder.
    ///
    /// # Panics
    ///
    /// If the folder cannot be created.
    #[must_use]
    pub fn new(label: &str) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let unique =
            format!("loopbound-{label}-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::SeqCst));
        let path = std::env::temp_dir().join(unique);
        std::fs::create_dir_all(&path).expect("a temporary folder");
        Self(path.canonicalize().expect("a canonical temporary folder"))
    }

    /// The folder.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The names of the entries in the folder, sorted: what the tests compare after a write.
    ///
    /// # Panics
    ///
    /// If the folder cannot be read.
    #[must_use]
    pub fn files(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.0)
            .expect("the folder")
            .map(|entry| entry.expect("an entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `server-everything` over streamable HTTP, started on a free loopback port, killed on drop.
#[derive(Debug)]
pub struct HttpEverything {
    child: Child,
    url: String,
}

impl HttpEverything {
    /// Starts the server and waits (up to 30 s) until it accepts connections.
    ///
    /// # Panics
    ///
    /// If it cannot start or does not listen in time.
    #[must_use]
    pub fn start() -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free loopback port")
            .port();
        let child = Command::new("node")
            .arg(everything_js())
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("node starts server-everything");
        let server = Self { child, url: format!("http://127.0.0.1:{port}/mcp") };
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(start.elapsed() < Duration::from_secs(30), "server-everything did not listen on {port}");
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    /// The MCP endpoint, e.g. `http://127.0.0.1:41277/mcp`.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Kills the server, as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for HttpEverything {
    fn drop(&mut self) {
        // Kills exactly the process this test started, by its handle.
        self.kill();
    }
}
