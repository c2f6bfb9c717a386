//! What a test does when an outside server it needs (node for aimock or MCP, PostgreSQL) is not on
//! this machine.
//!
//! # Invariants
//!
//! - Without the server, a test prints one line starting with `SKIPPED:` and the reason, and
//!   passes — unless the environment variable [`REQUIRE_SERVERS`] is `1`, in which case it fails
//!   with the same reason. `.ci/run` sets it, so CI never passes on a skip.

use std::fmt::Display;

/// The environment variable that turns a skip into a failure.
pub const REQUIRE_SERVERS: &str = "LOOPBOUND_REQUIRE_SERVERS";

/// Whether skips are failures here.
#[must_use]
pub fn servers_required() -> bool {
    std::env::var(REQUIRE_SERVERS).is_ok_and(|value| value == "1")
}

/// Reports that the calling test cannot run because of `reason`: prints `SKIPPED: reason` and
/// returns, or panics when [`REQUIRE_SERVERS`] is `1`.
///
/// # Panics
///
/// When [`REQUIRE_SERVERS`] is `1`: a required server is missing.
pub fn skip(reason: impl Display) {
    assert!(!servers_required(), "{REQUIRE_SERVERS}=1, but a required server is missing: {reason}");
    eprintln!("SKIPPED: {reason}");
}
