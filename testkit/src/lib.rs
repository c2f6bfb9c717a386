//! Test support shared by loopbound's crates, as a normal dependency (no `#[path]` includes):
//!
//! - [`review`]: the task the consoles run, re-exported from `loopbound-fixtures` (its one
//!   copy, which a release console links without this crate);
//! - [`conformance`], [`hooked`], [`telemetry`], [`chain`] and [`refund`]: the published test
//!   support of `loopbound-test`, re-exported (their one copy);
//! - [`pool`]: `loopbound-test`'s shared-pool races, re-exported, and the SQLite or PostgreSQL
//!   pool store a worker process opens;
//! - [`backend`]: one journal type over SQLite and PostgreSQL, opened from a short text, for
//!   test processes told where their journal is;
//! - [`journal_fixture`]: the journal fixtures written once by an earlier version, and the
//!   upgrade check every later version runs over them;
//! - [`child`]: test binaries that run themselves again as child processes;
//! - [`scratch`]: fresh scratch directories for tests that write files;
//! - [`aimock`]: the pinned scripted mock server, started per test on loopback;
//! - [`scenarios`]: the review scenarios as the aimock fixtures script them, and one run over any
//!   transport, for every provider transport's HTTP tests;
//! - [`canned`]: a tiny loopback server with one canned answer per connection (cut bodies,
//!   silence, exact bytes);
//! - [`mcp`]: the pinned reference MCP servers, started per test as child processes;
//! - [`json_schema_suite`]: the official JSON Schema Test Suite, fetched by a setup script, as
//!   cases for the MCP adapter's schema check;
//! - [`hostile`]: a deliberately hostile server on loopback (chat completions and the Messages API), bounded in bytes
//!   and time, for the tests that drive every bound of a run with the worst a provider can do;
//! - [`load`]: a load model server on loopback (OpenAI-compatible, hyper) that plays the review
//!   task for thousands of concurrent runs and measures each client's added latency per call;
//! - [`postgres`]: a throwaway PostgreSQL cluster (initdb in a temporary folder, a free loopback
//!   port, stopped by PID), shared per test binary with a database per test;
//! - [`leaks`]: one review run with all it produced as text and spans, and the check that no
//!   run of a key's characters is in it, for every provider transport's hostile tests;
//! - [`release`]: release builds of the workspace's programs, for tests about release code;
//! - [`golden`]: golden transcripts compared, or blessed with `UPDATE_GOLDEN=1`;
//! - [`skip`]: what a test does when a server it needs is absent (`SKIPPED`, or a failure in CI);
//! - [`fuzz`]: the fuzz targets' checks as plain functions, with the reference canonical form,
//!   the reference guard model and the structured inputs; `fuzz/` calls them under libFuzzer and
//!   `loopbound-proptests` replays the committed corpora through them on stable.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod aimock;
pub mod backend;
pub mod batches;
pub mod canned;
pub mod child;
pub mod fuzz;
pub mod golden;
pub mod hostile;
pub mod journal_fixture;
pub mod json_schema_suite;
pub mod leaks;
pub mod load;
pub mod mcp;
pub mod pool;
pub mod postgres;
pub mod release;
pub mod scenarios;
pub mod scratch;
pub mod skip;

pub use loopbound_fixtures::{Composition, review};
pub use loopbound_test::{chain, conformance, hooked, refund, telemetry};
