//! What a scope draws from: pools of one store, and the terms of its holds.
//!
//! # Invariants
//!
//! - A draw names each pool once, in the order the host gave (the first pool without room is
//!   the one a refusal names), and all of them live in one store, so one transaction reserves
//!   in all of them.
//! - A draw's output cap is positive: a pool bounding tokens or money needs a finite output to
//!   hold, and a call's own cap, when smaller, wins.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::DynPoolStore;
use super::budget::PoolName;
use crate::guard::Terms;
use crate::limits::LimitsError;

/// How long a hold lives without renewal, by default: a dead holder's hold is charged whole
/// this long after its last renewal.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// The largest output a call drawn from pools is granted when neither the call nor the run's
/// budgets set a smaller one (4,096 tokens).
pub const DEFAULT_OUTPUT_CAP: u32 = crate::pooled::DEFAULT_OUTPUT_CAP;

/// The pools a scope draws from, in one store, and the terms of each hold: what
/// [`Scope::pools`](crate::Scope::pools) reports. A host names the pools when it builds the
/// scope ([`ScopeBuilder::pools`](crate::ScopeBuilder::pools)) and sets the terms there
/// ([`pool_output_cap`](crate::ScopeBuilder::pool_output_cap),
/// [`pool_lease`](crate::ScopeBuilder::pool_lease),
/// [`pool_holder`](crate::ScopeBuilder::pool_holder)).
///
#[cfg_attr(feature = "pools", doc = "```")]
#[cfg_attr(not(feature = "pools"), doc = "```ignore")]
/// use std::sync::Arc;
/// use std::time::Duration;
/// use loopbound::pool::MemoryPools;
/// use loopbound::Scope;
///
/// let store = Arc::new(MemoryPools::new());
/// let scope = Scope::builder()
///     .pools(store, ["tenant:acme", "user:7", "tenant:acme"])
///     .pool_lease(Duration::from_secs(10))
///     .pool_holder("worker-a")
///     .build()?;
/// let draw = scope.pools().expect("the scope draws from pools");
/// let names: Vec<&str> = draw.names().iter().map(|name| name.as_str()).collect();
/// assert_eq!(names, ["tenant:acme", "user:7"], "each pool once, in the order given");
/// assert_eq!((draw.lease_duration(), draw.holder_name()), (Duration::from_secs(10), "worker-a"));
/// # Ok::<(), loopbound::LimitsError>(())
/// ```
#[derive(Clone)]
pub struct PoolDraw {
    store: Arc<dyn DynPoolStore>,
    names: Vec<PoolName>,
    lease: Duration,
    output_cap: u32,
    holder: Arc<str>,
}

impl PoolDraw {
    /// Draws from `names` (each kept once, first occurrence first) in `store`, with the default
    /// lease and output cap, held by this process (`pid-<id>`).
    pub(crate) fn new(store: Arc<dyn DynPoolStore>, names: impl IntoIterator<Item = PoolName>) -> Self {
        Self {
            store,
            names: unique(names),
            lease: DEFAULT_LEASE,
            output_cap: DEFAULT_OUTPUT_CAP,
            holder: Arc::from(format!("pid-{}", std::process::id())),
        }
    }

    /// Each hold lives `lease` without renewal (renewed while its call is in flight); at least
    /// one millisecond.
    #[must_use]
    pub(crate) fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_millis(1));
        self
    }

    /// A call is granted at most `cap` output tokens (at least 1).
    #[must_use]
    pub(crate) fn output_cap(mut self, cap: u32) -> Self {
        self.output_cap = cap.max(1);
        self
    }

    /// Names the holder of this draw's holds (a worker's label, at most 128 bytes kept).
    #[must_use]
    pub(crate) fn holder(mut self, holder: &str) -> Self {
        let mut end = holder.len().min(128);
        while !holder.is_char_boundary(end) {
            end -= 1;
        }
        self.holder = Arc::from(&holder[..end]);
        self
    }

    /// This draw with `more` pools of the same store added (a child scope's own).
    #[must_use]
    pub(crate) fn with(mut self, more: &Self) -> Self {
        for name in &more.names {
            if !self.names.contains(name) {
                self.names.push(name.clone());
            }
        }
        self
    }

    /// Whether `other` draws from the same store.
    pub(crate) fn same_store(&self, other: &Self) -> bool {
        std::ptr::addr_eq(Arc::as_ptr(&self.store), Arc::as_ptr(&other.store))
    }

    /// The store.
    #[must_use]
    pub fn store(&self) -> &Arc<dyn DynPoolStore> {
        &self.store
    }

    /// The pools, in order.
    #[must_use]
    pub fn names(&self) -> &[PoolName] {
        &self.names
    }

    /// The lease of each hold.
    #[must_use]
    pub fn lease_duration(&self) -> Duration {
        self.lease
    }

    /// The largest output a call is granted.
    #[must_use]
    pub fn max_output(&self) -> u32 {
        self.output_cap
    }

    /// The holder's label.
    #[must_use]
    pub fn holder_name(&self) -> &str {
        &self.holder
    }
}

