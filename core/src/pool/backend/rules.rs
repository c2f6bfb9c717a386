//! The arithmetic every pool store applies, the same in memory, in SQLite and in PostgreSQL:
//! whether a call fits its pools and what it holds, and what a settlement charges.
//!
//! A store reads the figures of the pools a call asks for (each pool's current window, after
//! charging the holds whose lease expired), hands them to [`fit`], and writes the hold it
//! returns into every one of them in the same transaction, or nothing.
//!
//! # Invariants
//!
//! - A call fits only if, in every pool it asks for and for every bound the pool sets,
//!   settled + reserved + what the call holds stays within the bound: one model call, its input
//!   and the output it is granted (tokens), their cost at the input's dearest price (money).
//! - The output granted is the smallest of the call's cap and what each pool leaves, and never
//!   below the call's minimum output; one output for all the pools, so each holds the same.
//! - A call under a pool's cost bound without a price does not fit (fail closed).
//! - A settlement charges what the provider reported; after its hold expired (charged whole),
//!   only what the report adds beyond the hold: nothing is counted twice and nothing refunded.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::pool::{Amount, PoolBudget, PoolName};
use crate::spend::{Micros, Price};

/// What one model call asks of the pools it draws from.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolAsk {
    /// The pools, each once.
    pub pools: Vec<PoolName>,
    /// The request's estimated input tokens (an upper bound with the default counter).
    pub input: u64,
    /// The largest output the call may be granted (`u64::MAX`: no cap of its own).
    pub cap: u64,
    /// The model's price (needed under a cost bound).
    pub price: Option<Price>,
    /// The smallest output worth sending the call for.
    pub min_output: u64,
    /// How long the hold lives unless renewed: a hold whose holder died is charged whole when
    /// it expires.
    pub lease: Duration,
    /// Who holds it (a worker's label, kept for a host's inspection only).
    pub holder: Arc<str>,
}

impl PoolAsk {
    /// A call whose request counts `input` tokens, asking `pools`: no cap of its own, no price,
    /// worth sending for one output token, held for [`DEFAULT_LEASE`](crate::pool::DEFAULT_LEASE) by
    /// no one in particular; the setters below say otherwise.
    #[must_use]
    pub fn new(pools: Vec<PoolName>, input: u64) -> Self {
        Self {
            pools,
            input,
            cap: u64::MAX,
            price: None,
            min_output: 1,
            lease: crate::pool::DEFAULT_LEASE,
            holder: Arc::from(""),
        }
    }

    /// The largest output the call may be granted.
    #[must_use]
    pub const fn cap(mut self, cap: u64) -> Self {
        self.cap = cap;
        self
    }

    /// The model's price (needed under a cost bound).
    #[must_use]
    pub const fn price(mut self, price: Option<Price>) -> Self {
        self.price = price;
        self
    }

    /// The smallest output worth sending the call for.
    #[must_use]
    pub const fn min_output(mut self, min_output: u64) -> Self {
        self.min_output = min_output;
        self
    }

    /// How long the hold lives unless renewed.
    #[must_use]
    pub const fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Who holds it.
    #[must_use]
    pub fn holder(mut self, holder: impl Into<Arc<str>>) -> Self {
        self.holder = holder.into();
        self
    }
}

/// One pool's figures in one window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct WindowTotals {
    /// Charged by settlements and by expired holds.
    pub settled: Amount,
    /// Held by calls in flight.
    pub reserved: Amount,
}

impl WindowTotals {
    /// A window's figures: `settled` charged, `reserved` held.
    #[must_use]
    pub const fn new(settled: Amount, reserved: Amount) -> Self {
        Self { settled, reserved }
    }

    /// Settled and reserved together.
    #[must_use]
    pub const fn used(&self) -> Amount {
        self.settled.plus(self.reserved)
    }
}

