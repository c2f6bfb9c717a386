//! Start-up: the command line (the approver seam's options included), then the model endpoint, the MCP server, the tools, the journal
//! (SQLite, or PostgreSQL when `LOOPBOUND_DATABASE_URL` is set) and the listener, in that order;
//! the first that fails stops the service with a [`StartError`] naming it.
//!
//! # Invariants
//!
//! - The address printed (`listening on http://…`) is the one bound, after everything else is
//!   ready: a client that reads it can send requests at once.
//! - No secret is printed: the API key and the database password stay in their crates' redacted
//!   forms.

use std::fmt;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use loopbound::journal::{Journal, JournalError};
use loopbound::pool::PoolError;
use loopbound::transport::{ChatOptions, Transport};
use loopbound::{Limits, LimitsError, Runner};
use loopbound_mcp::{ConnectError, Connection, StdioServer, Timeouts};
use loopbound_openai::{ConfigError, OpenAiTransport};

use super::api;
use super::app::App;
use super::approver::{self, Gate, GateError};
use super::tenants::{Tenant, Tenants};
use super::tools::{self, ToolsError};

/// The pinned filesystem server, fetched by `npx` when no other program is given.
pub const FILESYSTEM_SERVER: &str = "@modelcontextprotocol/server-filesystem@2026.8.31";

/// `service`: an HTTP service that runs bounded agent runs.
///
/// The model endpoint comes from `LOOPBOUND_OPENAI_BASE_URL` and `LOOPBOUND_OPENAI_MODEL` (`LOOPBOUND_OPENAI_API_KEY`,
/// `LOOPBOUND_OPENAI_TIMEOUT_SECS` optional). The journal is the SQLite file `--journal`, or PostgreSQL
/// when `LOOPBOUND_DATABASE_URL` is set.
#[derive(Debug, Parser)]
#[command(name = "service", version)]
pub struct Config {
    /// The address to listen on (port 0: any free port; the bound address is printed).
    #[arg(long, default_value = "127.0.0.1:8330")]
    pub listen: SocketAddr,
    /// The folder the filesystem tools may read and write (it must exist).
    #[arg(long)]
    pub files: PathBuf,
    /// The SQLite journal file (created if missing), unless `LOOPBOUND_DATABASE_URL` is set.
    #[arg(long, default_value = "service.db")]
    pub journal: PathBuf,
    /// The program that starts the MCP filesystem server. The default, `npx`, downloads the
    /// pinned package at start-up; to run the copy that `testkit/mcp/setup.sh` installs, pass
    /// `--mcp-program node --mcp-arg
    /// testkit/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js`.
    #[arg(long, default_value = "npx")]
    pub mcp_program: String,
    /// An argument for that program, placed before the folder; repeat for several. Any
    /// `--mcp-arg` replaces all the default arguments (`-y` and the pinned package), which
    /// apply only when none is given.
    #[arg(long = "mcp-arg", allow_hyphen_values = true)]
    pub mcp_args: Vec<String>,
    /// Each run's wall-clock deadline, in seconds.
    #[arg(long, default_value_t = 60)]
    pub deadline_secs: u64,
    /// The most runs kept in memory (in flight, waiting for approval, or ended); a run not in
    /// flight is forgotten to make room, and rebuilt from the journal when asked for again.
    #[arg(long, default_value_t = 4096)]
    pub max_runs: usize,
    /// The header that names the approver of a command, set by a trusted proxy in front of the
    /// service (which must replace any such header a client sends). Not read with
    /// `--approver-token`.
    #[arg(long, default_value = approver::DEFAULT_HEADER)]
    pub approver_header: String,
    /// For development, instead of a proxy: a token (at least 16 visible ASCII characters) that a
    /// command presents as `Authorization: Bearer <token>`, standing for `--approver-name`. Also
    /// read from `LOOPBOUND_APPROVER_TOKEN`, which keeps it out of the process list.
    #[arg(long)]
    pub approver_token: Option<String>,
    /// The approver a development token stands for.
    #[arg(long, default_value = "developer")]
    pub approver_name: String,
    /// The service's own origin (`scheme://host[:port]`, as a browser sees it); repeat for
    /// several. A command whose `Origin` header is another is refused. Default: the bound
    /// address, and `localhost` with its port when it is a loopback address.
    #[arg(long = "origin")]
    pub origins: Vec<String>,
    /// A tenant and its budget of tokens per UTC day, `NAME=TOKENS` (`acme=20000`); repeat for
    /// several. A request names its tenant (`"tenant":"acme"`) and every model call of its run
    /// is reserved in that tenant's pool, kept beside the journal, before it is sent.
    #[arg(long = "tenant")]
    pub tenants: Vec<Tenant>,
}

