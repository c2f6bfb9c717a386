//! The name of one logical run: what a [`RunRegistry`](crate::RunRegistry) cancels by, what the
//! run's telemetry span carries, and what a journal stores the run under
//! ([`journal::RunId`](crate::journal::RunId) is this type).
//!
//! # Invariants
//!
//! - A [`RunId`] is 1 to [`MAX_RUN_ID_LEN`] characters of `A-Z a-z 0-9 . _ : -`: no `/`, so a
//!   journal's operation id (`<run>/op/<ordinal>`) splits back into its run and its ordinal
//!   without ambiguity. Anything else is refused with [`InvalidRunId`].

use std::fmt;
use std::sync::Arc;

/// Longest run id, in bytes.
pub const MAX_RUN_ID_LEN: usize = 100;

/// The name of one logical run across processes and attempts.
///
/// ```
/// use loopbound::{InvalidRunId, RunId};
///
/// let run = RunId::new("refund-42")?;
/// assert_eq!(run.as_str(), "refund-42");
/// let refused = RunId::new("a/b").unwrap_err();
/// assert!(refused.to_string().starts_with("invalid run id"), "{refused}");
/// # Ok::<(), InvalidRunId>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunId(pub(crate) Arc<str>);

impl RunId {
    /// A run id given by the host.
    ///
    /// # Errors
    ///
    /// [`InvalidRunId`] for an empty id, one longer than [`MAX_RUN_ID_LEN`], or one with a
    /// character outside `A-Z a-z 0-9 . _ : -`.
    pub fn new(id: impl AsRef<str>) -> Result<Self, InvalidRunId> {
        let id = id.as_ref();
        let valid = (1..=MAX_RUN_ID_LEN).contains(&id.len())
            && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'));
        if valid { Ok(Self(Arc::from(id))) } else { Err(InvalidRunId) }
    }

    /// A fresh run id, `run-<32 hex digits>`, from the operating system's randomness as the
    /// standard library's hash maps draw it, and the clock.
    #[must_use]
    pub fn generate() -> Self {
        use std::hash::{BuildHasher, Hasher};
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos());
        let mut halves = [0u64; 2];
        for (half, salt) in halves.iter_mut().zip(0u8..) {
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_u128(nanos);
            hasher.write_u8(salt);
            *half = hasher.finish();
        }
        Self(Arc::from(format!("run-{:016x}{:016x}", halves[0], halves[1])))
    }

    /// The id as text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A run id outside `A-Z a-z 0-9 . _ : -`, empty, or longer than [`MAX_RUN_ID_LEN`]
/// ([`RunId::new`]). Under the `journal` feature it converts into
/// `JournalError::InvalidRunId`, so `?` keeps working in a journal command.
///
/// It may come to say more (which rule the id broke): only [`RunId::new`] makes one, and a
/// host matches it as a whole or reads its words.
///
/// ```compile_fail
/// let made_by_a_host = loopbound::InvalidRunId;
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct InvalidRunId;

impl fmt::Display for InvalidRunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid run id: use 1 to 100 characters among A-Z, a-z, 0-9, '.', '_', ':' and '-'")
    }
}

impl std::error::Error for InvalidRunId {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_refuse_slashes_blanks_and_overlong_names() {
        for bad in ["", "a/b", "a b", "é", &"x".repeat(MAX_RUN_ID_LEN + 1)] {
            assert_eq!(RunId::new(bad), Err(InvalidRunId), "{bad:?}");
        }
        assert!(RunId::new("Refund_42.v1:a-b").is_ok());
    }

    #[test]
    fn generated_run_ids_are_valid_and_distinct() {
        let a = RunId::generate();
        let b = RunId::generate();
        assert_ne!(a, b);
        assert_eq!(RunId::new(a.as_str()), Ok(a.clone()));
        assert_eq!(a.as_str().len(), 36);
    }
}
