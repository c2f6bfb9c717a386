//! The spend of one scope: what is settled, what is reserved by calls in flight, and the two
//! steps every model call takes, reserve before it is sent and settle when its reply is in.
//!
//! Everything here is pure arithmetic on one scope's figures, called by the ledger inside its one
//! critical section, so loom, the properties and the unit tests drive it as they drive the rest
//! of the ledger. A tree of scopes checks a reservation against every account of the chain
//! ([`Account::room`]) before holding it in any ([`Account::hold`]).
//!
//! # Invariants
//!
//! - A reservation is held only if, for every budget that is set, settled + reserved + this
//!   reservation stays within it; its output is the smallest of the call's cap and what each
//!   budget leaves, and never below the minimum output.
//! - Settling removes the reservation and charges the provider's reported usage, or the whole
//!   reservation when there is no report; nothing is ever given back below what was reported.
//! - A report above its reservation is charged as reported and counted; a budget it crosses is
//!   reported, and the caller halts.
//! - Costs are priced at the dearest input price before the call (no token is assumed cached)
//!   and at the reported split after it.

use serde::Serialize;

use super::money::Price;
use crate::limits::{Limits, Micros};
use crate::transport::Usage;

/// Which budget refused: a token budget or the cost budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    Tokens,
    Cost,
}

/// Tokens and money held for one call in flight.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Reserved {
    /// Input tokens: the counter's estimate of the request.
    pub input_tokens: u64,
    /// Output tokens: the cap the request was sent with (`u64::MAX`: no cap was needed).
    pub output_tokens: u64,
    /// Money: the input at its dearest price and the output at its price.
    pub cost: Micros,
}

impl Reserved {
    fn add(&mut self, other: Self) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cost = self.cost.saturating_add(other.cost);
    }

    fn remove(&mut self, other: Self) {
        self.input_tokens = self.input_tokens.saturating_sub(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_sub(other.output_tokens);
        self.cost = self.cost.saturating_sub(other.cost);
    }

    /// The reservation as usage: what a call without a usage report is charged.
    fn as_usage(self) -> Usage {
        Usage::new(self.input_tokens, if self.output_tokens == u64::MAX { 0 } else { self.output_tokens })
    }
}

/// What a budget check found room for: the largest output, and which budget bound it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Room {
    pub(crate) output: u64,
    bound_by: Refusal,
}

/// One scope's spend.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Account {
    settled: Usage,
    settled_cost: Micros,
    reserved: Reserved,
    over: u32,
    /// The largest overshoot past an ancestor's budgets that a call of this scope caused:
    /// tokens, money (this attempt's; not persisted).
    above: (u64, Micros),
}

impl Account {
    /// This account as it would be with every hold in flight released: what a call could find
    /// once the calls in flight settle (they settle at most at what they hold).
    pub(crate) fn without_holds(&self) -> Self {
        Self { reserved: Reserved::default(), ..self.clone() }
    }

    /// The room this account leaves for a call of `input` tokens, its output capped at `cap`, at
    /// `price`. Nothing is held.
    pub(crate) fn room(
        &self,
        limits: &Limits,
        price: Option<&Price>,
        input: u64,
        cap: u64,
    ) -> Result<Room, Refusal> {
        let mut room = Room { output: cap, bound_by: Refusal::Tokens };
        let held_input = self.settled.input_tokens.saturating_add(self.reserved.input_tokens);
        if let Some(limit) = limits.input_tokens()
            && held_input.saturating_add(input) > limit
        {
            return Err(Refusal::Tokens);
        }
        if let Some(limit) = limits.output_tokens() {
            let held = self.settled.output_tokens.saturating_add(self.reserved.output_tokens);
            room.output = room.output.min(limit.saturating_sub(held));
        }
        if let Some(limit) = limits.total_tokens() {
            let held = self
                .settled
                .total_tokens()
                .saturating_add(self.reserved.input_tokens)
                .saturating_add(self.reserved.output_tokens);
            let left =
                limit.checked_sub(held).and_then(|left| left.checked_sub(input)).ok_or(Refusal::Tokens)?;
            room.output = room.output.min(left);
        }
        if let Some(limit) = limits.cost() {
            let price = price.ok_or(Refusal::Cost)?;
            let held = self.settled_cost.saturating_add(self.reserved.cost);
            let left =
                limit.0.checked_sub(held.0).and_then(|left| left.checked_sub(price.worst_input(input).0));
            let affordable = price.output_affordable(Micros(left.ok_or(Refusal::Cost)?));
            if affordable < room.output {
                room = Room { output: affordable, bound_by: Refusal::Cost };
            }
        }
        Ok(room)
    }

