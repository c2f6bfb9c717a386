//! The console's own vocabulary: how it describes a composition, what it lists as absent, and
//! the process exit codes. None of this is the library's: a host that embeds loopbound picks
//! its own words and codes.
//!
//! # Invariants
//!
//! - Exit codes follow SPEC §9: 0 `Completed`; 2 every other status; 130 the caller cancelled;
//!   1 a provider error. The console adds 64 (bad arguments), 70 (its own failure) and 74 (a
//!   journal that failed or refused).
//! - An [`Agent`] description is data (composition, cap, telemetry, absent capabilities); its
//!   one-line form is what `--json` prints, and the transcript lays out the same fields.

use std::fmt;

use loopbound::progress::Progress;
use loopbound::{Limits, RunError, Status};
use loopbound_fixtures::Composition;

/// `error` and each of its causes, joined by `: `, as the console prints an error: every level
/// of the chain says something of its own, so nothing repeats.
#[must_use]
pub fn chained(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(level) = cause {
        text.push_str(": ");
        text.push_str(&level.to_string());
        cause = level.source();
    }
    text
}

/// Exit code of a completed run.
pub const EXIT_COMPLETED: i32 = 0;
/// Exit code of a provider error (authentication, malformed reply, the provider's own cancellation).
pub const EXIT_PROVIDER_ERROR: i32 = 1;
/// Exit code of a controlled stop, an incomplete run, or an unavailable provider.
pub const EXIT_STOPPED: i32 = 2;
/// Exit code of bad arguments (`EX_USAGE`).
pub const EXIT_USAGE: i32 = 64;
/// Exit code of a failure of the console itself: its scope or its report could not be built
/// (`EX_SOFTWARE`). The built-in scenarios never cause it.
pub const EXIT_INTERNAL: i32 = 70;
/// Exit code of a run cancelled by its caller (as for SIGINT).
pub const EXIT_CANCELLED: i32 = 130;
/// Exit code of a journal that failed or refused (`EX_IOERR`): a finished run, a corrupt or
/// unreadable file, a refused approval or reconciliation, another worker's lease on the run.
pub const EXIT_JOURNAL: i32 = 74;

/// The exit code of a run that ended with `status`: 0 for `Completed`, 2 for every other.
#[must_use]
pub fn status_exit_code(status: Status) -> i32 {
    if status == Status::Completed { EXIT_COMPLETED } else { EXIT_STOPPED }
}

/// The exit code of a run that produced no outcome: 130 for cancellation, 1 for a provider
/// error.
#[must_use]
pub fn error_exit_code(error: &RunError) -> i32 {
    match error {
        RunError::Cancelled | RunError::CancelledUnrecorded => EXIT_CANCELLED,
        RunError::Journal(_) => EXIT_JOURNAL,
        // A cost budget without the prices it needs, or a request option the transport cannot
        // send: the console's configuration, refused before anything ran.
        RunError::Unpriced(_) | RunError::Unsupported(_) => EXIT_USAGE,
        _ => EXIT_PROVIDER_ERROR,
    }
}

/// What a progress policy turns on, one item per check, in the console's words: none for exact
/// repetition (the default). No item contains `, `, so the items can be laid out as a list.
#[must_use]
pub fn progress_items(policy: &Progress) -> Vec<String> {
    let mut items: Vec<String> = policy
        .by_result_tools()
        .map(|(tool, polls)| format!("{tool} judged by result (at most {polls} attempts per call)"))
        .collect();
    if let Some((longest, repeats)) = policy.cycle_rule() {
        items.push(format!("halt on cycles of 2 to {longest} calls repeated {repeats} times"));
    }
    if let Some(calls) = policy.streak_rule() {
        items.push(format!("halt on {calls} failed calls in a row"));
    }
    if policy.nudges() {
        items.push("one warning before a repeat or a cycle halts".to_owned());
    }
    items
}

