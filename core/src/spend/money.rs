//! Money in integer micro-units, and what a model's tokens and a tool's calls cost.
//!
//! # Invariants
//!
//! - No floating point: amounts are whole micro-units of one currency (a host picks which), and
//!   prices are micro-units per million tokens.
//! - Every cost is rounded up, never down, and saturates instead of wrapping: a computed cost
//!   is never below what the provider would bill at these prices.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use crate::limits::Micros;
use crate::transport::Usage;

/// What one model's tokens cost, in micro-units per million tokens.
///
/// ```
/// use loopbound::spend::{Micros, Price};
/// use loopbound::transport::Usage;
///
/// // 0.15 per million input tokens, 0.075 cached, 0.60 output.
/// let price = Price::per_million(Micros(150_000), Micros(600_000)).with_cached_input(Micros(75_000));
/// let usage = Usage::new(10_000, 1_000).with_cached_input(4_000);
/// // 6,000 uncached × 0.15 + 4,000 cached × 0.075 + 1,000 output × 0.60, per million, rounded up.
/// assert_eq!(price.cost(&usage), Micros(900 + 300 + 600));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Price {
    input: u64,
    cached_input: u64,
    cache_write: u64,
    output: u64,
}

impl Price {
    /// `input` and `output` micro-units per million tokens; cached and cache-written input cost
    /// what input costs until set otherwise.
    #[must_use]
    pub const fn per_million(input: Micros, output: Micros) -> Self {
        Self { input: input.0, cached_input: input.0, cache_write: input.0, output: output.0 }
    }

    /// This price, with input read from the provider's cache at `cached` per million.
    #[must_use]
    pub const fn with_cached_input(mut self, cached: Micros) -> Self {
        self.cached_input = cached.0;
        self
    }

    /// This price, with input written to the provider's cache at `written` per million.
    #[must_use]
    pub const fn with_cache_write(mut self, written: Micros) -> Self {
        self.cache_write = written.0;
        self
    }

    /// Its parts, per million tokens: plain input, cached input, cache writes, output.
    #[cfg(feature = "journal")]
    pub(crate) const fn parts(&self) -> [u64; 4] {
        [self.input, self.cached_input, self.cache_write, self.output]
    }

    /// The price of `parts` (as [`parts`](Self::parts) lists them).
    #[cfg(feature = "journal")]
    pub(crate) const fn from_parts([input, cached_input, cache_write, output]: [u64; 4]) -> Self {
        Self { input, cached_input, cache_write, output }
    }

    /// What `usage` costs, rounded up to a whole micro-unit.
    #[must_use]
    pub fn cost(&self, usage: &Usage) -> Micros {
        let cached = usage.cached_input_tokens.min(usage.input_tokens);
        let written = usage.cache_write_tokens.min(usage.input_tokens - cached);
        let plain = usage.input_tokens - cached - written;
        let part = |tokens: u64, price: u64| u128::from(tokens) * u128::from(price);
        let millionths = part(plain, self.input)
            .saturating_add(part(cached, self.cached_input))
            .saturating_add(part(written, self.cache_write))
            .saturating_add(part(usage.output_tokens, self.output));
        Micros(u64::try_from(millionths.div_ceil(1_000_000)).unwrap_or(u64::MAX))
    }

    /// The most `input` tokens not yet read can cost: each at the dearest input price.
    #[must_use]
    pub fn worst_input(&self, input: u64) -> Micros {
        let dearest = self.input.max(self.cached_input).max(self.cache_write);
        Micros(per_million(input, dearest))
    }

    /// What `tokens` cost at the dearest of this price's rates.
    #[must_use]
    pub fn dearest(&self, tokens: u64) -> Micros {
        let dearest = self.input.max(self.cached_input).max(self.cache_write).max(self.output);
        Micros(per_million(tokens, dearest))
    }

    /// What `output` tokens cost.
    #[must_use]
    pub fn output(&self, output: u64) -> Micros {
        Micros(per_million(output, self.output))
    }

    /// How many output tokens `money` pays for, rounded down (`u64::MAX` if output is free).
    #[must_use]
    pub fn output_affordable(&self, money: Micros) -> u64 {
        if self.output == 0 {
            return u64::MAX;
        }
        let tokens = u128::from(money.0) * 1_000_000 / u128::from(self.output);
        u64::try_from(tokens).unwrap_or(u64::MAX)
    }
}

/// `tokens` at `price` micro-units per million, rounded up.
fn per_million(tokens: u64, price: u64) -> u64 {
    let millionths = u128::from(tokens) * u128::from(price);
    u64::try_from(millionths.div_ceil(1_000_000)).unwrap_or(u64::MAX)
}

/// The host's price table: each model's [`Price`] by model id, and a fixed price per admitted
/// call of the tools that cost money. Built once, shared by every request
/// ([`ScopeBuilder::prices`](crate::ScopeBuilder::prices)).
///
/// Under a cost budget nothing is guessed: a model or a tool without a price is a configuration
/// error reported before anything runs, unless the host named a price for every other tool
/// ([`other_tools`](Self::other_tools), often zero).
///
/// ```
/// use loopbound::spend::{Micros, Price, Prices};
///
/// let prices = Prices::new()
///     .model("gpt-4o-mini", Price::per_million(Micros(150_000), Micros(600_000)))
///     .tool("refund_order", Micros(20_000))
///     .other_tools(Micros::ZERO);
/// assert_eq!(prices.tool_price("refund_order"), Some(Micros(20_000)));
/// assert_eq!(prices.tool_price("read_ticket"), Some(Micros::ZERO));
/// assert!(prices.model_price("gpt-5").is_none());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Prices {
    models: BTreeMap<Box<str>, Price>,
    tools: BTreeMap<Box<str>, Micros>,
    other_tools: Option<Micros>,
}

