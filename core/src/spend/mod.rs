//! Spend budgets: tokens and money reserved before every model call, settled from what the
//! provider reports, and per-tool prices.
//!
//! Counting calls does not bound a bill: one call can read a million tokens. Here a model call
//! is sent only with a reservation that fits every budget the scope has ([`Limits`]'s input,
//! output and total tokens, and cost), and the request goes out with its output cap set to what
//! the budgets leave.
//!
//! 1. **Before the call** (the model admission, under the scope's lock, after the model-call
//!    budget): the input is the [`TokenCounter`]'s estimate of the request; the output is the
//!    smallest of the call's own cap and what each budget leaves after that input; below
//!    [`Limits::min_output_tokens`] the call is not sent and the run halts `TokenBudget` or
//!    `CostBudget`.
//! 2. **After the call**: the provider's reported usage replaces the reservation; a reply without
//!    a report is charged its whole reservation; a report above the reservation is charged as
//!    reported and counted, and if the run's spend then exceeds a budget the run halts at once,
//!    the overshoot stated in the outcome's [`Spend`].
//! 3. **While a reply streams**, its text and call arguments are counted as they arrive (with
//!    the counter's lower bound, so an honest reply is never cut early): a stream that passes
//!    its reservation is cut at that chunk, charged at least its reservation, and the run halts
//!    `TokenBudget`.
//!
//! # What a budget guarantees
//!
//! With the default counter and a provider that honours the output cap, a run never spends
//! beyond any of its budgets. With any counter or provider, the run stops at the first call that
//! crosses a budget, and the overshoot is at most that one call's reported usage beyond its
//! reservation, reported in [`Spend`]. Nothing is "checked after the response".
//!
//! Under a cost budget nothing is guessed: a model or tool without a price ([`Prices`]) is a
//! configuration error before anything runs.
//!
//! # Invariants
//!
//! - Money is integer micro-units ([`Micros`]); every computed cost is rounded up.
//! - The reservation is part of the model admission's one critical section: the token counter
//!   runs before the lock (it is incremental, so a reservation costs the new bytes only), the
//!   check and the hold under it.

mod account;
mod counter;
mod money;
#[cfg(feature = "tiktoken")]
mod tiktoken;

use serde::Serialize;

pub use account::Reserved;
pub(crate) use account::{Account, Refusal};
pub(crate) use counter::RequestCount;
pub use counter::{ByteCounter, TokenCounter};
// Money is a plain budget amount: defined with the limits it bounds.
pub use crate::limits::Micros;
pub use money::{Price, Prices};
#[cfg(feature = "tiktoken")]
pub use tiktoken::{Encoding, TiktokenCounter};

use crate::transport::Usage;

#[cfg(doc)]
use crate::Limits;

/// What a run spent: settled tokens and money, what was still reserved when it ended, and how
/// far past its budgets it went, if it did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Spend {
    /// Tokens charged: each call's reported usage, or its whole reservation when it reported
    /// none.
    pub settled: Usage,
    /// Money charged for those tokens and for priced tools' calls.
    pub cost: Micros,
    /// Reservations of calls still in flight when the run ended (a stop during a call): they
    /// may have been billed.
    pub reserved: Reserved,
    /// Calls whose reported usage exceeded their reservation.
    pub calls_over_reservation: u32,
    /// Tokens past the tightest token budget (0 within them).
    pub overshoot_tokens: u64,
    /// Money past the cost budget (0 within it).
    pub overshoot_cost: Micros,
    /// In a tree of scopes: the most tokens past an ancestor's tightest token budget that one of
    /// this scope's calls took it (0 when none did; serialised only when set). The ancestor's
    /// own spend states its whole overshoot; this says that this run's call crossed it.
    #[serde(skip_serializing_if = "is_zero")]
    pub ancestor_overshoot_tokens: u64,
    /// In a tree of scopes: the most money past an ancestor's cost budget that one of this
    /// scope's calls took it (0 when none did; serialised only when set).
    #[serde(skip_serializing_if = "is_no_money")]
    pub ancestor_overshoot_cost: Micros,
}

#[allow(clippy::trivially_copy_pass_by_ref, reason = "serde's `skip_serializing_if` hands over a reference")]
fn is_zero(tokens: &u64) -> bool {
    *tokens == 0
}

#[allow(clippy::trivially_copy_pass_by_ref, reason = "serde's `skip_serializing_if` hands over a reference")]
fn is_no_money(money: &Micros) -> bool {
    *money == Micros::ZERO
}