    /// Whether `room` leaves at least the limits' minimum output: the refusal otherwise.
    pub(crate) fn enough(limits: &Limits, room: Room) -> Result<u64, Refusal> {
        if room.output < u64::from(limits.min_output_tokens()) { Err(room.bound_by) } else { Ok(room.output) }
    }

    /// Holds a reservation of `input` and `output` tokens at `price`; returns it.
    pub(crate) fn hold(&mut self, price: Option<&Price>, input: u64, output: u64) -> Reserved {
        let cost = price.map_or(Micros::ZERO, |price| {
            let output_cost = if output == u64::MAX { Micros::ZERO } else { price.output(output) };
            price.worst_input(input).saturating_add(output_cost)
        });
        let reserved = Reserved { input_tokens: input, output_tokens: output, cost };
        self.reserved.add(reserved);
        reserved
    }

    /// Settles `reserved` with the provider's `reported` usage (or the whole reservation without
    /// one), at `price`; a call made without a reservation (no spend budget) is charged what it
    /// reported. Returns the budget the settled spend now exceeds, if any.
    pub(crate) fn settle(
        &mut self,
        limits: &Limits,
        price: Option<&Price>,
        reserved: Option<Reserved>,
        reported: Option<Usage>,
    ) -> Result<(), Refusal> {
        let Some(reserved) = reserved else {
            let usage = reported.unwrap_or_default();
            self.settled += usage;
            self.settled_cost =
                self.settled_cost.saturating_add(price.map_or(Micros::ZERO, |p| p.cost(&usage)));
            return self.exceeded(limits);
        };
        self.reserved.remove(reserved);
        let (charged, cost) = match reported {
            Some(usage) => {
                let cost = price.map_or(Micros::ZERO, |price| price.cost(&usage));
                let over = usage.input_tokens > reserved.input_tokens
                    || usage.output_tokens > reserved.output_tokens
                    || (price.is_some() && cost > reserved.cost);
                self.over += u32::from(over);
                (usage, cost)
            }
            None => (reserved.as_usage(), reserved.cost),
        };
        self.settled += charged;
        self.settled_cost = self.settled_cost.saturating_add(cost);
        self.exceeded(limits)
    }

    /// Charges a stream cut past its reservation: at least the reservation, and `output` tokens
    /// if the stream was counted beyond it. Counted as over its reservation.
    pub(crate) fn settle_cut(&mut self, price: Option<&Price>, reserved: Reserved, output: u64) {
        self.reserved.remove(reserved);
        let usage = Usage::new(reserved.input_tokens, output.max(reserved.as_usage().output_tokens));
        let cost = price.map_or(reserved.cost, |price| price.cost(&usage).max(reserved.cost));
        self.settled += usage;
        self.settled_cost = self.settled_cost.saturating_add(cost);
        self.over += 1;
    }

    /// Whether the cost budget has room for a priced tool's call.
    pub(crate) fn tool_room(&self, limits: &Limits, price: Micros) -> Result<(), Refusal> {
        match limits.cost() {
            Some(limit)
                if self.settled_cost.saturating_add(self.reserved.cost).saturating_add(price) > limit =>
            {
                Err(Refusal::Cost)
            }
            _ => Ok(()),
        }
    }

    /// Charges a priced tool's call (checked first with [`tool_room`](Self::tool_room)).
    pub(crate) fn charge_tool(&mut self, price: Micros) {
        self.settled_cost = self.settled_cost.saturating_add(price);
    }

    /// Charges whole every reservation still held (its call's process died: the provider may
    /// have billed it).
    #[cfg(feature = "journal")]
    pub(crate) fn charge_in_flight(&mut self) {
        let held = std::mem::take(&mut self.reserved);
        self.settled += held.as_usage();
        self.settled_cost = self.settled_cost.saturating_add(held.cost);
    }

    /// Adds `other`'s spend (a descendant's, restored from its journal), its reservations
    /// charged whole. Returns the budget the settled spend now exceeds, if any.
    #[cfg(feature = "journal")]
    pub(crate) fn absorb(&mut self, limits: &Limits, other: &Self) -> Result<(), Refusal> {
        let mut other = other.clone();
        other.charge_in_flight();
        self.settled += other.settled;
        self.settled_cost = self.settled_cost.saturating_add(other.settled_cost);
        self.over = self.over.saturating_add(other.over);
        self.exceeded(limits)
    }

