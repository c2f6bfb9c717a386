//! What a journaled run's completion condition reads when the run ends: the request's state in
//! host memory, and the logical run's record of every call, across every attempt.
//!
//! # Invariants
//!
//! - The operations are those of the logical run: every attempt's proposals, decisions and
//!   results, the ending attempt's own included (committed or about to be), and the host's
//!   reconciliations. A result that a resume replayed counts as it did in the attempt that ran it.
//! - A call counts as succeeded only when its result was recorded without an error, or when the
//!   host reconciled it as run; a denied, refused, failed or ambiguous call never does.

use super::id::RunId;
use super::record::Operation;
use super::run_record::RunRecord;

/// A journaled run as it ends, handed to its completion condition
/// ([`Runtime::run_journaled`](crate::Runtime::run_journaled)).
///
/// Host memory ([`state`](Self::state)) holds only what this attempt's bodies did; a resume
/// replays the results of earlier attempts without running their bodies. A condition that must
/// hold after a resume in another process reads the record ([`has_succeeded`](Self::has_succeeded),
/// [`succeeded`](Self::succeeded), [`operations`](Self::operations)).
///
/// ```
/// # fn check(ended: loopbound::journal::Ended<'_, ()>) -> bool {
/// // "The refund was made": true whichever attempt, in whichever process, made it.
/// ended.has_succeeded("refund")
/// # }
/// ```
pub struct Ended<'a, S> {
    state: &'a S,
    record: &'a RunRecord,
}

impl<S> Clone for Ended<'_, S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S> Copy for Ended<'_, S> {}

impl<S> std::fmt::Debug for Ended<'_, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ended").field("run", &self.record.run).finish_non_exhaustive()
    }
}

impl<'a, S> Ended<'a, S> {
    /// The run `record` holds, ending with `state`: what a journaled run hands its condition,
    /// and what a host builds to judge a run it [inspected](super::inspect) by the same
    /// condition.
    #[must_use]
    pub fn new(state: &'a S, record: &'a RunRecord) -> Self {
        Self { state, record }
    }

    /// The run's id.
    #[must_use]
    pub fn run(&self) -> &'a RunId {
        &self.record.run
    }

    /// The request's state (the scope's): what this attempt's bodies set in host memory.
    #[must_use]
    pub fn state(&self) -> &'a S {
        self.state
    }

    /// Whether a call to `tool` succeeded in the logical run, in any attempt: its result was
    /// recorded without an error, or the host reconciled it as run.
    #[must_use]
    pub fn has_succeeded(&self, tool: &str) -> bool {
        self.succeeded().any(|(name, _)| name == tool)
    }

    /// Every call that succeeded in the logical run, in every attempt, by operation: the tool's
    /// name and its result's text (as [`RunRecord::succeeded`]).
    pub fn succeeded(&self) -> impl Iterator<Item = (&'a str, &'a str)> + use<'a, S> {
        self.record.succeeded()
    }

    /// Every operation of the logical run, by ordinal: its proposal, decision, starts and result.
    pub fn operations(&self) -> impl Iterator<Item = &'a Operation> + use<'a, S> {
        self.record.operations.values()
    }
}
