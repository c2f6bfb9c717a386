//! Every budget of one run as plain values: the limits of a run (model calls, tool calls,
//! per-tool calls, repetitions, deadline, reply bounds, tokens, cost), money in micro-units, and
//! their validation.
//!
//! What many runs share is a pool ([`pool`](crate::pool)), not a limit: pools are set apart, on
//! the scope ([`ScopeBuilder::pools`](crate::ScopeBuilder::pools)).
//!
//! # Invariants
//!
//! - This module is a leaf of the crate's module graph: it imports nothing from `spend`,
//!   `transport`, `guard`, `scope`, `tool` or `journal`, only from `event` (which names may name
//!   a tool) and `progress` (the policy error a scope reports with the others), which import
//!   nothing from the crate either. `spend`, `transport` (its reply bounds), `guard`, `scope`
//!   and `journal` depend on this module for a budget's value; it depends on none of them.
//! - A [`Limits`] value can hold anything; it is checked by [`Limits::validate`], which every
//!   scope runs before it exists. A scope therefore never runs with zero model calls, zero
//!   repetitions, a zero deadline, zero calls per reply, zero reply bytes, or a per-tool limit
//!   on a name no tool may take.
//! - A tool-call budget of zero is valid: it means that no tool may run; so is a per-tool limit
//!   of zero: that tool may not run.
//! - The reply bounds ([`calls_per_reply`](Limits::calls_per_reply),
//!   [`reply_bytes`](Limits::reply_bytes)) bound every reply the run accepts, so the run's
//!   memory, events, conversation and request bodies are bounded by a function of the limits
//!   alone (see [`Limits`]).
//! - Money is integer micro-units ([`Micros`]): no floating point, and arithmetic on amounts
//!   saturates instead of wrapping.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::Serialize;

use crate::event::Subject;

/// An amount of money in micro-units of the host's currency: `Micros(1_500_000)` is 1.50.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Micros(pub u64);

impl Micros {
    /// Nothing.
    pub const ZERO: Self = Self(0);

    /// This amount and `other`, saturating.
    #[must_use]
    pub const fn saturating_add(self, other: Self) -> Self {
        Self(self.0.saturating_add(other.0))
    }

    /// This amount less `other`, or zero.
    #[must_use]
    pub const fn saturating_sub(self, other: Self) -> Self {
        Self(self.0.saturating_sub(other.0))
    }
}

impl fmt::Display for Micros {
    /// Formats as `1500000µ`: the integer amount, in micro-units.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}µ", self.0)
    }
}

