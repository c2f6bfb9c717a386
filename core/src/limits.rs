//! The four limits of a run and their validation.
//!
//! # Invariants
//!
//! - A [`Limits`] value can hold anything; it is checked by [`Limits::validate`], which every
//!   scope runs before it exists. A scope therefore never runs with zero model calls, zero
//!   repetitions or a zero deadline.
//! - A tool-call budget of zero is valid: it means that no tool may run.

use std::fmt;
use std::time::Duration;

/// The bounds of one run. Every field counts something the host can observe in the events.
///
/// | limit | default | counts |
/// |---|---|---|
/// | [`model_calls`](Limits::model_calls) | 6 | transport attempts, streaming or not, counted before the call is sent |
/// | [`tool_calls`](Limits::tool_calls) | 4 | admitted tool attempts over all tools, counted before the body runs |
/// | [`repetitions`](Limits::repetitions) | 1 | admitted attempts per signature (tool name + canonical typed arguments) |
/// | [`deadline`](Limits::deadline) | 120 s | wall time of the run, from the scope's creation |
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
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Limits {
    model_calls: u32,
    tool_calls: u32,
    repetitions: u32,
    deadline: Duration,
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

    /// Returns these limits with `model_calls` transport attempts allowed.
    #[must_use]
    pub const fn with_model_calls(mut self, model_calls: u32) -> Self {
        self.model_calls = model_calls;
        self
    }

    /// Returns these limits with `tool_calls` admitted tool attempts allowed (zero is valid).
    #[must_use]
    pub const fn with_tool_calls(mut self, tool_calls: u32) -> Self {
        self.tool_calls = tool_calls;
        self
    }

    /// Returns these limits with `repetitions` admitted attempts allowed per signature.
    #[must_use]
    pub const fn with_repetitions(mut self, repetitions: u32) -> Self {
        self.repetitions = repetitions;
        self
    }

    /// Returns these limits with the run's wall-clock `deadline`.
    #[must_use]
    pub const fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
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

    /// Checks that these limits can bound a run.
    ///
    /// # Errors
    ///
    /// Returns the first problem found: zero model calls, zero repetitions or a zero deadline.
    pub const fn validate(&self) -> Result<(), LimitsError> {
        if self.model_calls == 0 {
            return Err(LimitsError::ZeroModelCalls);
        }
        if self.repetitions == 0 {
            return Err(LimitsError::ZeroRepetitions);
        }
        if self.deadline.is_zero() {
            return Err(LimitsError::ZeroDeadline);
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
        }
    }
}

impl fmt::Display for Limits {
    /// Formats as `model calls 6, tool calls 4, repetitions 1, deadline 120s`; a deadline that is
    /// not a whole number of seconds is written in milliseconds (`1500ms`), or in microseconds or
    /// nanoseconds when even that is not whole.
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
            Some((unit, suffix)) => write!(f, "{}{suffix}", nanos / unit),
            None => write!(f, "{nanos}ns"),
        }
    }
}

/// Why a set of limits, or a scope built from them, was rejected before anything ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
}

impl fmt::Display for LimitsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ZeroModelCalls => "invalid limits: model calls must be at least 1",
            Self::ZeroRepetitions => "invalid limits: repetitions must be at least 1",
            Self::ZeroDeadline => "invalid limits: the deadline must be longer than zero",
            Self::DeadlineOutOfRange => "invalid limits: the deadline is too far in the future for the clock",
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
        assert_eq!(limits.validate(), Ok(()));
    }

    #[test]
    fn zero_limits_are_rejected_except_the_tool_budget() {
        let base = Limits::default();
        assert_eq!(base.with_model_calls(0).validate(), Err(LimitsError::ZeroModelCalls));
        assert_eq!(base.with_repetitions(0).validate(), Err(LimitsError::ZeroRepetitions));
        assert_eq!(base.with_deadline(Duration::ZERO).validate(), Err(LimitsError::ZeroDeadline));
        assert_eq!(base.with_tool_calls(0).validate(), Ok(()));
    }

    #[test]
    fn display_names_every_limit() {
        assert_eq!(
            Limits::default().to_string(),
            "model calls 6, tool calls 4, repetitions 1, deadline 120s"
        );
        let deadline =
            |d| Limits::default().with_deadline(d).to_string().rsplit(' ').next().map(str::to_owned);
        assert_eq!(deadline(Duration::from_millis(1500)).as_deref(), Some("1500ms"));
        assert_eq!(deadline(Duration::from_micros(7)).as_deref(), Some("7us"));
        assert_eq!(deadline(Duration::from_nanos(1_000_000_001)).as_deref(), Some("1000000001ns"));
    }
}