/// Which bound of a pool refused a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[non_exhaustive]
pub enum PoolLimit {
    /// Model calls.
    Calls,
    /// Tokens.
    Tokens,
    /// Money (or no price under a cost bound).
    Cost,
}

impl PoolLimit {
    /// The bound's name: `calls`, `tokens` or `cost`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Calls => "calls",
            Self::Tokens => "tokens",
            Self::Cost => "cost",
        }
    }
}

/// A pool that had no room for a call: nothing was held anywhere.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolRefusal {
    /// The pool.
    pub pool: PoolName,
    /// The bound.
    pub limit: PoolLimit,
    /// Whether the call would fit once the holds in flight settled (at most at what they hold):
    /// the pool is crowded, not spent, and a run waits for room instead of halting.
    pub crowded: bool,
}

impl PoolRefusal {
    /// A refusal by `pool`'s `limit`, of a call that would not fit even with no hold in flight.
    #[must_use]
    pub const fn new(pool: PoolName, limit: PoolLimit) -> Self {
        Self { pool, limit, crowded: false }
    }

    /// The same refusal, of a call that would fit once the holds in flight settled.
    #[must_use]
    pub const fn crowded(mut self) -> Self {
        self.crowded = true;
        self
    }
}

/// What a call that fits holds in each of its pools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Fit {
    /// The output granted (`u64::MAX`: the call's cap was none and no pool bounds spend).
    pub output: u64,
    /// The amount held in each pool.
    pub amount: Amount,
}

/// Whether a call asking `ask` fits every one of `pools` (each pool's budget and its current
/// window's figures, after charging the holds whose lease expired), and what it holds if it
/// does.
///
/// Pass the pools in the ask's order (`ask.pools`): the refusal names the first pool of that
/// order whose bound refuses, as the contract says a refusal does.
///
/// # Errors
///
/// The first pool, in `pools`' order, whose bound refuses the call; [`crowded`](PoolRefusal::crowded)
/// when the call would fit every pool once their holds in flight settled.
pub fn fit(ask: &PoolAsk, pools: &[(&PoolName, &PoolBudget, &WindowTotals)]) -> Result<Fit, PoolRefusal> {
    fit_lines(ask, pools).map_err(|refusal| {
        let settled: Vec<WindowTotals> =
            pools.iter().map(|(_, _, line)| WindowTotals { reserved: Amount::ZERO, ..**line }).collect();
        let released: Vec<_> =
            pools.iter().zip(&settled).map(|((name, budget, _), line)| (*name, *budget, line)).collect();
        if fit_lines(ask, &released).is_ok() { refusal.crowded() } else { refusal }
    })
}

/// [`fit`] on the figures as they are.
fn fit_lines(ask: &PoolAsk, pools: &[(&PoolName, &PoolBudget, &WindowTotals)]) -> Result<Fit, PoolRefusal> {
    let mut output = ask.cap;
    // The pool whose bound set the output so far, and which bound.
    let mut tightest: Option<(&PoolName, PoolLimit)> = None;
    for (name, budget, line) in pools {
        let refuse = |limit| PoolRefusal::new((*name).clone(), limit);
        let used = line.used();
        if let Some(calls) = budget.calls()
            && used.calls.saturating_add(1) > calls
        {
            return Err(refuse(PoolLimit::Calls));
        }
        if let Some(tokens) = budget.tokens() {
            let left = tokens
                .checked_sub(used.tokens)
                .and_then(|left| left.checked_sub(ask.input))
                .ok_or_else(|| refuse(PoolLimit::Tokens))?;
            if left < output {
                output = left;
                tightest = Some((name, PoolLimit::Tokens));
            }
        }
        if let Some(cost) = budget.cost() {
            let price = ask.price.as_ref().ok_or_else(|| refuse(PoolLimit::Cost))?;
            let left = cost
                .0
                .checked_sub(used.cost.0)
                .and_then(|left| left.checked_sub(price.worst_input(ask.input).0))
                .ok_or_else(|| refuse(PoolLimit::Cost))?;
            let affordable = price.output_affordable(Micros(left));
            if affordable < output {
                output = affordable;
                tightest = Some((name, PoolLimit::Cost));
            }
        }
    }
    // A pool refuses only when its own bound took the output below the minimum (a call's own
    // cap below it is the run's business).
    if output < ask.min_output
        && let Some((pool, limit)) = tightest
    {
        return Err(PoolRefusal::new(pool.clone(), limit));
    }
    Ok(Fit { output, amount: held(ask.input, output, ask.price.as_ref()) })
}

