//! What a pool is: its name, its budget and its window, and the figures it keeps.
//!
//! # Invariants
//!
//! - A pool's name is 1 to 128 bytes of `A-Z a-z 0-9 . _ : -` (`tenant:acme`, `feature.search`):
//!   it fits a key column of every store unquoted, and holds nothing a host did not choose to put
//!   in a label.
//! - A budget that is set is positive; a budget with nothing set is refused (it would bound
//!   nothing).
//! - Windows are fixed and in UTC: a day runs from 00:00 to 24:00 UTC, a month from its first
//!   day at 00:00 UTC to the next month's. Each window of a pool has its own figures; a hold
//!   belongs to the window it was made in, and so do its settlement and its expiry.

use std::fmt;
use std::sync::Arc;

use serde::Serialize;

use super::error::PoolError;
use crate::spend::Micros;

/// The longest pool name, in bytes.
pub const MAX_POOL_NAME_LEN: usize = 128;

/// A pool's name, e.g. `tenant:acme`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PoolName(Arc<str>);

impl Serialize for PoolName {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl PoolName {
    /// A pool's name.
    ///
    /// # Errors
    ///
    /// [`PoolError::InvalidName`] for an empty name, one longer than [`MAX_POOL_NAME_LEN`], or
    /// one with a byte outside `A-Z a-z 0-9 . _ : -`.
    pub fn new(name: impl AsRef<str>) -> Result<Self, PoolError> {
        let name = name.as_ref();
        let allowed = |byte: u8| byte.is_ascii_alphanumeric() || b"._:-".contains(&byte);
        if name.is_empty() || name.len() > MAX_POOL_NAME_LEN || !name.bytes().all(allowed) {
            return Err(PoolError::InvalidName);
        }
        Ok(Self(Arc::from(name)))
    }

    /// The name as text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for PoolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The period a pool's budget is for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Window {
    /// One budget for all time.
    #[default]
    Whole,
    /// A budget per UTC day.
    Day,
    /// A budget per UTC calendar month.
    Month,
}

impl Window {
    /// The window's name as stores keep it: `whole`, `day` or `month`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Whole => "whole",
            Self::Day => "day",
            Self::Month => "month",
        }
    }

    /// The window named `name` ([`as_str`](Self::as_str)'s words).
    ///
    /// # Errors
    ///
    /// [`PoolError::Corrupt`] for any other word.
    pub fn parse(name: &str) -> Result<Self, PoolError> {
        match name {
            "whole" => Ok(Self::Whole),
            "day" => Ok(Self::Day),
            "month" => Ok(Self::Month),
            _ => Err(PoolError::Corrupt("a pool's window is not whole, day or month".into())),
        }
    }

    /// When the window holding the instant `now` (milliseconds since 1970-01-01 UTC) starts.
    #[must_use]
    pub const fn start(self, now: u64) -> u64 {
        match self {
            Self::Whole => 0,
            Self::Day => now - now % DAY_MS,
            Self::Month => {
                let (year, month) = year_month(now / DAY_MS);
                days_from_civil(year, month) * DAY_MS
            }
        }
    }

    /// When the window holding `now` ends (`None`: never).
    #[must_use]
    pub const fn end(self, now: u64) -> Option<u64> {
        match self {
            Self::Whole => None,
            Self::Day => Some(self.start(now).saturating_add(DAY_MS)),
            Self::Month => {
                let (year, month) = year_month(now / DAY_MS);
                let (year, month) = if month == 12 { (year + 1, 1) } else { (year, month + 1) };
                Some(days_from_civil(year, month).saturating_mul(DAY_MS))
            }
        }
    }
}

const DAY_MS: u64 = 86_400_000;

/// The year and month (1 to 12) of the day `days` after 1970-01-01, in the proleptic Gregorian
/// calendar (days from 1970 on only, so everything stays unsigned).
const fn year_month(days: u64) -> (u64, u64) {
    // Shift to an era that starts on 0000-03-01, so that a leap day ends each year.
    let shifted = days + 719_468;
    let era = shifted / 146_097;
    let day_of_era = shifted - era * 146_097;
    let year_of_era = (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let month = if month_index < 10 { month_index + 3 } else { month_index - 9 };
    let year = year_of_era + era * 400 + if month <= 2 { 1 } else { 0 };
    (year, month)
}

/// The days from 1970-01-01 to the first day of `month` (1 to 12) of `year` (1970 or later).
const fn days_from_civil(year: u64, month: u64) -> u64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year / 400;
    let year_of_era = year - era * 400;
    let month_index = if month > 2 { month - 3 } else { month + 9 };
    let day_of_year = (153 * month_index + 2) / 5;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// A pool's budget: model calls, tokens (input and output together) and money, each optional,
/// per window.
///
/// ```
/// use loopbound::pool::{PoolBudget, Window};
/// use loopbound::spend::Micros;
///
/// // Tenant acme: 2 M tokens or 40.00 a day, whichever runs out first.
/// let budget = PoolBudget::default().with_tokens(2_000_000).with_cost(Micros(40_000_000)).per(Window::Day);
/// assert_eq!(budget.validate(), Ok(()));
/// assert!(PoolBudget::default().validate().is_err(), "a budget bounds something");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PoolBudget {
    calls: Option<u64>,
    tokens: Option<u64>,
    cost: Option<Micros>,
    window: Window,
}

impl PoolBudget {
    /// At most `calls` model calls per window.
    #[must_use]
    pub const fn with_calls(mut self, calls: u64) -> Self {
        self.calls = Some(calls);
        self
    }

