//! Why a journal, or a host's command on it, refused or failed.
//!
//! # Invariants
//!
//! - Every message names what failed (a table, a field, an operation id), never a stored value:
//!   stored rows hold canonical arguments and tool results, which never appear in an error. A
//!   lease's holder is the one stored name a message gives (`LeaseHeld`): it names a worker
//!   (a host and a process, or the host's own choice), never a run's data.
//! - The kind, not the text, classifies an error.
//! - A storage failure keeps the backend's own error as its [`source`](std::error::Error::source)
//!   (a SQLite or PostgreSQL client's error, which holds no password), and `Display` never
//!   repeats what a source says.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;

use crate::outcome::Status;

/// A journal's error: its storage failed, its rows do not decode, another worker took the run
/// over, or a host's command does not apply.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum JournalError {
    /// A run id is empty, too long, or has a character outside `A-Z a-z 0-9 . _ : -`.
    InvalidRunId,
    /// An operation id is not of the form `<run>/op/<ordinal>`.
    InvalidOperationId,
    /// A digest is not 64 hexadecimal digits.
    InvalidDigest,
    /// An approver's or reconciler's name is empty, longer than 64 bytes, or has a control
    /// character.
    InvalidActor,
    /// A host's reason for closing a run is empty, longer than 256 bytes, or has a control
    /// character.
    InvalidReason,
    /// A label's key is not 1 to 32 bytes of `a-z 0-9 _ . -`, its value not 1 to 128 bytes
    /// without a control character, or a run would carry more than 8 labels.
    InvalidLabel,
    /// A lease duration is zero or longer than a day.
    InvalidLease,
    /// The journal records no cancel requests (a backend that keeps only the default).
    CancelUnsupported,
    /// The journal keeps no recorded streams (a backend that keeps only the default).
    StreamUnsupported,
    /// A proposal's new expiry is zero or out of range.
    InvalidExpiry,
    /// The run does not record its stream ([`ScopeBuilder::record_stream`](crate::ScopeBuilder::record_stream)).
    StreamNotRecorded,
    /// A run's limits do not validate.
    InvalidLimits(crate::limits::LimitsError),
    /// A capability's name is empty or has a control character.
    InvalidCapability,
    /// The storage failed (I/O, locking, a full disk, a server down): what failed, in the
    /// backend's words, and the backend's own error as the source.
    Storage(StorageError),
    /// A stored row does not decode, or the rows contradict each other; names what.
    Corrupt(String),
    /// The file was written by a newer schema than this version understands.
    UnsupportedSchema {
        /// The file's schema version.
        found: i64,
        /// The newest version this build migrates to.
        supported: i64,
    },
    /// Another attempt took this run over (its epoch is newer): this attempt writes nothing more
    /// and runs no further effect.
    LeaseLost,
    /// Another attempt holds a live lease on this run (every backend refuses to take it over
    /// before the lease expires or is released, or, for a holder that is a process of this
    /// machine, before that process is gone: see [`is_dead_holder`](super::backend::is_dead_holder)):
    /// this attempt did not start, wrote nothing and ran nothing. Retry after `remaining`.
    /// Displays as `another attempt holds this run: held by host-a:4242 for 12.3 s more;
    /// nothing ran`.
    LeaseHeld {
        /// The worker holding the lease, as it named itself.
        holder: String,
        /// How long the lease has left, by the storage's clock.
        remaining: std::time::Duration,
    },
    /// A write repeated a record that must exist once (a second decision, a second result).
    Conflict(String),
    /// The run is not in the journal.
    UnknownRun,
    /// The operation is not in the journal.
    UnknownOperation,
    /// The approval presents the digest of other arguments than the proposal's: refused.
    SignatureMismatch,
    /// The operation already has a decision.
    AlreadyDecided,
    /// The proposal expired ([`Policy::AskWithin`](crate::tool::Policy::AskWithin)) before this
    /// approval was presented; nothing was written (a denial is still taken).
    ApprovalExpired,
    /// The operation is not ambiguous (not started, already recorded, or already reconciled, or
    /// its run is not stopped on it).
    NotAmbiguous,
    /// Only `effect` operations are reconciled: an `idempotent` one is driven again with its key.
    NotAnEffect,
    /// The run already ended with this status; it is not resumed.
    Finished(Status),
    /// A journaled run needs a fresh scope: this one has already admitted calls.
    ScopeInUse,
    /// The scope grants a capability the run's definition lacks, or allows more of a limit: a
    /// resume may narrow a run, never widen it without [`widen`](super::widen).
    Widened,
    /// The run was journaled before definitions were stored: there is none to rebuild a scope
    /// from.
    NoDefinition,
    /// A recorded call names a tool that the runtime's set no longer has, or binds to another
    /// signature than its proposal's.
    ToolMismatch(String),
}

impl From<crate::InvalidRunId> for JournalError {
    fn from(_: crate::InvalidRunId) -> Self {
        Self::InvalidRunId
    }
}