/// The bounds of one run. Every field counts something the host can observe in the events.
///
/// | limit | default | counts |
/// |---|---|---|
/// | [`model_calls`](Limits::model_calls) | 6 | transport attempts, streaming or not, counted before the call is sent |
/// | [`tool_calls`](Limits::tool_calls) | 4 | admitted tool attempts over all tools, counted before the body runs |
/// | [`tool_calls_of`](Limits::tool_calls_of) | none | admitted attempts of one tool, for each tool given one ([`with_tool_calls_of`](Limits::with_tool_calls_of)) |
/// | [`repetitions`](Limits::repetitions) | 1 | admitted attempts per signature (tool name + canonical typed arguments) |
/// | [`deadline`](Limits::deadline) | 120 s | wall time of the run, from the scope's creation |
/// | [`calls_per_reply`](Limits::calls_per_reply) | 16 | tool calls in one model reply, known tools or not, bindable or not |
/// | [`reply_bytes`](Limits::reply_bytes) | 16 MiB | bytes of one model reply, whole or streamed |
/// | [`input_tokens`](Limits::input_tokens) | none | input tokens of the run, reserved before each model call |
/// | [`output_tokens`](Limits::output_tokens) | none | output tokens of the run, reserved before each model call |
/// | [`total_tokens`](Limits::total_tokens) | none | input and output tokens of the run together |
/// | [`cost`](Limits::cost) | none | money of the run in micro-units, reserved before each model call or priced tool |
/// | [`min_output_tokens`](Limits::min_output_tokens) | 16 | the smallest output a call is sent with under a spend budget |
///
/// The spend budgets are reserved before every model call and settled from the provider's
/// usage: see [`spend`](crate::spend) for what they guarantee.
///
/// A reply with more tool calls than `calls_per_reply` is refused whole, before any of its
/// calls is observed or runs: the run halts with `TooManyCalls` and nothing of that reply enters
/// the conversation. A reply longer than `reply_bytes` is a provider error (`Malformed`); a
/// transport stops reading it as soon as it crosses the bound. So, with `m` model calls, `c`
/// calls per reply and `b` reply bytes:
///
/// - the events number at most `m × (2c + 2)` (a model call, a middleware observation and an
///   admission per call, one halt);
/// - the conversation grows by at most `m` accepted replies of at most `b` bytes each, plus
///   `m × c` tool results, so every request body stays under the initial conversation plus
///   `m × b` bytes plus those results;
/// - a reply in flight holds at most `b` bytes in memory.
///
/// ```
/// use std::time::Duration;
/// use loopbound::Limits;
///
/// let limits = Limits::default().with_model_calls(3).with_deadline(Duration::from_secs(30));
/// assert_eq!(limits.model_calls(), 3);
/// assert_eq!(limits.tool_calls(), 4);
/// assert!(limits.validate().is_ok());
/// assert!(Limits::default().with_repetitions(0).validate().is_err());
///
/// // A refund at most once, whatever else the run may do.
/// let limits = Limits::default().with_tool_calls_of("refund", 1);
/// assert_eq!(limits.tool_calls_of("refund"), Some(1));
/// assert_eq!(limits.tool_calls_of("lookup"), None);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Limits {
    model_calls: u32,
    tool_calls: u32,
    repetitions: u32,
    deadline: Duration,
    calls_per_reply: u32,
    reply_bytes: usize,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    total_tokens: Option<u64>,
    cost: Option<Micros>,
    min_output_tokens: u32,
    wrap_up_tokens: Option<u64>,
    /// Admitted attempts allowed per tool, for the tools given a limit of their own.
    per_tool: BTreeMap<Box<str>, u32>,
}

impl Limits {
    /// Default number of model calls (transport attempts) in one run.
    pub const DEFAULT_MODEL_CALLS: u32 = 6;
    /// Default number of admitted tool attempts in one run.
    pub const DEFAULT_TOOL_CALLS: u32 = 4;
    /// Default number of admitted attempts per signature.
    pub const DEFAULT_REPETITIONS: u32 = 1;
    /// Default wall-clock deadline of one run.
    pub const DEFAULT_DEADLINE: Duration = Duration::from_mins(2);
    /// Default number of tool calls one model reply may ask for.
    pub const DEFAULT_CALLS_PER_REPLY: u32 = 16;
    /// Default size, in bytes, of one model reply: 16 MiB.
    pub const DEFAULT_REPLY_BYTES: usize = 16 << 20;
    /// Default smallest output a call is sent with under a spend budget.
    pub const DEFAULT_MIN_OUTPUT_TOKENS: u32 = 16;

    /// Returns these limits with `model_calls` transport attempts allowed.
    #[must_use]
    pub const fn with_model_calls(mut self, model_calls: u32) -> Self {
        self.model_calls = model_calls;
        self
    }

    /// Returns these limits with `tool_calls` admitted tool attempts allowed in the run, all
    /// tools together (zero is valid: no tool may run). The next call asked for halts the run
    /// `ToolBudget`; what counts is in [`HaltReason::ToolBudget`](crate::HaltReason::ToolBudget).
    #[must_use]
    pub const fn with_tool_calls(mut self, tool_calls: u32) -> Self {
        self.tool_calls = tool_calls;
        self
    }

