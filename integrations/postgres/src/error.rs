//! What can go wrong between a worker and the database, as typed errors.
//!
//! # Invariants
//!
//! - The category comes from the failure's type (an I/O error, a closed connection, a pool
//!   timeout) or the server's SQLSTATE code, never from a message's words.
//! - No message carries the password: every text taken from the client or the server goes
//!   through [`Redactor::clean`], which replaces each occurrence of it with `[redacted]`.
//! - A [`Error::LeaseLost`] or [`Error::LeaseHeld`] means the database was reached and wrote
//!   nothing.

use std::fmt;
use std::time::{Duration, SystemTime};

use tokio_postgres::error::SqlState;

use crate::config::{ConfigError, REDACTED};

/// An error of this crate.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The configuration was refused.
    Config(ConfigError),
    /// The server could not be reached or stopped answering: nothing listens, the connection
    /// timed out or broke, the server is starting or shutting down, or it has no free
    /// connection. The message says which, redacted.
    Unavailable(String),
    /// The server answered and refused the login: wrong password, unknown role or database,
    /// or no `pg_hba.conf` entry. The message is the server's, redacted.
    Refused(String),
    /// A write repeated a record that must exist once.
    Conflict(String),
    /// A run id or worker id is empty, too long, or has a character outside the allowed set.
    InvalidId(&'static str),
    /// Another worker took this run over (the run's epoch is no longer this lease's): this
    /// worker writes nothing more for it and runs no further effect.
    LeaseLost {
        /// The run.
        run: String,
        /// The epoch this worker held.
        epoch: u64,
    },
    /// Another worker holds a live lease on this run.
    LeaseHeld {
        /// The run.
        run: String,
        /// The worker holding it.
        holder: String,
        /// When its lease expires, by the database's clock.
        until: SystemTime,
        /// How long until then, by the database's clock.
        remaining: Duration,
    },
    /// The database was migrated by a newer version of this crate.
    UnsupportedSchema {
        /// The database's schema version.
        found: i64,
        /// The newest version this build knows.
        supported: i64,
    },
    /// Any other failure of a statement; the message is the server's or the client's, redacted,
    /// with the SQLSTATE code when there is one.
    Storage(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Config(error) => write!(f, "{error}"),
            Self::Unavailable(message) => write!(f, "the database is unavailable: {message}"),
            Self::Refused(message) => write!(f, "the database refused the connection: {message}"),
            Self::Conflict(what) => write!(f, "the database already holds {what}"),
            Self::InvalidId(rule) => write!(f, "invalid id: {rule}"),
            Self::LeaseLost { run, epoch } => {
                write!(f, "run {run}: another worker took it over (this worker's epoch {epoch} is stale)")
            }
            Self::LeaseHeld { run, holder, remaining, .. } => {
                write!(
                    f,
                    "run {run}: worker {holder} holds its lease for another {} ms",
                    remaining.as_millis()
                )
            }
            Self::UnsupportedSchema { found, supported } => {
                write!(f, "the database's schema version {found} is newer than this build's ({supported})")
            }
            Self::Storage(message) => write!(f, "a database statement failed: {message}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<ConfigError> for Error {
    fn from(error: ConfigError) -> Self {
        Self::Config(error)
    }
}

impl From<tokio_postgres::Error> for Error {
    /// Classifies a client error raised inside a [`fenced`](crate::Store::fenced) write; the
    /// store removes the password from it before it leaves.
    fn from(error: tokio_postgres::Error) -> Self {
        Redactor::default().postgres(&error)
    }
}

/// Turns client errors into [`Error`]s without the password.
#[derive(Clone, Default)]
pub(crate) struct Redactor {
    password: Option<String>,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Redactor")
    }
}

impl Redactor {
    pub(crate) fn new(password: Option<&[u8]>) -> Self {
        Self { password: password.map(|bytes| String::from_utf8_lossy(bytes).into_owned()) }
    }

    /// `text` with every occurrence of the password replaced by `[redacted]`.
    pub(crate) fn clean(&self, text: &str) -> String {
        match &self.password {
            Some(password) if !password.is_empty() => text.replace(password.as_str(), REDACTED),
            _ => text.to_owned(),
        }
    }

    /// `error` with the password removed from every text it carries.
    pub(crate) fn scrub(&self, error: Error) -> Error {
        match error {
            Error::Unavailable(message) => Error::Unavailable(self.clean(&message)),
            Error::Refused(message) => Error::Refused(self.clean(&message)),
            Error::Conflict(message) => Error::Conflict(self.clean(&message)),
            Error::Storage(message) => Error::Storage(self.clean(&message)),
            Error::LeaseLost { run, epoch } => Error::LeaseLost { run: self.clean(&run), epoch },
            Error::LeaseHeld { run, holder, until, remaining } => {
                Error::LeaseHeld { run: self.clean(&run), holder: self.clean(&holder), until, remaining }
            }
            other @ (Error::Config(_) | Error::InvalidId(_) | Error::UnsupportedSchema { .. }) => other,
        }
    }

    /// Classifies a client error.
    pub(crate) fn postgres(&self, error: &tokio_postgres::Error) -> Error {
        if let Some(db) = error.as_db_error() {
            let message = self.clean(&format!("{} (SQLSTATE {})", db.message(), db.code().code()));
            return match category(db.code()) {
                Category::Unavailable => Error::Unavailable(message),
                Category::Refused => Error::Refused(message),
                Category::Conflict => Error::Conflict(message),
                Category::Other => Error::Storage(message),
            };
        }
        let message = self.clean(&chain(error));
        if error.is_closed() || has_io_cause(error) {
            Error::Unavailable(message)
        } else {
            Error::Storage(message)
        }
    }

    /// Classifies a pool error: a timeout or a closed pool is unavailability; a failure to open
    /// a connection is classified as the client's error.
    pub(crate) fn pool(&self, error: &deadpool_postgres::PoolError) -> Error {
        use deadpool_postgres::PoolError;
        match error {
            PoolError::Backend(error) => self.postgres(error),
            PoolError::Timeout(kind) => {
                Error::Unavailable(format!("no connection within the time allowed ({kind:?})"))
            }
            PoolError::Closed => Error::Unavailable("the connection pool is closed".to_owned()),
            PoolError::NoRuntimeSpecified => Error::Storage("the connection pool has no runtime".to_owned()),
            PoolError::PostCreateHook(error) => Error::Storage(self.clean(&error.to_string())),
        }
    }
}

enum Category {
    Unavailable,
    Refused,
    Conflict,
    Other,
}

/// The SQLSTATE classes and codes that name unavailability, a refused login, or a conflict.
fn category(code: &SqlState) -> Category {
    let text = code.code();
    // 08: connection exception; 53: insufficient resources (too many connections); 57P:
    // shutdown, crash, cannot connect now; 25P03: the server ended a transaction left idle.
    if text.starts_with("08")
        || text.starts_with("53")
        || text.starts_with("57P")
        || *code == SqlState::IDLE_IN_TRANSACTION_SESSION_TIMEOUT
    {
        Category::Unavailable
    } else if text.starts_with("28") || *code == SqlState::INVALID_CATALOG_NAME {
        // 28: invalid authorization (wrong password, unknown role); 3D000: no such database.
        Category::Refused
    } else if *code == SqlState::UNIQUE_VIOLATION {
        Category::Conflict
    } else {
        Category::Other
    }
}

fn has_io_cause(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = error.source();
    while let Some(current) = cause {
        if current.is::<std::io::Error>() {
            return true;
        }
        cause = current.source();
    }
    false
}

/// The error's message followed by its causes', as one line.
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(current) = cause {
        let next = current.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        cause = current.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::{Error, Redactor};

    #[test]
    fn every_text_an_error_carries_loses_the_password() {
        let redactor = Redactor::new(Some(b"pa55-word-xyz"));
        assert_eq!(
            redactor.clean("login pa55-word-xyz, again pa55-word-xyz"),
            "login [redacted], again [redacted]"
        );
        let scrubbed = [
            Error::Unavailable("at pa55-word-xyz".into()),
            Error::Refused("for pa55-word-xyz".into()),
            Error::Conflict("key pa55-word-xyz".into()),
            Error::Storage("near pa55-word-xyz".into()),
            Error::LeaseLost { run: "pa55-word-xyz".into(), epoch: 3 },
        ]
        .map(|error| redactor.scrub(error).to_string());
        assert_eq!(
            scrubbed,
            [
                "the database is unavailable: at [redacted]",
                "the database refused the connection: for [redacted]",
                "the database already holds key [redacted]",
                "a database statement failed: near [redacted]",
                "run [redacted]: another worker took it over (this worker's epoch 3 is stale)",
            ]
        );
    }

    #[test]
    fn without_a_password_nothing_is_replaced() {
        assert_eq!(Redactor::new(None).clean("unchanged text"), "unchanged text");
        assert_eq!(Redactor::new(Some(b"")).clean("unchanged text"), "unchanged text");
    }
}
