//! SQLite's errors as the journal's typed errors.
//!
//! # Invariants
//!
//! - A damaged or foreign file is [`Corrupt`](JournalError::Corrupt); a key written twice is a
//!   [`Conflict`](JournalError::Conflict); a stored value of the wrong type is `Corrupt`; anything
//!   else is [`Storage`](JournalError::Storage) whose source is SQLite's error, which names
//!   tables and columns, never a stored value.

use loopbound::journal::{JournalError, StorageError};
use rusqlite::ErrorCode;

/// The journal error for a SQLite error (taken by value, to fit `map_err`).
pub(crate) fn storage(error: rusqlite::Error) -> JournalError {
    match error {
        rusqlite::Error::SqliteFailure(failure, _) if is_corrupt(failure.code) => {
            JournalError::Corrupt("the file is not a SQLite database, or it is damaged".into())
        }
        rusqlite::Error::SqliteFailure(failure, _) if failure.code == ErrorCode::ConstraintViolation => {
            JournalError::Conflict("a record of this key".into())
        }
        rusqlite::Error::SqliteFailure(..) => {
            JournalError::Storage(StorageError::new("SQLite refused the operation").with_source(error))
        }
        rusqlite::Error::FromSqlConversionFailure(..)
        | rusqlite::Error::IntegralValueOutOfRange(..)
        | rusqlite::Error::InvalidColumnType(..) => {
            JournalError::Corrupt("a stored value has the wrong type".into())
        }
        _ => JournalError::Storage(StorageError::new("the SQLite call failed").with_source(error)),
    }
}

/// Whether SQLite's `code` says the file is damaged or not a database.
fn is_corrupt(code: ErrorCode) -> bool {
    matches!(code, ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt)
}

/// A stored integer as a `u32`, or `Corrupt`.
pub(crate) fn to_u32(value: i64, what: &str) -> Result<u32, JournalError> {
    u32::try_from(value).map_err(|_| JournalError::Corrupt(format!("{what} out of range")))
}

/// A stored integer as a `u64`, or `Corrupt`.
pub(crate) fn to_u64(value: i64, what: &str) -> Result<u64, JournalError> {
    u64::try_from(value).map_err(|_| JournalError::Corrupt(format!("{what} out of range")))
}