    /// Returns these limits with at most `calls` admitted attempts of the tool `tool` in the run
    /// (e.g. a refund at most once): past them the run halts `ToolLimit`. Zero forbids the tool.
    /// Set again for the same tool, the last limit given holds. A name no tool may take fails
    /// [`validate`](Self::validate) with [`LimitsError::InvalidToolLimit`].
    ///
    /// The limits do not know the run's tools, its runner does: a run whose tool set has no tool
    /// of that name (a misspelt name would limit nothing) is refused when it starts, before any
    /// model call, with [`RunError::InvalidLimits`](crate::RunError::InvalidLimits) holding
    /// [`LimitsError::UnknownTool`] ([`Runner::run`](crate::Runner::run) and the journaled run
    /// alike).
    #[must_use]
    pub fn with_tool_calls_of(mut self, tool: impl Into<String>, calls: u32) -> Self {
        self.per_tool.insert(tool.into().into_boxed_str(), calls);
        self
    }

    /// These limits without a limit of the tool `tool`'s own: its calls are then bounded by the
    /// run's other limits only.
    #[cfg(any(test, feature = "journal"))]
    #[must_use]
    pub(crate) fn without_tool_calls_of(mut self, tool: &str) -> Self {
        self.per_tool.remove(tool);
        self
    }

    /// Returns these limits with `repetitions` admitted attempts allowed per signature.
    #[must_use]
    pub const fn with_repetitions(mut self, repetitions: u32) -> Self {
        self.repetitions = repetitions;
        self
    }

    /// Returns these limits with the run's wall-clock `deadline`.
    ///
    /// It bounds everything the run waits on: the provider, the tools' bodies (dropped when it
    /// passes), and in a journaled or pooled run its store (a store call in flight gets
    /// [`STORE_GRACE`](crate::STORE_GRACE) more, then is given up: see
    /// [`EndRecord`](crate::EndRecord)). Not a host's own awaits outside the run.
    #[must_use]
    pub const fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// Returns these limits with at most `calls` tool calls accepted in one model reply (at
    /// least 1: to forbid tools, set the tool budget to zero instead).
    #[must_use]
    pub const fn with_calls_per_reply(mut self, calls: u32) -> Self {
        self.calls_per_reply = calls;
        self
    }

    /// Returns these limits with at most `bytes` bytes accepted in one model reply, whole or
    /// streamed.
    #[must_use]
    pub const fn with_reply_bytes(mut self, bytes: usize) -> Self {
        self.reply_bytes = bytes;
        self
    }

    /// Returns these limits with at most `tokens` input tokens over the run (positive).
    #[must_use]
    pub const fn with_input_tokens(mut self, tokens: u64) -> Self {
        self.input_tokens = Some(tokens);
        self
    }

    /// Returns these limits with at most `tokens` output tokens over the run (positive).
    #[must_use]
    pub const fn with_output_tokens(mut self, tokens: u64) -> Self {
        self.output_tokens = Some(tokens);
        self
    }

    /// Returns these limits with at most `tokens` input and output tokens together over the run
    /// (positive).
    #[must_use]
    pub const fn with_total_tokens(mut self, tokens: u64) -> Self {
        self.total_tokens = Some(tokens);
        self
    }

    /// Returns these limits with at most `cost` spent over the run (positive): model calls at
    /// the scope's [`Prices`](crate::spend::Prices), and priced tools' calls.
    #[must_use]
    pub const fn with_cost(mut self, cost: Micros) -> Self {
        self.cost = Some(cost);
        self
    }

    /// Returns these limits with calls under a spend budget sent only with room for at least
    /// `tokens` of output (at least 1).
    #[must_use]
    pub const fn with_min_output_tokens(mut self, tokens: u32) -> Self {
        self.min_output_tokens = tokens;
        self
    }

    /// Returns these limits with one model call and `tokens` tokens (and, under a cost budget,
    /// what they cost at the model's dearest price) kept aside for a wrap-up: when a limit stops
    /// the run, the runtime makes that one call, with no tool offered, and the outcome keeps the
    /// halt's status and carries its text as partial
    /// ([`Outcome::partial_text`](crate::Outcome::partial_text)). Until then the run's budgets
    /// are the limits less what is kept aside. Positive.
    #[must_use]
    pub const fn with_wrap_up(mut self, tokens: u64) -> Self {
        self.wrap_up_tokens = Some(tokens);
        self
    }

