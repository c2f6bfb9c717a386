//! Release builds of the workspace's programs, for the tests whose bounds (time, memory) are
//! about release code: the attack tests' console, the watched-run probe.
//!
//! # Invariants
//!
//! - An environment variable naming the program wins: a caller that built it already (`.ci/run`)
//!   is not made to wait for a second build.
//! - Otherwise the program is built once with `cargo build --release --locked`, and its path is
//!   read from cargo's own report of the build, never guessed.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::Value;

/// The release build of `bin` in `package`: the path in the variable `env`, else built now.
///
/// # Panics
///
/// If cargo cannot run, the build fails, or cargo does not report the executable: the test
/// that needs the program cannot go on.
#[must_use]
pub fn binary(env: &str, package: &str, bin: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(env) {
        return PathBuf::from(path);
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args(["build", "--release", "--locked", "-p", package, "--bin", bin, "--message-format=json"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stderr(Stdio::inherit())
        .output()
        .expect("cargo runs");
    assert!(output.status.success(), "building the release {bin} failed");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|message| message["reason"] == "compiler-artifact" && message["target"]["name"] == bin)
        .find_map(|message| message["executable"].as_str().map(PathBuf::from))
        .unwrap_or_else(|| panic!("cargo reports no executable for {bin}"))
}
