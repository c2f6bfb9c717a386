//! Error chains as a host prints them (each `source()` in turn, as `{:#}` in `anyhow` does),
//! and the check that every level says something of its own.

use std::error::Error;

/// The `Display` text of `error` and of each of its sources, outermost first.
#[must_use]
pub fn chain(error: &(dyn Error + 'static)) -> Vec<String> {
    let mut levels = Vec::new();
    let mut next = Some(error);
    while let Some(level) = next {
        levels.push(level.to_string());
        next = level.source();
    }
    levels
}

/// Asserts that no level of `error`'s chain repeats the text of a level below it (so a chain
/// printed whole says each thing once) and that the last level, the root cause, is `root`.
///
/// # Panics
///
/// When either does not hold: this is a test's assertion.
pub fn assert_chain(error: &(dyn Error + 'static), root: &str) -> Vec<String> {
    let levels = chain(error);
    for (outer, text) in levels.iter().enumerate() {
        for inner in &levels[outer + 1..] {
            assert!(
                !inner.is_empty() && !text.contains(inner.as_str()),
                "{text:?} repeats {inner:?}: {levels:?}"
            );
        }
    }
    assert_eq!(levels.last().map(String::as_str), Some(root), "the root cause: {levels:?}");
    levels
}
