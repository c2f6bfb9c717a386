//! Test support shared by loopbound's crates, as a normal dependency (no `#[path]` includes):
//!
//! - [`review`]: the review task of SPEC §11, the one copy of its tools, texts and state;
//! - [`aimock`]: the pinned scripted mock server, started per test on loopback;
//! - [`postgres`]: a throwaway PostgreSQL cluster (initdb in a temporary folder, a free loopback
//!   port, stopped by PID), shared per test binary with a database per test;
//! - [`skip`]: what a test does when a server it needs is absent (`SKIPPED`, or a failure in CI);
//! - [`fuzz`]: the fuzz targets' checks as plain functions, with the reference canonical form,
//!   the reference guard model and the structured inputs; `fuzz/` calls them under libFuzzer and
//!   `loopbound-proptests` replays the committed corpora through them on stable.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod aimock;
pub mod fuzz;
pub mod postgres;
pub mod review;
pub mod skip;
