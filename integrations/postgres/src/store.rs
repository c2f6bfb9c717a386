//! A connection pool to one database, migrated on connect.
//!
//! # Invariants
//!
//! - [`Store::connect`] returns only once the database is reachable, the login accepted and the
//!   schema at [`supported_version`](crate::supported_version); otherwise a typed error, and
//!   nothing written.
//! - A broken pooled connection is discarded when it is next taken (the pool checks that it is
//!   not closed), so after the server comes back a store recovers without being rebuilt.
//! - Connections are plain TCP or a Unix socket, without TLS.
//! - At most [`Config::pool_size`] connections for reads, acquisitions, a host's commands and
//!   the pools, and [`GROUP_WRITERS`] more of the journal's group commits' own (so that commits
//!   never wait behind reads for a connection).
//! - Every operation of the journal and the pools is given up after the configured query timeout
//!   ([`Config::query_timeout`], 30 s by default), taking a connection from the pool included: a
//!   server that stops answering yields a storage error, not a caller that waits forever.
//! - Every statement of the journal and the pools finds its rows through an index (each is keyed
//!   by run, pool or hold), and the sessions tell the planner so (`enable_seqscan = off`, unless
//!   the URL's options set it back): a table that grew faster than its statistics (a new
//!   database taking its first ten thousand runs in seconds, with plans cached while it was
//!   empty) must not turn a commit's lookups of a few runs into scans of every run, each row
//!   compared with each run of the group.
//! - A transaction left idle for longer than the lease (its worker paused or stuck between two
//!   statements) is ended by the server (`idle_in_transaction_session_timeout`), so it cannot
//!   keep a run's row locked, and with it the run, from the worker that takes the run over.

use std::sync::Arc;

use deadpool_postgres::{Client, Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::NoTls;

use crate::config::Config;
use crate::error::{Error, Redactor};
use crate::journal::{GROUP_WRITERS, Group};
use crate::schema::{MIGRATIONS, migrate};

/// A pool of connections to the journal's database, shared by all runs of a process.
#[derive(Clone, Debug)]
pub struct Store {
    pool: Pool,
    /// The group commits' own connections (at most [`GROUP_WRITERS`]), so that a group never
    /// waits for a connection behind the process's reads.
    writers: Pool,
    /// The journal's commits and renewals waiting for their group, of every journal on this
    /// store.
    group: Arc<Group>,
    config: Config,
    redactor: Redactor,
}

impl Store {
    /// Connects to the database of `config` and brings its schema up to date (safely when many
    /// workers start at once).
    ///
    /// # Errors
    ///
    /// [`Error::Unavailable`] when the server cannot be reached, [`Error::Refused`] when it
    /// refuses the login, [`Error::UnsupportedSchema`] when a newer version migrated it,
    /// [`Error::Storage`] when a migration fails (rolled back whole).
    pub async fn connect(config: &Config) -> Result<Self, Error> {
        let redactor = Redactor::new(config.password());
        let pool = |size: usize| {
            let manager = Manager::from_config(
                session_settings(config),
                NoTls,
                ManagerConfig { recycling_method: RecyclingMethod::Fast },
            );
            Pool::builder(manager)
                .max_size(size)
                .runtime(Runtime::Tokio1)
                .wait_timeout(Some(config.wait_timeout()))
                .create_timeout(Some(config.connect_timeout()))
                .build()
                .map_err(|error| Error::Storage(redactor.clean(&error.to_string())))
        };
        let (pool, writers) = (pool(config.pool_size())?, pool(GROUP_WRITERS)?);
        let store = Self { pool, writers, group: Arc::default(), config: config.clone(), redactor };
        let mut client = store.client().await?;
        migrate(&mut client, MIGRATIONS, &store.redactor).await?;
        Ok(store)
    }

    /// The configuration this store was built from.
    #[must_use]
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// A pooled connection.
    pub(crate) async fn client(&self) -> Result<Client, Error> {
        self.pool.get().await.map_err(|error| self.redactor.pool(&error))
    }

    /// The journal's group commits on this store.
    pub(crate) fn group(&self) -> &Arc<Group> {
        &self.group
    }

    /// A connection of the group commits' own.
    pub(crate) async fn writer(&self) -> Result<Client, Error> {
        self.writers.get().await.map_err(|error| self.redactor.pool(&error))
    }

    /// `operation`'s output, or `None` once the configured query timeout
    /// ([`Config::query_timeout`]) has passed without one (the operation is dropped).
    pub(crate) async fn within<F: std::future::Future>(&self, operation: F) -> Option<F::Output> {
        tokio::time::timeout(self.config.query_timeout(), operation).await.ok()
    }

    /// The password-free classifier of this store's errors.
    pub(crate) fn redactor(&self) -> &Redactor {
        &self.redactor
    }
}

/// The client's configuration with this crate's session settings added to the URL's own.
fn session_settings(config: &Config) -> tokio_postgres::Config {
    let mut postgres = config.postgres().clone();
    let idle = format!("-c idle_in_transaction_session_timeout={}", config.lease().as_millis().max(1));
    // Before the URL's own options, so that a host may set it back.
    let keyed = format!("-c enable_seqscan=off {}", postgres.get_options().unwrap_or_default());
    let options = format!("{} {idle}", keyed.trim_end());
    postgres.options(options);
    postgres
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn sessions_find_rows_through_indexes_unless_the_url_says_otherwise() {
        let config = Config::new("postgres://app@127.0.0.1:5432/jobs")
            .unwrap()
            .with_lease(Duration::from_secs(30))
            .unwrap();
        assert_eq!(
            session_settings(&config).get_options(),
            Some("-c enable_seqscan=off -c idle_in_transaction_session_timeout=30000")
        );
        let own = Config::new("postgres://app@127.0.0.1:5432/jobs?options=-c%20enable_seqscan%3Don")
            .unwrap()
            .with_lease(Duration::from_secs(30))
            .unwrap();
        // The URL's own options come after, so they win.
        assert_eq!(
            session_settings(&own).get_options(),
            Some("-c enable_seqscan=off -c enable_seqscan=on -c idle_in_transaction_session_timeout=30000")
        );
    }
}
