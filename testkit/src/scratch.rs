//! Fresh scratch directories for tests that write files (journals, effect logs), under the
//! system's temporary directory.
//!
//! # Invariants
//!
//! - Each call returns a directory no other call of any process returns (the process id and a
//!   counter name it), emptied if a previous process with the same id left one behind.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A new empty directory `loopbound-<label>-<pid>-<n>` in the temporary directory.
///
/// # Panics
///
/// If the directory cannot be created.
#[must_use]
pub fn dir(label: &str) -> PathBuf {
    let n = NEXT.fetch_add(1, Ordering::SeqCst);
    let path = std::env::temp_dir().join(format!("loopbound-{label}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&path);
    std::fs::create_dir_all(&path).unwrap_or_else(|error| panic!("creating {}: {error}", path.display()));
    path
}