    /// The tokens kept aside for a wrap-up, if one is.
    #[must_use]
    pub const fn wrap_up_tokens(&self) -> Option<u64> {
        self.wrap_up_tokens
    }

    /// These limits less what a wrap-up keeps aside (one model call, its tokens, and
    /// `aside_cost` of those tokens, the cost at the model's dearest rate): what the run itself
    /// may spend. Unchanged (and borrowed) without a wrap-up. With one, the per-tool limits are
    /// left out: the result bounds model calls and spend, never a tool's admission.
    #[must_use]
    pub(crate) fn before_wrap_up(&self, aside_cost: impl FnOnce(u64) -> Micros) -> Cow<'_, Self> {
        let Some(aside) = self.wrap_up_tokens else { return Cow::Borrowed(self) };
        let less = |budget: Option<u64>| budget.map(|budget| budget.saturating_sub(aside));
        Cow::Owned(Self {
            model_calls: self.model_calls.saturating_sub(1),
            input_tokens: less(self.input_tokens),
            output_tokens: less(self.output_tokens),
            total_tokens: less(self.total_tokens),
            cost: self.cost.map(|cost| cost.saturating_sub(aside_cost(aside))),
            per_tool: BTreeMap::new(),
            ..*self
        })
    }

    /// Input tokens allowed over the run, if limited.
    #[must_use]
    pub const fn input_tokens(&self) -> Option<u64> {
        self.input_tokens
    }

    /// Output tokens allowed over the run, if limited.
    #[must_use]
    pub const fn output_tokens(&self) -> Option<u64> {
        self.output_tokens
    }

    /// Input and output tokens allowed together over the run, if limited.
    #[must_use]
    pub const fn total_tokens(&self) -> Option<u64> {
        self.total_tokens
    }

    /// Money allowed over the run, if limited.
    #[must_use]
    pub const fn cost(&self) -> Option<Micros> {
        self.cost
    }

    /// The smallest output a call is sent with under a spend budget.
    #[must_use]
    pub const fn min_output_tokens(&self) -> u32 {
        self.min_output_tokens
    }

    /// Whether a token or cost budget is set (every model call is then reserved).
    #[must_use]
    pub const fn has_spend_budget(&self) -> bool {
        self.input_tokens.is_some()
            || self.output_tokens.is_some()
            || self.total_tokens.is_some()
            || self.cost.is_some()
    }

    /// Transport attempts allowed in one run.
    #[must_use]
    pub const fn model_calls(&self) -> u32 {
        self.model_calls
    }

    /// Admitted tool attempts allowed in one run.
    #[must_use]
    pub const fn tool_calls(&self) -> u32 {
        self.tool_calls
    }

    /// Admitted attempts of the tool `tool` allowed in one run, if it has a limit of its own.
    #[must_use]
    pub fn tool_calls_of(&self, tool: &str) -> Option<u32> {
        // A run without per-tool limits looks nothing up.
        if self.per_tool.is_empty() { None } else { self.per_tool.get(tool).copied() }
    }

    /// Every tool's own limit ([`tool_calls_of`](Self::tool_calls_of)), in tool-name order.
    pub fn per_tool_calls(&self) -> impl Iterator<Item = (&str, u32)> {
        self.per_tool.iter().map(|(tool, calls)| (&**tool, *calls))
    }

    /// Admitted attempts allowed per signature.
    #[must_use]
    pub const fn repetitions(&self) -> u32 {
        self.repetitions
    }

    /// Wall-clock time allowed for one run.
    #[must_use]
    pub const fn deadline(&self) -> Duration {
        self.deadline
    }

    /// Tool calls accepted in one model reply; a reply asking for more halts the run with
    /// `TooManyCalls` before any of its calls runs.
    #[must_use]
    pub const fn calls_per_reply(&self) -> u32 {
        self.calls_per_reply
    }

    /// Bytes accepted in one model reply, whole or streamed (text, every call's id, name and
    /// arguments, and the transport's framing); a longer reply is a provider error.
    #[must_use]
    pub const fn reply_bytes(&self) -> usize {
        self.reply_bytes
    }

    /// Checks that these limits can bound a run.
    ///
    /// # Errors
    ///
    /// Returns the first problem found: zero model calls, zero repetitions, a zero deadline,
    /// zero calls per reply, zero reply bytes, a spend budget set to zero, a zero minimum
    /// output, a wrap-up without room, or a per-tool limit on a name no tool may take.
    pub fn validate(&self) -> Result<(), LimitsError> {
        if self.model_calls == 0 {
            return Err(LimitsError::ZeroModelCalls);
        }
        if self.repetitions == 0 {
            return Err(LimitsError::ZeroRepetitions);
        }
        if self.deadline.is_zero() {
            return Err(LimitsError::ZeroDeadline);
        }
        if self.calls_per_reply == 0 {
            return Err(LimitsError::ZeroCallsPerReply);
        }
        if self.reply_bytes == 0 {
            return Err(LimitsError::ZeroReplyBytes);
        }
        if matches!(self.input_tokens, Some(0))
            || matches!(self.output_tokens, Some(0))
            || matches!(self.total_tokens, Some(0))
            || matches!(self.cost, Some(Micros(0)))
        {
            return Err(LimitsError::ZeroBudget);
        }
        if self.min_output_tokens == 0 {
            return Err(LimitsError::ZeroMinOutput);
        }
        if matches!(self.wrap_up_tokens, Some(0)) || (self.wrap_up_tokens.is_some() && self.model_calls < 2) {
            return Err(LimitsError::WrapUpWithoutRoom);
        }
        if self.per_tool.keys().any(|tool| !Subject::is_tool_name(tool)) {
            return Err(LimitsError::InvalidToolLimit);
        }
        Ok(())
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            model_calls: Self::DEFAULT_MODEL_CALLS,
            tool_calls: Self::DEFAULT_TOOL_CALLS,
            repetitions: Self::DEFAULT_REPETITIONS,
            deadline: Self::DEFAULT_DEADLINE,
            calls_per_reply: Self::DEFAULT_CALLS_PER_REPLY,
            reply_bytes: Self::DEFAULT_REPLY_BYTES,
            input_tokens: None,
            output_tokens: None,
            total_tokens: None,
            cost: None,
            min_output_tokens: Self::DEFAULT_MIN_OUTPUT_TOKENS,
            wrap_up_tokens: None,
            per_tool: BTreeMap::new(),
        }
    }
}

