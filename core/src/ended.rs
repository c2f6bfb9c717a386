//! What every run's completion condition reads when the run ends: the request's state in host
//! memory, and the calls that succeeded.
//!
//! One type for every run ([`Runner::run`](crate::Runner::run),
//! [`Runner::run_journaled`](crate::Runner::run_journaled) and both of
//! [`SubAgent`](crate::SubAgent)'s), so that a condition written for a plain run reads the same
//! for a journaled one.
//!
//! # Invariants
//!
//! - A plain run's calls are its own: those whose body returned an answer, in the order the loop
//!   handed their answers on. A call that failed, was refused (a repetition, a budget), was denied
//!   (a missing grant) or named no tool never counts.
//! - A journaled run's calls are those of the logical run: every attempt's proposals, decisions
//!   and results, the ending attempt's own included (committed or about to be), and the host's
//!   reconciliations. A result that a resume replayed counts as it did in the attempt that ran it.
//!   A call counts as succeeded only when its result was recorded without an error, or when the
//!   host reconciled it as run; a denied, refused, failed or ambiguous call never does.

use std::sync::Arc;

use crate::RunId;
#[cfg(feature = "journal")]
use crate::journal::{Operation, RunRecord};

/// A run as it ends, handed to its completion condition.
///
/// Host memory ([`state`](Self::state)) holds only what this attempt's bodies did; a resume of
/// a journaled run replays the results of earlier attempts without running their bodies. A
/// condition that must hold after a resume in another process reads the calls
/// ([`has_succeeded`](Self::has_succeeded), [`succeeded`](Self::succeeded)), which a journaled
/// run answers from its record and a plain run from its own calls.
///
/// ```
/// # fn check(ended: loopbound::Ended<'_, ()>) -> bool {
/// // "The refund was made": in this run, or, journaled, in whichever attempt, in whichever
/// // process, made it.
/// ended.has_succeeded("refund")
/// # }
/// ```
pub struct Ended<'a, S> {
    state: &'a S,
    calls: Calls<'a>,
}

/// Where an [`Ended`] reads its calls from.
#[derive(Clone, Copy)]
enum Calls<'a> {
    /// A plain run's successful calls: each tool's name and its answer's text.
    Plain(&'a [(Arc<str>, String)]),
    /// A journaled run's record.
    #[cfg(feature = "journal")]
    Journaled(&'a RunRecord),
}

impl<S> Clone for Ended<'_, S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S> Copy for Ended<'_, S> {}

impl<S> std::fmt::Debug for Ended<'_, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ended").field("run", &self.run()).finish_non_exhaustive()
    }
}

impl<'a, S> Ended<'a, S> {
    /// The journaled run `record` holds, ending with `state`: what a journaled run hands its
    /// condition, and what a host builds to judge a run it [inspected](crate::journal::inspect)
    /// by the same condition.
    #[cfg(feature = "journal")]
    #[must_use]
    pub fn new(state: &'a S, record: &'a RunRecord) -> Self {
        Self { state, calls: Calls::Journaled(record) }
    }

    /// A plain run ending with `state`, whose successful calls are `succeeded` (each tool's name
    /// and its answer's text).
    pub(crate) fn plain(state: &'a S, succeeded: &'a [(Arc<str>, String)]) -> Self {
        Self { state, calls: Calls::Plain(succeeded) }
    }

    /// The run's id, for a journaled run; `None` for a plain one.
    #[must_use]
    pub fn run(&self) -> Option<&'a RunId> {
        match self.calls {
            Calls::Plain(_) => None,
            #[cfg(feature = "journal")]
            Calls::Journaled(record) => Some(&record.run),
        }
    }

    /// The request's state (the scope's): what this attempt's bodies set in host memory.
    #[must_use]
    pub fn state(&self) -> &'a S {
        self.state
    }

    /// Whether a call to `tool` succeeded: in a plain run, its body returned an answer; in a
    /// journaled run, in any attempt, its result was recorded without an error, or the host
    /// reconciled it as run.
    #[must_use]
    pub fn has_succeeded(&self, tool: &str) -> bool {
        self.succeeded().any(|(name, _)| name == tool)
    }

    /// Every call that succeeded, as the tool's name and its result's text: a plain run's in the
    /// order their answers were handed on; a journaled run's in every attempt, by operation (as
    #[cfg_attr(feature = "journal", doc = " [`RunRecord::succeeded`]).")]
    #[cfg_attr(not(feature = "journal"), doc = " `RunRecord::succeeded`).")]
    pub fn succeeded(&self) -> impl Iterator<Item = (&'a str, &'a str)> + use<'a, S> {
        let plain = match self.calls {
            Calls::Plain(calls) => Some(calls),
            #[cfg(feature = "journal")]
            Calls::Journaled(_) => None,
        };
        #[cfg(feature = "journal")]
        let journaled = match self.calls {
            Calls::Plain(_) => None,
            Calls::Journaled(record) => Some(record.succeeded()),
        };
        #[cfg(not(feature = "journal"))]
        let journaled: Option<std::iter::Empty<(&'a str, &'a str)>> = None;
        let plain = plain.into_iter().flatten().map(|(name, text)| (&**name, text.as_str()));
        plain.chain(journaled.into_iter().flatten())
    }

    /// Every operation of a journaled run, by ordinal: its proposal, decision, starts and result.
    /// A plain run has none.
    #[cfg(feature = "journal")]
    pub fn operations(&self) -> impl Iterator<Item = &'a Operation> + use<'a, S> {
        let record = match self.calls {
            Calls::Plain(_) => None,
            Calls::Journaled(record) => Some(record),
        };
        record.into_iter().flat_map(|record| record.operations.values())
    }
}