impl PoolDraw {
    /// What this draw asks of its pools, without the store: what a journaled run's definition
    /// keeps, so that a resume draws the same way
    /// ([`ScopeBuilder::pool_store`](crate::ScopeBuilder::pool_store)).
    #[must_use]
    pub fn terms(&self) -> PoolTerms {
        PoolTerms { names: self.names.clone(), lease: self.lease, output_cap: self.output_cap }
    }
}

/// The pools a draw takes from and the terms of its holds, without the store that keeps them
#[cfg_attr(
    feature = "journal",
    doc = " (a journaled run's [`RunDefinition`](crate::journal::RunDefinition) records these)."
)]
#[cfg_attr(not(feature = "journal"), doc = " (a journaled run's `journal::RunDefinition` records these).")]
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolTerms {
    names: Vec<PoolName>,
    lease: Duration,
    output_cap: u32,
}

impl PoolTerms {
    /// Terms from their parts, checked as a [`PoolDraw`]'s: the names kept once each, first
    /// occurrence first; the lease at least a millisecond, the output cap at least 1.
    #[must_use]
    pub fn new(names: impl IntoIterator<Item = PoolName>, lease: Duration, output_cap: u32) -> Self {
        Self {
            names: unique(names),
            lease: lease.max(Duration::from_millis(1)),
            output_cap: output_cap.max(1),
        }
    }

    /// The pools, in order.
    #[must_use]
    pub fn names(&self) -> &[PoolName] {
        &self.names
    }

    /// The lease of each hold.
    #[must_use]
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// The largest output a call is granted.
    #[must_use]
    pub fn output_cap(&self) -> u32 {
        self.output_cap
    }

    /// A draw on these terms from the pools of `store`, held by this process.
    #[must_use]
    pub(crate) fn draw_from(&self, store: Arc<dyn DynPoolStore>) -> PoolDraw {
        PoolDraw::new(store, self.names.iter().cloned()).lease(self.lease).output_cap(self.output_cap)
    }

    /// Whether a draw on `asked` takes no more than these terms allow: from every pool these
    /// name (more pools only narrow a call), with an output cap at most this one. The lease is
    /// the holder's own: it bounds how long a dead holder's hold waits, not what is spent.
    #[cfg(feature = "journal")]
    pub(crate) fn covers(&self, asked: &Self) -> bool {
        self.names.iter().all(|name| asked.names.contains(name)) && asked.output_cap <= self.output_cap
    }
}

/// What a scope builder was given for its pools, applied to its draw when it is built: the terms
/// of its holds, the pools of the run it resumes, and what the build refuses.
#[derive(Clone, Debug, Default)]
pub(crate) struct PoolSettings {
    pub(crate) output_cap: Option<u32>,
    pub(crate) lease: Option<Duration>,
    pub(crate) holder: Option<Arc<str>>,
    /// A pool was named with a name that is not one (sticky: calls add pools up).
    pub(crate) invalid_name: bool,
    /// A child named pools of another store than its parent's.
    pub(crate) foreign: bool,
    /// The pools a journaled run's definition draws from, for a resume: the build needs their
    /// store ([`pool_store`](crate::ScopeBuilder::pool_store)) or a draw of its own.
    pub(crate) resumed: Option<PoolTerms>,
}

impl PoolSettings {
    /// `draw` on these terms, each left as it was where unset.
    fn apply(&self, mut draw: PoolDraw) -> PoolDraw {
        if let Some(cap) = self.output_cap {
            draw = draw.output_cap(cap);
        }
        if let Some(lease) = self.lease {
            draw = draw.lease(lease);
        }
        if let Some(holder) = &self.holder {
            draw = draw.holder(holder);
        }
        draw
    }

    /// `terms` with these terms applied to its draw, once what the builder was given is
    /// checked, as the scope is built.
    ///
    /// # Errors
    ///
    /// [`LimitsError::InvalidPoolName`], [`LimitsError::PoolStores`],
    /// [`LimitsError::PoolStoreMissing`], [`LimitsError::PricedToolsWithPools`].
    pub(crate) fn settle(&self, mut terms: Terms) -> Result<Terms, LimitsError> {
        if self.invalid_name {
            return Err(LimitsError::InvalidPoolName);
        }
        if self.foreign {
            return Err(LimitsError::PoolStores);
        }
        terms.pools = terms.pools.take().map(|draw| self.apply(draw));
        if self.resumed.is_some() && terms.pools.is_none() {
            return Err(LimitsError::PoolStoreMissing);
        }
        if terms.pools.is_some() && terms.prices.as_ref().is_some_and(|prices| prices.charges_tools()) {
            return Err(LimitsError::PricedToolsWithPools);
        }
        Ok(terms)
    }
}

/// `names`, each kept once, first occurrence first.
fn unique(names: impl IntoIterator<Item = PoolName>) -> Vec<PoolName> {
    let mut unique: Vec<PoolName> = Vec::new();
    for name in names {
        if !unique.contains(&name) {
            unique.push(name);
        }
    }
    unique
}

impl fmt::Debug for PoolDraw {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolDraw")
            .field("pools", &self.names.len())
            .field("lease", &self.lease)
            .field("output_cap", &self.output_cap)
            .finish_non_exhaustive()
    }
}
