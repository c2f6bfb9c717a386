//! Where the database is and how to use it: a connection URL, the pool's size and timeouts, and
//! the default lease duration.
//!
//! # Invariants
//!
//! - The password never leaves this module except towards the server: `Debug` and `Display`
//!   print the URL with `[redacted]` in its place, and no [`ConfigError`] quotes the text it
//!   failed to parse (which may hold the password).
//! - TLS is not supported: a URL that requires it (`sslmode=require`) is refused here rather
//!   than connected in plain text; `sslmode=prefer` (the default) and `disable` connect without.
//! - Every duration and size is positive; zero is refused, not taken as "unlimited".

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use tokio_postgres::config::{Host, SslMode};

/// Environment variable holding the connection URL, e.g.
/// `postgres://loopbound:secret@127.0.0.1:5432/loopbound`.
pub const ENV_DATABASE_URL: &str = "LOOPBOUND_DATABASE_URL";
/// Optional environment variable: the default lease duration in whole seconds.
pub const ENV_LEASE_SECS: &str = "LOOPBOUND_LEASE_SECS";
/// Optional environment variable: how many connections the pool holds at most.
pub const ENV_POOL_SIZE: &str = "LOOPBOUND_DATABASE_POOL_SIZE";

/// Text printed in place of the password.
pub const REDACTED: &str = "[redacted]";

/// The default lease duration: how long a worker holds a run without writing or renewing.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);
/// The default pool size.
pub const DEFAULT_POOL_SIZE: usize = 16;
/// The default time allowed to open one connection.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The default time a caller waits for a free pooled connection.
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(30);
/// The default time one operation (a journal's commit, a pool's reservation, a host's listing)
/// may take from asking for a connection to its answer.
pub const DEFAULT_QUERY_TIMEOUT: Duration = Duration::from_secs(30);

/// How to reach the database and use it.
#[derive(Clone)]
pub struct Config {
    postgres: tokio_postgres::Config,
    lease: Duration,
    pool_size: usize,
    wait_timeout: Duration,
    query_timeout: Duration,
}

