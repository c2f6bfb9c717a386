//! Proptest configuration shared by every property.
//!
//! # Invariants
//!
//! - Failures persist to `proptests/proptest-regressions/<file>.txt`, an absolute path under the
//!   package, so a shrunk failing case is replayed first on every later run and can be committed.
//! - `PROPTEST_CASES` in the environment overrides each property's default case count, so that
//!   `PROPTEST_CASES=10000 cargo test -p loopbound-proptests --release` runs a long session.

use proptest::test_runner::{Config, FileFailurePersistence};

/// A configuration with `default_cases` cases (unless `PROPTEST_CASES` says otherwise) and
/// failures persisted to `persistence`, an absolute path.
pub fn with_cases(default_cases: u32, persistence: &'static str) -> Config {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(default_cases);
    Config {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(persistence))),
        ..Config::default()
    }
}

/// Expands to the absolute path of `proptest-regressions/<name>.txt` in this package.
#[macro_export]
macro_rules! regressions {
    ($name:literal) => {
        concat!(env!("CARGO_MANIFEST_DIR"), "/proptest-regressions/", $name, ".txt")
    };
}