/// Optional capabilities that richer agent runtimes bring and that neither composition has.
pub const ABSENT_CAPABILITIES: &[&str] = &[
    "todo tracking",
    "agent modes",
    "file memory",
    "skill discovery",
    "web search",
    "permanent tool auto-approval",
    "shell",
    "shared file store",
    "background agents",
    "external loop evaluator",
    "context compaction",
];

/// What the console says about the agent loop before a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Agent {
    /// The composition.
    pub composition: Composition,
    /// The loop's own iteration cap under the scope's limits.
    pub iteration_cap: u32,
    /// Whether tracing spans are on.
    pub telemetry: bool,
    /// The optional capabilities that are absent.
    pub absent: &'static [&'static str],
}

impl Agent {
    /// The description of `composition` under `limits`.
    #[must_use]
    pub fn new(composition: Composition, limits: &Limits) -> Self {
        Self {
            composition,
            iteration_cap: composition.max_iterations(limits),
            telemetry: composition.telemetry(),
            absent: ABSENT_CAPABILITIES,
        }
    }

    /// The loop's line: `harness loop, iteration cap 7, tracing spans on`.
    #[must_use]
    pub fn loop_line(&self) -> String {
        let telemetry = if self.telemetry { "tracing spans on" } else { "no telemetry" };
        format!("{} loop, iteration cap {}, {telemetry}", self.composition, self.iteration_cap)
    }

    /// The absent capabilities' line: `absent: todo tracking, …`.
    #[must_use]
    pub fn absent_line(&self) -> String {
        format!("absent: {}", self.absent.join(", "))
    }
}

impl fmt::Display for Agent {
    /// The one-line form: the loop's line and the absent capabilities, separated by `; `.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}; {}", self.loop_line(), self.absent_line())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopbound::transport::TransportError;

    #[test]
    fn exit_codes_follow_the_contract() {
        let codes: Vec<i32> = Status::ALL.iter().copied().map(status_exit_code).collect();
        assert_eq!(codes, [0, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2]);
        assert_eq!(error_exit_code(&RunError::Cancelled), 130);
        assert_eq!(error_exit_code(&RunError::CancelledUnrecorded), 130);
        let finished = loopbound::journal::JournalError::Finished(Status::Completed);
        assert_eq!(error_exit_code(&RunError::Journal(finished)), 74);
        let held = loopbound::journal::JournalError::LeaseHeld {
            holder: "host-b:7".to_owned(),
            remaining: std::time::Duration::from_secs(3),
        };
        assert_eq!(error_exit_code(&RunError::Journal(held)), 74);
        assert_eq!(error_exit_code(&RunError::Provider(TransportError::cancelled())), 1);
        assert_eq!(error_exit_code(&RunError::Unpriced("the model m".to_owned())), 64);
        let seed = TransportError::unsupported("AnthropicTransport cannot send seed");
        assert_eq!(error_exit_code(&RunError::Unsupported(seed)), 64);
    }

    #[test]
    fn a_progress_policy_is_described_one_item_per_check_and_exact_not_at_all() {
        assert_eq!(progress_items(&Progress::exact()), Vec::<String>::new());
        let every = Progress::recommended().by_result("poll", 5).by_result("fetch", 2).nudge(true);
        assert_eq!(
            progress_items(&every),
            [
                "fetch judged by result (at most 2 attempts per call)",
                "poll judged by result (at most 5 attempts per call)",
                "halt on cycles of 2 to 3 calls repeated 3 times",
                "halt on 3 failed calls in a row",
                "one warning before a repeat or a cycle halts",
            ]
        );
        assert!(progress_items(&every).iter().all(|item| !item.contains(", ")));
    }

    #[test]
    fn the_harness_description_lists_what_is_absent() {
        let agent = Agent::new(Composition::Harness, &Limits::default()).to_string();
        assert!(agent.starts_with("harness loop, iteration cap 7, tracing spans on; absent: todo tracking,"));
        assert!(agent.ends_with("external loop evaluator, context compaction"));
        let simple = Agent::new(Composition::Simple, &Limits::default());
        assert_eq!(simple.loop_line(), "simple loop, iteration cap 40, no telemetry");
    }
}
