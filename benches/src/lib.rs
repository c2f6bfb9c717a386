//! Benchmarks of loopbound and the comparison with Python agent frameworks.
//!
//! The library holds what the criterion benches (`benches/`) and the `compare` binary share, so
//! that both measure exactly the same operations:
//!
//! - [`fixtures`]: scopes and guarded tools set up so that the next call of `{"input":42}` is
//!   admitted, or refused at a chosen check;
//! - [`values`]: argument values of about 100 B, 10 KB and 1 MB for the canonical form;
//! - [`runs`]: whole scripted runs of the review task, checked against the contract;
//! - [`parallel`]: admissions from several threads, on one scope or on many;
//! - [`load`]: the `load` command's parts: many concurrent review runs over HTTP against the
//!   testkit's load model server, and their figures;
//! - [`mcp`]: one MCP tool call three ways (direct, the SDK unguarded, through loopbound-mcp);
//! - [`timing`]: the peers' timing method (median, nearest-rank p99) and batch medians;
//! - [`targets`]: every speed target, measured in one process, beside its measured figure;
//! - [`peers`] and [`table`]: the peers' JSON reports and the comparison table;
//! - [`traces`]: scripted loop traces under each progress policy, and their table.
//!
//! # Invariants
//!
//! - Nothing here asserts a time. Speed targets are printed with their measured ratios by the
//!   `compare` binary; tests and the benches' smoke run only check that the measured operations
//!   do what they claim (admitted, refused at the right check, run completed).
//! - Setup (building scopes, registering tools, building values) happens outside every timed
//!   region, unless the measured operation is the setup itself.

#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![warn(clippy::pedantic)]
// Module names prefix most types; repeating them in item names reads well here.
#![allow(clippy::module_name_repetitions)]
// Nanoseconds, byte counts and call counts are turned into f64 to be divided and printed; they
// stay far below 2^52, where the conversion is exact.
#![allow(clippy::cast_precision_loss)]

pub mod fixtures;
pub mod journal;
pub mod load;
pub mod mcp;
pub mod parallel;
pub mod peers;
pub mod runs;
pub mod spend;
pub mod table;
pub mod targets;
pub mod timing;
pub mod traces;
pub mod values;