/// Why a configuration was refused. No variant quotes the refused text.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// A required variable is unset or empty.
    Missing {
        /// The variable.
        variable: &'static str,
    },
    /// A variable is not valid Unicode.
    NotUnicode {
        /// The variable.
        variable: &'static str,
    },
    /// The text is not a PostgreSQL connection URL (`postgres://…` or `postgresql://…`) or
    /// key-value string, or names no host.
    InvalidUrl,
    /// The URL requires TLS (`sslmode=require`), which this crate does not support.
    TlsUnsupported,
    /// A duration or size is zero or not a whole number.
    InvalidNumber {
        /// The variable or setting.
        setting: &'static str,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Missing { variable } => write!(f, "{variable} is not set"),
            Self::NotUnicode { variable } => write!(f, "{variable} is not valid Unicode"),
            Self::InvalidUrl => f.write_str(
                "the database URL is not a PostgreSQL connection URL (postgres://user:password@host:port/database)",
            ),
            Self::TlsUnsupported => {
                f.write_str("the database URL requires TLS (sslmode=require), which is not supported")
            }
            Self::InvalidNumber { setting } => write!(f, "{setting} must be a whole number above zero"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Reads `variable` from the process environment; an unset variable is `None`.
fn environment(variable: &'static str) -> Result<Option<String>, ConfigError> {
    match std::env::var(variable) {
        Ok(value) => Ok(Some(value)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(ConfigError::NotUnicode { variable }),
    }
}

impl Config {
    /// A configuration for the database at `url`, with the optional settings of the process
    /// environment (`LOOPBOUND_LEASE_SECS`, `LOOPBOUND_DATABASE_POOL_SIZE`, as
    /// [`from_env`](Self::from_env) reads them) or the defaults, and the default timeouts. So a
    /// URL given in code and one given by `LOOPBOUND_DATABASE_URL` give the same lease. A
    /// `connect_timeout` or `application_name` given in the URL is kept (the latter defaults to
    /// `loopbound`, which `pg_stat_activity` shows). The `with_` methods override any of them.
    ///
    /// ```
    /// let config = loopbound_postgres::Config::new("postgres://app:s3cret-pass@127.0.0.1:5432/jobs")?;
    /// assert_eq!(config.to_string(), "postgres://app:[redacted]@127.0.0.1:5432/jobs");
    /// # Ok::<(), loopbound_postgres::ConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`ConfigError::InvalidUrl`] or [`ConfigError::TlsUnsupported`]; a [`ConfigError`]
    /// naming an optional variable that is invalid.
    pub fn new(url: &str) -> Result<Self, ConfigError> {
        Self::with_settings(url, environment)
    }

    /// The configuration for `url` with the optional settings that `read` gives.
    fn with_settings(
        url: &str,
        read: impl Fn(&'static str) -> Result<Option<String>, ConfigError>,
    ) -> Result<Self, ConfigError> {
        let get = |variable| read(variable).map(|value| value.filter(|text| !text.trim().is_empty()));
        let mut config = Self::parse(url)?;
        if let Some(secs) = get(ENV_LEASE_SECS)? {
            config.lease = Duration::from_secs(positive(&secs, ENV_LEASE_SECS)?);
        }
        if let Some(size) = get(ENV_POOL_SIZE)? {
            let size = positive(&size, ENV_POOL_SIZE)?;
            config.pool_size =
                usize::try_from(size).map_err(|_| ConfigError::InvalidNumber { setting: ENV_POOL_SIZE })?;
        }
        Ok(config)
    }

    /// The configuration for `url` with the default settings.
    fn parse(url: &str) -> Result<Self, ConfigError> {
        let mut postgres =
            tokio_postgres::Config::from_str(url.trim()).map_err(|_| ConfigError::InvalidUrl)?;
        if postgres.get_hosts().is_empty() {
            return Err(ConfigError::InvalidUrl);
        }
        if postgres.get_ssl_mode() == SslMode::Require {
            return Err(ConfigError::TlsUnsupported);
        }
        if postgres.get_connect_timeout().is_none() {
            postgres.connect_timeout(DEFAULT_CONNECT_TIMEOUT);
        }
        if postgres.get_application_name().is_none() {
            postgres.application_name("loopbound");
        }
        Ok(Self {
            postgres,
            lease: DEFAULT_LEASE,
            pool_size: DEFAULT_POOL_SIZE,
            wait_timeout: DEFAULT_WAIT_TIMEOUT,
            query_timeout: DEFAULT_QUERY_TIMEOUT,
        })
    }

    /// Reads `LOOPBOUND_DATABASE_URL` (required), `LOOPBOUND_LEASE_SECS` and
    /// `LOOPBOUND_DATABASE_POOL_SIZE` (optional) from the process environment. An empty variable
    /// counts as unset.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the variable that is missing or invalid.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_source(environment)
    }

    /// As [`from_env`](Self::from_env), reading variables through `lookup`.
    ///
    /// ```
    /// use loopbound_postgres::{Config, ConfigError};
    ///
    /// let missing = Config::from_lookup(|_| None).unwrap_err();
    /// assert_eq!(missing, ConfigError::Missing { variable: "LOOPBOUND_DATABASE_URL" });
    /// ```
    ///
    /// # Errors
    ///
    /// As [`from_env`](Self::from_env).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Self::from_source(|variable| Ok(lookup(variable)))
    }

    fn from_source(
        read: impl Fn(&'static str) -> Result<Option<String>, ConfigError>,
    ) -> Result<Self, ConfigError> {
        let url = read(ENV_DATABASE_URL)?
            .filter(|text| !text.trim().is_empty())
            .ok_or(ConfigError::Missing { variable: ENV_DATABASE_URL })?;
        Self::with_settings(&url, read)
    }

    /// Sets the default lease duration (see [`Store::acquire`](crate::Store::acquire)).
    ///
    /// # Errors
    ///
    /// [`ConfigError::InvalidNumber`] for zero.
    pub fn with_lease(mut self, lease: Duration) -> Result<Self, ConfigError> {
        if lease.is_zero() {
            return Err(ConfigError::InvalidNumber { setting: "the lease duration" });
        }
        self.lease = lease;
        Ok(self)
    }

    /// Sets how many connections the pool holds at most.
    ///
    /// # Errors
    ///
    /// [`ConfigError::InvalidNumber`] for zero.
    pub fn with_pool_size(mut self, size: usize) -> Result<Self, ConfigError> {
        if size == 0 {
            return Err(ConfigError::InvalidNumber { setting: "the pool size" });
        }
        self.pool_size = size;
        Ok(self)
    }

    /// Sets how long opening one connection may take, and how long a caller waits for a free
    /// pooled connection.
    ///
    /// # Errors
    ///
    /// [`ConfigError::InvalidNumber`] for a zero duration.
    pub fn with_timeouts(mut self, connect: Duration, wait: Duration) -> Result<Self, ConfigError> {
        if connect.is_zero() || wait.is_zero() {
            return Err(ConfigError::InvalidNumber { setting: "a timeout" });
        }
        self.postgres.connect_timeout(connect);
        self.wait_timeout = wait;
        Ok(self)
    }

    /// Sets how long one operation may take, from asking for a pooled connection to its
    /// answer: past it, the operation is given up with a storage error (its transaction, if the
    /// server ever sees it through, is rolled back with the connection's). A run's deadline
    /// bounds its own operations sooner (`loopbound::STORE_GRACE`); this bounds every caller,
    /// the host's commands included, against a server that stops answering.
    ///
    /// # Errors
    ///
    /// [`ConfigError::InvalidNumber`] for a zero duration.
    pub fn with_query_timeout(mut self, timeout: Duration) -> Result<Self, ConfigError> {
        if timeout.is_zero() {
            return Err(ConfigError::InvalidNumber { setting: "the query timeout" });
        }
        self.query_timeout = timeout;
        Ok(self)
    }

    /// How long one operation may take ([`with_query_timeout`](Self::with_query_timeout)).
    #[must_use]
    pub fn query_timeout(&self) -> Duration {
        self.query_timeout
    }

    /// The default lease duration.
    #[must_use]
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// The pool's size.
    #[must_use]
    pub fn pool_size(&self) -> usize {
        self.pool_size
    }

    /// How long a caller waits for a free pooled connection.
    #[must_use]
    pub fn wait_timeout(&self) -> Duration {
        self.wait_timeout
    }

    /// How long opening one connection may take.
    #[must_use]
    pub fn connect_timeout(&self) -> Duration {
        self.postgres.get_connect_timeout().copied().unwrap_or(DEFAULT_CONNECT_TIMEOUT)
    }

    /// The client's configuration, password included: only for opening connections.
    pub(crate) fn postgres(&self) -> &tokio_postgres::Config {
        &self.postgres
    }

    /// The password, for redaction.
    pub(crate) fn password(&self) -> Option<&[u8]> {
        self.postgres.get_password().filter(|password| !password.is_empty())
    }
}

fn positive(text: &str, setting: &'static str) -> Result<u64, ConfigError> {
    text.trim().parse::<u64>().ok().filter(|value| *value > 0).ok_or(ConfigError::InvalidNumber { setting })
}

impl fmt::Display for Config {
    /// The URL with the password replaced by `[redacted]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("postgres://")?;
        if let Some(user) = self.postgres.get_user() {
            f.write_str(user)?;
            if self.password().is_some() {
                write!(f, ":{REDACTED}")?;
            }
            f.write_str("@")?;
        }
        let ports = self.postgres.get_ports();
        for (index, host) in self.postgres.get_hosts().iter().enumerate() {
            if index > 0 {
                f.write_str(",")?;
            }
            match host {
                Host::Tcp(name) if name.contains(':') => write!(f, "[{name}]")?,
                Host::Tcp(name) => f.write_str(name)?,
                Host::Unix(path) => write!(f, "{}", path.display())?,
            }
            match ports.get(index).or_else(|| ports.first()) {
                Some(port) => write!(f, ":{port}")?,
                None => f.write_str(":5432")?,
            }
        }
        write!(f, "/{}", self.postgres.get_dbname().or(self.postgres.get_user()).unwrap_or_default())
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("url", &self.to_string())
            .field("lease", &self.lease)
            .field("pool_size", &self.pool_size)
            .field("connect_timeout", &self.connect_timeout())
            .field("wait_timeout", &self.wait_timeout)
            .field("query_timeout", &self.query_timeout)
            .finish()
    }
}
