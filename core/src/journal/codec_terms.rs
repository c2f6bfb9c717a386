//! The stored form of a run definition's price table and pools, inside the definition's JSON
//! text (no column of its own: a definition stored before them reads as having none). Its
//! per-tool limits are a plain map there, read back into its [`Limits`](crate::Limits), whose
//! validation refuses a name no tool may take.
//!
//! # Invariants
//!
//! - Decoding never panics: a tool name that is not a valid tool name, a pool name that is not
//!   a valid pool name, a pool named twice, a zero lease or output cap are refused, so a stored
//!   definition rebuilds only scopes that would build.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[cfg(feature = "pools")]
use crate::pool::{PoolName, PoolTerms};
use crate::spend::{Micros, Price, Prices};

/// A price table as stored: each model's parts per million tokens (plain input, cached input,
/// cache writes, output), each named tool's price per call, and the other tools' price.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StoredPrices {
    models: BTreeMap<String, [u64; 4]>,
    tools: BTreeMap<String, u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    other_tools: Option<u64>,
}

pub(crate) fn encode_prices(prices: &Prices) -> StoredPrices {
    StoredPrices {
        models: prices.models().map(|(model, price)| (model.to_owned(), price.parts())).collect(),
        tools: prices.tools().map(|(tool, price)| (tool.to_owned(), price.0)).collect(),
        other_tools: prices.others().map(|price| price.0),
    }
}

/// The table `stored` holds, or `None` if a tool's name is not a valid tool name.
pub(crate) fn decode_prices(stored: StoredPrices) -> Option<Prices> {
    if stored.tools.keys().any(|tool| crate::tool::check_name(tool).is_err()) {
        return None;
    }
    let mut prices = Prices::new();
    for (model, parts) in stored.models {
        prices = prices.model(model, Price::from_parts(parts));
    }
    for (tool, price) in stored.tools {
        prices = prices.tool(tool, Micros(price));
    }
    if let Some(price) = stored.other_tools {
        prices = prices.other_tools(Micros(price));
    }
    Some(prices)
}

/// The pools a run draws from as stored: their names in order, each hold's lease in
/// microseconds, the output cap.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StoredPools {
    names: Vec<String>,
    lease_micros: u64,
    output_cap: u32,
}

#[cfg(feature = "pools")]
pub(crate) fn encode_pools(terms: &PoolTerms) -> StoredPools {
    StoredPools {
        names: terms.names().iter().map(|name| name.as_str().to_owned()).collect(),
        lease_micros: u64::try_from(terms.lease().as_micros()).unwrap_or(u64::MAX),
        output_cap: terms.output_cap(),
    }
}

/// The terms `stored` holds, or `None` if they are not terms a draw could have.
#[cfg(feature = "pools")]
pub(crate) fn decode_pools(stored: &StoredPools) -> Option<PoolTerms> {
    let names: Vec<PoolName> = stored.names.iter().map(PoolName::new).collect::<Result<_, _>>().ok()?;
    let lease = std::time::Duration::from_micros(stored.lease_micros);
    let terms = PoolTerms::new(names, lease, stored.output_cap);
    let intact = terms.names().len() == stored.names.len()
        && !stored.names.is_empty()
        && terms.lease() == lease
        && terms.output_cap() == stored.output_cap;
    intact.then_some(terms)
}