impl fmt::Display for Limits {
    /// Formats as `model calls 6, tool calls 4, repetitions 1, deadline 120s, calls per reply 16,
    /// reply bytes 16MiB`; a deadline that is not a whole number of seconds is written in
    /// milliseconds (`1500ms`), or in microseconds or nanoseconds when even that is not whole; a
    /// byte count that is not a whole number of MiB is written in KiB, or in bytes (`1000B`).
    /// Per-tool limits follow when set, in tool-name order: `, refund calls 1`; then spend
    /// budgets: `, input tokens 5000, output tokens 800, total tokens 6000, cost 20000µ, min
    /// output 16`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "model calls {}, tool calls {}, repetitions {}, deadline ",
            self.model_calls, self.tool_calls, self.repetitions
        )?;
        let nanos = self.deadline.as_nanos();
        match [(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")]
            .into_iter()
            .find(|(unit, _)| nanos.is_multiple_of(*unit))
        {
            Some((unit, suffix)) => write!(f, "{}{suffix}", nanos / unit)?,
            None => write!(f, "{nanos}ns")?,
        }
        write!(f, ", calls per reply {}, reply bytes ", self.calls_per_reply)?;
        let bytes = self.reply_bytes;
        match [(1 << 20, "MiB"), (1 << 10, "KiB")]
            .into_iter()
            .find(|(unit, _)| bytes != 0 && bytes.is_multiple_of(*unit))
        {
            Some((unit, suffix)) => write!(f, "{}{suffix}", bytes / unit)?,
            None => write!(f, "{bytes}B")?,
        }
        for (tool, calls) in self.per_tool_calls() {
            write!(f, ", {tool} calls {calls}")?;
        }
        for (name, value) in [
            ("input tokens", self.input_tokens),
            ("output tokens", self.output_tokens),
            ("total tokens", self.total_tokens),
        ] {
            if let Some(value) = value {
                write!(f, ", {name} {value}")?;
            }
        }
        if let Some(cost) = self.cost {
            write!(f, ", cost {cost}")?;
        }
        if self.has_spend_budget() {
            write!(f, ", min output {}", self.min_output_tokens)?;
        }
        Ok(())
    }
}

