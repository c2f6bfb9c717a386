//! A throwaway PostgreSQL cluster for tests: `initdb` in a temporary folder, a server on a free
//! loopback port, stopped by its PID.
//!
//! ```no_run
//! use loopbound_testkit::postgres::{Cluster, Durability};
//!
//! // One cluster per test binary, one fresh database per test.
//! let Some(cluster) = Cluster::shared(Durability::Fast) else { return }; // SKIPPED: no PostgreSQL
//! let database = cluster.create_database("leases");
//! assert_eq!(cluster.execute(&database.name, "SELECT 1 + 1"), "2");
//! let url = database.url; // postgres://postgres@127.0.0.1:PORT/leases_0
//! ```
//!
//! `initdb` costs seconds, so it runs once per machine and PostgreSQL version, and each cluster
//! copies the cached result; tests share one cluster per test binary ([`Cluster::shared`]) and
//! take a database each ([`Cluster::create_database`]); a test that crashes or restarts the
//! server starts its own ([`Cluster::start`]). The programs are found on `PATH`, else in
//! `pg_config --bindir`; where they are absent, [`Cluster::start`] and [`Cluster::shared`] print
//! `SKIPPED` and return `None` (a failure under `LOOPBOUND_REQUIRE_SERVERS=1`, see
//! [`crate::skip`]). Run as root, the server runs as `nobody`.
//!
//! Authentication: the superuser `postgres` is trusted over TCP from 127.0.0.1; roles made by
//! [`Cluster::create_password_role`] must give their password (SCRAM-SHA-256), so a test can
//! see a server refuse a login.
//!
//! # Invariants
//!
//! - No server outlives its test process: a [`Cluster`] stops its server when dropped, also
//!   while unwinding from a panic; the shared clusters (never dropped) and any cluster of a
//!   process that was killed get a fast-shutdown signal when the process ends (the server's
//!   parent-death signal), and the next test process removes their folders.
//! - Durability is explicit: [`Durability::Durable`] keeps PostgreSQL's defaults (`fsync`,
//!   `synchronous_commit` and `full_page_writes` on) for the crash and durability tests;
//!   [`Durability::Fast`] turns all three off where durability is not what a test checks.
//! - The server listens on 127.0.0.1 only, with its Unix socket in the cluster's own folder.

mod account;
mod binaries;
mod psql;
mod server;
mod template;
mod workdir;

use std::fmt::Write as _;
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use account::Account;
use binaries::Binaries;
use server::{Server, StartError};
use template::PASSWORD_GROUP;
use workdir::Workdir;

/// How long a server may take to become ready (a shared two-core machine can be slow).
const READY_WITHIN: Duration = Duration::from_secs(60);

/// How many free ports are tried when another process takes the one picked first.
const PORT_ATTEMPTS: usize = 5;

/// The variable whose `name=value` pairs (comma-separated) are passed to every cluster's server
/// after this module's own settings, so that they win: for benchmarks that try a server setting
/// (`LOOPBOUND_POSTGRES_SETTINGS=shared_buffers=128MB`); tests never set it.
pub const EXTRA_SETTINGS: &str = "LOOPBOUND_POSTGRES_SETTINGS";

/// Whether a cluster's commits survive a crash of the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Durability {
    /// PostgreSQL's defaults: `fsync`, `synchronous_commit` and `full_page_writes` on. A
    /// committed transaction survives an immediate shutdown ([`Cluster::crash`]).
    Durable,
    /// `fsync`, `synchronous_commit` and `full_page_writes` off: faster, and a crash may lose
    /// the last commits. For tests where durability is not what is checked.
    Fast,
}

impl Durability {
    fn settings(self) -> [(&'static str, &'static str); 3] {
        let value = match self {
            Self::Durable => "on",
            Self::Fast => "off",
        };
        [("fsync", value), ("synchronous_commit", value), ("full_page_writes", value)]
    }
}

