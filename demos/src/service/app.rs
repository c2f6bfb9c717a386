//! The service's state, built once at start-up: the runtime (tools and model), the journal, the
//! registry that cancels by id, the runs kept; the ways an attempt starts (a new run, a resume
//! after a decision, a resume of an open run); and the host commands on a run.
//!
//! # Invariants
//!
//! - Every attempt is registered under its run's id from before the request that started it
//!   is answered until it ends, so a cancel by id reaches it; its live stream is the journal's
//!   record of the run ([`journal::follow`] on this service's handle sees it as it happens).
//! - A run this process does not hold is found through the journal ([`App::find`]); every
//!   attempt after a run's first rebuilds its scope from the journal, never from memory.
//! - A command (a decision, a resume, a closing) is recorded only by the caller that claimed
//!   the run's slot; if the journal refuses it, the run is handed back as it was, and nothing is
//!   resumed.

use std::fmt;
use std::sync::Arc;

use loopbound::journal::{self, Journal, JournalError, RunId, RunState};
use loopbound::transport::{Message, Transport};
use loopbound::{Limits, Registration, RunRegistry, Runner, Scope};

use super::durable::{self, Opening, ScopeError, Verdict};
use super::runs::{self, Ended, Failure, Full, Phase, Recorded, RunSlot, Runs};
use super::task::Task;
use super::tenants::Tenants;

/// What the service holds for its whole life.
#[derive(Debug)]
pub struct App<T, J> {
    runtime: Runner<T>,
    journal: Arc<J>,
    registry: RunRegistry,
    runs: Runs,
    limits: Limits,
    files: String,
    tenants: Tenants,
}

/// Why a run could not be found.
#[derive(Debug)]
#[non_exhaustive]
pub enum FindError {
    /// Neither this process nor the journal knows it.
    Unknown,
    /// The journal holds it, but this service did not start it (it has no task label).
    Foreign,
    /// Every run kept is in flight: the run cannot be taken in now.
    Full(Full),
    /// The journal could not be read.
    Journal(JournalError),
}

impl fmt::Display for FindError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unknown => f.write_str("no such run"),
            Self::Foreign => f.write_str("the journal holds this run, but this service did not start it"),
            Self::Full(full) => full.fmt(f),
            Self::Journal(error) => write!(f, "the journal: {error}"),
        }
    }
}

impl std::error::Error for FindError {}

