//! The run's definition as its journal keeps it: the grants, the limits (per-tool limits
//! included), the price table, the shared pools it draws from, the progress policy and the host's labels of its
//! first attempt, so that a resume in any process rebuilds the same scope from the run id alone
//! (and the pools' store handle, which a journal cannot keep).
//!
//! # Invariants
//!
//! - Written when the run is created, and never changed by a backend; only the host's explicit,
//!   audited [`widen`](super::widen) changes it.
//! - An attempt runs with no more than its run's definition: a scope granting a capability the
//!   definition lacks, or allowing more of any limit (the deadline aside; a token or cost budget
//!   the definition sets and the scope lacks or sets higher; a per-tool limit the definition sets
//!   and the scope lacks or sets higher), or charging less than the definition's price table (a
//!   model or a tool priced lower or not at all, a model the table does not price), or drawing
//!   from fewer of the definition's pools or with a larger output cap, or with a progress policy
//!   that stops less ([`Progress::no_looser_than`]), is refused with
//!   [`Widened`](super::JournalError::Widened) before anything runs. Narrower is allowed.
//! - Decoding never panics: a stored definition that does not decode, or whose limits do not
//!   validate, is [`Corrupt`](super::JournalError::Corrupt).

use std::collections::BTreeSet;
use std::sync::Arc;

use super::label::Labels;
use crate::limits::Limits;
#[cfg(feature = "pools")]
use crate::pool::PoolTerms;
use crate::progress::Progress;
use crate::scope::{Scope, ScopeBuilder};
use crate::spend::Prices;

/// What a run was started with: its granted capabilities, its limits (per-tool limits included),
/// its price table, the pools it draws from, its progress policy, its labels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunDefinition {
    pub(crate) grants: BTreeSet<String>,
    pub(crate) limits: Limits,
    pub(crate) prices: Option<Arc<Prices>>,
    #[cfg(feature = "pools")]
    pub(crate) pools: Option<PoolTerms>,
    pub(crate) labels: Labels,
    pub(crate) records_stream: bool,
    pub(crate) progress: Progress,
}

impl RunDefinition {
    /// The definition of a run started with `scope`.
    pub(crate) fn of<S>(scope: &Scope<S>) -> Self {
        Self {
            grants: scope.capabilities().map(str::to_owned).collect(),
            limits: scope.limits().clone(),
            prices: scope.prices().cloned(),
            #[cfg(feature = "pools")]
            pools: scope.pools().map(crate::pool::PoolDraw::terms).filter(|terms| !terms.names().is_empty()),
            labels: scope.labels().clone(),
            records_stream: scope.records_stream(),
            progress: scope.progress().clone(),
        }
    }

    /// The granted capabilities, in code-point order.
    pub fn grants(&self) -> impl Iterator<Item = &str> {
        self.grants.iter().map(String::as_str)
    }

    /// Whether `capability` was granted.
    #[must_use]
    pub fn is_granted(&self, capability: &str) -> bool {
        self.grants.contains(capability)
    }

    /// The run's limits, per-tool limits included ([`Limits::tool_calls_of`]). The deadline is
    /// each attempt's own: a resume may set another.
    #[must_use]
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The run's price table (models' tokens, tools' calls), if it was started with one.
    #[must_use]
    pub fn prices(&self) -> Option<&Arc<Prices>> {
        self.prices.as_ref()
    }

    /// The shared pools the run draws from, and the terms of its holds, if it draws from any.
    #[cfg(feature = "pools")]
    #[must_use]
    pub fn pools(&self) -> Option<&PoolTerms> {
        self.pools.as_ref()
    }

    /// The host's labels.
    #[must_use]
    pub fn labels(&self) -> &Labels {
        &self.labels
    }

    /// The run's progress policy ([`ScopeBuilder::progress`]).
    #[must_use]
    pub fn progress(&self) -> &Progress {
        &self.progress
    }

    /// Whether the run records its stream ([`ScopeBuilder::record_stream`]).
    #[must_use]
    pub fn records_stream(&self) -> bool {
        self.records_stream
    }

