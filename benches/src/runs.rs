//! Whole scripted runs of the review task, as one request: open the scenario's scope over the
//! review's tools (defined once for the process), run the loop over the scripted transport,
//! return the outcome.
//!
//! # Invariants
//!
//! - A run uses a fresh scope: counters, repetition map and events never carry over.
//! - [`verify`] compares an outcome with the contract's table (SPEC §11): status, admitted tool
//!   calls, admitted model calls, and the text for `complete`.

use std::fmt;

use loopbound::{EventKind, Outcome, RunError, Status};

use loopbound_demos::scenario::{FINAL_SENTENCE, Scenario};
use loopbound_demos::session::{Session, SetupError};
use loopbound_testkit::Composition;
use tokio_util::sync::CancellationToken;

use crate::timing::{Summary, time_runs};

/// Why a run produced no outcome, or not the contract's.
#[derive(Debug)]
pub enum RunFailure {
    /// The session could not be set up.
    Setup(SetupError),
    /// The run ended without an outcome.
    Run(RunError),
    /// The outcome differs from the contract's table.
    Unexpected(String),
}

impl fmt::Display for RunFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Setup(error) => error.fmt(f),
            Self::Run(error) => error.fmt(f),
            Self::Unexpected(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for RunFailure {}

/// Opens the session of `scenario` (its scope over the shared tools): the per-request setup.
///
/// # Errors
///
/// [`RunFailure::Setup`] if the scope could not be set up.
pub fn session(scenario: Scenario, composition: Composition) -> Result<Session, RunFailure> {
    Session::new(&crate::fixtures::tools().set, scenario, composition, CancellationToken::new())
        .map_err(RunFailure::Setup)
}

/// Runs a prepared session over its scenario's scripted transport, non-streaming.
///
/// # Errors
///
/// [`RunFailure::Run`] if the run ended without an outcome.
pub async fn play(session: Session) -> Result<Outcome, RunFailure> {
    let transport = session.scenario().transport();
    session.run(transport, false).await.map_err(RunFailure::Run)
}

/// One whole request: [`session`], then [`play`].
///
/// # Errors
///
/// As [`session`] and [`play`].
pub async fn request(scenario: Scenario, composition: Composition) -> Result<Outcome, RunFailure> {
    play(session(scenario, composition)?).await
}

/// Admitted calls of `kind` in `outcome`'s events.
#[must_use]
pub fn count(outcome: &Outcome, kind: EventKind) -> u32 {
    let admitted = outcome.events().iter().filter(|event| event.kind() == kind).count();
    u32::try_from(admitted).unwrap_or(u32::MAX)
}

/// Checks `outcome` against the contract's row for `scenario`.
///
/// # Errors
///
/// [`RunFailure::Unexpected`] naming what differs.
pub fn verify(scenario: Scenario, outcome: &Outcome) -> Result<(), RunFailure> {
    let expected = scenario.expected();
    let seen = (outcome.status(), count(outcome, EventKind::ToolCall), count(outcome, EventKind::ModelCall));
    let text_ok = match scenario {
        Scenario::Complete => outcome.text() == Some(FINAL_SENTENCE),
        _ => outcome.status() == Status::Incomplete || outcome.text().is_none(),
    };
    if seen == (expected.status, expected.tool_calls, expected.model_calls) && text_ok {
        Ok(())
    } else {
        Err(RunFailure::Unexpected(format!(
            "{scenario}: got {:?} with {} tool and {} model calls and text {:?}, expected {:?}",
            seen.0,
            seen.1,
            seen.2,
            outcome.text(),
            expected
        )))
    }
}

/// Times `runs` whole requests of `scenario` (scope, tools and run) the peers' way, after
/// `warmup` of them; every outcome is verified outside the timed region. With `prepared`, each
/// run's scope and tools are built before its timer starts.
///
/// # Errors
///
/// The first run that failed or did not meet the contract.
pub fn time_scenario(
    runtime: &tokio::runtime::Runtime,
    (scenario, composition): (Scenario, Composition),
    counts: (usize, usize),
    prepared: bool,
) -> Result<Summary, RunFailure> {
    let check = |outcome: &Outcome| verify(scenario, outcome);
    let samples = if prepared {
        time_runs(runtime, counts, || session(scenario, composition), play, check)?
    } else {
        time_runs(runtime, counts, || Ok(()), |()| request(scenario, composition), check)?
    };
    Summary::of_nanos(&samples).ok_or_else(|| RunFailure::Unexpected("no timed run".to_owned()))
}

/// A current-thread tokio runtime with the timer enabled, as every run needs.
///
/// # Panics
///
/// If the runtime cannot be built (the operating system refused its resources).
#[must_use]
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_time().build().expect("a current-thread runtime")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_benchmarked_scenarios_meet_the_contract_in_both_compositions() {
        let runtime = runtime();
        for scenario in [Scenario::Complete, Scenario::Changing, Scenario::Repeat] {
            for composition in [Composition::Harness, Composition::Simple] {
                let outcome = runtime.block_on(request(scenario, composition)).expect("an outcome");
                verify(scenario, &outcome).expect("the contract's row");
            }
        }
    }

    #[test]
    fn verify_rejects_an_outcome_of_another_scenario() {
        let runtime = runtime();
        let outcome = runtime.block_on(request(Scenario::Repeat, Composition::Harness)).expect("an outcome");
        assert!(matches!(verify(Scenario::Complete, &outcome), Err(RunFailure::Unexpected(_))));
    }
}
