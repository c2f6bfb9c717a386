//! Why a pool store refused an operation or failed.
//!
//! # Invariants
//!
//! - No message holds a pool's name, a holder's name or a stored figure: a pool is named after a
//!   tenant, and a store's error may travel to logs that the tenant's data must not reach. What
//!   failed is named by kind (an unknown pool, an unknown hold, the storage).
//! - A storage failure keeps the backend's own error as its [`source`](std::error::Error::source)
//!   (a SQLite or PostgreSQL client's error, with any password already removed), and `Display`
//!   never repeats what the source says.
//! - On any error a store has written nothing.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;

/// A pool store's error.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum PoolError {
    /// A pool name is empty, too long, or has a byte outside `A-Z a-z 0-9 . _ : -`.
    InvalidName,
    /// A budget bounds nothing, sets a bound of zero, or changes an existing pool's window.
    InvalidBudget,
    /// The pool was never defined in this store.
    UnknownPool,
    /// The hold is not in the store: it was settled or released already, or never made here.
    UnknownHold,
    /// The storage failed (I/O, a lock held too long, a server down): what failed, and the
    /// backend's own error as the source.
    Storage {
        /// What failed, in this crate's words.
        what: &'static str,
        /// The backend's error.
        source: Option<Arc<dyn StdError + Send + Sync>>,
    },
    /// A stored row does not decode; names which.
    Corrupt(String),
}

impl PoolError {
    /// A storage failure with the backend's `source`.
    ///
    /// A failure without an error of its own (a poisoned lock, a row count that is not the
    /// expected one) passes `std::io::Error::other("…")`, or builds
    /// [`PoolError::Storage`]` { what, source: None }`.
    #[must_use]
    pub fn storage(what: &'static str, source: impl StdError + Send + Sync + 'static) -> Self {
        Self::Storage { what, source: Some(Arc::new(source)) }
    }

    /// Whether the storage failed (rather than an operation being refused).
    #[must_use]
    pub const fn is_storage(&self) -> bool {
        matches!(self, Self::Storage { .. })
    }
}

impl PartialEq for PoolError {
    /// Errors are equal by kind and words; two storage failures by what failed.
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Storage { what, .. }, Self::Storage { what: theirs, .. }) => what == theirs,
            (Self::Corrupt(what), Self::Corrupt(theirs)) => what == theirs,
            _ => std::mem::discriminant(self) == std::mem::discriminant(other),
        }
    }
}

impl Eq for PoolError {}

impl fmt::Display for PoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidName => {
                f.write_str("invalid pool name: 1 to 128 bytes of letters, digits and . _ : -")
            }
            Self::InvalidBudget => f.write_str(
                "invalid pool budget: it must bound something, each bound positive, and keep its window",
            ),
            Self::UnknownPool => f.write_str("the pool is not defined in this store"),
            Self::UnknownHold => {
                f.write_str("the hold is not in the pool store (settled, released or unknown)")
            }
            Self::Storage { what, .. } => write!(f, "the pool store failed: {what}"),
            Self::Corrupt(what) => write!(f, "the pool store holds a damaged row: {what}"),
        }
    }
}

impl StdError for PoolError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            Self::Storage { source: Some(source), .. } => Some(&**source as &(dyn StdError + 'static)),
            _ => None,
        }
    }
}
