//! Golden transcripts: a program's output compared with the file that holds what it must print,
//! or, when blessing, written to it.
//!
//! # Invariants
//!
//! - Blessing (`UPDATE_GOLDEN=1`) writes the file and never fails on a difference; otherwise a
//!   difference or a missing file is reported with both texts, never written.

use std::fs;
use std::path::Path;

/// Whether this run rewrites the golden files (`UPDATE_GOLDEN=1`).
#[must_use]
pub fn updating() -> bool {
    std::env::var("UPDATE_GOLDEN").is_ok_and(|value| value == "1")
}

/// Compares `actual` with the file at `path` (or writes it there when `update`); `Err` says how
/// they differ, for the test's report.
///
/// # Errors
///
/// A description of the difference, or of why the file cannot be read.
///
/// # Panics
///
/// When blessing, if the file or its folder cannot be written.
pub fn compare(path: &Path, actual: &str, update: bool) -> Result<(), String> {
    if update {
        if let Some(folder) = path.parent() {
            fs::create_dir_all(folder).expect("the golden folder");
        }
        fs::write(path, actual).expect("golden file written");
        return Ok(());
    }
    match fs::read_to_string(path) {
        Ok(expected) if expected == actual => Ok(()),
        Ok(expected) => {
            Err(format!("{} differs\n--- expected\n{expected}--- actual\n{actual}", path.display()))
        }
        Err(error) => Err(format!("cannot read {}: {error}", path.display())),
    }
}