/// Why a set of limits, or a scope built from them, or a run under them, was rejected before
/// anything ran.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LimitsError {
    /// A run needs at least one model call.
    ZeroModelCalls,
    /// Every signature needs at least one admitted attempt.
    ZeroRepetitions,
    /// A run needs time to run.
    ZeroDeadline,
    /// The deadline lies beyond what the clock can represent from now.
    DeadlineOutOfRange,
    /// A reply must be allowed at least one tool call (a tool budget of zero forbids tools).
    ZeroCallsPerReply,
    /// A reply must be allowed at least one byte.
    ZeroReplyBytes,
    /// A spend budget that is set must be positive (leave it unset for no budget).
    ZeroBudget,
    /// A call under a spend budget must be allowed at least one output token.
    ZeroMinOutput,
    /// A cost budget needs the scope's prices ([`ScopeBuilder::prices`](crate::ScopeBuilder::prices)).
    Unpriced,
    /// A per-tool limit ([`Limits::with_tool_calls_of`]) names a tool by a name no tool may
    /// take.
    InvalidToolLimit,
    /// A per-tool limit ([`Limits::with_tool_calls_of`]) names a tool that the run's tool set
    /// does not have (a misspelt name would limit nothing): refused when the run starts
    /// ([`RunError::InvalidLimits`](crate::RunError::InvalidLimits)), before any model call.
    UnknownTool(String),
    /// A child scope asked for a capability its parent was not granted.
    GrantsBeyondParent,
    /// A child scope's caller is its parent scope: it takes no caller's token of its own.
    ChildCaller,
    /// A wrap-up needs tokens kept aside and a model call besides the run's own (at least 2).
    WrapUpWithoutRoom,
    /// A scope that draws from shared pools has tool prices: pools hold model calls only, so a
    /// priced tool would spend money its pools never saw (refused rather than let through).
    #[cfg(feature = "pools")]
    PricedToolsWithPools,
    /// A pool the scope draws from ([`ScopeBuilder::pools`](crate::ScopeBuilder::pools)) is
    /// named with an empty name, one too long, or a byte outside `A-Z a-z 0-9 . _ : -`.
    #[cfg(feature = "pools")]
    InvalidPoolName,
    /// A child scope's pools live in another store than its parent's: one transaction could not
    /// reserve in both.
    #[cfg(feature = "pools")]
    PoolStores,
    /// A resumed run draws from pools, and its scope was given neither their store
    /// ([`ScopeBuilder::pool_store`](crate::ScopeBuilder::pool_store)) nor pools of its own
    /// ([`ScopeBuilder::pools`](crate::ScopeBuilder::pools)): built, it would spend outside them.
    #[cfg(feature = "pools")]
    PoolStoreMissing,
    /// The scope's progress policy ([`ScopeBuilder::progress`](crate::ScopeBuilder::progress))
    /// has a value out of range.
    Progress(crate::progress::ProgressError),
}

