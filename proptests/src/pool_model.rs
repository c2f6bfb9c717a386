//! A reference model of shared pools, written from the contract, for the property in
//! `tests/pool.rs`: holds are a list, a window's settled figures are the sum of a log of
//! charges, and nothing is kept as a running total.
//!
//! The price is fixed (1 micro-unit per input token, 2 per output token), so every cost is an
//! exact product and the model needs none of the library's rounding.
//!
//! # Invariants
//!
//! - The model never calls the library's arithmetic: fit, expiry and settlement are re-derived
//!   here from the contract's words.

use loopbound::pool::Window;
use loopbound::pool::backend::lease_millis;
use std::time::Duration;

/// Micro-units per input token.
pub const INPUT_PRICE: u64 = 1;
/// Micro-units per output token.
pub const OUTPUT_PRICE: u64 = 2;

/// One pool's bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Model calls.
    pub calls: Option<u64>,
    /// Tokens.
    pub tokens: Option<u64>,
    /// Money.
    pub cost: Option<u64>,
    /// The window.
    pub window: Window,
}

/// Calls, tokens, money.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Figures {
    /// Calls.
    pub calls: u64,
    /// Tokens.
    pub tokens: u64,
    /// Money.
    pub cost: u64,
}

/// A hold's life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Life {
    /// Held, its lease running.
    Open,
    /// Its lease ran out: charged whole, still to be settled late.
    Expired,
    /// Settled or released: gone from the store.
    Gone,
}

/// One hold.
#[derive(Clone, Debug)]
pub struct Hold {
    /// The store's id for it.
    pub id: u64,
    /// Each pool (index) and the start of its window when the hold was made.
    pub parts: Vec<(usize, u64)>,
    /// What it holds.
    pub amount: Figures,
    /// When its lease ends.
    pub expires: u64,
    /// Its life.
    pub life: Life,
}

/// What a reservation did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reserved {
    /// Held: output and amount.
    Granted(u64, Figures),
    /// Refused by this pool (index) for this bound (`calls`, `tokens`, `cost`).
    Refused(usize, &'static str),
}

/// The model.
#[derive(Clone, Debug)]
pub struct Model {
    /// Each pool's bounds.
    pub bounds: Vec<Bounds>,
    /// Every hold ever made.
    pub holds: Vec<Hold>,
    /// Every charge: pool, window start, figures.
    pub log: Vec<(usize, u64, Figures)>,
    /// The clock.
    pub now: u64,
    /// Whether a settlement reported more than its hold, or a bound was lowered: the bounds may
    /// then be exceeded by what was already held or reported.
    pub excused: bool,
}

/// The start of the window of `window` holding `now`: a day is 86,400,000 ms; a month is found
/// by walking calendar months from 1970.
#[must_use]
pub fn window_start(window: Window, now: u64) -> u64 {
    const DAY: u64 = 86_400_000;
    match window {
        Window::Day => now / DAY * DAY,
        Window::Month => {
            let (mut year, mut month, mut start) = (1970_u64, 1_u64, 0_u64);
            loop {
                let leap = year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
                let days = match month {
                    2 if leap => 29,
                    2 => 28,
                    4 | 6 | 9 | 11 => 30,
                    _ => 31,
                };
                let next = start + days * DAY;
                if next > now {
                    return start;
                }
                start = next;
                (year, month) = if month == 12 { (year + 1, 1) } else { (year, month + 1) };
            }
        }
        _ => 0,
    }
}

impl Model {
    /// A model of pools with `bounds`, at `now`.
    #[must_use]
    pub fn new(bounds: Vec<Bounds>, now: u64) -> Self {
        Self { bounds, holds: Vec::new(), log: Vec::new(), now, excused: false }
    }

    /// Charges whole every open hold whose lease ran out.
    pub fn expire(&mut self) {
        for hold in &mut self.holds {
            if hold.life == Life::Open && hold.expires <= self.now {
                hold.life = Life::Expired;
                for (pool, start) in &hold.parts {
                    self.log.push((*pool, *start, hold.amount));
                }
            }
        }
    }

    /// Settled figures of `pool` in the window starting at `start`.
    #[must_use]
    pub fn settled(&self, pool: usize, start: u64) -> Figures {
        let mut sum = Figures::default();
        for (_, _, charge) in self.log.iter().filter(|(p, s, _)| *p == pool && *s == start) {
            sum.calls += charge.calls;
            sum.tokens += charge.tokens;
            sum.cost += charge.cost;
        }
        sum
    }