impl Prices {
    /// An empty table.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// This table with `model`'s price.
    #[must_use]
    pub fn model(mut self, model: impl Into<String>, price: Price) -> Self {
        self.models.insert(model.into().into_boxed_str(), price);
        self
    }

    /// This table with the price of one admitted call of `tool`.
    #[must_use]
    pub fn tool(mut self, tool: impl Into<String>, price: Micros) -> Self {
        self.tools.insert(tool.into().into_boxed_str(), price);
        self
    }

    /// This table with `price` for a call of any tool it does not name.
    #[must_use]
    pub fn other_tools(mut self, price: Micros) -> Self {
        self.other_tools = Some(price);
        self
    }

    /// The price of `model`'s tokens, if the table has one.
    #[must_use]
    pub fn model_price(&self, model: &str) -> Option<Price> {
        self.models.get(model).copied()
    }

    /// The price of one call of `tool`, if the table names it or prices every other tool.
    #[must_use]
    pub fn tool_price(&self, tool: &str) -> Option<Micros> {
        self.tools.get(tool).copied().or(self.other_tools)
    }

    /// Every model's price, by model id.
    #[cfg(feature = "journal")]
    pub(crate) fn models(&self) -> impl Iterator<Item = (&str, Price)> {
        self.models.iter().map(|(model, price)| (&**model, *price))
    }

    /// Every named tool's price per call, by tool name.
    #[cfg(feature = "journal")]
    pub(crate) fn tools(&self) -> impl Iterator<Item = (&str, Micros)> {
        self.tools.iter().map(|(tool, price)| (&**tool, *price))
    }

    /// The price of a call of a tool the table does not name, if it sets one.
    #[cfg(feature = "journal")]
    pub(crate) fn others(&self) -> Option<Micros> {
        self.other_tools
    }

    /// Whether this table charges at least what `floor` charges for everything `floor` prices:
    /// each of its models at least as dear in every part and no model `floor` lacks, each tool
    /// `floor` prices (by name, or as one of its other tools) at least as dear. A table that
    /// charges less lets a cost budget buy more.
    #[cfg(feature = "journal")]
    pub(crate) fn charges_at_least(&self, floor: &Self) -> bool {
        let models = self.models.keys().all(|model| floor.models.contains_key(model))
            && floor.models.iter().all(|(model, price)| {
                self.models.get(model).is_some_and(|mine| {
                    mine.parts().iter().zip(price.parts()).all(|(mine, floor)| *mine >= floor)
                })
            });
        let at_least = |mine: Option<Micros>, theirs: Option<Micros>| match (mine, theirs) {
            (_, None) => true,
            (Some(mine), Some(theirs)) => mine >= theirs,
            (None, Some(_)) => false,
        };
        let named = self.tools.keys().chain(floor.tools.keys());
        models
            && named.into_iter().all(|tool| at_least(self.tool_price(tool), floor.tool_price(tool)))
            && at_least(self.other_tools, floor.other_tools)
    }

    /// Whether some tool's call costs money.
    #[cfg(feature = "pools")]
    pub(crate) fn charges_tools(&self) -> bool {
        self.tools.values().any(|price| price.0 > 0) || self.other_tools.is_some_and(|price| price.0 > 0)
    }

    /// This table, shared.
    #[must_use]
    pub fn shared(self) -> Arc<Self> {
        Arc::new(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_round_up_and_never_wrap() {
        let price = Price::per_million(Micros(1), Micros(3));
        assert_eq!(price.cost(&Usage::new(1, 0)), Micros(1), "a millionth rounds up to one");
        assert_eq!(price.cost(&Usage::new(0, 0)), Micros::ZERO);
        let dear = Price::per_million(Micros(u64::MAX), Micros(u64::MAX));
        assert_eq!(dear.cost(&Usage::new(u64::MAX, u64::MAX)), Micros(u64::MAX));
        assert_eq!(dear.worst_input(u64::MAX), Micros(u64::MAX));
    }

    #[test]
    fn cached_and_written_input_are_priced_apart_and_never_counted_twice() {
        let price = Price::per_million(Micros(1_000_000), Micros(0))
            .with_cached_input(Micros(100_000))
            .with_cache_write(Micros(1_250_000));
        // 10 read from the cache, 20 written to it, 70 plain.
        let usage = Usage::new(100, 0).with_cached_input(10).with_cache_write(20);
        assert_eq!(price.cost(&usage), Micros(70 + 1 + 25));
        // A report that claims more cached tokens than input is read as all cached.
        assert_eq!(price.cost(&Usage::new(10, 0).with_cached_input(50).with_cache_write(50)), Micros(1));
        assert_eq!(price.worst_input(100), Micros(125), "the dearest input price");
    }

    #[test]
    fn affordable_output_rounds_down() {
        let price = Price::per_million(Micros(0), Micros(600_000));
        assert_eq!(price.output_affordable(Micros(6)), 10);
        assert_eq!(price.output_affordable(Micros(5)), 8);
        assert_eq!(Price::per_million(Micros(1), Micros(0)).output_affordable(Micros(0)), u64::MAX);
    }
}