/// Why the service did not start.
#[derive(Debug)]
pub enum StartError {
    /// The model endpoint's configuration.
    Model(ConfigError),
    /// The files folder.
    Files(std::io::Error),
    /// The MCP server.
    Mcp(ConnectError),
    /// The tools.
    Tools(ToolsError),
    /// The limits.
    Limits(LimitsError),
    /// The SQLite journal.
    Journal(JournalError),
    /// The PostgreSQL journal.
    Postgres(loopbound_postgres::Error),
    /// The approver seam's options.
    Approver(GateError),
    /// The tenants' pools.
    Pools(PoolError),
    /// The listener.
    Listen(std::io::Error),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Model(error) => write!(f, "the model endpoint: {error}"),
            Self::Files(error) => write!(f, "the --files folder: {error}"),
            Self::Mcp(error) => write!(f, "the MCP filesystem server: {error}"),
            Self::Tools(error) => write!(f, "the tools: {error}"),
            Self::Limits(error) => write!(f, "the limits: {error}"),
            Self::Journal(error) => write!(f, "the SQLite journal: {error}"),
            Self::Postgres(error) => write!(f, "the PostgreSQL journal: {error}"),
            Self::Approver(error) => write!(f, "the approver: {error}"),
            Self::Pools(error) => write!(f, "the tenants' pools: {error}"),
            Self::Listen(error) => write!(f, "the listener: {error}"),
        }
    }
}

impl std::error::Error for StartError {}

/// Starts the service and serves until Ctrl-C.
///
/// # Errors
///
/// [`StartError`], naming what failed.
pub async fn serve(config: Config) -> Result<(), StartError> {
    // Checked first, so that a mistyped option stops the service before anything starts.
    gate(&config, config.listen).map_err(StartError::Approver)?;
    let transport = OpenAiTransport::from_env().map_err(StartError::Model)?;
    let files = std::fs::canonicalize(&config.files).map_err(StartError::Files)?;
    let args = if config.mcp_args.is_empty() {
        vec!["-y".to_owned(), FILESYSTEM_SERVER.to_owned()]
    } else {
        config.mcp_args.clone()
    };
    let server = StdioServer::new("filesystem", &config.mcp_program).args(args).arg(&files);
    let timeouts =
        Timeouts::default().with_initialize(Duration::from_mins(1)).with_list(Duration::from_secs(30));
    let connection = Connection::stdio(&server, timeouts).await.map_err(StartError::Mcp)?;
    let tools = tools::define(&connection).map_err(StartError::Tools)?;
    let runtime = Runner::new(&tools, transport)
        .observe(loopbound::Middleware)
        .options(ChatOptions::default().with_max_output_tokens(800))
        .streaming(true);
    let limits = Limits::default().with_deadline(Duration::from_secs(config.deadline_secs));
    limits.validate().map_err(StartError::Limits)?;
    let files = files.display().to_string();
    match std::env::var("LOOPBOUND_DATABASE_URL") {
        Ok(url) if !url.is_empty() => {
            let database =
                loopbound_postgres::Config::from_env().map_err(|error| StartError::Postgres(error.into()))?;
            let journal = loopbound_postgres::PostgresJournal::connect(&database)
                .await
                .map_err(StartError::Postgres)?;
            let tenants = if config.tenants.is_empty() {
                Tenants::none()
            } else {
                let pools = loopbound_postgres::PostgresPools::connect(journal.store())
                    .await
                    .map_err(StartError::Pools)?;
                Tenants::define(Arc::new(pools), &config.tenants).await.map_err(StartError::Pools)?
            };
            let app = App::new(runtime, journal, limits, config.max_runs, files).with_tenants(tenants);
            listen(&config, app).await
        }
        _ => {
            let journal =
                loopbound_sqlite::SqliteJournal::open(&config.journal).map_err(StartError::Journal)?;
            let tenants = if config.tenants.is_empty() {
                Tenants::none()
            } else {
                // The pools live in the journal's file, beside the runs that draw from them.
                let pools =
                    loopbound_sqlite::SqlitePools::open(&config.journal).map_err(StartError::Pools)?;
                Tenants::define(Arc::new(pools), &config.tenants).await.map_err(StartError::Pools)?
            };
            let app = App::new(runtime, journal, limits, config.max_runs, files).with_tenants(tenants);
            listen(&config, app).await
        }
    }
}

async fn listen<T: Transport + 'static, J: Journal + 'static>(
    config: &Config,
    app: App<T, J>,
) -> Result<(), StartError> {
    let listener = tokio::net::TcpListener::bind(config.listen).await.map_err(StartError::Listen)?;
    let address = listener.local_addr().map_err(StartError::Listen)?;
    let gate = gate(config, address).map_err(StartError::Approver)?;
    let mut stdout = std::io::stdout();
    // The test and a person read this line; a closed stdout must not stop the service.
    let _ = writeln!(stdout, "listening on http://{address}").and_then(|()| stdout.flush());
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    axum::serve(listener, api::router(Arc::new(app), Arc::new(gate)))
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(StartError::Listen)
}

/// The approver seam: a development token if one is given (option, then environment), else the
/// trusted proxy's header; the service's own origins as configured, else those of `address`.
fn gate(config: &Config, address: SocketAddr) -> Result<Gate, GateError> {
    let origins = if config.origins.is_empty() {
        let mut own = vec![format!("http://{address}")];
        if address.ip().is_loopback() {
            own.push(format!("http://localhost:{}", address.port()));
        }
        own
    } else {
        config.origins.clone()
    };
    let token = config
        .approver_token
        .clone()
        .or_else(|| std::env::var("LOOPBOUND_APPROVER_TOKEN").ok())
        .filter(|token| !token.is_empty());
    match token {
        Some(token) => Gate::token(&token, &config.approver_name, &origins),
        None => Gate::proxy(&config.approver_header, &origins),
    }
}