/// How long a cluster took to come up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Startup {
    /// Whether this start ran `initdb` (the first on this machine for this PostgreSQL version),
    /// rather than copying the cached template data folder that an earlier `initdb` made.
    pub initdb: bool,
    /// Making the data folder: `initdb` and a copy, or only a copy.
    pub data: Duration,
    /// From spawning the server to its `ready` status.
    pub server: Duration,
}

/// A database created for one test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Database {
    /// Its name, unique in the cluster.
    pub name: String,
    /// A connection URL for the superuser, e.g. `postgres://postgres@127.0.0.1:PORT/NAME`.
    pub url: String,
}

/// A running throwaway cluster. Dropping it stops the server and removes its folder.
#[derive(Debug)]
pub struct Cluster {
    // Declared before `workdir`, so the server stops before its folder is removed.
    server: Option<Server>,
    workdir: Workdir,
    binaries: Binaries,
    account: Account,
    port: u16,
    durability: Durability,
    /// The caller's own server settings (`name=value`).
    settings: Vec<String>,
    startup: Startup,
}

impl Cluster {
    /// Starts a cluster of its own for the calling test, or prints `SKIPPED` and returns `None`
    /// where PostgreSQL is not installed.
    ///
    /// # Panics
    ///
    /// When PostgreSQL is installed but the cluster cannot be made or started (the message
    /// carries `initdb`'s or the server's log), or when it is absent and
    /// `LOOPBOUND_REQUIRE_SERVERS=1`.
    #[must_use]
    pub fn start(durability: Durability) -> Option<Self> {
        Self::start_with(durability, &[])
    }

