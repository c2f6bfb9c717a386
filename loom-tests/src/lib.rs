//! Loom models of the scope's critical section, compiled only under `--cfg loopbound_loom`.
//!
//! Under that cfg, `loopbound`'s `sync` shim swaps the ledger's mutex for loom's, and the models
//! in `tests/` explore every interleaving of two threads and the main thread. Run them with:
//!
//! ```sh
//! RUSTFLAGS="--cfg loopbound_loom -C debug-assertions" LOOM_MAX_PREEMPTIONS=2 \
//!     CARGO_TARGET_DIR=target/loom cargo test -p loopbound-loom --release
//! ```
//!
//! Without the cfg, this crate and its tests compile to nothing.

#[cfg(loopbound_loom)]
pub mod fixtures;
