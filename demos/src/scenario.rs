//! The scripted scenarios of the review task: the eight of SPEC §11, then one per progress check
//! (SPEC §25).
//!
//! A scenario fixes what the host grants, the limits it sets, its progress policy, and what the
//! scripted model answers on its n-th call. The model's answers are real tool-call messages that the runtime really
//! executes through the guarded tools; nothing about the outcome is scripted.
//!
//! # Invariants
//!
//! - A script depends only on the call number, never on the conversation, so the same scenario
//!   gives the same events on the streaming and the non-streaming path, in both compositions.
//! - [`Scenario::expected`] is the SPEC §11 table, written out, with a row for each progress
//!   scenario; the tests compare real runs with it.
//! - Only the progress scenarios set a progress policy; the eight of SPEC §11 keep the default,
//!   exact repetition, so their transcripts do not mention one.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use loopbound::progress::Progress;
use loopbound::scripted::{Scripted, Step};
use loopbound::transport::{ChatRequest, ModelReply, TransportError};
use loopbound::{Limits, Status};

use loopbound_fixtures::review::{CLOSING, FINISH_CAPABILITY, READ_CAPABILITY, TICKET_ID};

/// The model's closing sentence, which is never proof that the review was done.
pub const FINAL_SENTENCE: &str = CLOSING;
/// What the `unavailable` scenario's transport reports.
pub const UNAVAILABLE_MESSAGE: &str = "scripted transport: connection refused";
/// The ticket the `cycle` scenario's model tries to finish instead of 42: not in scope, so
/// `finish_review` fails on it every time.
pub const WRONG_TICKET: i64 = 7;
/// How many attempts of one `finish_review` call the `retry` scenario's policy admits.
pub const RETRY_ATTEMPTS: u32 = 3;

/// One scripted scenario of the review task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scenario {
    /// `read_ticket(42)`, `finish_review(42)`, then "Review finished.".
    Complete,
    /// "Review finished." at once, without any tool call.
    Incomplete,
    /// `read_ticket(42)` while only `review.finish` is granted.
    Forbidden,
    /// `read_ticket(42)` on every call.
    Repeat,
    /// `read_ticket(n)` on call n.
    Changing,
    /// The complete script with a budget of one model call.
    Budget,
    /// A model that never answers, with a deadline of one second.
    Deadline,
    /// A transport that cannot reach its provider.
    Unavailable,
    /// `finish_review(42)` before the ticket is read, `read_ticket(42)`, `finish_review(42)` again,
    /// with `finish_review` judged by result.
    Retry,
    /// `read_ticket(42)` and `finish_review(7)` in turn, under the recommended policy.
    Cycle,
    /// `finish_review(n)` on call n, under the recommended policy.
    Streak,
    /// `read_ticket(42)` on every call, with a nudge before the halt.
    Nudge,
}

/// What a scenario must produce: the SPEC §11 table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expected {
    /// The run's status.
    pub status: Status,
    /// Tool calls admitted by the guard.
    pub tool_calls: u32,
    /// Model calls admitted by the budget.
    pub model_calls: u32,
}

impl Scenario {
    /// Every scenario: the SPEC table's order, then the progress scenarios.
    pub const ALL: [Self; 12] = [
        Self::Complete,
        Self::Incomplete,
        Self::Forbidden,
        Self::Repeat,
        Self::Changing,
        Self::Budget,
        Self::Deadline,
        Self::Unavailable,
        Self::Retry,
        Self::Cycle,
        Self::Streak,
        Self::Nudge,
    ];

