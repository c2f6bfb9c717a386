//! One bounded review: a scope opened for a scenario and one run over any transport, with the
//! review's tools defined once and shared.
//!
//! # Invariants
//!
//! - A [`Session`] owns one scope and runs at most once: [`Session::run`] consumes it, so counters,
//!   the repetition map and the review's state never carry over from one run to the next.
//! - The tools are not the session's: they are defined once ([`review::tools`]) and any number of
//!   sessions share them.
//! - The scope's clock starts when the session is built: the deadline covers the whole run.
//! - The header describes the scope as built (its capabilities and limits), not the scenario's
//!   wishes, so what is printed is what was enforced.
//! - The runner is generic over [`Transport`]: the scripted transport and a live one go through
//!   the same scope, tools, budget and loop.

use std::fmt;

use loopbound::transport::Transport;
use loopbound::watch::Feed;
use loopbound::{Limits, LimitsError, Message, Outcome, RunError, Scope, ToolSet};
use loopbound_fixtures::Composition;
use loopbound_fixtures::review::{self, Review};
use tokio_util::sync::CancellationToken;

use crate::budget::{self, ModelPrice};
use crate::report::{Header, Report};
use crate::scenario::Scenario;
use crate::vocabulary::Agent;

/// A scope set up for one scenario, ready to run once over the shared review tools.
#[derive(Debug)]
pub struct Session {
    scenario: Scenario,
    composition: Composition,
    tools: ToolSet<Review>,
    scope: Scope<Review>,
    price: Option<ModelPrice>,
}

/// Why a session could not be set up. Nothing ran and nothing was counted.
#[derive(Debug)]
#[non_exhaustive]
pub enum SetupError {
    /// The scenario's limits were rejected.
    Limits(LimitsError),
}

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Limits(_) => f.write_str("could not set up the scope"),
        }
    }
}

impl std::error::Error for SetupError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Limits(error) => Some(error),
        }
    }
}

impl Session {
    /// Opens the scope of `scenario` (its capabilities, limits and progress policy, linked to the `caller`'s
    /// cancellation, with a fresh review state) over the shared `tools`. The deadline runs from
    /// now.
    ///
    /// # Errors
    ///
    /// A [`SetupError`] if the limits are invalid.
    pub fn new(
        tools: &ToolSet<Review>,
        scenario: Scenario,
        composition: Composition,
        caller: CancellationToken,
    ) -> Result<Self, SetupError> {
        Self::open(tools, scenario, composition, caller, scenario.limits(), None, None)
    }

    /// A session with `limits` instead of the scenario's (its budgets, say), the run's model's
    /// `price` as the scope's price table (every tool free) when given, and the run streamed to
    /// `feed`'s watcher when given.
    ///
    /// # Errors
    ///
    /// A [`SetupError`] if the limits are invalid, or a cost budget comes without a price.
    pub fn open(
        tools: &ToolSet<Review>,
        scenario: Scenario,
        composition: Composition,
        caller: CancellationToken,
        limits: Limits,
        price: Option<ModelPrice>,
        feed: Option<Feed>,
    ) -> Result<Self, SetupError> {
        let mut builder = Scope::builder()
            .grants(scenario.capabilities().iter().copied())
            .limits(limits)
            .progress(scenario.progress())
            .caller(caller);
        if let Some(price) = &price {
            builder = builder.prices(budget::table([price]));
        }
        if let Some(feed) = feed {
            builder = builder.watch(feed);
        }
        let scope = builder.state(Review::default()).build().map_err(SetupError::Limits)?;
        Ok(Self { scenario, composition, tools: tools.clone(), scope, price })
    }

    /// The scenario this session plays.
    #[must_use]
    pub fn scenario(&self) -> Scenario {
        self.scenario
    }

    /// The scope the run is bounded by; its state is the review's.
    #[must_use]
    pub fn scope(&self) -> &Scope<Review> {
        &self.scope
    }

    /// What the console prints before the run: composition, transport (described by `label`),
    /// capabilities, limits, progress policy and completion condition.
    #[must_use]
    pub fn header(&self, label: &str, streaming: bool, live: bool) -> Header {
        let limits = self.scope.limits();
        Header {
            scenario: self.scenario,
            composition: self.composition,
            agent: Agent::new(self.composition, limits),
            transport: transport_label(label, streaming),
            capabilities: self.scope.capabilities().map(str::to_owned).collect(),
            limits: limits.clone(),
            progress: self.scope.progress().clone(),
            price: self.price.clone(),
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
        self.composition
            .runner(&self.tools, transport)
            .options(review::options())
            .streaming(streaming)
            .run(&self.scope, &mut conversation, |ended| Review::completed(ended.state()))
            .await
    }
}

/// The transport's label, with the path it is driven on.
fn transport_label(label: &str, streaming: bool) -> String {
    if streaming { format!("{label}, streaming") } else { label.to_owned() }
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
    /// Transparent: the inner error's words, and its source as this one's.
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
            Self::Setup(error) => error.source(),
            Self::Run(error) => error.source(),
        }
    }
}

/// The label of the scripted transport in headers.
pub const SCRIPTED: &str = "scripted";

/// Runs `scenario` with its scripted transport in `composition`, on the streaming path if
/// `streaming`, cancelled when `caller` fires, over freshly defined review tools. Returns the
/// header and the outcome.
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
    let tools = review::tools();
    let session = Session::new(&tools.set, scenario, composition, caller).map_err(DemoError::Setup)?;
    let header = session.header(SCRIPTED, streaming, false);
    let outcome = session.run(scenario.transport(), streaming).await.map_err(DemoError::Run)?;
    Ok(Report { header, outcome })
}
