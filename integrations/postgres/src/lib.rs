//! loopbound's journal on PostgreSQL, for services that run many workers (SPEC §16).
//!
//! One process, or one SQLite file, cannot hold a run's budgets and decisions for workers on
//! many machines: each would believe it has the whole budget, and two workers resuming one run
//! would both run its effects. Here that state lives in an existing PostgreSQL database, and a
//! worker may act on a run only under a **lease** whose **epoch** fences every write.
//!
//! This crate provides, so far, what the journal backend stands on:
//!
//! - [`Config`]: the connection URL (`LOOPBOUND_DATABASE_URL` or [`Config::new`]) with its
//!   password redacted in every output, the pool's size and timeouts, the default lease;
//! - [`Store::connect`]: a connection pool, with the schema created or migrated on connect
//!   (versioned, in one transaction, under an advisory lock, so workers may start together);
//! - leases ([`Store::acquire`], [`Store::renew`], [`Store::release`]) and fenced writes
//!   ([`Store::fenced`]);
//! - typed [`Error`]s: [`Error::Unavailable`] (server down or gone), [`Error::Refused`] (login
//!   refused), [`Error::Conflict`], [`Error::LeaseHeld`], [`Error::LeaseLost`].
//!
//! | variable | required | meaning |
//! |---|---|---|
//! | `LOOPBOUND_DATABASE_URL` | yes | `postgres://user:password@host:port/database`; never printed whole |
//! | `LOOPBOUND_LEASE_SECS` | no | default lease duration, whole seconds (default 30) |
//! | `LOOPBOUND_DATABASE_POOL_SIZE` | no | connections per process at most (default 16) |
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
//! The journal (SPEC §15: `loopbound::journal` and `loopbound-sqlite`, on the `journal` branch
//! as this is written) stores plain rows that the core encodes and decodes, so every backend
//! stores the same thing. Its storage trait has three operations, each one transaction:
//! `acquire(run, fresh)` (create the run from `fresh`, or add one to its epoch and attempts; a
//! finished run is returned untouched), `load(run)`, and `commit(run, fence, batch)` (a batch of
//! writes, whole or not at all, under `Fence::Epoch(e)`, or `Fence::Host` for a host's decision
//! or reconciliation, which the keys' uniqueness guards). On PostgreSQL the rows become tables
//! keyed like SQLite's:
//!
//! | table | key | columns |
//! |---|---|---|
//! | `loopbound_runs` | `run_id` | `epoch`, `attempts`, the lease (`lease_holder`, `lease_until`), `conversation`, `ledger` (the logical run's budgets: model calls, tool calls, repetitions per signature), `state` |
//! | `loopbound_replies` | `(run_id, ordinal)` | `reply` (a model reply, JSON) |
//! | `loopbound_calls` | `(run_id, reply, idx)`, unique `(run_id, operation)` | `operation`, `is_error`, `text` |
//! | `loopbound_proposals` | `(run_id, ordinal)` | `reply`, `idx`, `tool`, `capability`, `effect`, `arguments` (canonical) |
//! | `loopbound_decisions` | `(run_id, ordinal)` | `verdict`, `by` |
//! | `loopbound_started` | `(run_id, ordinal, start)` | — |
//! | `loopbound_reconciliations` | `(run_id, ordinal, start)` | `resolution`, `result`, `by` |
//! | `loopbound_events` | `(run_id, seq)` | `kind`, `name`, `count`, `operation`, `by` |
//!
//! Only `loopbound_runs` exists so far (schema version 1, with the epoch and the lease); the
//! other tables and the run's `conversation`, `ledger` and `state` come with the backend, as
//! migration 2. A repeated key is a unique violation, which is [`Error::Conflict`] and rolls the
//! whole batch back, as the trait requires.
//!
//! **Fencing rule: a write of epoch *e* commits only if the run's epoch is still *e*.** The
//! backend's `commit` under `Fence::Epoch(e)` is a [`Store::fenced`] transaction: its first
//! statement updates the run's row where `epoch = e` (and the lease is this worker's), which
//! both checks the epoch and locks the row until commit, so a takeover is ordered wholly before
//! the write (which then gets [`Error::LeaseLost`] and writes nothing) or wholly after it. An
//! effect's `started` record is such a write: a worker whose lease was taken over fails that
//! commit and never runs the body; a worker paused after it leaves `started` without a result,
//! which the next holder sees as `Ambiguous` and does not run again. A `Fence::Host` commit
//! skips the epoch and relies on the keys. The per-run budgets are in `ledger`, written by the
//! same fenced commits, so every worker resumes with the logical run's counters.
//!
//! `acquire` on PostgreSQL is [`Store::acquire`] for the worker id and lease duration the
//! backend is configured with, plus the trait's rules (`fresh` fills a new run's columns; a
//! finished run is returned without a grant). The trait grants every acquisition ("the newest
//! attempt wins"), which [`Store::acquire`] does for the same worker; another worker's live lease
//! is refused ([`Error::LeaseHeld`]), so that two workers racing for one run cannot both start
//! it, and the trait's error type needs a variant to carry that refusal.
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
mod schema;
mod store;

pub use config::{
    Config, ConfigError, DEFAULT_CONNECT_TIMEOUT, DEFAULT_LEASE, DEFAULT_POOL_SIZE, DEFAULT_WAIT_TIMEOUT,
    ENV_DATABASE_URL, ENV_LEASE_SECS, ENV_POOL_SIZE, REDACTED,
};
pub use error::Error;
pub use fence::Write;
pub use id::{MAX_RUN_ID_LEN, MAX_WORKER_ID_LEN, WorkerId};
pub use journal::PostgresJournal;
pub use lease::{Lease, LeaseState, MAX_LEASE};
pub use schema::supported_version;
pub use store::Store;
/// The PostgreSQL client, whose [`Transaction`](tokio_postgres::Transaction) a fenced write
/// receives.
pub use tokio_postgres;
