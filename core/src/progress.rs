//! Loop control that knows progress: a run's policy for telling a loop that advances from one
//! that goes round (SPEC §25).
//!
//! A [`Progress`] is set on a scope ([`ScopeBuilder::progress`](crate::ScopeBuilder::progress)).
//! Its checks run inside the guard, in the scope's one critical section, in a fixed place of the
//! order of checks (see the guard's module documentation): nothing here asks the model whether it
//! progressed.
//!
//! - **Repetition by result** ([`Progress::by_result`], per tool): a repeated signature of that
//!   tool is progress when its previous result differs from the one before it (a poll whose job
//!   moved on, a re-read after a write). A repeat whose result did not change counts toward the
//!   repetition limit ([`Limits::repetitions`](crate::Limits::repetitions)), and the tool's poll
//!   limit bounds its attempts per signature in any case. Other tools keep exact repetition.
//! - **Cycles** ([`Progress::cycles`]): admitted signatures that repeat a block of 2 to
//!   `longest` calls, `repeats` times in a row, with no new result after the block's first
//!   occurrence, halt the run [`NoProgress`](crate::Status::NoProgress); the outcome's detail
//!   names the cycle by its tools.
//! - **Error streaks** ([`Progress::error_streak`]): that many tool calls in a row that failed
//!   (the body's error), were refused without a halt (a nudge), named no known tool, or did not
//!   bind, halt the run `NoProgress`.
//! - **A nudge before the halt** ([`Progress::nudge`]): the first repetition or cycle the guard
//!   would halt on is answered instead with an error result that says what was repeated; its body
//!   does not run and nothing is reserved. The next one halts.
//!
//! Results are compared by a digest (SHA-256 of the result's text and whether it is an error,
//! cut to 128 bits), kept under the guard; a result's text is never kept.
//!
//! # Invariants
//!
//! - [`Progress::exact`] (the default) turns every check off: a scope without a policy decides,
//!   records and journals exactly what it did before these checks existed.
//! - A child scope ([`Scope::child`](crate::Scope::child)) starts from its parent's policy;
//!   [`ScopeBuilder::progress`](crate::ScopeBuilder::progress) on the child's builder replaces
//!   it whole. Each scope's checks remember its own calls only.
//! - A policy is validated when the scope is built ([`Progress::validate`]): a zero poll limit,
//!   a zero streak, a period or a repeat count out of range, or an invalid tool name is a typed
//!   error before anything runs, never a panic.
//! - Nothing here carries an argument or a result's text: a nudge names tools and counts only.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// The longest cycle period a policy may look for: a cycle check reads at most
/// `MAX_PERIOD × MAX_REPEATS` recent calls.
pub const MAX_PERIOD: u32 = 8;

/// The most repeats a cycle check may wait for.
pub const MAX_REPEATS: u32 = 32;

/// A run's progress policy (see the [module](self)).
///
/// ```
/// use loopbound::progress::Progress;
/// use loopbound::{Limits, Scope};
///
/// // Spare polling of `job_status` (up to 20 polls of one job), stop oscillation and streaks of
/// // failures, warn the model once before halting.
/// let scope = Scope::builder()
///     .grant("jobs.read")
///     .limits(Limits::default().with_tool_calls(30))
///     .progress(Progress::recommended().by_result("job_status", 20).nudge(true))
///     .build()?;
/// assert_eq!(scope.progress().poll_limit("job_status"), Some(20));
/// assert_eq!(scope.progress().cycle_rule(), Some((3, 3)));
/// # Ok::<(), loopbound::LimitsError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    by_result: BTreeMap<Box<str>, u32>,
    cycles: Option<(u32, u32)>,
    error_streak: Option<u32>,
    nudge: bool,
}

impl Progress {
    /// The cycle rule of [`recommended`](Self::recommended): blocks of 2 or 3 calls, 3 times in
    /// a row.
    pub const RECOMMENDED_CYCLES: (u32, u32) = (3, 3);

    /// The error streak of [`recommended`](Self::recommended): 3 failed calls in a row.
    pub const RECOMMENDED_ERROR_STREAK: u32 = 3;

