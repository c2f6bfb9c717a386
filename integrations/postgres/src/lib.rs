//! loopbound's journal on PostgreSQL, for services that run many workers.
//!
//! One process, or one SQLite file, cannot hold a run's budgets and decisions for workers on
//! many machines: each would believe it has the whole budget, and two workers resuming one run
//! would both run its effects. Here that state lives in an existing PostgreSQL database, and a
//! worker may act on a run only under a **lease** whose **epoch** fences every write.
//!
//! This crate provides:
//!
//! - [`PostgresJournal`]: the journal ([`loopbound::journal::Journal`]) on PostgreSQL, with
//!   the rows and semantics of `loopbound-sqlite` (the same conformance suite passes on both)
//!   and a lease per run, named by its worker ([`WorkerId`]: this process's
//!   `<host>:<pid>/<start>/<scope>` unless [`PostgresJournal::with_worker`] names another; a
//!   process of the same machine that is gone is taken over at once), the lease duration from
//!   [`Config::lease`] or [`PostgresJournal::with_lease`]; a host's commands (inspect, list,
//!   approve, deny, reconcile, cancel, close) need no worker of their own;
//! - [`Config`]: the connection URL (`LOOPBOUND_DATABASE_URL` or [`Config::new`]) with its
//!   password redacted in every output, the pool's size and timeouts, the default lease;
//! - [`Store::connect`]: a connection pool, with the schema created or migrated on connect
//!   (versioned, in one transaction, under an advisory lock, so workers may start together);
//! - leases ([`Store::acquire`], [`Store::renew`], [`Store::release`]) and fenced writes
//!   ([`Store::fenced`]) for a host's own tables;
//! - [`PostgresPools`]: shared pools (`loopbound::pool`) in the same database, in tables of their
//!   own: budgets every worker's runs draw from, reserved before each model call;
//! - typed [`Error`]s: [`Error::Unavailable`] (server down or gone), [`Error::Refused`] (login
//!   refused), [`Error::Conflict`], [`Error::LeaseHeld`], [`Error::LeaseLost`]; the journal's
//!   operations return them as [`JournalError`](loopbound::journal::JournalError)s
//!   (`LeaseHeld`, `LeaseLost`, `Conflict`, and `Storage` for a server down or refusing).
//!
//! **What the lease guarantees.** An attempt runs or resumes a run only after its `acquire`
//! granted it the lease, which adds one to the run's epoch. A live lease is refused with
//! `LeaseHeld` whoever asks (another worker, or another task of the same one: nothing started,
//! nothing written), so of two attempts racing for one run one runs it and the other is
//! refused; an expired lease is taken over. Every commit of an attempt is conditioned on its
//! epoch and its live lease, and renews the lease; an attempt whose lease expired or was taken
//! over gets `LeaseLost` at its next commit and runs no further effect (an effect's body starts
//! only after its `started` record committed). The attempt's last commit releases the lease. The run's budgets are in its row, written by the same fenced commits, so they are the
//! logical run's whichever worker runs it. A lease shorter than the longest gap between two
//! commits (a slow model call, a long tool body) lets another worker take the run over
//! mid-attempt: the first then stops with `LeaseLost`, and an effect it had started is
//! `Ambiguous` for the second, never run twice.
//!
//! | variable | required | meaning |
//! |---|---|---|
//! | `LOOPBOUND_DATABASE_URL` | yes | `postgres://user:password@host:port/database`; never printed whole |
//! | `LOOPBOUND_LEASE_SECS` | no | default lease duration, whole seconds (default 30); read by [`Config::new`] too |
//! | `LOOPBOUND_DATABASE_POOL_SIZE` | no | connections per process at most (default 16), besides the [`GROUP_WRITERS`] of group commits |
//!
//! Connections are plain TCP or a Unix socket: TLS is not supported, and a URL with
//! `sslmode=require` is refused rather than connected in clear. Use a loopback address, a Unix
//! socket or a private network.
//!
//! ```no_run
//! use std::time::Duration;
//! use loopbound_postgres::{Config, Error, Store, WorkerId};
//!
//! # async fn example() -> Result<(), Error> {
//! let store = Store::connect(&Config::from_env()?).await?;
//! let worker = WorkerId::new(format!("host-a:{}", std::process::id()))?;
//! match store.acquire("order-1234", &worker, store.config().lease()).await {
//!     Ok(mut lease) => {
//!         // Run or resume the run; every write goes through `store.fenced(&mut lease, ...)`.
//!         store.release(lease).await?;
//!     }
//!     Err(Error::LeaseHeld { holder, remaining, .. }) => {
//!         println!("{holder} runs it; retry in {} ms", remaining.as_millis());
//!     }
//!     Err(other) => return Err(other),
//! }
//! # Ok(()) }
//! ```
//!
//! # Design: the journal's records on PostgreSQL
//!
//! The journal stores plain rows that the core encodes and decodes, so every backend stores
//! the same thing. Its storage trait's operations are each one transaction (or part of one that
//! commits a group of them whole, see below): `acquire(run, fresh)`, `renew(run, epoch)`,
//! `load(run)`, `commit(run, fence, batch)` and `list(query)`. On PostgreSQL the rows are tables keyed like SQLite's (schema version 3):
//!
//! | table | key | columns |
//! |---|---|---|
//! | `loopbound_runs` | `run_id` | `epoch`, `attempts`, the lease (`lease_holder`, `lease_until`), `conversation`, `ledger` (the logical run's budgets: model calls, tool calls, repetitions per signature), the state as its parts (`state`, `state_operation`, `state_status`), `definition` (grants and limits) |
//! | `loopbound_labels` | `(run_id, key)` | `value`; indexed by `(key, value, run_id)` for listings |
//! | `loopbound_replies` | `(run_id, ordinal)` | `reply` (a model reply, JSON) |
//! | `loopbound_calls` | `(run_id, reply, idx)`, unique `(run_id, operation)` | `operation`, `is_error`, `text` (`bytea`: a result may hold NUL) |
//! | `loopbound_proposals` | `(run_id, ordinal)` | `reply`, `idx`, `tool`, `capability`, `effect`, `arguments` (canonical) |
//! | `loopbound_decisions` | `(run_id, ordinal)` | `verdict`, `decided_by` |
//! | `loopbound_started` | `(run_id, ordinal, start)` | — |
//! | `loopbound_reconciliations` | `(run_id, ordinal, start)` | `resolution`, `result` (`bytea`), `reconciled_by` |
//! | `loopbound_events` | `(run_id, seq)` | `kind`, `name`, `count`, `operation`, `decided_by` |
//!
//! A repeated key is a unique violation, a `Conflict`, and rolls the whole batch back.
//!
//! **Fencing rule: a write of epoch *e* commits only if the run's epoch is still *e* and its
//! lease live.** A commit under `Fence::Epoch(e)` first updates the run's row where `epoch = e`,
//! the lease is this worker's and not expired (renewing it), which both checks the fence and
//! locks the row until commit, so a takeover is ordered wholly before the write (which then gets
//! `LeaseLost` and writes nothing) or wholly after it. A `Fence::Host` commit (a host's
//! approval, denial or reconciliation) locks the row and is refused with `LeaseHeld` while a
//! lease is live; the keys refuse a second decision. `acquire` is one upsert granted when the
//! run is unfinished and its lease released or expired; a finished run is returned as it is,
//! without a grant. Listings walk indexes in run-id byte order (`COLLATE "C"`).
//!
//! **Group commit.** The commits and lease renewals of a journal's attempts (and its clones')
//! that arrive together share one transaction, one round trip and one sync: a writer task takes
//! up to [`MAX_GROUP`] of them, locks their runs' rows in run-id byte order (so two workers'
//! groups cannot deadlock), checks and renews every fence and applies the fenced batches in one
//! statement, and commits once; at most [`GROUP_WRITERS`] groups of a journal are written at a
//! time. Each batch keeps its own semantics: one whose fence fails writes nothing
//! (`LeaseLost`), and when a row is refused (a key written twice) the group rolls back and its
//! batches are committed one by one, so each gets its own result.
//!
//! # Invariants
//!
//! - The password appears in no `Debug` or `Display` output and no error message.
//! - A failure is a typed [`Error`], never a panic; a failed transaction writes nothing.
//! - Lease expiry is judged by the database's clock.

mod config;
mod error;
pub mod fence;
mod id;
mod journal;
mod lease;
mod pool;
mod schema;
mod store;

pub use config::{
    Config, ConfigError, DEFAULT_CONNECT_TIMEOUT, DEFAULT_LEASE, DEFAULT_POOL_SIZE, DEFAULT_QUERY_TIMEOUT,
    DEFAULT_WAIT_TIMEOUT, ENV_DATABASE_URL, ENV_LEASE_SECS, ENV_POOL_SIZE, REDACTED,
};
pub use error::Error;
pub use fence::Write;
pub use id::{MAX_RUN_ID_LEN, MAX_WORKER_ID_LEN, WorkerId};
pub use journal::{GROUP_WRITERS, MAX_GROUP, PostgresJournal};
pub use lease::{Lease, LeaseState, MAX_LEASE};
pub use pool::{ATTEMPTS as POOL_ATTEMPTS, POOL_SCHEMA_VERSION, PostgresPools};
pub use schema::supported_version;
pub use store::Store;
/// The PostgreSQL client, whose [`Transaction`](tokio_postgres::Transaction) a fenced write
/// receives.
pub use tokio_postgres;