impl fmt::Display for LimitsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Progress(error) => return error.fmt(f),
            Self::UnknownTool(tool) => {
                return write!(
                    f,
                    "invalid limits: a per-tool limit names the tool {tool}, which the run's tool set does not have"
                );
            }
            _ => {}
        }
        f.write_str(match self {
            Self::ZeroModelCalls => "invalid limits: model calls must be at least 1",
            Self::ZeroRepetitions => "invalid limits: repetitions must be at least 1",
            Self::ZeroDeadline => "invalid limits: the deadline must be longer than zero",
            Self::DeadlineOutOfRange => "invalid limits: the deadline is too far in the future for the clock",
            Self::ZeroCallsPerReply => {
                "invalid limits: calls per reply must be at least 1 (to forbid tools, set tool calls to 0)"
            }
            Self::ZeroReplyBytes => "invalid limits: reply bytes must be at least 1",
            Self::ZeroBudget => "invalid limits: a token or cost budget that is set must be positive",
            Self::ZeroMinOutput => "invalid limits: the minimum output must be at least 1 token",
            Self::Unpriced => "invalid limits: a cost budget needs the scope's prices",
            Self::InvalidToolLimit => {
                "invalid limits: a per-tool limit names a tool by a name no tool may take"
            }
            Self::GrantsBeyondParent => {
                "invalid scope: a child may be granted only capabilities its parent has"
            }
            Self::ChildCaller => {
                "invalid scope: a child's caller is its parent; it takes no token of its own"
            }
            Self::WrapUpWithoutRoom => {
                "invalid limits: a wrap-up keeps a positive number of tokens and one of at least 2 model calls aside"
            }
            #[cfg(feature = "pools")]
            Self::PricedToolsWithPools => {
                "invalid scope: a scope drawing from shared pools cannot price tools (pools hold model calls only)"
            }
            #[cfg(feature = "pools")]
            Self::InvalidPoolName => {
                "invalid scope: a pool name is 1 to 128 bytes of letters, digits and . _ : -"
            }
            #[cfg(feature = "pools")]
            Self::PoolStores => "invalid scope: a child's pools must live in its parent's pool store",
            #[cfg(feature = "pools")]
            Self::PoolStoreMissing => {
                "invalid scope: the resumed run draws from pools; give their store with `ScopeBuilder::pool_store`"
            }
            Self::Progress(_) => "invalid progress policy",
            Self::UnknownTool(_) => "invalid limits: a per-tool limit names a tool the run does not have",
        })
    }
}