    /// The seed's rules, and the default: exact repetition for every tool, no cycle check, no
    /// error streak, no nudge.
    #[must_use]
    pub fn exact() -> Self {
        Self::default()
    }

    /// Cycles of period 2 or 3 repeated 3 times, and an error streak of 3; no tool repeats by
    /// result until named ([`by_result`](Self::by_result)), and no nudge until asked
    /// ([`nudge`](Self::nudge)).
    #[must_use]
    pub fn recommended() -> Self {
        let (longest, repeats) = Self::RECOMMENDED_CYCLES;
        Self::default().cycles(longest, repeats).error_streak(Self::RECOMMENDED_ERROR_STREAK)
    }

    /// Repeats of `tool` are judged by result, and each of its signatures is admitted at most
    /// `polls` times (the poll limit). Naming a tool again replaces its poll limit.
    #[must_use]
    pub fn by_result(mut self, tool: impl Into<String>, polls: u32) -> Self {
        self.by_result.insert(tool.into().into_boxed_str(), polls);
        self
    }

    /// Halts a run whose calls repeat a block of 2 to `longest` signatures `repeats` times in a
    /// row with no new result.
    #[must_use]
    pub fn cycles(mut self, longest: u32, repeats: u32) -> Self {
        self.cycles = Some((longest, repeats));
        self
    }

    /// Halts a run after `calls` tool calls in a row that failed, were refused or did not bind.
    #[must_use]
    pub fn error_streak(mut self, calls: u32) -> Self {
        self.error_streak = Some(calls);
        self
    }

    /// Answers the first repetition or cycle with an error result instead of halting.
    #[must_use]
    pub fn nudge(mut self, on: bool) -> Self {
        self.nudge = on;
        self
    }

    /// The poll limit of `tool`, if its repeats are judged by result.
    #[must_use]
    pub fn poll_limit(&self, tool: &str) -> Option<u32> {
        self.by_result.get(tool).copied()
    }

    /// Every tool judged by result, with its poll limit, in code-point order.
    pub fn by_result_tools(&self) -> impl Iterator<Item = (&str, u32)> {
        self.by_result.iter().map(|(tool, polls)| (&**tool, *polls))
    }

    /// The cycle rule (longest period, repeats), if set.
    #[must_use]
    pub fn cycle_rule(&self) -> Option<(u32, u32)> {
        self.cycles
    }

    /// The error streak that halts, if set.
    #[must_use]
    pub fn streak_rule(&self) -> Option<u32> {
        self.error_streak
    }

    /// Whether the first repetition or cycle is answered with a nudge.
    #[must_use]
    pub fn nudges(&self) -> bool {
        self.nudge
    }

    /// Whether any check is on: a policy that is not active costs a run nothing.
    #[must_use]
    pub fn is_active(&self) -> bool {
        !self.by_result.is_empty() || self.cycles.is_some() || self.error_streak.is_some() || self.nudge
    }

    /// Whether this policy stops no less than `definition` (a journaled run's stored policy),
    /// so that a resumed attempt may run under it: every tool it judges by result is judged so
    /// there with a poll limit at least as high; its cycle rule looks for periods at least as
    /// long and stops after no more repeats; its streak is no longer; it nudges only if that one
    /// does. Judging fewer tools by result is stricter, never looser.
    #[cfg(feature = "journal")]
    pub(crate) fn no_looser_than(&self, definition: &Self) -> bool {
        let by_result = self
            .by_result
            .iter()
            .all(|(tool, polls)| definition.by_result.get(tool).is_some_and(|mine| polls <= mine));
        let cycles = match (self.cycles, definition.cycles) {
            (_, None) => true,
            (Some((longest, repeats)), Some((mine_longest, mine_repeats))) => {
                longest >= mine_longest && repeats <= mine_repeats
            }
            (None, Some(_)) => false,
        };
        let streak = match (self.error_streak, definition.error_streak) {
            (_, None) => true,
            (Some(calls), Some(mine)) => calls <= mine,
            (None, Some(_)) => false,
        };
        by_result && cycles && streak && (!self.nudge || definition.nudge)
    }