    /// A scope builder with this definition's grants, limits (per-tool limits included), price table,
    /// pools, progress policy and labels, for the run's next attempt in any process: add the request's state and
    /// the caller's token, narrow the grants or set another deadline if need be, and build. A
    /// run that draws from pools needs their store first
    #[cfg_attr(
        feature = "pools",
        doc = " ([`pool_store`](ScopeBuilder::pool_store)): built without it, the builder refuses with \
        [`LimitsError::PoolStoreMissing`](crate::LimitsError::PoolStoreMissing)."
    )]
    #[cfg_attr(
        not(feature = "pools"),
        doc = " (`ScopeBuilder::pool_store`): built without it, the builder refuses with \
        `LimitsError::PoolStoreMissing`."
    )]
    pub fn scope_builder(&self) -> ScopeBuilder {
        let mut builder = Scope::builder()
            .grants(self.grants.iter().cloned())
            .limits(self.limits.clone())
            .progress(self.progress.clone())
            .labels(self.labels.clone());
        #[cfg(feature = "pools")]
        if let Some(pools) = &self.pools {
            builder = builder.resuming_pools(pools.clone());
        }
        if self.records_stream {
            builder = builder.record_stream();
        }
        match &self.prices {
            Some(prices) => builder.prices(Arc::clone(prices)),
            None => builder,
        }
    }

    /// Whether `scope` asks for no more than this definition: its grants a subset of these,
    /// each of its limits at most this one's (the deadline aside: it is each attempt's own), a
    /// per-tool limit at most this one's for each tool this definition limits, and, when this
    /// definition has a price table, one that charges at least as much, when it draws from
    /// pools, a draw from every one of them with an output cap at most its own, and a progress
    /// policy that stops no less than its own.
    pub(crate) fn covers<S>(&self, scope: &Scope<S>) -> bool {
        #[cfg(feature = "pools")]
        let pools = match (&self.pools, scope.pools()) {
            (None, _) => true,
            (Some(mine), Some(asked)) => mine.covers(&asked.terms()),
            (Some(_), None) => false,
        };
        // Without the feature, no definition draws from pools (the journal refuses one that does).
        #[cfg(not(feature = "pools"))]
        let pools = true;
        let limits = scope.limits();
        let mine = &self.limits;
        let tool_limits = mine
            .per_tool_calls()
            .all(|(tool, mine)| limits.tool_calls_of(tool).is_some_and(|asked| asked <= mine));
        let prices = match (&self.prices, scope.prices()) {
            (None, _) => true,
            (Some(mine), Some(asked)) => asked.charges_at_least(mine),
            (Some(_), None) => false,
        };
        let mut grants = scope.capabilities();
        tool_limits
            && prices
            && pools
            && scope.progress().no_looser_than(&self.progress)
            && grants.all(|grant| self.grants.contains(grant))
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
    use crate::spend::{Micros, Price};

    fn stored(limits: Limits) -> RunDefinition {
        RunDefinition {
            grants: BTreeSet::new(),
            limits,
            prices: None,
            #[cfg(feature = "pools")]
            pools: None,
            labels: Labels::new(),
            records_stream: false,
            progress: Progress::exact(),
        }
    }

    fn priced(limits: Limits) -> Scope {
        let prices = Prices::new().other_tools(Micros::ZERO).shared();
        Scope::builder().limits(limits).prices(prices).build().unwrap()
    }

    #[test]
    fn a_spend_budget_the_definition_sets_may_be_narrowed_never_dropped_or_raised() {
        let stored = stored(Limits::default().with_total_tokens(1000).with_cost(Micros(500)));
        let same = Limits::default().with_total_tokens(1000).with_cost(Micros(500));
        let narrower = Limits::default().with_total_tokens(10).with_cost(Micros(1));
        let dropped = Limits::default().with_cost(Micros(500));
        let raised = Limits::default().with_total_tokens(1000).with_cost(Micros(501));
        let covered = |limits: Limits| stored.covers(&priced(limits));
        assert_eq!(
            [covered(same), covered(narrower.clone()), covered(dropped), covered(raised)],
            [true, true, false, false]
        );
        let unbudgeted = super::tests::stored(Limits::default());
        assert!(unbudgeted.covers(&priced(narrower)), "a budget narrows an unbudgeted run");
    }

    #[test]
    fn a_per_tool_limit_the_definition_sets_may_be_narrowed_never_dropped_or_raised() {
        let definition = stored(Limits::default().with_tool_calls_of("refund", 2));
        let scope = |limits: &[(&str, u32)]| {
            let limits =
                limits.iter().fold(Limits::default(), |l, (tool, calls)| l.with_tool_calls_of(*tool, *calls));
            Scope::builder().limits(limits).build().unwrap()
        };
        let covered = |limits: &[(&str, u32)]| definition.covers(&scope(limits));
        assert_eq!(
            [
                covered(&[("refund", 2)]),
                covered(&[("refund", 0)]),
                covered(&[("refund", 2), ("mail", 1)]),
                covered(&[("refund", 3)]),
                covered(&[]),
                covered(&[("mail", 1)]),
            ],
            [true, true, true, false, false, false]
        );
        assert!(stored(Limits::default()).covers(&scope(&[("refund", 5)])), "a per-tool limit narrows");
        let rebuilt = definition.scope_builder().build().unwrap();
        assert_eq!(rebuilt.limits().per_tool_calls().collect::<Vec<_>>(), [("refund", 2)]);
    }

    #[test]
    fn a_progress_policy_the_definition_sets_is_rebuilt_and_may_not_be_loosened() {
        let policy = Progress::recommended().by_result("poll", 10);
        let definition = RunDefinition { progress: policy.clone(), ..stored(Limits::default()) };
        let rebuilt = definition.scope_builder().build().unwrap();
        assert_eq!(rebuilt.progress(), &policy);
        assert!(definition.covers(&rebuilt));
        let without = Scope::builder().build().unwrap();
        assert!(!definition.covers(&without), "dropping the policy loosens the run");
        let nudging = Scope::builder().progress(policy.nudge(true)).build().unwrap();
        assert!(!definition.covers(&nudging), "a nudge gives the model one more turn");
        let plain = stored(Limits::default());
        let stricter = Scope::builder().progress(Progress::recommended()).build().unwrap();
        assert!(plain.covers(&stricter), "cycles and a streak narrow a run without them");
        assert!(!plain.covers(&rebuilt), "sparing a tool's repeats loosens exact repetition");
    }

    #[test]
    fn a_price_table_the_definition_sets_may_charge_more_never_less_nor_be_dropped() {
        let model = Price::per_million(Micros(3), Micros(15));
        let table = Prices::new().model("m", model).tool("refund", Micros(20)).other_tools(Micros(1));
        let definition = RunDefinition { prices: Some(table.clone().shared()), ..stored(Limits::default()) };
        let covered = |prices: Option<Prices>| {
            let builder = Scope::builder();
            let builder = match prices {
                Some(prices) => builder.prices(prices.shared()),
                None => builder,
            };
            definition.covers(&builder.build().unwrap())
        };
        let dearer = Prices::new()
            .model("m", Price::per_million(Micros(4), Micros(15)))
            .tool("refund", Micros(21))
            .other_tools(Micros(1));
        let cheaper_model = table.clone().model("m", model.with_cached_input(Micros(2)));
        let cheaper_tool = table.clone().tool("refund", Micros(19));
        let cheaper_other = table.clone().tool("mail", Micros(0));
        let new_model = table.clone().model("n", model);
        let unpriced_others = Prices::new().model("m", model).tool("refund", Micros(20));
        assert_eq!(
            [
                covered(Some(table.clone())),
                covered(Some(dearer)),
                covered(Some(cheaper_model)),
                covered(Some(cheaper_tool)),
                covered(Some(cheaper_other)),
                covered(Some(new_model)),
                covered(Some(unpriced_others)),
                covered(None),
            ],
            [true, true, false, false, false, false, false, false]
        );
        let rebuilt = definition.scope_builder().build().unwrap();
        assert_eq!(rebuilt.prices().map(|prices| &**prices), Some(&table));
    }
}
