//! The service's state, built once at start-up: the runtime (tools and model), the journal, the
//! registry that cancels by id, the runs kept; and the two ways an attempt starts (a new run, a
//! resume after a decision).
//!
//! # Invariants
//!
//! - Every attempt is registered under its run's id from before the request that started it
//!   is answered until it ends, so a cancel by id reaches it; its live stream goes to the run's log; its end is recorded in the run's slot
//!   only after the log holds its last update.
//! - A decision is recorded only by the caller that claimed the waiting run; if the journal
//!   refuses it, the run is handed back as it was, and nothing is resumed.

use std::sync::Arc;

use loopbound::journal::{Journal, JournalError, RunId};
use loopbound::transport::{Message, Transport};
use loopbound::watch::Updates;
use loopbound::{Limits, Registration, RunRegistry, Runtime, Scope, watch};

use super::durable::{self, Definition, Verdict};
use super::runs::{Ended, Failure, Full, RunSlot, Runs};

/// What the service holds for its whole life.
#[derive(Debug)]
pub struct App<T, J> {
    runtime: Runtime<T>,
    journal: J,
    registry: RunRegistry,
    runs: Runs,
    limits: Limits,
    files: String,
}

/// Why a decision did not resume the run.
#[derive(Debug)]
pub enum DecideError {
    /// The run does not wait for a decision (it is in flight, or ended for good).
    NotWaiting,
    /// The journal refused or failed the decision; the run still waits.
    Journal(JournalError),
}

impl<T, J> App<T, J>
where
    T: Transport + 'static,
    J: Journal + 'static,
{
    /// The service over `runtime` and `journal`, with `limits` for every attempt, keeping at
    /// most `capacity` runs; `files` is the folder the file tools work in (told to the model).
    #[must_use]
    pub fn new(runtime: Runtime<T>, journal: J, limits: Limits, capacity: usize, files: String) -> Self {
        Self { runtime, journal, registry: RunRegistry::new(), runs: Runs::new(capacity), limits, files }
    }

    /// The run `id`, if kept.
    #[must_use]
    pub fn run(&self, id: &RunId) -> Option<Arc<RunSlot>> {
        self.runs.get(id)
    }

    /// The journal.
    #[must_use]
    pub fn journal(&self) -> &J {
        &self.journal
    }

    /// Cancels the attempt of `id` in flight, as its caller; `false` if none is.
    #[must_use]
    pub fn cancel(&self, id: &RunId) -> bool {
        self.registry.cancel(id)
    }

    /// Starts a new run of `definition` on `prompt` in the background.
    ///
    /// # Errors
    ///
    /// [`Full`] if too many runs are live; nothing started then.
    pub fn start(self: &Arc<Self>, definition: Definition, prompt: String) -> Result<Arc<RunSlot>, Full> {
        let conversation =
            vec![Message::system(definition.task.instructions(&self.files)), Message::user(prompt)];
        let slot = Arc::new(RunSlot::new(RunId::generate(), definition));
        self.runs.insert(Arc::clone(&slot))?;
        self.spawn_attempt(Arc::clone(&slot), conversation);
        Ok(slot)
    }

    /// Records `approver`'s `verdict` on the proposal `slot` waits on, presenting `digest`, then
    /// resumes the run in the background.
    ///
    /// # Errors
    ///
    /// [`DecideError`]: the run does not wait, or the journal refused the decision.
    pub async fn decide(
        self: &Arc<Self>,
        slot: &Arc<RunSlot>,
        digest: &str,
        approver: &str,
        verdict: Verdict,
    ) -> Result<(), DecideError> {
        let waiting = slot.claim().ok_or(DecideError::NotWaiting)?;
        let Some(pending) = waiting.pending.as_ref() else {
            slot.restore(waiting);
            return Err(DecideError::NotWaiting);
        };
        if let Err(error) = durable::decide(&self.journal, pending, digest, approver, verdict).await {
            slot.restore(waiting);
            return Err(DecideError::Journal(error));
        }
        // Resumed from the journal, which replaces this (empty) conversation with its own.
        self.spawn_attempt(Arc::clone(slot), Vec::new());
        Ok(())
    }

    /// Opens one attempt of `slot` and runs it in its own task. The attempt is registered
    /// under the run's id before this returns, so a cancel sent as soon as the caller has the
    /// answer to its request reaches it.
    fn spawn_attempt(self: &Arc<Self>, slot: Arc<RunSlot>, conversation: Vec<Message>) {
        let (feed, updates) = watch::channel();
        let scope = match slot.definition().scope(self.limits, feed) {
            Ok(scope) => scope,
            Err(error) => {
                let failure = Failure::Setup(format!("invalid limits: {error}"));
                slot.end(Ended { result: Err(failure), pending: None });
                return;
            }
        };
        let Ok(registration) = self.registry.register(slot.id().clone(), &scope) else {
            let reason = "another attempt of this run is registered in this process".to_owned();
            slot.end(Ended { result: Err(Failure::Setup(reason)), pending: None });
            return;
        };
        slot.log().open();
        let app = Arc::clone(self);
        tokio::spawn(async move {
            let ended = app.attempt(&slot, scope, registration, updates, conversation).await;
            slot.end(ended);
        });
    }

    async fn attempt(
        &self,
        slot: &RunSlot,
        scope: Scope,
        registration: Registration,
        updates: Updates,
        conversation: Vec<Message>,
    ) -> Ended {
        let drain = tokio::spawn(Arc::clone(slot.log()).drain(updates));
        let task = slot.definition().task;
        let result = durable::attempt(&self.runtime, &self.journal, slot.id(), &scope, conversation, task)
            .await
            .map_err(Failure::Run);
        drop(registration);
        drop(scope);
        // The feed closed with the scope: the log now holds the attempt's last update.
        let _ = drain.await;
        let pending = result.as_ref().ok().and_then(durable::pending);
        Ended { result, pending }
    }
}