    /// Checks the policy's values.
    ///
    /// # Errors
    ///
    /// The first [`ProgressError`] found.
    pub fn validate(&self) -> Result<(), ProgressError> {
        for (tool, polls) in &self.by_result {
            if !crate::event::Subject::is_tool_name(tool) {
                return Err(ProgressError::InvalidTool);
            }
            if *polls == 0 {
                return Err(ProgressError::ZeroPolls);
            }
        }
        if let Some((longest, repeats)) = self.cycles {
            if !(2..=MAX_PERIOD).contains(&longest) {
                return Err(ProgressError::CyclePeriod);
            }
            if !(2..=MAX_REPEATS).contains(&repeats) {
                return Err(ProgressError::CycleRepeats);
            }
        }
        if self.error_streak == Some(0) {
            return Err(ProgressError::ZeroErrorStreak);
        }
        Ok(())
    }
}

/// Why a [`Progress`] policy was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProgressError {
    /// A tool judged by result needs a poll limit of at least 1.
    ZeroPolls,
    /// A tool judged by result has an invalid name.
    InvalidTool,
    /// A cycle's longest period must be 2 to [`MAX_PERIOD`].
    CyclePeriod,
    /// A cycle's repeats must be 2 to [`MAX_REPEATS`].
    CycleRepeats,
    /// An error streak must be at least 1 call.
    ZeroErrorStreak,
}

impl fmt::Display for ProgressError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroPolls => f.write_str("invalid progress policy: a poll limit must be at least 1"),
            Self::InvalidTool => {
                f.write_str("invalid progress policy: a tool judged by result has an invalid name")
            }
            Self::CyclePeriod => {
                write!(f, "invalid progress policy: a cycle's longest period must be 2 to {MAX_PERIOD}")
            }
            Self::CycleRepeats => {
                write!(f, "invalid progress policy: a cycle's repeats must be 2 to {MAX_REPEATS}")
            }
            Self::ZeroErrorStreak => {
                f.write_str("invalid progress policy: an error streak must be at least 1")
            }
        }
    }
}

impl std::error::Error for ProgressError {}

/// What the guard answered instead of running a call: the first repetition or cycle of a run
/// whose policy nudges. Its [`Display`](fmt::Display) is the error result the model is told;
/// it names tools and counts, never arguments or results.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nudge {
    tool: Arc<str>,
    cycle: Option<Vec<Arc<str>>>,
    repeats: u32,
}

impl Nudge {
    /// A repeat of one signature of `tool`, after `repeats` admitted attempts.
    pub(crate) fn repeat(tool: Arc<str>, repeats: u32) -> Self {
        Self { tool, cycle: None, repeats }
    }

    /// A cycle of `tools` (in call order) that came round `repeats` times.
    pub(crate) fn cycle(tool: Arc<str>, tools: Vec<Arc<str>>, repeats: u32) -> Self {
        Self { tool, cycle: Some(tools), repeats }
    }

    /// The tool of the call that was not run.
    #[must_use]
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// The cycle's tools in call order, for a cycle; `None` for a repeat of one signature.
    #[must_use]
    pub fn cycle_tools(&self) -> Option<impl Iterator<Item = &str>> {
        self.cycle.as_ref().map(|tools| tools.iter().map(|tool| &**tool))
    }
}

impl fmt::Display for Nudge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.cycle {
            None => write!(
                f,
                "Error: no progress: {} was called again with the same arguments after {} attempt(s) \
                 that got the same result; this call was not run. Use the result you have or change \
                 course: the next repeat ends the run.",
                self.tool, self.repeats
            ),
            Some(tools) => {
                f.write_str("Error: no progress: the calls ")?;
                write_cycle(f, tools)?;
                write!(
                    f,
                    " came round {} times with no new result; this call to {} was not run. Change \
                     course: the next repeat ends the run.",
                    self.repeats, self.tool
                )
            }
        }
    }
}