impl fmt::Display for JournalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidRunId => crate::InvalidRunId.fmt(f),
            Self::InvalidOperationId => f.write_str("invalid operation id: expected <run>/op/<ordinal>"),
            Self::InvalidDigest => f.write_str("invalid digest: expected 64 hexadecimal digits"),
            Self::InvalidActor => f.write_str("invalid name: use 1 to 64 bytes without control characters"),
            Self::InvalidReason => {
                f.write_str("invalid reason: use 1 to 256 bytes without control characters")
            }
            Self::InvalidLabel => f.write_str(
                "invalid label: keys of 1 to 32 bytes among a-z, 0-9, '_', '.', '-', values of 1 to 128 bytes without control characters, at most 8 labels",
            ),
            Self::InvalidLease => f.write_str("invalid lease: use more than zero and at most a day"),
            Self::CancelUnsupported => f.write_str("this journal records no cancel requests"),
            Self::StreamUnsupported => f.write_str("this journal keeps no recorded streams"),
            Self::StreamNotRecorded => f.write_str("this run does not record its stream (ScopeBuilder::record_stream)"),
            Self::InvalidExpiry => f.write_str("invalid expiry: use more than zero, within the clock's range"),
            Self::InvalidLimits(error) => error.fmt(f),
            Self::InvalidCapability => f.write_str("invalid capability: a name without control characters"),
            Self::Storage(error) => write!(f, "journal storage failed: {error}"),
            Self::Corrupt(what) => write!(f, "the journal is corrupt: {what}"),
            Self::UnsupportedSchema { found, supported } => {
                write!(f, "the journal's schema version {found} is newer than this build's ({supported})")
            }
            Self::LeaseLost => f.write_str("another attempt took this run over; this one stops"),
            Self::LeaseHeld { holder, remaining } => write!(
                f,
                "another attempt holds this run: held by {holder} for {:.1} s more; nothing ran",
                remaining.as_secs_f64()
            ),
            Self::Conflict(what) => write!(f, "the journal already holds {what}"),
            Self::UnknownRun => f.write_str("no such run in the journal"),
            Self::UnknownOperation => f.write_str("no such operation in the journal"),
            Self::SignatureMismatch => {
                f.write_str("the approval is for other arguments than the proposal's; refused")
            }
            Self::AlreadyDecided => f.write_str("the operation already has a decision"),
            Self::ApprovalExpired => f.write_str("the proposal expired before it was approved; nothing was written"),
            Self::NotAmbiguous => f.write_str("the operation is not ambiguous; nothing to reconcile"),
            Self::NotAnEffect => {
                f.write_str("only effect operations are reconciled; an idempotent one is driven again")
            }
            Self::Finished(status) => write!(f, "the run already ended with {status}"),
            Self::ScopeInUse => f.write_str("a journaled run needs a fresh scope"),
            Self::Widened => f.write_str(
                "the scope grants or allows more than the run's definition; widen the run explicitly first",
            ),
            Self::NoDefinition => f.write_str("the run has no stored definition to rebuild its scope from"),
            Self::ToolMismatch(what) => write!(f, "the recorded call does not match the tools: {what}"),
        }
    }
}

impl StdError for JournalError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            Self::Storage(error) => error.source(),
            _ => None,
        }
    }
}

impl JournalError {
    /// A storage failure described by `message`, without a source.
    pub fn storage(message: impl Into<String>) -> Self {
        Self::Storage(StorageError::new(message))
    }
}

/// A journal backend's storage failure: what failed, and the backend's error that caused it.
///
/// Two are equal when their messages are, whatever their sources.
#[derive(Clone)]
pub struct StorageError {
    message: Box<str>,
    source: Option<Arc<dyn StdError + Send + Sync + 'static>>,
}

impl StorageError {
    /// A failure described by `message` (what failed; no stored value, no password).
    pub fn new(message: impl Into<String>) -> Self {
        Self { message: message.into().into_boxed_str(), source: None }
    }

    /// This failure, caused by `source` (which must hold no password or stored value).
    #[must_use]
    pub fn with_source(mut self, source: impl StdError + Send + Sync + 'static) -> Self {
        self.source = Some(Arc::new(source));
        self
    }

    /// What failed, in the backend's words.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl PartialEq for StorageError {
    fn eq(&self, other: &Self) -> bool {
        self.message == other.message
    }
}

impl Eq for StorageError {}

impl fmt::Debug for StorageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StorageError")
            .field("message", &self.message)
            .field("source", &self.source.is_some())
            .finish()
    }
}

impl fmt::Display for StorageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl StdError for StorageError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source.as_deref().map(|source| source as &(dyn StdError + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lease_names_its_holder_and_the_time_it_has_left() {
        let held = JournalError::LeaseHeld {
            holder: "host-a:4242/1319620/0123456789ab".to_owned(),
            remaining: std::time::Duration::from_millis(12_345),
        };
        assert_eq!(
            held.to_string(),
            "another attempt holds this run: held by host-a:4242/1319620/0123456789ab for 12.3 s more; nothing ran"
        );
    }
}
