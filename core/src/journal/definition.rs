//! The run's definition as its journal keeps it: the grants, the limits and the host's labels of
//! its first attempt, so that a resume in any process rebuilds the same scope from the run id
//! alone.
//!
//! # Invariants
//!
//! - Written when the run is created, and never changed by a backend; only the host's explicit,
//!   audited [`widen`](super::widen) changes it.
//! - An attempt runs with no more than its run's definition: a scope granting a capability the
//!   definition lacks, or allowing more of any limit (the deadline aside; a token or cost budget
//!   the definition sets and the scope lacks or sets higher), is refused with
//!   [`Widened`](super::JournalError::Widened) before anything runs. Narrower is allowed.
//! - Decoding never panics: a stored definition that does not decode, or whose limits do not
//!   validate, is [`Corrupt`](super::JournalError::Corrupt).

use std::collections::BTreeSet;

use super::label::Labels;
use crate::limits::Limits;
use crate::scope::{Scope, ScopeBuilder};

/// What a run was started with: its granted capabilities, its limits, its labels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunDefinition {
    pub(crate) grants: BTreeSet<String>,
    pub(crate) limits: Limits,
    pub(crate) labels: Labels,
}

impl RunDefinition {
    /// The granted capabilities, in code-point order.
    pub fn grants(&self) -> impl Iterator<Item = &str> {
        self.grants.iter().map(String::as_str)
    }

    /// Whether `capability` was granted.
    #[must_use]
    pub fn is_granted(&self, capability: &str) -> bool {
        self.grants.contains(capability)
    }

    /// The run's limits. The deadline is each attempt's own: a resume may set another.
    #[must_use]
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The host's labels.
    #[must_use]
    pub fn labels(&self) -> &Labels {
        &self.labels
    }

    /// A scope builder with this definition's grants, limits and labels, for the run's next
    /// attempt in any process: add the request's state and the caller's token, narrow the grants
    /// or set another deadline if need be, and build.
    pub fn scope_builder(&self) -> ScopeBuilder {
        Scope::builder().grants(self.grants.iter().cloned()).limits(self.limits).labels(self.labels.clone())
    }

    /// Whether a scope with `grants` and `limits` asks for no more than this definition: its
    /// grants a subset of these, each of its limits at most this one's (the deadline aside: it
    /// is each attempt's own).
    pub(crate) fn covers<'a>(&self, mut grants: impl Iterator<Item = &'a str>, limits: &Limits) -> bool {
        let mine = &self.limits;
        grants.all(|grant| self.grants.contains(grant))
            && limits.model_calls() <= mine.model_calls()
            && limits.tool_calls() <= mine.tool_calls()
            && limits.repetitions() <= mine.repetitions()
            && limits.calls_per_reply() <= mine.calls_per_reply()
            && limits.reply_bytes() <= mine.reply_bytes()
            && within(limits.input_tokens(), mine.input_tokens())
            && within(limits.output_tokens(), mine.output_tokens())
            && within(limits.total_tokens(), mine.total_tokens())
            && within(limits.cost(), mine.cost())
    }
}

/// Whether an optional bound `asked` is no wider than `mine`: no bound is the widest, so a
/// bounded definition needs a bound at most its own.
fn within<T: Ord>(asked: Option<T>, mine: Option<T>) -> bool {
    match (asked, mine) {
        (_, None) => true,
        (Some(asked), Some(mine)) => asked <= mine,
        (None, Some(_)) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spend::Micros;

    fn budgeted(limits: Limits) -> RunDefinition {
        RunDefinition { grants: BTreeSet::new(), limits, labels: Labels::new() }
    }

    #[test]
    fn a_spend_budget_the_definition_sets_may_be_narrowed_never_dropped_or_raised() {
        let stored = budgeted(Limits::default().with_total_tokens(1000).with_cost(Micros(500)));
        let same = Limits::default().with_total_tokens(1000).with_cost(Micros(500));
        let narrower = Limits::default().with_total_tokens(10).with_cost(Micros(1));
        let dropped = Limits::default().with_cost(Micros(500));
        let raised = Limits::default().with_total_tokens(1000).with_cost(Micros(501));
        let covered = |limits: &Limits| stored.covers(std::iter::empty(), limits);
        assert_eq!(
            [covered(&same), covered(&narrower), covered(&dropped), covered(&raised)],
            [true, true, false, false]
        );
        let unbudgeted = budgeted(Limits::default());
        assert!(unbudgeted.covers(std::iter::empty(), &narrower), "a budget narrows an unbudgeted run");
    }
}