impl std::error::Error for LimitsError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_those_of_the_contract() {
        let limits = Limits::default();
        assert_eq!(limits.model_calls(), 6);
        assert_eq!(limits.tool_calls(), 4);
        assert_eq!(limits.repetitions(), 1);
        assert_eq!(limits.deadline(), Duration::from_mins(2));
        assert_eq!(limits.calls_per_reply(), 16);
        assert_eq!(limits.reply_bytes(), 16 * 1024 * 1024);
        assert_eq!(limits.validate(), Ok(()));
    }

    #[test]
    fn zero_limits_are_rejected_except_the_tool_budget() {
        let base = Limits::default;
        assert_eq!(base().with_model_calls(0).validate(), Err(LimitsError::ZeroModelCalls));
        assert_eq!(base().with_repetitions(0).validate(), Err(LimitsError::ZeroRepetitions));
        assert_eq!(base().with_deadline(Duration::ZERO).validate(), Err(LimitsError::ZeroDeadline));
        assert_eq!(base().with_calls_per_reply(0).validate(), Err(LimitsError::ZeroCallsPerReply));
        assert_eq!(base().with_reply_bytes(0).validate(), Err(LimitsError::ZeroReplyBytes));
        assert_eq!(base().with_tool_calls(0).validate(), Ok(()));
        assert_eq!(base().with_calls_per_reply(1).with_reply_bytes(1).validate(), Ok(()));
        assert_eq!(base().with_total_tokens(0).validate(), Err(LimitsError::ZeroBudget));
        assert_eq!(base().with_cost(Micros(0)).validate(), Err(LimitsError::ZeroBudget));
        assert_eq!(base().with_min_output_tokens(0).validate(), Err(LimitsError::ZeroMinOutput));
        assert_eq!(base().with_input_tokens(1).with_output_tokens(1).validate(), Ok(()));
        assert_eq!(base().with_tool_calls_of("refund", 0).validate(), Ok(()), "zero forbids the tool");
    }

    #[test]
    fn a_per_tool_limit_is_read_back_replaced_by_the_last_and_refused_on_a_name_no_tool_may_take() {
        let limits = Limits::default().with_tool_calls_of("refund", 1).with_tool_calls_of("mail", 0);
        assert_eq!(limits.tool_calls_of("refund"), Some(1));
        assert_eq!(limits.tool_calls_of("mail"), Some(0));
        assert_eq!(limits.tool_calls_of("lookup"), None);
        assert_eq!(Limits::default().tool_calls_of("refund"), None);
        assert_eq!(limits.per_tool_calls().collect::<Vec<_>>(), [("mail", 0), ("refund", 1)]);
        let again = limits.clone().with_tool_calls_of("refund", 3);
        assert_eq!(again.per_tool_calls().collect::<Vec<_>>(), [("mail", 0), ("refund", 3)]);
        assert_eq!(again.clone().without_tool_calls_of("mail").per_tool_calls().count(), 1);
        assert_ne!(again, limits);
        for name in ["", "no spaces", "model", "run", &"x".repeat(65)] {
            let invalid = Limits::default().with_tool_calls_of(name, 1);
            assert_eq!(invalid.validate(), Err(LimitsError::InvalidToolLimit), "{name:?}");
        }
        assert_eq!(Limits::default().with_tool_calls_of("x".repeat(64), 1).validate(), Ok(()));
    }

    #[test]
    fn a_wrap_up_keeps_a_call_and_its_tokens_aside_and_leaves_out_the_per_tool_limits() {
        let plain = Limits::default().with_tool_calls_of("refund", 1);
        assert!(matches!(plain.before_wrap_up(|_| Micros(7)), Cow::Borrowed(limits) if *limits == plain));
        let limits = plain.clone().with_total_tokens(1_000).with_cost(Micros(100)).with_wrap_up(64);
        let run = limits.before_wrap_up(|tokens| Micros(tokens / 2));
        assert_eq!(
            (run.model_calls(), run.total_tokens(), run.cost(), run.tool_calls_of("refund")),
            (5, Some(936), Some(Micros(68)), None)
        );
        assert_eq!((run.tool_calls(), run.deadline()), (limits.tool_calls(), limits.deadline()));
    }

    #[test]
    fn display_adds_spend_budgets_only_when_set() {
        let limits = Limits::default().with_total_tokens(6000).with_cost(Micros(20_000));
        assert_eq!(
            limits.to_string(),
            "model calls 6, tool calls 4, repetitions 1, deadline 120s, calls per reply 16, reply bytes 16MiB, \
             total tokens 6000, cost 20000µ, min output 16"
        );
    }

    #[test]
    fn display_adds_per_tool_limits_in_name_order_before_spend_budgets() {
        let limits = Limits::default()
            .with_tool_calls_of("refund", 1)
            .with_tool_calls_of("mail", 0)
            .with_total_tokens(10);
        assert_eq!(
            limits.to_string(),
            "model calls 6, tool calls 4, repetitions 1, deadline 120s, calls per reply 16, reply bytes 16MiB, \
             mail calls 0, refund calls 1, total tokens 10, min output 16"
        );
    }

    #[test]
    fn display_names_every_limit() {
        assert_eq!(
            Limits::default().to_string(),
            "model calls 6, tool calls 4, repetitions 1, deadline 120s, calls per reply 16, reply bytes 16MiB"
        );
        let deadline = |d| {
            let text = Limits::default().with_deadline(d).to_string();
            text.split(", ").nth(3).and_then(|part| part.rsplit(' ').next()).map(str::to_owned)
        };
        assert_eq!(deadline(Duration::from_millis(1500)).as_deref(), Some("1500ms"));
        assert_eq!(deadline(Duration::from_micros(7)).as_deref(), Some("7us"));
        assert_eq!(deadline(Duration::from_nanos(1_000_000_001)).as_deref(), Some("1000000001ns"));
        let bytes =
            |b| Limits::default().with_reply_bytes(b).to_string().rsplit(' ').next().map(str::to_owned);
        assert_eq!(bytes(3 << 20).as_deref(), Some("3MiB"));
        assert_eq!(bytes(1536).as_deref(), Some("1536B"));
        assert_eq!(bytes(64 << 10).as_deref(), Some("64KiB"));
        assert_eq!(bytes(1000).as_deref(), Some("1000B"));
    }
}
