//! SQLite's errors as the journal's typed errors.
//!
//! # Invariants
//!
//! - A damaged or foreign file is [`Corrupt`](JournalError::Corrupt); a key written twice is a
//!   [`Conflict`](JournalError::Conflict); a stored value of the wrong type is `Corrupt`; anything
//!   else is [`Storage`](JournalError::Storage) with SQLite's message, which names tables and
//!   columns, never a stored value.

use loopbound::journal::JournalError;
use rusqlite::ErrorCode;

/// The journal error for a SQLite error (taken by value, to fit `map_err`).
#[allow(clippy::needless_pass_by_value, reason = "used as `map_err(storage)`, which hands over the error")]
pub(crate) fn storage(error: rusqlite::Error) -> JournalError {
    match &error {
        rusqlite::Error::SqliteFailure(failure, _) => match failure.code {
            ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt => {
                JournalError::Corrupt("the file is not a SQLite database, or it is damaged".into())
            }
            ErrorCode::ConstraintViolation => JournalError::Conflict("a record of this key".into()),
            _ => JournalError::Storage(format!("{:?}", failure.code)),
        },
        rusqlite::Error::FromSqlConversionFailure(..)
        | rusqlite::Error::IntegralValueOutOfRange(..)
        | rusqlite::Error::InvalidColumnType(..) => {
            JournalError::Corrupt("a stored value has the wrong type".into())
        }
        _ => JournalError::Storage(error.to_string()),
    }
}

/// A stored integer as a `u32`, or `Corrupt`.
pub(crate) fn to_u32(value: i64, what: &str) -> Result<u32, JournalError> {
    u32::try_from(value).map_err(|_| JournalError::Corrupt(format!("{what} out of range")))
}

/// A stored integer as a `u64`, or `Corrupt`.
pub(crate) fn to_u64(value: i64, what: &str) -> Result<u64, JournalError> {
    u64::try_from(value).map_err(|_| JournalError::Corrupt(format!("{what} out of range")))
}
