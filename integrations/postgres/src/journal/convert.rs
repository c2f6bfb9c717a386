//! This crate's errors and the database's integers as the journal's.
//!
//! # Invariants
//!
//! - Every [`Error`] keeps its kind: a lost or held lease, a conflict and a newer schema stay
//!   themselves; a server that is down, refuses the login or fails a statement is
//!   [`Storage`](JournalError::Storage), whose source is this crate's [`Error`], which never
//!   holds the password (the store's redactor removed it).
//! - A stored integer out of the journal's range is [`Corrupt`](JournalError::Corrupt).

use loopbound::journal::{JournalError, StorageError};

use crate::error::Error;

impl From<Error> for JournalError {
    fn from(error: Error) -> Self {
        match error {
            Error::LeaseLost { .. } => Self::LeaseLost,
            Error::LeaseHeld { holder, remaining, .. } => Self::LeaseHeld { holder, remaining },
            Error::Conflict(message) => Self::Conflict(format!("a record of this key ({message})")),
            Error::UnsupportedSchema { found, supported } => Self::UnsupportedSchema { found, supported },
            Error::InvalidId(_) => Self::InvalidRunId,
            other @ (Error::Config(_) | Error::Unavailable(_) | Error::Refused(_) | Error::Storage(_)) => {
                Self::Storage(StorageError::new("the PostgreSQL journal failed").with_source(other))
            }
        }
    }
}

/// The error for a stored value of the wrong type, or a null where one is needed.
pub(super) fn corrupt(what: &str) -> JournalError {
    JournalError::Corrupt(format!("{what} has the wrong type or is missing"))
}

/// A stored integer as a `u32`, or `Corrupt`.
pub(super) fn to_u32(value: i64, what: &str) -> Result<u32, JournalError> {
    u32::try_from(value).map_err(|_| JournalError::Corrupt(format!("{what} out of range")))
}

/// A stored integer as a `u64`, or `Corrupt`.
pub(super) fn to_u64(value: i64, what: &str) -> Result<u64, JournalError> {
    u64::try_from(value).map_err(|_| JournalError::Corrupt(format!("{what} out of range")))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use loopbound::journal::JournalError;

    use crate::error::Error;

    #[test]
    fn every_kind_survives_the_conversion() {
        let held = Error::LeaseHeld {
            run: "r".into(),
            holder: "host-b:7".into(),
            until: SystemTime::UNIX_EPOCH,
            remaining: Duration::from_millis(1500),
        };
        assert_eq!(
            JournalError::from(held),
            JournalError::LeaseHeld { holder: "host-b:7".into(), remaining: Duration::from_millis(1500) }
        );
        assert_eq!(
            JournalError::from(Error::LeaseLost { run: "r".into(), epoch: 2 }),
            JournalError::LeaseLost
        );
        assert_eq!(
            JournalError::from(Error::UnsupportedSchema { found: 9, supported: 2 }),
            JournalError::UnsupportedSchema { found: 9, supported: 2 }
        );
        let down = JournalError::from(Error::Unavailable("connection refused".into()));
        assert_eq!(down.to_string(), "journal storage failed: the PostgreSQL journal failed");
        let cause = std::error::Error::source(&down).map(ToString::to_string);
        assert_eq!(cause.as_deref(), Some("the database is unavailable: connection refused"));
        assert!(matches!(JournalError::from(Error::Conflict("dup".into())), JournalError::Conflict(_)));
    }
}
