//! Test support for code built on [`loopbound`], as `tower-test` is to `tower`: what a third
//! party needs to test a journal store, a pool store or a host against loopbound's contract.
//!
#![cfg_attr(
    feature = "journal",
    doc = "- [`conformance`]: the journal conformance suite. A store passes it before it is trusted"
)]
#![cfg_attr(
    not(feature = "journal"),
    doc = "- `conformance` (feature `journal`): the journal conformance suite. A store passes it before it is trusted"
)]
//!   with runs: the in-memory journal, SQLite and PostgreSQL all run it unchanged;
#![cfg_attr(
    feature = "journal",
    doc = "- [`hooked`]: a journal with a test's hook in front of it (a store that stops answering,"
)]
#![cfg_attr(
    not(feature = "journal"),
    doc = "- `hooked` (feature `journal`): a journal with a test's hook in front of it (a store that stops answering,"
)]
//!   fails a commit, or counts its calls);
#![cfg_attr(
    feature = "pools",
    doc = "- [`pool`]: the pool-store conformance suite ([`pool::conformance`]) a third-party pool store"
)]
#![cfg_attr(
    not(feature = "pools"),
    doc = "- `pool` (feature `pools`): the pool-store conformance suite (`pool::conformance`) a third-party pool store"
)]
//!   must pass (memory, SQLite and PostgreSQL run it unchanged), and races of many runs drawing
//!   from one shared pool, against a model that bills every call it answers, to check that a
//!   pool store never lets spend past its budget;
//! - [`refund`]: the refund task (a read, an effect, an idempotent call) whose effects are
//!   counted outside the run, which the conformance suite runs;
//! - [`telemetry`]: a tracing layer that records every span and field a run emits;
//! - [`chain`]: error chains as a host prints them, and the check that each level says
//!   something of its own.
//!
//! The scripted transport a test drives a run with is [`loopbound::scripted`]: it stays in
//! `loopbound` because consoles and examples run it outside tests too.
//!
//! # Running the journal conformance suite
//!
#![cfg_attr(
    feature = "journal",
    doc = "A store's test implements [`conformance::Backend`] (fresh storage, and journals opened on it"
)]
#![cfg_attr(
    not(feature = "journal"),
    doc = "A store's test implements `conformance::Backend` (fresh storage, and journals opened on it"
)]
#![cfg_attr(
    feature = "journal",
    doc = "under a holder's name and a lease) and awaits [`conformance::check_all`], which panics with"
)]
#![cfg_attr(
    not(feature = "journal"),
    doc = "under a holder's name and a lease) and awaits `conformance::check_all`, which panics with"
)]
//! the rule a check found broken. Here, the in-memory journal; a file or a database is opened the
#![cfg_attr(
    feature = "journal",
    doc = "same way, one fresh file or database per [`conformance::Backend::fresh`]. The suite takes"
)]
#![cfg_attr(
    not(feature = "journal"),
    doc = "same way, one fresh file or database per `conformance::Backend::fresh`. The suite takes"
)]
//! tens of seconds (some checks wait for short leases to expire), so this example is only
//! compiled; `loopbound`'s own tests run the same code.
//!
#![cfg_attr(feature = "journal", doc = "```no_run")]
#![cfg_attr(not(feature = "journal"), doc = "```ignore")]
//! use std::time::Duration;
//!
//! use loopbound::journal::MemoryJournal;
//! use loopbound_test::conformance::{self, Backend};
//!
//! struct Memory;
//!
//! impl Backend for Memory {
//!     type Place = MemoryJournal;
//!     type Journal = MemoryJournal;
//!
//!     async fn fresh(&self) -> MemoryJournal {
//!         MemoryJournal::default()
//!     }
//!
//!     async fn open(&self, place: &MemoryJournal, holder: &str, lease: Duration) -> MemoryJournal {
//!         place
//!             .clone()
//!             .with_holder(holder)
//!             .and_then(|journal| journal.with_lease(lease))
//!             .expect("a valid holder and lease")
//!     }
//! }
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() {
//!     conformance::check_all(&Memory).await;
//! }
//! ```
//!
//! # Running the pool-store conformance suite
//!
#![cfg_attr(
    feature = "pools",
    doc = "A pool store's test implements [`pool::conformance::Stores`] (a fresh, empty store; and one"
)]
#![cfg_attr(
    not(feature = "pools"),
    doc = "A pool store's test implements `pool::conformance::Stores` (a fresh, empty store; and one"
)]
//! that judges leases and windows by a clock the test moves, or `None` for a store that keeps its
#![cfg_attr(
    feature = "pools",
    doc = "own clock, as a database server does) and awaits [`pool::conformance::check_all`], which"
)]
#![cfg_attr(
    not(feature = "pools"),
    doc = "own clock, as a database server does) and awaits `pool::conformance::check_all`, which"
)]
//! panics with the rule a check found broken. Here, the in-memory store; on a store that keeps
//! its own clock the checks wait for real leases to lapse, and the checks that need days to pass
//! are left out.
//!
#![cfg_attr(feature = "pools", doc = "```")]
#![cfg_attr(not(feature = "pools"), doc = "```ignore")]
//! use std::sync::Arc;
//!
//! use loopbound::pool::{ManualClock, MemoryPools};
//! use loopbound_test::pool::conformance::{self, Stores};
//!
//! struct Memory;
//!
//! impl Stores for Memory {
//!     type Store = MemoryPools;
//!
//!     async fn fresh(&self) -> MemoryPools {
//!         MemoryPools::new()
//!     }
//!
//!     async fn fresh_on(&self, clock: ManualClock) -> Option<MemoryPools> {
//!         Some(MemoryPools::with_clock(Arc::new(clock)))
//!     }
//! }
//!
//! #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! async fn main() {
//!     conformance::check_all(&Memory).await;
//! }
//! ```
//!
//! # Features
//!
#![cfg_attr(feature = "journal", doc = "`journal` ([`conformance`], [`hooked`]) and")]
#![cfg_attr(not(feature = "journal"), doc = "`journal` (`conformance`, `hooked`) and")]
#![cfg_attr(feature = "pools", doc = "`pools` ([`pool`]), both on by default, turn on")]
#![cfg_attr(not(feature = "pools"), doc = "`pools` (`pool`), both on by default, turn on")]
//! `loopbound`'s features of the same names; the rest needs neither.
//!
//! # Invariants
//!
//! - This crate depends on `loopbound` and on crates `loopbound` already builds (tokio, serde,
//!   serde_json, schemars, tracing), so a test that uses it builds no database client, no MCP
//!   client and no TLS stack.
//! - Everything here uses `loopbound`'s public API only: a check that passes here passes for
//!   any host.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod chain;
#[cfg(feature = "journal")]
pub mod conformance;
#[cfg(feature = "journal")]
pub mod hooked;
#[cfg(feature = "pools")]
pub mod pool;
pub mod refund;
pub mod telemetry;
