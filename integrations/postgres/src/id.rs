//! The names a lease carries: the run's id and the worker's.
//!
//! # Invariants
//!
//! - A run id has 1 to [`MAX_RUN_ID_LEN`] characters among `A-Z a-z 0-9 . _ : -`, the rule of
//!   the journal's run ids, so any run the journal names can be leased.
//! - A worker id has 1 to [`MAX_WORKER_ID_LEN`] bytes and no control character; it must be
//!   unique among live workers (a host name and a process id, say): two workers sharing one id
//!   take each other's leases.

use std::fmt;

use crate::error::Error;

/// The longest run id, in characters.
pub const MAX_RUN_ID_LEN: usize = 100;
/// The longest worker id, in bytes.
pub const MAX_WORKER_ID_LEN: usize = 64;

/// Checks a run id.
pub(crate) fn check_run(run: &str) -> Result<(), Error> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-');
    if (1..=MAX_RUN_ID_LEN).contains(&run.len()) && run.chars().all(allowed) {
        Ok(())
    } else {
        Err(Error::InvalidId("a run id has 1 to 100 characters among A-Z, a-z, 0-9, '.', '_', ':' and '-'"))
    }
}

/// Who holds a lease: one worker process (or one task, when a process runs several).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct WorkerId(String);

impl WorkerId {
    /// Wraps `name`.
    ///
    /// ```
    /// let worker = loopbound_postgres::WorkerId::new(format!("host-a:{}", std::process::id()))?;
    /// assert!(worker.as_str().starts_with("host-a:"));
    /// # Ok::<(), loopbound_postgres::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidId`] for an empty name, one longer than 64 bytes, or one with a control
    /// character.
    pub fn new(name: impl Into<String>) -> Result<Self, Error> {
        let name = name.into();
        if (1..=MAX_WORKER_ID_LEN).contains(&name.len()) && !name.chars().any(char::is_control) {
            Ok(Self(name))
        } else {
            Err(Error::InvalidId("a worker id has 1 to 64 bytes and no control character"))
        }
    }

    /// The name.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for WorkerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for WorkerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
