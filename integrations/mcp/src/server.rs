//! Where a server is and how long to wait for it: a child process over stdio, or a URL over
//! streamable HTTP, and the timeouts of every step.
//!
//! # Invariants
//!
//! - A stdio server is the program itself, spawned directly (no shell): the process the
//!   connection kills is the server. Wrappers such as `sh -c`, `npx` or `uv run` would leave
//!   the real server behind as a grandchild when the connection ends.
//! - Every step has a timeout: the opening (`server/discover` and/or `initialize`),
//!   `tools/list`, and each `tools/call` with all its rounds and its task. The MCP SDK
//!   sets none by default; a silent server would hang the caller forever.
//! - Only `http://` URLs are accepted by the built-in HTTP transport. No TLS stack is compiled
//!   in (no C build, no process-wide crypto provider to install); an `https://` URL is a typed
//!   [`ConnectError::HttpsUnsupported`](crate::ConnectError::HttpsUnsupported) before anything
//!   is sent. A host that needs TLS passes its own transport to
//!   [`Connection::with_transport`](crate::Connection::with_transport).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::revision::Protocol;

/// A server started as a child process, speaking JSON-RPC on its stdin and stdout.
///
/// ```
/// use loopbound_mcp::StdioServer;
///
/// let server = StdioServer::new("everything", "node")
///     .arg("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
///     .arg("stdio");
/// assert_eq!(server.name(), "everything");
/// ```
#[derive(Clone, Debug)]
pub struct StdioServer {
    pub(crate) name: String,
    pub(crate) program: OsString,
    pub(crate) args: Vec<OsString>,
    pub(crate) env: Vec<(OsString, OsString)>,
    pub(crate) current_dir: Option<PathBuf>,
    pub(crate) inherit_stderr: bool,
    pub(crate) protocol: Protocol,
}

impl StdioServer {
    /// The server the host calls `name` (used in capabilities and messages), started as
    /// `program`. Give the program itself, not a shell or a launcher (see the module's docs).
    pub fn new(name: impl Into<String>, program: impl Into<OsString>) -> Self {
        Self {
            name: name.into(),
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            current_dir: None,
            inherit_stderr: false,
            protocol: Protocol::default(),
        }
    }

    /// Adds one argument.
    #[must_use]
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Adds arguments.
    #[must_use]
    pub fn args<I: IntoIterator<Item = A>, A: Into<OsString>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets one environment variable of the process.
    #[must_use]
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Sets the process's working directory.
    #[must_use]
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.current_dir = Some(dir.into());
        self
    }

    /// Lets the server write to this process's stderr (default: its stderr is discarded).
    #[must_use]
    pub fn inherit_stderr(mut self, inherit: bool) -> Self {
        self.inherit_stderr = inherit;
        self
    }

    /// Speaks to the server as `protocol` says (default: the newest revision it speaks, every
    /// question declined).
    #[must_use]
    pub fn protocol(mut self, protocol: Protocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// The host's name for the server.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// A server reached over streamable HTTP at an `http://` URL.
#[derive(Clone, Debug)]
pub struct HttpServer {
    pub(crate) name: String,
    pub(crate) url: String,
    pub(crate) protocol: Protocol,
}

impl HttpServer {
    /// The server the host calls `name`, at `url` (e.g. `http://127.0.0.1:3001/mcp`).
    pub fn new(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self { name: name.into(), url: url.into(), protocol: Protocol::default() }
    }

    /// Speaks to the server as `protocol` says (default: the newest revision it speaks, every
    /// question declined).
    #[must_use]
    pub fn protocol(mut self, protocol: Protocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// The host's name for the server.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// How long each step may take.
///
/// A call is also bounded by its scope: the deadline, a halt or the caller's cancellation drops
/// it earlier. The call timeout bounds a call made under a long deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    initialize: Duration,
    list: Duration,
    call: Duration,
}

impl Default for Timeouts {
    /// 10 s for `initialize`, 10 s for `tools/list`, 60 s for each call.
    fn default() -> Self {
        Self {
            initialize: Duration::from_secs(10),
            list: Duration::from_secs(10),
            call: Duration::from_mins(1),
        }
    }
}

impl Timeouts {
    /// Sets the `initialize` timeout.
    #[must_use]
    pub fn with_initialize(mut self, timeout: Duration) -> Self {
        self.initialize = timeout;
        self
    }

    /// Sets the `tools/list` timeout (for all pages together).
    #[must_use]
    pub fn with_list(mut self, timeout: Duration) -> Self {
        self.list = timeout;
        self
    }

    /// Sets the timeout of each `tools/call`.
    #[must_use]
    pub fn with_call(mut self, timeout: Duration) -> Self {
        self.call = timeout;
        self
    }

    /// The `initialize` timeout.
    #[must_use]
    pub fn initialize(&self) -> Duration {
        self.initialize
    }

    /// The `tools/list` timeout.
    #[must_use]
    pub fn list(&self) -> Duration {
        self.list
    }

    /// The timeout of each `tools/call`.
    #[must_use]
    pub fn call(&self) -> Duration {
        self.call
    }
}
