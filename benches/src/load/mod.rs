//! The parts of the `load` command: thousands of concurrent review runs in one process, through
//! loopbound's real OpenAI transport, against the testkit's load model server
//! (`loopbound_testkit::load`) in another process.
//!
//! - [`drive`]: the one place that uses loopbound's API: the runtime, one run (plain or
//!   journaled), and what a run must have done;
//! - [`control`]: the load server's control routes (reset with a hold, release, figures);
//! - [`process`]: this process's resident memory and CPU time;
//! - [`statements`]: with `--pg-stats`, what the PostgreSQL journal's statements cost the
//!   server (`pg_stat_statements`);
//! - [`report`]: the figures of one load, in the JSON shape the Python peers' load scripts
//!   write too, and as text.
//!
//! # Invariants
//!
//! - The server measures the added latency per model call, framework-agnostically, from its
//!   side of the wire; the client measures only what the server cannot see (its runs' start
//!   times, its memory, its CPU time), on the same `CLOCK_MONOTONIC`.
//! - Memory per waiting run is measured while every run waits on its first model call (the
//!   server holds them all until the sample is taken), never estimated.
//! - A load whose runs did not all do exactly the review (Completed, 3 model calls, 2 tool
//!   calls, seen so by the server too) is reported as failed, with its figures.

pub mod control;
pub mod drive;
pub mod process;
pub mod report;
pub mod statements;