    /// Reserved figures (and open holds) of `pool` in the window starting at `start`.
    #[must_use]
    pub fn reserved(&self, pool: usize, start: u64) -> (Figures, u64) {
        let mut sum = Figures::default();
        let mut holds = 0;
        for hold in self.holds.iter().filter(|hold| hold.life == Life::Open) {
            if hold.parts.contains(&(pool, start)) {
                sum.calls += hold.amount.calls;
                sum.tokens += hold.amount.tokens;
                sum.cost += hold.amount.cost;
                holds += 1;
            }
        }
        (sum, holds)
    }

    /// The current window's start of `pool`.
    #[must_use]
    pub fn current(&self, pool: usize) -> u64 {
        window_start(self.bounds[pool].window, self.now)
    }

    /// Reserves a call of `input` tokens, its output at most `cap` and at least `min_output`,
    /// in `pools` (indices, in order), as store hold `id` if it fits.
    pub fn reserve(
        &mut self,
        pools: &[usize],
        input: u64,
        cap: u64,
        min_output: u64,
        lease: Duration,
        id: u64,
    ) -> Reserved {
        self.expire();
        let mut output = cap;
        let mut bound_by = None;
        for &pool in pools {
            let start = self.current(pool);
            let settled = self.settled(pool, start);
            let (reserved, _) = self.reserved(pool, start);
            let bounds = self.bounds[pool];
            if let Some(calls) = bounds.calls
                && settled.calls + reserved.calls + 1 > calls
            {
                return Reserved::Refused(pool, "calls");
            }
            if let Some(tokens) = bounds.tokens {
                let used = settled.tokens + reserved.tokens + input;
                if used > tokens {
                    return Reserved::Refused(pool, "tokens");
                }
                if tokens - used < output {
                    output = tokens - used;
                    bound_by = Some((pool, "tokens"));
                }
            }
            if let Some(cost) = bounds.cost {
                let used = settled.cost + reserved.cost + input * INPUT_PRICE;
                if used > cost {
                    return Reserved::Refused(pool, "cost");
                }
                let affordable = (cost - used) / OUTPUT_PRICE;
                if affordable < output {
                    output = affordable;
                    bound_by = Some((pool, "cost"));
                }
            }
        }
        if output < min_output
            && let Some((pool, bound)) = bound_by
        {
            return Reserved::Refused(pool, bound);
        }
        let amount =
            Figures { calls: 1, tokens: input + output, cost: input * INPUT_PRICE + output * OUTPUT_PRICE };
        let parts = pools.iter().map(|&pool| (pool, self.current(pool))).collect();
        let expires = self.now + lease_millis(lease);
        self.holds.push(Hold { id, parts, amount, expires, life: Life::Open });
        Reserved::Granted(output, amount)
    }

    /// The hold the store calls `id`.
    fn hold(&mut self, id: u64) -> Option<&mut Hold> {
        self.holds.iter_mut().find(|hold| hold.id == id)
    }

    /// Settles hold `id` with `charge`: `None` if the store must answer "unknown hold", else
    /// whether it was late.
    pub fn settle(&mut self, id: u64, charge: Figures) -> Option<bool> {
        self.expire();
        let hold = self.hold(id)?;
        let (parts, amount, life) = (hold.parts.clone(), hold.amount, hold.life);
        let added = match life {
            Life::Gone => return None,
            Life::Open => charge,
            Life::Expired => Figures {
                calls: charge.calls.saturating_sub(amount.calls),
                tokens: charge.tokens.saturating_sub(amount.tokens),
                cost: charge.cost.saturating_sub(amount.cost),
            },
        };
        if charge.calls > amount.calls || charge.tokens > amount.tokens || charge.cost > amount.cost {
            self.excused = true;
        }
        if let Some(hold) = self.hold(id) {
            hold.life = Life::Gone;
        }
        for (pool, start) in parts {
            self.log.push((pool, start, added));
        }
        Some(life == Life::Expired)
    }

    /// Releases hold `id`: `false` if the store must answer "unknown hold".
    pub fn release(&mut self, id: u64) -> bool {
        self.expire();
        match self.hold(id) {
            Some(hold) if hold.life != Life::Gone => {
                hold.life = Life::Gone;
                true
            }
            _ => false,
        }
    }

    /// Renews hold `id` for `lease`: whether it was open.
    pub fn renew(&mut self, id: u64, lease: Duration) -> bool {
        self.expire();
        let now = self.now;
        match self.hold(id) {
            Some(hold) if hold.life == Life::Open => {
                hold.expires = now + lease_millis(lease);
                true
            }
            _ => false,
        }
    }
}
