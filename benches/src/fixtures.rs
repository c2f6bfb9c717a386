//! Scopes and tools for the guard benchmarks: the review task's `read_ticket`, called with
//! `{"input":42}`, admitted or refused at a chosen check.
//!
//! # Invariants
//!
//! - [`admit`] is the measured admission: bind the JSON arguments to the tool's typed input,
//!   then check and reserve (signature, cancellation, permission, budget, repetition, reserve).
//!   The body does not run.
//! - A scope armed by [`Check::arm`] refuses its next call of `read_ticket(42)` at exactly its [`Check`], and
//!   records that halt; a scope already halted refuses at the cancellation check without
//!   recording anything more.

use std::sync::OnceLock;

use loopbound::tool::{BindError, Reservation};
use loopbound::{GuardedTool, HaltReason, Limits, Scope, Stop, ToolError};
use loopbound_testkit::review::{self, FINISH_CAPABILITY, READ_CAPABILITY, Review, ReviewTools, TicketInput};

/// The arguments of every measured call.
pub const ARGUMENTS: &str = r#"{"input":42}"#;

/// The review's tools, defined once for the whole process, as a service defines them.
#[must_use]
pub fn tools() -> &'static ReviewTools {
    static TOOLS: OnceLock<ReviewTools> = OnceLock::new();
    TOOLS.get_or_init(review::tools)
}

/// `read_ticket` in one scope: what the guard benchmarks call.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    tool: &'a GuardedTool<TicketInput, Review>,
    scope: &'a Scope<Review>,
}

impl<'a> Target<'a> {
    /// Binds JSON `arguments` to the tool's input. Nothing is counted.
    ///
    /// # Errors
    ///
    /// The binding error.
    pub fn bind(self, arguments: &str) -> Result<TicketInput, BindError> {
        self.tool.bind(arguments)
    }

    /// Checks and reserves one attempt for `input` in the scope.
    ///
    /// # Errors
    ///
    /// The guard's refusal.
    pub fn reserve(self, input: TicketInput) -> Result<Reservation<'a, TicketInput, Review>, ToolError> {
        self.tool.reserve(self.scope, input)
    }
}

/// Binds [`ARGUMENTS`] to the tool's input, then checks and reserves one attempt (dropped
/// unrun). Returns the scope's tool-call count after the reservation.
///
/// # Errors
///
/// The guard's refusal, or a binding error (which the fixtures never cause).
#[inline]
pub fn admit(target: Target<'_>) -> Result<u32, ToolError> {
    let input = target.bind(ARGUMENTS)?;
    target.reserve(input).map(|reservation| reservation.tool_count())
}

/// A scope, over the review's tools defined once.
#[derive(Debug)]
pub struct Fixture {
    /// The scope.
    pub scope: Scope<Review>,
    /// `read_ticket` and `finish_review`, shared by every fixture.
    pub tools: &'static ReviewTools,
}

impl Fixture {
    /// A scope granting `capabilities` under `limits`.
    ///
    /// # Panics
    ///
    /// If `limits` are invalid: the fixtures pass only valid limits.
    #[must_use]
    pub fn new(capabilities: &[&str], limits: Limits) -> Self {
        let scope =
            review::scope(capabilities.iter().copied(), limits).expect("the fixtures' limits are valid");
        Self { scope, tools: tools() }
    }

    /// Both capabilities and the default limits: 6 model calls, 4 tool calls, 1 repetition.
    #[must_use]
    pub fn default_limits() -> Self {
        Self::new(&[READ_CAPABILITY, FINISH_CAPABILITY], Limits::default())
    }

    /// Both capabilities and room for `calls` admissions of the same signature.
    #[must_use]
    pub fn roomy(calls: u32) -> Self {
        let limits = Limits::default().with_tool_calls(calls).with_repetitions(calls.max(1));
        Self::new(&[READ_CAPABILITY, FINISH_CAPABILITY], limits)
    }

    /// Both capabilities, room for `calls` admissions of the same signature, and `caller` as the
    /// caller's token (a service may hand one token to every request).
    ///
    /// # Panics
    ///
    /// Never: these limits are valid.
    #[must_use]
    pub fn roomy_with_caller(calls: u32, caller: tokio_util::sync::CancellationToken) -> Self {
        let limits = Limits::default().with_tool_calls(calls).with_repetitions(calls.max(1));
        let scope = Scope::builder()
            .grants([READ_CAPABILITY, FINISH_CAPABILITY])
            .limits(limits)
            .caller(caller)
            .state(Review::default())
            .build()
            .expect("the fixtures' limits are valid");
        Self { scope, tools: tools() }
    }

    /// Both capabilities, room for `calls` admissions of the same signature, and the run
    /// streamed to a watcher through `feed` ([`ScopeBuilder::watch`](loopbound::ScopeBuilder::watch)):
    /// every admission hands its event to the feed, and wakes the watcher if it waits.
    ///
    /// # Panics
    ///
    /// Never: these limits are valid.
    #[must_use]
    pub fn roomy_watched(calls: u32, feed: loopbound::watch::Feed) -> Self {
        let limits = Limits::default().with_tool_calls(calls).with_repetitions(calls.max(1));
        let scope = Scope::builder()
            .grants([READ_CAPABILITY, FINISH_CAPABILITY])
            .limits(limits)
            .watch(feed)
            .state(Review::default())
            .build()
            .expect("the fixtures' limits are valid");
        Self { scope, tools: tools() }
    }