/// What a call of `input` tokens with `output` tokens granted holds, at `price`: one call, the
/// tokens, and their cost at the input's dearest price.
///
/// A store does not need it: [`fit`] returns what a call holds ([`Fit::amount`]), and the store
/// keeps that amount with the hold. The runtime uses it to charge a call that ended without a
/// usage report (or was cut short) the hold it would have made.
#[must_use]
pub fn held(input: u64, output: u64, price: Option<&Price>) -> Amount {
    let output = if output == u64::MAX { 0 } else { output };
    let cost =
        price.map_or(Micros::ZERO, |price| price.worst_input(input).saturating_add(price.output(output)));
    Amount { calls: 1, tokens: input.saturating_add(output), cost }
}

/// What a settlement adds to a window's settled figures: `charge` for an open hold (its
/// `reserved` amount leaves the window's reserved figures), and for a hold that expired (and was
/// charged `reserved` whole then) only what `charge` adds beyond it.
///
/// The window is the one of each pool the hold was made in (as for its expiry), not the one
/// current when the settlement arrives.
#[must_use]
pub fn settlement(reserved: Amount, charge: Amount, expired: bool) -> Amount {
    if expired { charge.minus(reserved) } else { charge }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::budget::Window;

    fn ask(input: u64, cap: u64) -> PoolAsk {
        PoolAsk {
            pools: Vec::new(),
            input,
            cap,
            price: None,
            min_output: 16,
            lease: Duration::from_secs(30),
            holder: Arc::from("test"),
        }
    }

    #[test]
    fn an_ask_built_with_defaults_has_no_cap_no_price_and_the_default_lease() {
        let ask = PoolAsk::new(vec![name("tenant:acme")], 120);
        assert_eq!((ask.input, ask.cap, ask.price, ask.min_output), (120, u64::MAX, None, 1));
        assert_eq!((ask.lease, &*ask.holder), (crate::pool::DEFAULT_LEASE, ""));
        let ask = ask.cap(300).min_output(16).lease(Duration::from_secs(5)).holder("worker-1");
        assert_eq!(
            (ask.cap, ask.min_output, ask.lease, &*ask.holder),
            (300, 16, Duration::from_secs(5), "worker-1")
        );
        let line = WindowTotals::new(Amount::new(1, 2, Micros(3)), Amount::new(4, 5, Micros(6)));
        assert_eq!(line.used(), Amount::new(5, 7, Micros(9)));
    }

    fn name(text: &str) -> PoolName {
        PoolName::new(text).unwrap()
    }

    #[test]
    fn the_output_is_what_the_tightest_pool_leaves() {
        let (a, b) = (name("a"), name("b"));
        let wide = PoolBudget::default().with_tokens(10_000);
        let narrow = PoolBudget::default().with_tokens(1_000).per(Window::Day);
        let line = WindowTotals { settled: Amount { tokens: 200, ..Amount::ZERO }, reserved: Amount::ZERO };
        let fit = fit(&ask(300, 4_096), &[(&a, &wide, &line), (&b, &narrow, &line)]).unwrap();
        assert_eq!(fit.output, 500);
        assert_eq!(fit.amount, Amount { calls: 1, tokens: 800, cost: Micros::ZERO });
    }

    #[test]
    fn a_pool_that_leaves_less_than_the_minimum_refuses_by_name() {
        let (a, b) = (name("a"), name("b"));
        let wide = PoolBudget::default().with_tokens(10_000);
        let narrow = PoolBudget::default().with_tokens(1_000);
        let line = WindowTotals { settled: Amount { tokens: 690, ..Amount::ZERO }, reserved: Amount::ZERO };
        let refused = fit(&ask(300, 4_096), &[(&a, &wide, &line), (&b, &narrow, &line)]);
        assert_eq!(refused, Err(PoolRefusal::new(b.clone(), PoolLimit::Tokens)));
        let calls = PoolBudget::default().with_calls(3);
        let full = WindowTotals {
            settled: Amount { calls: 2, ..Amount::ZERO },
            reserved: Amount { calls: 1, ..Amount::ZERO },
        };
        // The third call is in flight: the pool is crowded, not spent.
        assert_eq!(
            super::fit(&ask(1, 100), &[(&a, &calls, &full)]),
            Err(PoolRefusal::new(a.clone(), PoolLimit::Calls).crowded())
        );
        let spent = WindowTotals { settled: Amount { calls: 3, ..Amount::ZERO }, reserved: Amount::ZERO };
        assert_eq!(
            super::fit(&ask(1, 100), &[(&a, &calls, &spent)]),
            Err(PoolRefusal::new(a, PoolLimit::Calls))
        );
    }

    #[test]
    fn a_refusal_that_holds_in_flight_alone_cause_is_crowded_in_every_pool_it_asks() {
        let (a, b) = (name("a"), name("b"));
        let budget = PoolBudget::default().with_tokens(5_000);
        let idle = WindowTotals { settled: Amount { tokens: 500, ..Amount::ZERO }, reserved: Amount::ZERO };
        let busy = WindowTotals {
            settled: Amount { tokens: 500, ..Amount::ZERO },
            reserved: Amount { calls: 1, tokens: 4_396, ..Amount::ZERO },
        };
        // 4,400 asked (300 in, 4,096 out): 104 left beside the hold, 4,500 once it settles.
        let refused = fit(&ask(300, 4_096), &[(&a, &budget, &idle), (&b, &budget, &busy)]);
        assert_eq!(refused, Err(PoolRefusal::new(b.clone(), PoolLimit::Tokens).crowded()));
        // Spent: even with no hold in flight, 300 in and 16 out do not fit in 200.
        let spent = WindowTotals { settled: Amount { tokens: 4_800, ..Amount::ZERO }, ..busy };
        let refused = fit(&ask(300, 4_096), &[(&a, &budget, &idle), (&b, &budget, &spent)]);
        assert_eq!(refused, Err(PoolRefusal::new(b, PoolLimit::Tokens)));
    }

    #[test]
    fn a_cost_bound_needs_a_price_and_prices_the_output() {
        let a = name("a");
        let budget = PoolBudget::default().with_cost(Micros(1_000));
        let line = WindowTotals::default();
        assert_eq!(
            fit(&ask(10, 100), &[(&a, &budget, &line)]),
            Err(PoolRefusal::new(a.clone(), PoolLimit::Cost))
        );
        let mut priced = ask(400, u64::MAX);
        priced.price = Some(Price::per_million(Micros(1_000_000), Micros(2_000_000)));
        // 400 input tokens cost 400; 600 left buys 300 output tokens.
        let fit = fit(&priced, &[(&a, &budget, &line)]).unwrap();
        assert_eq!((fit.output, fit.amount.cost, fit.amount.tokens), (300, Micros(1_000), 700));
    }

    #[test]
    fn a_late_settlement_adds_only_what_it_reports_beyond_the_hold() {
        let hold = Amount { calls: 1, tokens: 800, cost: Micros(50) };
        let report = Amount { calls: 1, tokens: 900, cost: Micros(40) };
        assert_eq!(settlement(hold, report, false), report);
        assert_eq!(settlement(hold, report, true), Amount { calls: 0, tokens: 100, cost: Micros::ZERO });
    }
}
