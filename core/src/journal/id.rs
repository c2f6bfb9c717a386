//! Names of durable things: a run, an operation, and the digest that binds an approval to the
//! exact call it approves.
//!
//! # Invariants
//!
//! - A [`RunId`] (core's, re-exported here) is 1 to 100 characters of `A-Z a-z 0-9 . _ : -`:
//!   no `/`, so an operation id splits back into its run and its ordinal without ambiguity.
//! - An [`OperationId`] is `<run>/op/<ordinal>`, where the ordinal is the admitted call's tool
//!   count in the logical run (1 for the first). It never derives from a provider's call id,
//!   which providers mint anew on every turn.
//! - A child run's id (a sub-agent run inside an operation's body) is `<run>:op:<ordinal>`,
//!   derived from its operation, so every attempt of the parent finds the same child.
//! - A [`Digest`] is the lowercase hex SHA-256 of a call's signature (tool name + canonical
//!   arguments): two calls share it only if they share the signature.

use std::fmt;
use std::sync::Arc;

use sha2::{Digest as _, Sha256};

use super::error::JournalError;

pub use crate::run_id::{MAX_RUN_ID_LEN, RunId};

impl RunId {
    /// The id of this run's `ordinal`-th admitted call.
    #[must_use]
    pub fn operation(&self, ordinal: u32) -> OperationId {
        OperationId { run: self.clone(), ordinal }
    }
}

/// One admitted call of a logical run, named deterministically: `<run>/op/<ordinal>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OperationId {
    run: RunId,
    ordinal: u32,
}

impl OperationId {
    /// Parses `<run>/op/<ordinal>`.
    ///
    /// ```
    /// use loopbound::journal::OperationId;
    ///
    /// let operation = OperationId::parse("refund-42/op/1")?;
    /// assert_eq!(operation.run().as_str(), "refund-42");
    /// assert_eq!(operation.ordinal(), 1);
    /// # Ok::<(), loopbound::journal::JournalError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`JournalError::InvalidOperationId`] if the text is not of that form, with a valid run
    /// id and an ordinal from 1.
    pub fn parse(text: &str) -> Result<Self, JournalError> {
        let (run, ordinal) = text.rsplit_once("/op/").ok_or(JournalError::InvalidOperationId)?;
        let run = RunId::new(run).map_err(|_| JournalError::InvalidOperationId)?;
        let digits =
            !ordinal.is_empty() && ordinal.bytes().all(|b| b.is_ascii_digit()) && !ordinal.starts_with('0');
        let ordinal = if digits { ordinal.parse::<u32>().ok() } else { None };
        ordinal.map(|ordinal| Self { run, ordinal }).ok_or(JournalError::InvalidOperationId)
    }

    /// The run this operation belongs to.
    #[must_use]
    pub fn run(&self) -> &RunId {
        &self.run
    }

    /// The call's ordinal among the run's admitted calls (1 for the first).
    #[must_use]
    pub fn ordinal(&self) -> u32 {
        self.ordinal
    }

    /// The id of the child run (a sub-agent's own logical run) that this operation's body
    /// runs: `<run>:op:<ordinal>`. The same in every attempt that drives the operation, so a
    /// resumed parent that runs the body again finds the child's journal and resumes it; a
    /// child's own operations are `<run>:op:<ordinal>/op/<n>`, and its children nest the same
    /// way. Hosts should not give their own runs ids of this form.
    ///
    /// ```
    /// use loopbound::journal::{OperationId, RunId};
    ///
    /// let child = RunId::new("refund-42")?.operation(3).child_run()?;
    /// assert_eq!(child.as_str(), "refund-42:op:3");
    /// assert_eq!(OperationId::parse("refund-42:op:3/op/1")?.run(), &child);
    /// # Ok::<(), loopbound::journal::JournalError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`JournalError::InvalidRunId`] if the derived id is longer than [`MAX_RUN_ID_LEN`].
    pub fn child_run(&self) -> Result<RunId, JournalError> {
        Ok(RunId::new(format!("{}:op:{}", self.run, self.ordinal))?)
    }

    /// The id as shared text, as events carry it.
    pub(crate) fn shared(&self) -> Arc<str> {
        Arc::from(self.to_string())
    }
}

impl fmt::Display for OperationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/op/{}", self.run, self.ordinal)
    }
}

/// The SHA-256 of a call's signature, in lowercase hex: what an approval presents to show which
/// exact call it approves.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Digest(Box<str>);

impl Digest {
    /// The digest of `signature` (tool name + `:` + canonical arguments).
    #[must_use]
    pub fn of(signature: &str) -> Self {
        let hash = Sha256::digest(signature.as_bytes());
        let mut hex = String::with_capacity(64);
        for byte in hash {
            hex.push(char::from(HEX[usize::from(byte >> 4)]));
            hex.push(char::from(HEX[usize::from(byte & 0x0f)]));
        }
        Self(hex.into_boxed_str())
    }

    /// A digest as an approver presents it: 64 hexadecimal digits (either case).
    ///
    /// # Errors
    ///
    /// [`JournalError::InvalidDigest`] for anything else.
    pub fn parse(text: &str) -> Result<Self, JournalError> {
        if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            Ok(Self(text.to_ascii_lowercase().into_boxed_str()))
        } else {
            Err(JournalError::InvalidDigest)
        }
    }

    /// The digest as 64 lowercase hexadecimal digits.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_ids_round_trip_and_refuse_other_forms() {
        let run = RunId::new("r").unwrap_or_else(|_| unreachable!());
        let id = run.operation(12);
        assert_eq!(OperationId::parse(&id.to_string()), Ok(id));
        for bad in ["r/op/0", "r/op/", "r/op/01", "r/op/x", "/op/1", "r/1", "r/op/4294967296", "r/op/+1"] {
            assert_eq!(OperationId::parse(bad), Err(JournalError::InvalidOperationId), "{bad:?}");
        }
    }

    #[test]
    fn a_digest_is_the_sha256_of_the_signature() {
        // SHA-256("abc"), the FIPS 180-2 example.
        let digest = Digest::of("abc");
        assert_eq!(digest.as_str(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(Digest::parse(&digest.as_str().to_ascii_uppercase()), Ok(digest));
        assert_eq!(Digest::parse("abc"), Err(JournalError::InvalidDigest));
    }
}

/// An attempt's fencing token for one operation: the operation id and the attempt's epoch.
///
/// Every attempt that takes a run gets a higher epoch than the one before, so of two tokens for
/// one operation the newer attempt's is the greater. Displayed as `<operation>@<epoch>`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct FencingToken {
    operation: Arc<str>,
    epoch: u64,
}

impl FencingToken {
    pub(crate) fn new(operation: Arc<str>, epoch: u64) -> Self {
        Self { operation, epoch }
    }

    /// The operation id, e.g. `refund-42/op/2`.
    #[must_use]
    pub fn operation(&self) -> &str {
        &self.operation
    }

    /// The attempt's epoch.
    #[must_use]
    pub fn epoch(&self) -> u64 {
        self.epoch
    }
}

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.operation, self.epoch)
    }
}

impl fmt::Debug for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FencingToken({self})")
    }
}
