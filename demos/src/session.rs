//! One bounded review: a scope built for a scenario, its tools, and one run over any transport.
//!
//! # Invariants
//!
//! - A [`Session`] owns one scope and runs at most once: [`Session::run`] consumes it, so counters
//!   and the repetition map never carry over from one run to the next.
//! - The scope's clock starts when the session is built: the deadline covers the whole run.
//! - The header describes the scope as built (its capabilities and limits), not the scenario's
//!   wishes, so what is printed is what was enforced.
//! - The runner is generic over [`Transport`]: the scripted transport and a live one go through
//!   the same scope, tools, budget and loop.

use std::fmt;

use loopbound::{
    Composition, LimitsError, Message, Outcome, RegistrationError, RunError, Runtime, Scope, Transport,
};
use tokio_util::sync::CancellationToken;

use crate::report::{Header, Report};
use crate::review::{self, ReviewState};
use crate::scenario::Scenario;

/// A scope set up for one scenario, with the review's tools registered, ready to run once.
#[derive(Debug)]
pub struct Session {
    scenario: Scenario,
    composition: Composition,
    scope: Scope,
    state: ReviewState,
}

/// Why a session could not be set up. Nothing ran and nothing was counted.
#[derive(Debug)]
#[non_exhaustive]
pub enum SetupError {
    /// The scenario's limits were rejected.
    Limits(LimitsError),
    /// A tool could not be registered.
    Registration(RegistrationError),
}

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Limits(error) => write!(f, "could not set up the scope: {error}"),
            Self::Registration(error) => write!(f, "could not register the review's tools: {error}"),
        }
    }
}

impl std::error::Error for SetupError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Limits(error) => Some(error),
            Self::Registration(error) => Some(error),
        }
    }
}

impl Session {
    /// Builds the scope of `scenario` (its capabilities and limits, linked to the `caller`'s
    /// cancellation) and registers the review's tools in it. The deadline runs from now.
    ///
    /// # Errors
    ///
    /// A [`SetupError`] if the limits are invalid or a tool cannot be registered.
    pub fn new(
        scenario: Scenario,
        composition: Composition,
        caller: CancellationToken,
    ) -> Result<Self, SetupError> {
        let scope = Scope::builder()
            .grants(scenario.capabilities().iter().copied())
            .limits(scenario.limits())
            .caller(caller)
            .build()
            .map_err(SetupError::Limits)?;
        let state = ReviewState::default();
        review::register(&scope, &state).map_err(SetupError::Registration)?;
        Ok(Self { scenario, composition, scope, state })
    }

    /// The scenario this session plays.
    #[must_use]
    pub fn scenario(&self) -> Scenario {
        self.scenario
    }

    /// The scope the run is bounded by.
    #[must_use]
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// The review's state in host memory.
    #[must_use]
    pub fn state(&self) -> &ReviewState {
        &self.state
    }

    /// What the console prints before the run: composition, transport (described by
    /// `transport`, e.g. its name), capabilities, limits and completion condition.
    #[must_use]
    pub fn header(&self, transport: &str, streaming: bool, live: bool) -> Header {
        let limits = self.scope.limits();
        Header {
            scenario: self.scenario,
            composition: self.composition,
            agent: self.composition.describe(&limits),
            transport: transport_label(transport, streaming),
            capabilities: self.scope.capabilities().map(str::to_owned).collect(),
            limits,
            completion: review::COMPLETION_CONDITION,
            live,
        }
    }

    /// Runs the review once over `transport`, on its streaming path if `streaming`, with the
    /// scripted scenarios' conversation.
    ///
    /// # Errors
    ///
    /// [`RunError::Cancelled`] if the caller cancelled; [`RunError::Provider`] if the provider
    /// answered unusably.
    pub async fn run<T: Transport>(self, transport: T, streaming: bool) -> Result<Outcome, RunError> {
        self.run_conversation(transport, streaming, review::conversation()).await
    }

    /// Runs the review once over `transport`, starting from `conversation` (for a live model,
    /// [`review::live_conversation`], which carries a worked example).
    ///
    /// # Errors
    ///
    /// As [`run`](Self::run).
    pub async fn run_conversation<T: Transport>(
        self,
        transport: T,
        streaming: bool,
        mut conversation: Vec<Message>,
    ) -> Result<Outcome, RunError> {
        let state = self.state;
        Runtime::new(self.composition, &self.scope, transport)
            .options(review::options())
            .streaming(streaming)
            .run(&mut conversation, || state.completed())
            .await
    }
}

/// The transport's name, with the path it is driven on.
fn transport_label(name: &str, streaming: bool) -> String {
    if streaming { format!("{name}, streaming") } else { name.to_owned() }
}

/// Why a scenario produced no report.
#[derive(Debug)]
#[non_exhaustive]
pub enum DemoError {
    /// The session could not be set up.
    Setup(SetupError),
    /// The run ended without an outcome.
    Run(RunError),
}

impl fmt::Display for DemoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Setup(error) => error.fmt(f),
            Self::Run(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for DemoError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Setup(error) => Some(error),
            Self::Run(error) => Some(error),
        }
    }
}

/// Runs `scenario` with its scripted transport in `composition`, on the streaming path if
/// `streaming`, cancelled when `caller` fires. Returns the header and the outcome.
///
/// # Errors
///
/// [`DemoError::Setup`] if the scope could not be set up, [`DemoError::Run`] if the run ended
/// without an outcome (the caller cancelled, or a provider error).
pub async fn run_scenario(
    scenario: Scenario,
    composition: Composition,
    streaming: bool,
    caller: CancellationToken,
) -> Result<Report, DemoError> {
    let session = Session::new(scenario, composition, caller).map_err(DemoError::Setup)?;
    let transport = scenario.transport();
    let header = session.header(transport.name(), streaming, false);
    let outcome = session.run(transport, streaming).await.map_err(DemoError::Run)?;
    Ok(Report { header, outcome })
}