    /// Both capabilities, room for `calls` admissions of the same signature, and a token and a
    /// cost budget with a price table (both tools free), so that every admission also checks
    /// the tools' prices.
    ///
    /// # Panics
    ///
    /// Never: these limits are valid.
    #[must_use]
    pub fn roomy_with_budgets(calls: u32) -> Self {
        let limits = Limits::default()
            .with_tool_calls(calls)
            .with_repetitions(calls.max(1))
            .with_total_tokens(1 << 40)
            .with_cost(loopbound::spend::Micros(1 << 40));
        let prices = loopbound::spend::Prices::new().other_tools(loopbound::spend::Micros::ZERO).shared();
        let scope = Scope::builder()
            .grants([READ_CAPABILITY, FINISH_CAPABILITY])
            .limits(limits)
            .prices(prices)
            .state(Review::default())
            .build()
            .expect("the fixtures' limits are valid");
        Self { scope, tools: tools() }
    }

    /// The tool every guard benchmark calls, in this fixture's scope.
    #[must_use]
    pub fn read_ticket(&self) -> Target<'_> {
        Target { tool: &self.tools.read_ticket, scope: &self.scope }
    }
}

/// The guard's checks that can refuse a call, in the contract's order after cancellation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// The tool's capability is not granted.
    Permission,
    /// The tool budget is spent.
    Budget,
    /// The signature already reached its repetition limit.
    Repetition,
    /// The scope already halted (here, on a repetition): the cancellation check refuses.
    Halted,
}

impl Check {
    /// Every check, in the guard's order, then the sticky refusal after a halt.
    pub const ALL: [Self; 4] = [Self::Permission, Self::Budget, Self::Repetition, Self::Halted];

    /// A short name for reports.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Permission => "permission",
            Self::Budget => "budget",
            Self::Repetition => "repetition",
            Self::Halted => "halted",
        }
    }

    /// The stop a refusal at this check returns.
    #[must_use]
    pub const fn stop(self) -> Stop {
        match self {
            Self::Permission => Stop::Halted(HaltReason::PermissionDenied),
            Self::Budget => Stop::Halted(HaltReason::ToolBudget),
            Self::Repetition | Self::Halted => Stop::Halted(HaltReason::RepeatedCall),
        }
    }

    /// A scope whose next call of `read_ticket(42)` is refused at this check.
    ///
    /// # Panics
    ///
    /// If the preparatory calls are not admitted or refused as the contract says.
    #[must_use]
    pub fn arm(self) -> Fixture {
        match self {
            Self::Permission => Fixture::new(&[FINISH_CAPABILITY], Limits::default()),
            Self::Budget => {
                Fixture::new(&[READ_CAPABILITY, FINISH_CAPABILITY], Limits::default().with_tool_calls(0))
            }
            Self::Repetition => {
                let fixture = Fixture::default_limits();
                let first = admit(fixture.read_ticket()).expect("the first call is admitted");
                assert_eq!(first, 1, "the first call is the scope's first tool call");
                fixture
            }
            Self::Halted => {
                let fixture = Self::Repetition.arm();
                let refused = admit(fixture.read_ticket());
                assert!(matches!(refused, Err(ToolError::Stopped(_))), "the second call halts");
                fixture
            }
        }
    }

    /// Whether `result` is this check's refusal.
    #[must_use]
    pub fn refused(self, result: &Result<u32, ToolError>) -> bool {
        matches!(result, Err(ToolError::Stopped(stop)) if *stop == self.stop())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopbound::ControlEvent;

    fn log(fixture: &Fixture) -> Vec<String> {
        fixture.scope.events().iter().map(ControlEvent::to_string).collect()
    }

    #[test]
    fn a_roomy_scope_admits_the_same_call_as_often_as_it_has_room() {
        let fixture = Fixture::roomy(3);
        for expected in 1..=3 {
            let count = admit(fixture.read_ticket()).expect("room left");
            assert_eq!(count, expected);
        }
        let refused = admit(fixture.read_ticket());
        assert!(Check::Budget.refused(&refused), "{refused:?}");
    }

    #[test]
    fn a_watched_scope_streams_each_admission_as_it_is_recorded() {
        let (feed, mut updates) = loopbound::watch::channel();
        let fixture = Fixture::roomy_watched(2, feed);
        assert_eq!(admit(fixture.read_ticket()).ok(), Some(1));
        assert_eq!(admit(fixture.read_ticket()).ok(), Some(2));
        let streamed: Vec<String> = std::iter::from_fn(|| updates.try_next())
            .map(|update| match update {
                loopbound::watch::Update::Event(event) => event.to_string(),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(streamed, ["ToolCall read_ticket 1", "ToolCall read_ticket 2"]);
        assert_eq!(streamed, log(&fixture));
    }

    #[test]
    fn each_armed_scope_refuses_at_its_own_check_and_records_one_halt() {
        let expected_logs: [&[&str]; 4] = [
            &["PermissionDenied read_ticket 0"],
            &["ToolBudget read_ticket 0"],
            &["ToolCall read_ticket 1", "RepeatedCall read_ticket 1"],
            &["ToolCall read_ticket 1", "RepeatedCall read_ticket 1"],
        ];
        for (check, expected) in Check::ALL.into_iter().zip(expected_logs) {
            let fixture = check.arm();
            let refused = admit(fixture.read_ticket());
            assert!(check.refused(&refused), "{}: {refused:?}", check.name());
            assert_eq!(log(&fixture), expected, "{}", check.name());
        }
    }
}