    /// The budget the settled spend exceeds, if any.
    fn exceeded(&self, limits: &Limits) -> Result<(), Refusal> {
        let past = |limit: Option<u64>, spent: u64| limit.is_some_and(|limit| spent > limit);
        if past(limits.input_tokens(), self.settled.input_tokens)
            || past(limits.output_tokens(), self.settled.output_tokens)
            || past(limits.total_tokens(), self.settled.total_tokens())
        {
            return Err(Refusal::Tokens);
        }
        if past(limits.cost().map(|cost| cost.0), self.settled_cost.0) {
            return Err(Refusal::Cost);
        }
        Ok(())
    }

    /// What this account says of the run's spend under `limits`.
    pub(crate) fn report(&self, limits: &Limits) -> super::Spend {
        let excess = |limit: Option<u64>, spent: u64| limit.map_or(0, |limit| spent.saturating_sub(limit));
        let tokens = excess(limits.input_tokens(), self.settled.input_tokens)
            .max(excess(limits.output_tokens(), self.settled.output_tokens))
            .max(excess(limits.total_tokens(), self.settled.total_tokens()));
        let cost = Micros(excess(limits.cost().map(|cost| cost.0), self.settled_cost.0));
        super::Spend {
            settled: self.settled,
            cost: self.settled_cost,
            reserved: self.reserved,
            calls_over_reservation: self.over,
            overshoot_tokens: tokens,
            overshoot_cost: cost,
            ancestor_overshoot_tokens: self.above.0,
            ancestor_overshoot_cost: self.above.1,
        }
    }

    /// Notes that a call of this scope took an ancestor `tokens` and `cost` past its budgets
    /// (keeping the largest of each).
    pub(crate) fn crossed_above(&mut self, tokens: u64, cost: Micros) {
        self.above = (self.above.0.max(tokens), self.above.1.max(cost));
    }

    /// The persisted form: settled figures, in-flight reservations, calls over.
    #[cfg(feature = "journal")]
    pub(crate) fn parts(&self) -> (Usage, Micros, Reserved, u32) {
        (self.settled, self.settled_cost, self.reserved, self.over)
    }

    /// An account from its persisted form.
    #[cfg(feature = "journal")]
    pub(crate) fn from_parts(settled: Usage, cost: Micros, reserved: Reserved, over: u32) -> Self {
        Self { settled, settled_cost: cost, reserved, over, above: (0, Micros::ZERO) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits::default().with_total_tokens(1_000)
    }

    #[test]
    fn the_output_is_what_the_total_budget_leaves_after_the_input() {
        let mut account = Account::default();
        let room = account.room(&limits(), None, 300, u64::MAX).unwrap();
        assert_eq!(Account::enough(&limits(), room), Ok(700));
        let held = account.hold(None, 300, 700);
        assert_eq!(account.room(&limits(), None, 1, u64::MAX), Err(Refusal::Tokens), "all of it is held");
        assert_eq!(account.settle(&limits(), None, Some(held), Some(Usage::new(290, 100))), Ok(()));
        let room = account.room(&limits(), None, 300, 50).unwrap();
        assert_eq!(room.output, 50, "the call's own cap is smaller");
        assert_eq!(
            Account::enough(&limits(), account.room(&limits(), None, 600, 50).unwrap()),
            Err(Refusal::Tokens)
        );
    }

    #[test]
    fn a_report_above_the_reservation_is_charged_counted_and_crosses_the_budget() {
        let mut account = Account::default();
        let held = account.hold(None, 100, 200);
        assert_eq!(
            account.settle(&limits(), None, Some(held), Some(Usage::new(100, 5_000))),
            Err(Refusal::Tokens)
        );
        let spend = account.report(&limits());
        assert_eq!((spend.calls_over_reservation, spend.overshoot_tokens), (1, 4_100));
    }

    #[test]
    fn no_report_charges_the_whole_reservation() {
        let mut account = Account::default();
        let held = account.hold(None, 100, 200);
        assert_eq!(account.settle(&limits(), None, Some(held), None), Ok(()));
        assert_eq!(account.report(&limits()).settled, Usage::new(100, 200));
    }

    #[test]
    fn a_cost_budget_needs_a_price_and_bounds_the_output() {
        let limits = Limits::default().with_cost(Micros(1_000));
        let account = Account::default();
        assert_eq!(account.room(&limits, None, 1, u64::MAX), Err(Refusal::Cost));
        let price = Price::per_million(Micros(1_000_000), Micros(2_000_000));
        // 400 input tokens cost 400; 600 left buys 300 output tokens.
        let room = account.room(&limits, Some(&price), 400, u64::MAX).unwrap();
        assert_eq!(room, Room { output: 300, bound_by: Refusal::Cost });
        assert_eq!(account.room(&limits, Some(&price), 1_001, u64::MAX), Err(Refusal::Cost));
    }
}