    /// The scenario's name on the command line, e.g. `repeat`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Complete => "complete",
            Self::Incomplete => "incomplete",
            Self::Forbidden => "forbidden",
            Self::Repeat => "repeat",
            Self::Changing => "changing",
            Self::Budget => "budget",
            Self::Deadline => "deadline",
            Self::Unavailable => "unavailable",
            Self::Retry => "retry",
            Self::Cycle => "cycle",
            Self::Streak => "streak",
            Self::Nudge => "nudge",
        }
    }

    /// What the scenario demonstrates, in one sentence.
    #[must_use]
    pub const fn demonstrates(self) -> &'static str {
        match self {
            Self::Complete => "the whole review: read ticket 42, finish it, and the host's condition holds",
            Self::Incomplete => {
                "the model says \"Review finished.\" without doing it: its words are not proof"
            }
            Self::Forbidden => {
                "a tool the model can see is not one it may run: read_ticket without ticket.read"
            }
            Self::Repeat => "the same call again is refused: one admitted attempt per signature",
            Self::Changing => "new arguments on every call are stopped by the tool budget",
            Self::Budget => "a model-call budget of one refuses the call that follows a tool result",
            Self::Deadline => "a model that never answers is cut off by the one-second deadline",
            Self::Unavailable => "a provider that cannot be reached ends the run without text",
            Self::Retry => {
                "finish_review failed, the ticket was read, the same call again: judged by its result, it runs"
            }
            Self::Cycle => "read_ticket(42), finish_review(7), round and round: the cycle is halted",
            Self::Streak => "finish_review with a new id every time, failing: three failures in a row halt",
            Self::Nudge => "the first repeat is answered with a warning instead of running; the next halts",
        }
    }

    /// The capabilities the host grants.
    #[must_use]
    pub const fn capabilities(self) -> &'static [&'static str] {
        match self {
            Self::Forbidden => &[FINISH_CAPABILITY],
            _ => &[READ_CAPABILITY, FINISH_CAPABILITY],
        }
    }

    /// The limits the host sets.
    #[must_use]
    pub fn limits(self) -> Limits {
        let defaults = Limits::default();
        match self {
            Self::Budget => defaults.with_model_calls(1),
            Self::Deadline => defaults.with_deadline(Duration::from_secs(1)),
            // Re-reads are allowed, so that the repetition limit does not end the oscillation
            // before the cycle check can.
            Self::Cycle => defaults.with_tool_calls(8).with_repetitions(3),
            _ => defaults,
        }
    }

    /// The progress policy the host sets: the default, exact repetition, except in the progress
    /// scenarios.
    #[must_use]
    pub fn progress(self) -> Progress {
        match self {
            Self::Retry => Progress::exact().by_result("finish_review", RETRY_ATTEMPTS),
            Self::Cycle | Self::Streak => Progress::recommended(),
            Self::Nudge => Progress::exact().nudge(true),
            _ => Progress::exact(),
        }
    }

    /// What the scripted model does on its `call`-th call (1-based).
    #[must_use]
    pub fn step(self, call: u32) -> Step {
        match self {
            Self::Complete | Self::Budget => match call {
                1 => read_ticket(call, TICKET_ID),
                2 => finish_review(call, TICKET_ID),
                _ => Step::Reply(ModelReply::text(FINAL_SENTENCE)),
            },
            Self::Incomplete => Step::Reply(ModelReply::text(FINAL_SENTENCE)),
            Self::Forbidden | Self::Repeat | Self::Nudge => read_ticket(call, TICKET_ID),
            Self::Changing => read_ticket(call, i64::from(call)),
            Self::Retry => match call {
                1 | 3 => finish_review(call, TICKET_ID),
                2 => read_ticket(call, TICKET_ID),
                _ => Step::Reply(ModelReply::text(FINAL_SENTENCE)),
            },
            Self::Cycle if call % 2 == 1 => read_ticket(call, TICKET_ID),
            Self::Cycle => finish_review(call, WRONG_TICKET),
            Self::Streak => finish_review(call, i64::from(call)),
            Self::Deadline => Step::Hang,
            Self::Unavailable => Step::Fail(TransportError::unavailable(UNAVAILABLE_MESSAGE.to_owned())),
        }
    }

    /// A scripted transport that plays this scenario.
    #[must_use]
    pub fn transport(self) -> Scripted<impl Fn(u32, &ChatRequest<'_>) -> Step + Send + Sync> {
        Scripted::new(move |call, _request: &ChatRequest<'_>| self.step(call))
    }

    /// What a run of this scenario must produce, in either composition and on either path.
    #[must_use]
    pub const fn expected(self) -> Expected {
        let (status, tool_calls, model_calls) = match self {
            Self::Complete => (Status::Completed, 2, 3),
            Self::Incomplete => (Status::Incomplete, 0, 1),
            Self::Forbidden => (Status::PermissionDenied, 0, 1),
            Self::Repeat => (Status::RepeatedCall, 1, 2),
            Self::Changing => (Status::ToolBudget, 4, 5),
            Self::Budget => (Status::ModelBudget, 1, 1),
            Self::Deadline => (Status::DeadlineExceeded, 0, 1),
            Self::Unavailable => (Status::ProviderUnavailable, 0, 1),
            Self::Retry => (Status::Completed, 3, 4),
            Self::Cycle => (Status::NoProgress, 5, 6),
            Self::Streak => (Status::NoProgress, 3, 3),
            Self::Nudge => (Status::RepeatedCall, 1, 3),
        };
        Expected { status, tool_calls, model_calls }
    }
}

