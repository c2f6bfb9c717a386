//! What a host widens a run's definition by ([`widen`](super::widen)): capabilities to grant
//! too, and, each only when given, new limits, per-tool limits set or dropped, a new price
//! table, the shared pools dropped.
//!
//! # Invariants
//!
//! - A widening names only valid capabilities and tool names; [`widen`](super::widen) refuses
//!   one that does not, and writes nothing.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::limits::Limits;
use crate::spend::Prices;

/// What to widen a run's definition by: built up, then handed to [`widen`](super::widen).
///
/// ```
/// use loopbound::journal::Widening;
///
/// // Grant the refund, allow a second attempt of it, lift the limit on the e-mails.
/// let widening = Widening::new().grant("payments.refund").tool_limit("refund", 2).drop_tool_limit("send_receipt");
/// # let _ = widening;
/// ```
#[derive(Clone, Debug, Default)]
#[must_use]
pub struct Widening {
    pub(crate) grants: Vec<String>,
    pub(crate) limits: Option<Limits>,
    /// A tool's new per-tool limit, or `None` to drop it.
    pub(crate) tool_limits: BTreeMap<String, Option<u32>>,
    pub(crate) prices: Option<Arc<Prices>>,
    /// Whether the run stops drawing from the pools its definition names.
    #[cfg(feature = "pools")]
    pub(crate) drop_pools: bool,
}

impl Widening {
    /// Widens by nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Grants `capability` too.
    pub fn grant(mut self, capability: impl Into<String>) -> Self {
        self.grants.push(capability.into());
        self
    }

    /// Grants every capability of `capabilities` too.
    pub fn grants<I, C>(mut self, capabilities: I) -> Self
    where
        I: IntoIterator<Item = C>,
        C: Into<String>,
    {
        self.grants.extend(capabilities.into_iter().map(Into::into));
        self
    }

    /// Replaces the run's limits with `limits`, per-tool limits included: to keep the run's
    /// own, start from them (`definition.limits().clone().with_model_calls(12)`). A
    /// [`tool_limit`](Self::tool_limit) or [`drop_tool_limit`](Self::drop_tool_limit) applies
    /// after, to what this gives.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = Some(limits);
        self
    }

    /// Sets the per-tool limit of `tool` to `limit` (raised, lowered or new).
    pub fn tool_limit(mut self, tool: impl Into<String>, limit: u32) -> Self {
        self.tool_limits.insert(tool.into(), Some(limit));
        self
    }

    /// Drops the per-tool limit of `tool`: its calls are then bounded by the run's limits only.
    pub fn drop_tool_limit(mut self, tool: impl Into<String>) -> Self {
        self.tool_limits.insert(tool.into(), None);
        self
    }

    /// Replaces the run's price table with `prices`.
    pub fn prices(mut self, prices: Arc<Prices>) -> Self {
        self.prices = Some(prices);
        self
    }

    /// Drops the shared pools the run draws from: its next attempts may run without a draw
    /// (or with one from other pools), bounded by the run's own limits only.
    #[cfg(feature = "pools")]
    pub fn drop_pools(mut self) -> Self {
        self.drop_pools = true;
        self
    }
}
