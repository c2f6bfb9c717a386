//! The one place the load command uses loopbound's API: the runtime over the OpenAI transport
//! (harness composition), one review run, plain or journaled, and what the run did.
//!
//! A change in how a run is built, started or watched is made here and nowhere else.
//!
//! # Invariants
//!
//! - The runtime, the tools and the transport (one HTTP connection pool) are built once and
//!   shared by every run; each run builds only its own scope and conversation.
//! - A journaled run uses one journal (a SQLite file or a PostgreSQL database) shared by every
//!   run, each run under its own id, and the journal is wrapped in a timer of each effect's two
//!   commits and a count of its store calls that forwards everything unchanged.
//! - A run's end records only counts and the status: never an argument value.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use loopbound::journal::RunId;
use loopbound::watch::{self, Update, Updates};
use loopbound::{Limits, Message, Outcome, RunError, Runner, Scope, Status};
use loopbound_openai::{Config, ConfigError, OpenAiTransport};
use loopbound_testkit::backend::AnyJournal;
use loopbound_testkit::load::script::prompt;
use loopbound_testkit::review::{self, BOTH_CAPABILITIES, CLOSING, INSTRUCTIONS, Review};

use crate::journal::TimedJournal;

/// The model name sent with every request.
pub const MODEL: &str = "load-model";

/// How one run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunEnd {
    /// The outcome's status, or the run's error.
    pub ended: Result<Status, String>,
    /// Model calls the scope counted.
    pub model_calls: u32,
    /// Tool calls the scope counted.
    pub tool_calls: u32,
    /// Whether the run's reply was the closing text.
    pub closed: bool,
    /// With a watcher: whether it read the whole stream, ending in the run's outcome.
    pub watched_to_the_end: Option<bool>,
}

impl RunEnd {
    /// Whether the run did exactly the review: Completed, 3 model calls, 2 tool calls, the
    /// closing text.
    #[must_use]
    pub fn is_review(&self) -> bool {
        self.ended == Ok(Status::Completed)
            && self.model_calls == 3
            && self.tool_calls == 2
            && self.closed
            && self.watched_to_the_end != Some(false)
    }
}

impl fmt::Display for RunEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.ended {
            Ok(status) => write!(f, "{status}")?,
            Err(error) => write!(f, "error ({error})")?,
        }
        write!(
            f,
            " with {} model calls, {} tool calls, {} closing text",
            self.model_calls,
            self.tool_calls,
            if self.closed { "the" } else { "no" }
        )?;
        if self.watched_to_the_end == Some(false) {
            write!(f, ", its watcher did not see the outcome")?;
        }
        Ok(())
    }
}

/// Why the load could not be set up.
#[derive(Debug)]
pub enum SetupError {
    /// The transport could not be configured.
    Transport(ConfigError),
}

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Transport(error) => write!(f, "the OpenAI transport: {error}"),
        }
    }
}

impl std::error::Error for SetupError {}

/// The review, ready to run any number of times at once.
#[derive(Debug)]
pub struct ReviewLoad {
    runtime: Runner<OpenAiTransport, Review>,
    journal: Option<TimedJournal<AnyJournal>>,
    deadline: Duration,
    watch: bool,
    record: bool,
}

impl ReviewLoad {
    /// The review against the server `config` names, streamed or whole; journaled
    /// on `journal` (a SQLite file or a PostgreSQL database) when given, each journaled run
    /// recording its stream with `record`. Each run's deadline is `deadline`.
    ///
    /// # Errors
    ///
    /// A [`SetupError`] if the transport or the journal cannot be set up.
    pub fn new(
        config: Config,
        streaming: bool,
        journal: Option<AnyJournal>,
        deadline: Duration,
        watch: bool,
        record: bool,
    ) -> Result<Arc<Self>, SetupError> {
        let transport = OpenAiTransport::new(config).map_err(SetupError::Transport)?;
        let runtime =
            Runner::new(&review::tools().set, transport).options(review::options()).streaming(streaming);
        let journal = journal.map(TimedJournal::new);
        Ok(Arc::new(Self { runtime, journal, deadline, watch, record }))
    }

    /// Runs review `id` (ASCII letters, digits, `-`, `_`): its user message names it
    /// (`run=<id>`), so the server follows it.
    pub async fn run(&self, id: &str) -> RunEnd {
        let limits = Limits::default().with_deadline(self.deadline);
        let (feed, updates) = watch::channel();
        let mut builder = Scope::builder().grants(BOTH_CAPABILITIES).limits(limits).state(Review::default());
        if self.watch {
            builder = builder.watch(feed);
        }
        if self.record {
            builder = builder.record_stream();
        }
        let scope = match builder.build() {
            Ok(scope) => scope,
            Err(error) => {
                return RunEnd {
                    ended: Err(error.to_string()),
                    model_calls: 0,
                    tool_calls: 0,
                    closed: false,
                    watched_to_the_end: None,
                };
            }
        };
        let mut conversation = vec![Message::system(INSTRUCTIONS), Message::user(prompt(id))];
        // The live-stream watcher of each run attaches here, on `scope`, before the run starts,
        // once the runtime offers one; its events are then in the measured path.
        let watcher = self.watch.then(|| tokio::spawn(read_to_the_end(updates)));
        // Each run's end is reduced to what it records as the run's future returns: a whole
        // outcome kept in this future would be kept beside the run's own while it waits.
        let (ended, closed) = match &self.journal {
            None => ended(
                self.runtime.run(&scope, &mut conversation, |ended| Review::completed(ended.state())).await,
            ),
            Some(journal) => match RunId::new(format!("load-{id}")) {
                // Boxed: a plain run's task is then as large as a plain run needs, not as the
                // journaled run's larger future.
                Ok(id) => ended(
                    Box::pin(self.runtime.run_journaled(journal, &id, &scope, &mut conversation, |ended| {
                        ended.state().completed()
                    }))
                    .await,
                ),
                Err(error) => {
                    let ended = Err(error.to_string());
                    return RunEnd {
                        ended,
                        model_calls: 0,
                        tool_calls: 0,
                        closed: false,
                        watched_to_the_end: None,
                    };
                }
            },
        };
        let watched_to_the_end = match watcher {
            Some(watcher) => Some(watcher.await.unwrap_or(false)),
            None => None,
        };
        RunEnd {
            watched_to_the_end,
            closed,
            ended,
            model_calls: scope.model_calls(),
            tool_calls: scope.tool_calls(),
        }
    }

    /// How many calls reached the journal's store so far; `None` without a journal.
    #[must_use]
    pub fn store_calls(&self) -> Option<u64> {
        self.journal.as_ref().map(TimedJournal::store_calls)
    }

    /// The time of each journaled effect from its `started` commit to its result commit; `None`
    /// without a journal.
    #[must_use]
    pub fn effect_times(&self) -> Option<Vec<Duration>> {
        self.journal.as_ref().map(TimedJournal::effects)
    }
}

/// A run's status (or error) and whether its reply was the closing text.
fn ended(outcome: Result<Outcome, RunError>) -> (Result<Status, String>, bool) {
    let closed = outcome.as_ref().is_ok_and(|outcome| outcome.text() == Some(CLOSING));
    (outcome.map(|outcome| outcome.status()).map_err(|error| error.to_string()), closed)
}

/// Reads a run's live stream as a service's client would, to its end: whether its last update
/// was the outcome.
async fn read_to_the_end(mut updates: Updates) -> bool {
    let mut last_was_outcome = false;
    while let Some(update) = updates.next().await {
        last_was_outcome = matches!(update, Update::Outcome(_));
    }
    last_was_outcome
}