    /// At most `tokens` tokens (input and output) per window.
    #[must_use]
    pub const fn with_tokens(mut self, tokens: u64) -> Self {
        self.tokens = Some(tokens);
        self
    }

    /// At most `cost` per window.
    #[must_use]
    pub const fn with_cost(mut self, cost: Micros) -> Self {
        self.cost = Some(cost);
        self
    }

    /// The budget is for each `window`.
    #[must_use]
    pub const fn per(mut self, window: Window) -> Self {
        self.window = window;
        self
    }

    /// The model-call budget.
    #[must_use]
    pub const fn calls(&self) -> Option<u64> {
        self.calls
    }

    /// The token budget.
    #[must_use]
    pub const fn tokens(&self) -> Option<u64> {
        self.tokens
    }

    /// The cost budget.
    #[must_use]
    pub const fn cost(&self) -> Option<Micros> {
        self.cost
    }

    /// The window.
    #[must_use]
    pub const fn window(&self) -> Window {
        self.window
    }

    /// Whether the budget bounds tokens or money (its holds then need a finite output).
    #[must_use]
    pub const fn bounds_spend(&self) -> bool {
        self.tokens.is_some() || self.cost.is_some()
    }

    /// Checks that something is bounded and that every bound that is set is positive.
    ///
    /// # Errors
    ///
    /// [`PoolError::InvalidBudget`].
    pub fn validate(&self) -> Result<(), PoolError> {
        let positive = |bound: Option<u64>| bound.is_none_or(|bound| bound > 0);
        let any = self.calls.is_some() || self.tokens.is_some() || self.cost.is_some();
        if any && positive(self.calls) && positive(self.tokens) && positive(self.cost.map(|cost| cost.0)) {
            Ok(())
        } else {
            Err(PoolError::InvalidBudget)
        }
    }
}

/// Model calls, tokens and money: what a hold reserves, a settlement charges, or a window has
/// settled or reserved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[non_exhaustive]
pub struct Amount {
    /// Model calls.
    pub calls: u64,
    /// Tokens, input and output together.
    pub tokens: u64,
    /// Money.
    pub cost: Micros,
}

impl Amount {
    /// Nothing.
    pub const ZERO: Self = Self { calls: 0, tokens: 0, cost: Micros::ZERO };

    /// `calls` model calls, `tokens` tokens and `cost`.
    #[must_use]
    pub const fn new(calls: u64, tokens: u64, cost: Micros) -> Self {
        Self { calls, tokens, cost }
    }

    /// This amount and `other`, saturating.
    #[must_use]
    pub const fn plus(self, other: Self) -> Self {
        Self {
            calls: self.calls.saturating_add(other.calls),
            tokens: self.tokens.saturating_add(other.tokens),
            cost: self.cost.saturating_add(other.cost),
        }
    }

    /// This amount less `other`, each part at least zero.
    #[must_use]
    pub const fn minus(self, other: Self) -> Self {
        Self {
            calls: self.calls.saturating_sub(other.calls),
            tokens: self.tokens.saturating_sub(other.tokens),
            cost: self.cost.saturating_sub(other.cost),
        }
    }

    /// Whether some part of this amount is above `other`'s.
    #[must_use]
    pub const fn exceeds(&self, other: &Self) -> bool {
        self.calls > other.calls || self.tokens > other.tokens || self.cost.0 > other.cost.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-12-01T00:00:00Z and 2027-01-01T00:00:00Z, in milliseconds.
    const DEC_1: u64 = 1_796_083_200_000;
    const JAN_1: u64 = 1_798_761_600_000;

    #[test]
    fn windows_are_fixed_utc_days_and_months() {
        let now = DEC_1 + 13 * 3_600_000 + 42;
        assert_eq!(Window::Day.start(now), DEC_1);
        assert_eq!(Window::Day.end(now), Some(DEC_1 + DAY_MS));
        assert_eq!(Window::Month.start(now), DEC_1);
        assert_eq!(Window::Month.end(now), Some(JAN_1), "December ends with the year");
        assert_eq!(Window::Month.start(JAN_1 - 1), DEC_1, "the last millisecond of December");
        assert_eq!(Window::Month.start(JAN_1), JAN_1);
        assert_eq!((Window::Whole.start(now), Window::Whole.end(now)), (0, None));
        // 2028 is a leap year: February has 29 days.
        let feb_1_2028 = 1_832_976_000_000;
        assert_eq!(Window::Month.end(feb_1_2028), Some(feb_1_2028 + 29 * DAY_MS));
        assert_eq!(Window::Month.start(0), 0, "1970-01-01");
    }

    #[test]
    fn every_month_start_is_a_day_start_and_months_follow_each_other() {
        let mut start = 0;
        for _ in 0..12 * 200 {
            let end = Window::Month.end(start).expect("a month ends");
            assert_eq!(Window::Month.start(start), start);
            assert_eq!(Window::Month.start(end - 1), start);
            assert_eq!(end % DAY_MS, 0);
            let days = (end - start) / DAY_MS;
            assert!((28..=31).contains(&days), "{days} days");
            start = end;
        }
    }

    #[test]
    fn names_and_budgets_are_validated() {
        assert!(PoolName::new("tenant:acme.search-1_x").is_ok());
        for bad in ["", "tenant acme", "tenant/acme", "é"] {
            assert_eq!(PoolName::new(bad), Err(PoolError::InvalidName), "{bad:?}");
        }
        assert_eq!(PoolName::new("a".repeat(129)), Err(PoolError::InvalidName));
        assert_eq!(PoolBudget::default().with_tokens(0).validate(), Err(PoolError::InvalidBudget));
        assert_eq!(PoolBudget::default().with_calls(1).validate(), Ok(()));
    }
}