    /// As [`start`](Self::start), the server also given `settings` (`name=value` pairs, after
    /// this module's own and before [`EXTRA_SETTINGS`]): for a bench that loads a server
    /// extension, such as `shared_preload_libraries=pg_stat_statements`.
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start).
    #[must_use]
    pub fn start_with(durability: Durability, settings: &[&str]) -> Option<Self> {
        let binaries = installed()?;
        Some(Self::create(binaries.clone(), durability, settings))
    }

    /// The cluster shared by every test of this test binary with this durability, started by
    /// the first caller; `None` (after printing `SKIPPED`) where PostgreSQL is not installed.
    /// Give each test its own database ([`create_database`](Self::create_database)).
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start).
    #[must_use]
    pub fn shared(durability: Durability) -> Option<&'static Self> {
        static DURABLE: OnceLock<Cluster> = OnceLock::new();
        static FAST: OnceLock<Cluster> = OnceLock::new();
        let binaries = installed()?;
        let cell = match durability {
            Durability::Durable => &DURABLE,
            Durability::Fast => &FAST,
        };
        Some(cell.get_or_init(|| Self::create(binaries.clone(), durability, &[])))
    }

    fn create(binaries: Binaries, durability: Durability, settings: &[&str]) -> Self {
        let account = Account::for_this_process().unwrap_or_else(|reason| panic!("{reason}"));
        let workdir = Workdir::create(account).expect("the cluster's temporary folder can be created");
        let began = Instant::now();
        let initdb = template::materialise(&binaries, account, &workdir::root(), &workdir.data())
            .unwrap_or_else(|reason| panic!("{reason}"));
        let data = began.elapsed();
        let mut cluster = Self {
            server: None,
            workdir,
            binaries,
            account,
            port: 0,
            durability,
            settings: settings.iter().map(|setting| (*setting).to_owned()).collect(),
            startup: Startup { initdb, data, server: Duration::ZERO },
        };
        cluster.startup.server = cluster.launch(None);
        cluster.execute("postgres", &format!("CREATE ROLE {PASSWORD_GROUP} NOLOGIN"));
        cluster
    }

    /// Starts the server on `port`, or on a free port (trying another if it was taken
    /// meanwhile); returns how long it took to become ready.
    fn launch(&mut self, port: Option<u16>) -> Duration {
        let attempts = if port.is_some() { 1 } else { PORT_ATTEMPTS };
        for _ in 0..attempts {
            let port = port.unwrap_or_else(unused_port);
            let logged = self.log().len();
            let began = Instant::now();
            match Server::start(
                self.server_command(port),
                &self.workdir.log(),
                &self.workdir.data(),
                READY_WITHIN,
            ) {
                Ok(server) => {
                    self.server = Some(server);
                    self.port = port;
                    return began.elapsed();
                }
                Err(StartError::Exited(_))
                    if self.log().get(logged..).is_some_and(|new| new.contains("could not bind")) => {}
                Err(error) => {
                    panic!("the PostgreSQL server did not start: {error}; its log:\n{}", self.log())
                }
            }
        }
        panic!("the PostgreSQL server found no free port in {attempts} attempts; its log:\n{}", self.log())
    }

    fn server_command(&self, port: u16) -> Command {
        let mut command = self.account.command(&self.binaries.setpriv, &self.binaries.postgres);
        command
            .arg("-D")
            .arg(self.workdir.data())
            .arg("-p")
            .arg(port.to_string())
            .arg("-k")
            .arg(self.workdir.path());
        let settings = [
            ("listen_addresses", "127.0.0.1"),
            ("shared_buffers", "32MB"),
            ("max_connections", "200"),
            ("logging_collector", "off"),
        ];
        for (name, value) in settings.into_iter().chain(self.durability.settings()) {
            command.arg("-c").arg(format!("{name}={value}"));
        }
        for setting in &self.settings {
            command.arg("-c").arg(setting);
        }
        // A bench's own settings last, so that they win: `name=value` pairs, comma-separated.
        if let Ok(extra) = std::env::var(EXTRA_SETTINGS) {
            for setting in extra.split(',').map(str::trim).filter(|setting| !setting.is_empty()) {
                command.arg("-c").arg(setting);
            }
        }
        command
    }

    /// The cluster's temporary folder: `data/`, the server's socket and `server.log`.
    #[must_use]
    pub fn folder(&self) -> &std::path::Path {
        self.workdir.path()
    }

    /// The server's port on 127.0.0.1.
    #[must_use]
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The postmaster's PID, or `None` while the server is down after [`crash`](Self::crash).
    #[must_use]
    pub fn pid(&self) -> Option<u32> {
        self.server.as_ref().map(Server::pid)
    }

    /// This cluster's durability settings.
    #[must_use]
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// How long making the data folder and the first server start took.
    #[must_use]
    pub fn startup(&self) -> Startup {
        self.startup
    }

    /// A connection URL for the superuser `postgres` (trusted, no password) to `database`.
    #[must_use]
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{}", self.port, encode(database))
    }

    /// A connection URL for `user` with `password` to `database`, each part percent-encoded.
    #[must_use]
    pub fn url_with_password(&self, user: &str, password: &str, database: &str) -> String {
        format!(
            "postgres://{}:{}@127.0.0.1:{}/{}",
            encode(user),
            encode(password),
            self.port,
            encode(database)
        )
    }

    /// Creates a fresh, empty database whose name starts with `hint` (lower-cased, letters,
    /// digits and `_` kept) and is unique in this cluster.
    ///
    /// # Panics
    ///
    /// When the server refuses (the message carries `psql`'s error).
    #[must_use]
    pub fn create_database(&self, hint: &str) -> Database {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let mut name: String = hint
            .chars()
            .map(|c| c.to_ascii_lowercase())
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
            .take(40)
            .collect();
        let _ = write!(name, "_{}", NEXT.fetch_add(1, Ordering::Relaxed));
        self.execute("postgres", &format!("CREATE DATABASE {}", psql::identifier(&name)));
        Database { url: self.url(&name), name }
    }

    /// Creates a login role that must authenticate with `password` (SCRAM-SHA-256) over TCP.
    ///
    /// # Panics
    ///
    /// When the server refuses.
    pub fn create_password_role(&self, role: &str, password: &str) {
        self.execute(
            "postgres",
            &format!(
                "CREATE ROLE {} LOGIN PASSWORD {} IN ROLE {PASSWORD_GROUP}",
                psql::identifier(role),
                psql::literal(password)
            ),
        );
    }

    /// Runs `sql` as the superuser in `database` and returns the rows `psql` printed, one per
    /// line, columns separated by `|`.
    ///
    /// # Panics
    ///
    /// When the SQL fails (the message carries the server's error).
    pub fn execute(&self, database: &str, sql: &str) -> String {
        self.try_execute(database, sql).unwrap_or_else(|error| panic!("{error}\nSQL: {sql}"))
    }

    /// As [`execute`](Self::execute), returning the error text instead of panicking.
    ///
    /// # Errors
    ///
    /// `psql`'s error text when the SQL fails or the server is down.
    pub fn try_execute(&self, database: &str, sql: &str) -> Result<String, String> {
        psql::run(&self.binaries.psql, self.port, database, sql)
    }

    /// Crashes the server: an immediate shutdown (SIGQUIT to the postmaster, no checkpoint),
    /// which the next [`recover`](Self::recover) repairs by replaying the WAL. Nothing listens
    /// on the port meanwhile.
    pub fn crash(&mut self) {
        if let Some(mut server) = self.server.take() {
            server.stop(Signal::SIGQUIT);
        }
    }

    /// Starts the server again on the same port and data after [`crash`](Self::crash); returns
    /// how long recovery took until it was ready.
    ///
    /// # Panics
    ///
    /// When the server is running, or does not come back (the message carries its log).
    pub fn recover(&mut self) -> Duration {
        assert!(self.server.is_none(), "recover() is for a crashed server; this one is running");
        self.launch(Some(self.port))
    }

    /// Freezes the server as a stalled machine would: SIGSTOP to the postmaster, then to every
    /// process it started (the backends behind open connections among them). Its sockets stay
    /// open and nothing answers on them until [`thaw`](Self::thaw): a connection's queries wait,
    /// and a new connection is accepted by the kernel and never greeted.
    pub fn freeze(&self) {
        self.signal_server(Signal::SIGSTOP);
    }

    /// Resumes a server [`freeze`](Self::freeze) stopped: SIGCONT to its processes.
    pub fn thaw(&self) {
        self.signal_server(Signal::SIGCONT);
    }

    /// Sends `signal` to the postmaster and then to each of its children.
    fn signal_server(&self, signal: Signal) {
        let Some(postmaster) = self.pid() else { return };
        for pid in std::iter::once(postmaster).chain(children(postmaster)) {
            if let Ok(pid) = i32::try_from(pid) {
                // A child that exited meanwhile needs nothing.
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal);
            }
        }
    }

    /// Everything the server has logged so far.
    #[must_use]
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.workdir.log()).unwrap_or_default()
    }
}