/// Why a host command on a run was not carried out.
#[derive(Debug)]
#[non_exhaustive]
pub enum CommandError {
    /// An attempt of the run is in flight in this process (or another command is being
    /// recorded).
    Running,
    /// The run does not wait for a decision (for a decision).
    NotWaiting,
    /// The journal holds the run in another state than the command needs (for a resume: not
    /// open, or held by another process's attempt).
    NotOpen(RunState),
    /// The journal refused or failed the command; the run is as it was.
    Journal(JournalError),
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Running => f.write_str("an attempt of this run is in flight"),
            Self::NotWaiting => f.write_str("the run does not wait for a decision"),
            Self::NotOpen(state) => {
                write!(f, "the run is {state}, or held by another process; only an open run resumes")
            }
            Self::Journal(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for CommandError {}

/// A new run's id, `run-<start>-<random>`: the start in milliseconds since 1970 (12 hex
/// digits, so that ids sort by start time, as the journal lists them), then the 32 random hex
/// digits of [`RunId::generate`].
fn started_id() -> RunId {
    let generated = RunId::generate();
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis());
    let random = generated.as_str().trim_start_matches("run-");
    RunId::new(format!("run-{millis:012x}-{random}")).unwrap_or(generated)
}

impl<T, J> App<T, J>
where
    T: Transport + 'static,
    J: Journal + 'static,
{
    /// The service over `runtime` and `journal`, with `limits` for every new run, keeping at
    /// most `capacity` runs in memory; `files` is the folder the file tools work in (told to the
    /// model).
    #[must_use]
    pub fn new(runtime: Runner<T>, journal: J, limits: Limits, capacity: usize, files: String) -> Self {
        let journal = Arc::new(journal);
        let runs = Runs::new(capacity);
        let tenants = Tenants::none();
        Self { runtime, journal, registry: RunRegistry::new(), runs, limits, files, tenants }
    }

    /// This service with `tenants`: a run started for one draws from its pool.
    #[must_use]
    pub fn with_tenants(mut self, tenants: Tenants) -> Self {
        self.tenants = tenants;
        self
    }

    /// The tenants, and their pools.
    #[must_use]
    pub fn tenants(&self) -> &Tenants {
        &self.tenants
    }

    /// The run `id`, if kept in memory.
    #[must_use]
    pub fn run(&self, id: &RunId) -> Option<Arc<RunSlot>> {
        self.runs.get(id)
    }

    /// The run `id`: the one kept in memory, else rebuilt from its journal record and kept.
    ///
    /// # Errors
    ///
    /// [`FindError`]: unknown, not this service's, no room, or the journal failed.
    pub async fn find(&self, id: &RunId) -> Result<Arc<RunSlot>, FindError> {
        if let Some(slot) = self.runs.get(id) {
            return Ok(slot);
        }
        let record = match journal::inspect(&self.journal, id).await {
            Ok(record) => record,
            Err(JournalError::UnknownRun) => return Err(FindError::Unknown),
            Err(error) => return Err(FindError::Journal(error)),
        };
        let task = durable::task_of(&record).ok_or(FindError::Foreign)?;
        let slot = RunSlot::recorded(id.clone(), task, Recorded::of(&record));
        self.runs.adopt(Arc::new(slot)).map_err(FindError::Full)
    }

    /// The journal (a handle that a run's stream, [`journal::follow`], can own).
    #[must_use]
    pub fn journal(&self) -> &Arc<J> {
        &self.journal
    }

    /// Cancels the attempt of `id` in flight, as its caller; `false` if none is.
    #[must_use]
    pub fn cancel(&self, id: &RunId) -> bool {
        self.registry.cancel(id)
    }

    /// Starts a new run of `task` on `prompt`, under `grants`, for `tenant` (a configured one,
    /// checked by the caller), in the background.
    ///
    /// # Errors
    ///
    /// [`Full`] if every run kept is in flight; nothing started then.
    pub async fn start(
        self: &Arc<Self>,
        task: Task,
        grants: Vec<String>,
        tenant: Option<String>,
        prompt: String,
    ) -> Result<Arc<RunSlot>, Full> {
        let conversation = vec![Message::system(task.instructions(&self.files)), Message::user(prompt)];
        let slot = Arc::new(RunSlot::new(started_id(), task));
        self.runs.insert(Arc::clone(&slot))?;
        let opening = Opening::First { task, grants, tenant };
        self.spawn_attempt(Arc::clone(&slot), opening, conversation).await;
        Ok(slot)
    }

    /// Records `approver`'s `verdict` on the proposal `slot` waits on, presenting `digest`, then
    /// resumes the run in the background.
    ///
    /// # Errors
    ///
    /// [`CommandError`]: the run does not wait, or the journal refused the decision.
    pub async fn decide(
        self: &Arc<Self>,
        slot: &Arc<RunSlot>,
        digest: &str,
        approver: &str,
        verdict: Verdict,
    ) -> Result<(), CommandError> {
        let before = slot.claim(|phase| phase.pending().is_some()).ok_or(CommandError::NotWaiting)?;
        let Some(pending) = before.pending().cloned() else {
            slot.restore(before);
            return Err(CommandError::NotWaiting);
        };
        if let Err(error) = durable::decide(&self.journal, &pending, digest, approver, verdict).await {
            slot.restore(before);
            return Err(CommandError::Journal(error));
        }
        self.spawn_attempt(Arc::clone(slot), Opening::Resume, Vec::new()).await;
        Ok(())
    }

    /// Resumes `slot`'s run in the background if its journal says it is open and no attempt
    /// holds it (its last attempt was cut by a crash, cancelled, or stopped by its provider).
    ///
    /// # Errors
    ///
    /// [`CommandError`]: an attempt is in flight here, the run is not open, or the journal
    /// could not be read.
    pub async fn resume(self: &Arc<Self>, slot: &Arc<RunSlot>) -> Result<(), CommandError> {
        let before = slot.claim(|_| true).ok_or(CommandError::Running)?;
        match journal::inspect(&self.journal, slot.id()).await {
            Ok(record) if record.state() == RunState::Open && !runs::is_held(&record) => {
                self.spawn_attempt(Arc::clone(slot), Opening::Resume, Vec::new()).await;
                Ok(())
            }
            Ok(record) => {
                slot.restore(before);
                Err(CommandError::NotOpen(record.state()))
            }
            Err(error) => {
                slot.restore(before);
                Err(CommandError::Journal(error))
            }
        }
    }

    /// Closes `slot`'s run for good, as `by`, for `reason` ([`journal::close`]); the run then
    /// stands as the journal records it.
    ///
    /// # Errors
    ///
    /// [`CommandError::Running`] if an attempt is in flight here; [`CommandError::Journal`] as
    /// [`journal::close`] (`LeaseHeld` while another process's attempt holds the run,
    /// `Finished` for a run that ended, `InvalidReason`, …).
    pub async fn close(&self, slot: &Arc<RunSlot>, reason: &str, by: &str) -> Result<(), CommandError> {
        let before = slot.claim(|_| true).ok_or(CommandError::Running)?;
        if let Err(error) = journal::close(&self.journal, slot.id(), reason, by).await {
            slot.restore(before);
            return Err(CommandError::Journal(error));
        }
        if let Ok(record) = journal::inspect(&self.journal, slot.id()).await {
            slot.restore(Phase::Recorded(Arc::new(Recorded::of(&record))));
        } else {
            // Closed, but not readable now: the next request rebuilds it from the journal.
            self.runs.forget(slot.id());
            slot.restore(before);
        }
        Ok(())
    }

    /// Opens one attempt of `slot` and runs it in its own task. The attempt is registered
    /// under the run's id before this returns, so a cancel sent as soon as the caller has the
    /// answer to its request reaches it.
    async fn spawn_attempt(
        self: &Arc<Self>,
        slot: Arc<RunSlot>,
        opening: Opening,
        conversation: Vec<Message>,
    ) {
        let scope =
            match durable::scope(&self.journal, slot.id(), opening, self.limits.clone(), &self.tenants).await
            {
                Ok(scope) => scope,
                Err(error) => {
                    let failure = match error {
                        ScopeError::Journal(error) => Failure::Journal(error),
                        setup @ (ScopeError::Limits(_) | ScopeError::Tenant) => {
                            Failure::Setup(setup.to_string())
                        }
                    };
                    slot.end(Ended { result: Err(failure), pending: None });
                    return;
                }
            };
        let Ok(registration) = self.registry.register(slot.id().clone(), &scope) else {
            let reason = "another attempt of this run is registered in this process".to_owned();
            slot.end(Ended { result: Err(Failure::Setup(reason)), pending: None });
            return;
        };
        let app = Arc::clone(self);
        tokio::spawn(async move {
            let ended = app.attempt(&slot, scope, registration, conversation).await;
            slot.end(ended);
        });
    }

    async fn attempt(
        &self,
        slot: &RunSlot,
        scope: Scope,
        registration: Registration,
        conversation: Vec<Message>,
    ) -> Ended {
        let result =
            durable::attempt(&self.runtime, &self.journal, slot.id(), &scope, conversation, slot.task())
                .await
                .map_err(Failure::Run);
        drop(registration);
        drop(scope);
        let pending = result.as_ref().ok().and_then(durable::pending);
        Ended { result, pending }
    }
}