/// Writes a cycle's tools as `a → b → a`.
pub(crate) fn write_cycle(f: &mut fmt::Formatter<'_>, tools: &[Arc<str>]) -> fmt::Result {
    for (at, tool) in tools.iter().enumerate() {
        if at > 0 {
            f.write_str(" → ")?;
        }
        f.write_str(tool)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_is_the_default_and_inactive() {
        assert_eq!(Progress::exact(), Progress::default());
        assert!(!Progress::exact().is_active());
        assert_eq!(Progress::exact().validate(), Ok(()));
    }

    #[test]
    fn recommended_sets_cycles_and_a_streak_but_no_tool_and_no_nudge() {
        let recommended = Progress::recommended();
        assert_eq!(recommended.cycle_rule(), Some((3, 3)));
        assert_eq!(recommended.streak_rule(), Some(3));
        assert_eq!(recommended.by_result_tools().count(), 0);
        assert!(!recommended.nudges());
        assert!(recommended.is_active());
    }

    #[test]
    fn bad_values_are_typed_errors() {
        let cases = [
            (Progress::exact().by_result("poll", 0), ProgressError::ZeroPolls),
            (Progress::exact().by_result("not a name", 3), ProgressError::InvalidTool),
            (Progress::exact().by_result("model", 3), ProgressError::InvalidTool),
            (Progress::exact().cycles(1, 3), ProgressError::CyclePeriod),
            (Progress::exact().cycles(MAX_PERIOD + 1, 3), ProgressError::CyclePeriod),
            (Progress::exact().cycles(2, 1), ProgressError::CycleRepeats),
            (Progress::exact().cycles(2, MAX_REPEATS + 1), ProgressError::CycleRepeats),
            (Progress::exact().error_streak(0), ProgressError::ZeroErrorStreak),
        ];
        for (policy, error) in cases {
            assert_eq!(policy.validate(), Err(error), "{policy:?}");
        }
        assert_eq!(Progress::exact().cycles(MAX_PERIOD, MAX_REPEATS).by_result("p", 1).validate(), Ok(()));
    }

    #[test]
    fn naming_a_tool_again_replaces_its_poll_limit() {
        let policy = Progress::exact().by_result("poll", 3).by_result("poll", 5);
        assert_eq!(policy.by_result_tools().collect::<Vec<_>>(), [("poll", 5)]);
    }

    #[cfg(feature = "journal")]
    #[test]
    fn a_policy_is_no_looser_than_a_definition_when_it_stops_no_less() {
        let definition = Progress::recommended().by_result("poll", 10);
        let cases = [
            (definition.clone(), true),
            (Progress::recommended(), true),
            (Progress::recommended().by_result("poll", 5), true),
            (Progress::exact().cycles(4, 2).error_streak(2), true),
            (Progress::recommended().by_result("poll", 11), false),
            (Progress::recommended().by_result("other", 1), false),
            (Progress::exact().error_streak(3), false),
            (Progress::exact().cycles(2, 3).error_streak(3), false),
            (Progress::exact().cycles(3, 4).error_streak(3), false),
            (Progress::recommended().error_streak(4), false),
            (Progress::recommended().nudge(true), false),
        ];
        for (policy, expected) in cases {
            assert_eq!(policy.no_looser_than(&definition), expected, "{policy:?}");
        }
        assert!(Progress::exact().no_looser_than(&Progress::exact()));
        assert!(Progress::recommended().nudge(true).no_looser_than(&Progress::recommended().nudge(true)));
    }

    #[test]
    fn a_nudge_names_tools_and_counts_only() {
        let repeat = Nudge::repeat("job_status".into(), 2);
        assert_eq!(
            repeat.to_string(),
            "Error: no progress: job_status was called again with the same arguments after 2 \
             attempt(s) that got the same result; this call was not run. Use the result you have \
             or change course: the next repeat ends the run."
        );
        let cycle = Nudge::cycle("b".into(), vec!["a".into(), "b".into()], 3);
        assert_eq!(
            cycle.to_string(),
            "Error: no progress: the calls a → b came round 3 times with no new result; this call \
             to b was not run. Change course: the next repeat ends the run."
        );
        assert_eq!(cycle.cycle_tools().map(Iterator::collect::<Vec<_>>), Some(vec!["a", "b"]));
    }
}