/// The processes whose parent is `parent`, read from `/proc`.
fn children(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            // `pid (comm) state ppid ...`: the comm may hold spaces and parentheses.
            std::fs::read_to_string(format!("/proc/{pid}/stat")).ok().is_some_and(|stat| {
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
                    == Some(parent)
            })
        })
        .collect()
}

/// Removes the folders that test processes which no longer run left behind (after stopping any
/// server still running in one); returns how many. Every process does this before its first
/// cluster; it is public so a test can check it.
///
/// # Errors
///
/// When the clusters' common folder cannot be read.
pub fn remove_leftovers() -> std::io::Result<usize> {
    workdir::sweep(&workdir::root())
}

/// The programs, found once per process; `None` (after a skip) where they are absent.
fn installed() -> Option<&'static Binaries> {
    static FOUND: OnceLock<Result<Binaries, String>> = OnceLock::new();
    match FOUND.get_or_init(Binaries::find) {
        Ok(binaries) => Some(binaries),
        Err(reason) => {
            crate::skip::skip(reason);
            None
        }
    }
}

/// A loopback port on which nothing listens (at the moment of the call).
///
/// # Panics
///
/// When no port can be bound on 127.0.0.1.
#[must_use]
pub fn unused_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port can be bound");
    listener.local_addr().expect("a bound listener has an address").port()
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
fn encode(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            encoded.push(char::from(byte));
        } else {
            let _ = write!(encoded, "%{byte:02X}");
        }
    }
    encoded
}