/// A reply asking for `read_ticket(id)`.
fn read_ticket(call: u32, id: i64) -> Step {
    tool_call(call, "read_ticket", id)
}

/// A reply asking for `finish_review(id)`.
fn finish_review(call: u32, id: i64) -> Step {
    tool_call(call, "finish_review", id)
}

fn tool_call(call: u32, tool: &str, id: i64) -> Step {
    Step::Reply(ModelReply::call(format!("call-{call}"), tool, format!(r#"{{"input":{id}}}"#)))
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is not a scenario.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownScenario(pub String);

impl fmt::Display for UnknownScenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = Scenario::ALL.iter().map(|s| s.name()).collect();
        write!(f, "unknown scenario '{}'; expected one of: {}", self.0, names.join(", "))
    }
}

impl std::error::Error for UnknownScenario {}

impl FromStr for Scenario {
    type Err = UnknownScenario;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|s| s.name() == name).ok_or_else(|| UnknownScenario(name.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        for scenario in Scenario::ALL {
            assert_eq!(scenario.name().parse(), Ok(scenario));
        }
        assert_eq!(
            "Complete".parse::<Scenario>(),
            Err(UnknownScenario("Complete".to_owned())),
            "names are case-sensitive"
        );
    }

    #[test]
    fn only_the_forbidden_scenario_withholds_ticket_read() {
        let withholding: Vec<Scenario> =
            Scenario::ALL.into_iter().filter(|s| !s.capabilities().contains(&READ_CAPABILITY)).collect();
        assert_eq!(withholding, [Scenario::Forbidden]);
        assert_eq!(Scenario::Forbidden.capabilities(), [FINISH_CAPABILITY]);
    }

    #[test]
    fn budget_and_deadline_change_one_limit_each() {
        assert_eq!(Scenario::Budget.limits(), Limits::default().with_model_calls(1));
        assert_eq!(Scenario::Deadline.limits(), Limits::default().with_deadline(Duration::from_secs(1)));
        assert_eq!(Scenario::Complete.limits(), Limits::default());
    }

    #[test]
    fn only_the_progress_scenarios_set_a_policy() {
        let with_policy: Vec<Scenario> =
            Scenario::ALL.into_iter().filter(|s| s.progress() != Progress::exact()).collect();
        assert_eq!(with_policy, [Scenario::Retry, Scenario::Cycle, Scenario::Streak, Scenario::Nudge]);
        assert_eq!(Scenario::Retry.progress().poll_limit("finish_review"), Some(3));
        assert_eq!(Scenario::Retry.progress().poll_limit("read_ticket"), None);
        assert_eq!(Scenario::Cycle.progress(), Progress::recommended());
        assert_eq!(Scenario::Nudge.progress(), Progress::exact().nudge(true));
        assert_eq!(Scenario::Cycle.limits(), Limits::default().with_tool_calls(8).with_repetitions(3));
    }

    #[test]
    fn cycle_alternates_read_and_the_wrong_finish_and_streak_changes_its_id() {
        assert_eq!(Scenario::Cycle.step(5), read_ticket(5, TICKET_ID));
        assert_eq!(Scenario::Cycle.step(6), finish_review(6, WRONG_TICKET));
        assert_eq!(Scenario::Streak.step(2), finish_review(2, 2));
        assert_eq!(Scenario::Retry.step(3), finish_review(3, TICKET_ID));
        assert_eq!(Scenario::Retry.step(4), Step::Reply(ModelReply::text(FINAL_SENTENCE)));
    }

    #[test]
    fn changing_asks_for_ticket_n_on_call_n() {
        assert_eq!(Scenario::Changing.step(3), read_ticket(3, 3));
        let Step::Reply(reply) = Scenario::Changing.step(5) else { panic!("a reply") };
        assert_eq!(reply.tool_calls[0].arguments, r#"{"input":5}"#);
        assert_eq!(reply.tool_calls[0].id, "call-5");
    }
}
