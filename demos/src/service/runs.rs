//! The runs this process serves: each run's definition, its live stream, and where it stands
//! (in flight, or ended with an outcome or an error), with a bounded number kept.
//!
//! # Invariants
//!
//! - At most one attempt of a run is in flight in this process: an attempt starts only from a
//!   phase change that one caller wins ([`RunSlot::claim`]).
//! - At most `capacity` runs are kept; to take in a new one, the oldest run that has ended for
//!   good (not in flight, not waiting for approval) is forgotten; when every kept run is in
//!   flight or waiting, a new run is refused ([`Full`]) rather than growing without bound.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use loopbound::journal::RunId;
use loopbound::{Outcome, RunError};
use tokio::sync::watch;

use super::durable::{Definition, Pending};
use super::log::Log;

/// Why an attempt has no outcome.
#[derive(Clone, Debug)]
pub enum Failure {
    /// The run ended without an outcome (cancelled, a provider or journal error).
    Run(RunError),
    /// The attempt could not start: the host's setup does not fit (a fault of this service).
    Setup(String),
}

/// How a run's last attempt ended.
#[derive(Clone, Debug)]
pub struct Ended {
    /// The attempt's outcome, or why it has none.
    pub result: Result<Outcome, Failure>,
    /// The proposal it waits on, for `AwaitingApproval`.
    pub pending: Option<Pending>,
}

/// Where a run stands.
#[derive(Clone, Debug)]
pub enum Phase {
    /// An attempt is in flight (or a decision on it is being recorded).
    Running,
    /// The last attempt ended.
    Ended(Arc<Ended>),
}

impl Phase {
    /// Whether the run can change without a host's command.
    #[must_use]
    pub fn is_running(&self) -> bool {
        matches!(self, Self::Running)
    }

    /// Whether the run may still continue (in flight, or waiting for a decision).
    fn is_live(&self) -> bool {
        match self {
            Self::Running => true,
            Self::Ended(ended) => ended.pending.is_some(),
        }
    }
}

/// One run.
#[derive(Debug)]
pub struct RunSlot {
    id: RunId,
    definition: Definition,
    log: Arc<Log>,
    phase: watch::Sender<Phase>,
}

impl RunSlot {
    /// A run about to start its first attempt.
    #[must_use]
    pub fn new(id: RunId, definition: Definition) -> Self {
        Self { id, definition, log: Arc::new(Log::default()), phase: watch::Sender::new(Phase::Running) }
    }

    /// The run's id.
    #[must_use]
    pub fn id(&self) -> &RunId {
        &self.id
    }

    /// What the run was asked to do, under which grants.
    #[must_use]
    pub fn definition(&self) -> &Definition {
        &self.definition
    }

    /// The run's live stream, every attempt's.
    #[must_use]
    pub fn log(&self) -> &Arc<Log> {
        &self.log
    }

    /// Where the run stands now.
    #[must_use]
    pub fn phase(&self) -> Phase {
        self.phase.borrow().clone()
    }

    /// Where the run stands once no attempt is in flight.
    pub async fn settled(&self) -> Phase {
        let mut changes = self.phase.subscribe();
        match changes.wait_for(|phase| !phase.is_running()).await {
            Ok(phase) => phase.clone(),
            // The sender lives in `self`, so this cannot close while we borrow it.
            Err(_) => self.phase(),
        }
    }

    /// Records how an attempt ended.
    pub fn end(&self, ended: Ended) {
        self.restore(Arc::new(ended));
    }

    /// Hands back how the last attempt ended, after a refused decision.
    pub fn restore(&self, ended: Arc<Ended>) {
        self.phase.send_replace(Phase::Ended(ended));
    }

    /// If the run waits on a proposal, marks it in flight and returns how it ended (to hand back
    /// with [`end`](Self::end) if the decision is refused); else `None`, and nothing changes.
    /// Of two callers racing, one wins.
    #[must_use]
    pub fn claim(&self) -> Option<Arc<Ended>> {
        let mut claimed = None;
        self.phase.send_if_modified(|phase| match phase {
            Phase::Ended(ended) if ended.pending.is_some() => {
                claimed = Some(Arc::clone(ended));
                *phase = Phase::Running;
                true
            }
            _ => false,
        });
        claimed
    }
}

/// Every run kept is in flight or waits for a decision: a new one is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Full;

impl std::fmt::Display for Full {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("too many runs in flight or waiting for approval; retry later")
    }
}

impl std::error::Error for Full {}

#[derive(Debug, Default)]
struct Table {
    by_id: HashMap<RunId, Arc<RunSlot>>,
    order: VecDeque<RunId>,
}

/// The runs kept, at most `capacity`.
#[derive(Debug)]
pub struct Runs {
    table: Mutex<Table>,
    capacity: usize,
}

impl Runs {
    /// An empty table that keeps at most `capacity` runs (at least one).
    #[must_use]
    pub fn new(capacity: usize) -> Self {
        Self { table: Mutex::new(Table::default()), capacity: capacity.max(1) }
    }

    /// Adds `slot`, forgetting the oldest run that ended for good if the table is full.
    ///
    /// # Errors
    ///
    /// [`Full`] if every run kept is live; nothing changes then.
    pub fn insert(&self, slot: Arc<RunSlot>) -> Result<(), Full> {
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        if table.by_id.len() >= self.capacity {
            let table = &mut *table;
            let evictable = table
                .order
                .iter()
                .position(|id| table.by_id.get(id).is_none_or(|slot| !slot.phase.borrow().is_live()));
            let index = evictable.ok_or(Full)?;
            if let Some(id) = table.order.remove(index) {
                table.by_id.remove(&id);
            }
        }
        table.order.push_back(slot.id.clone());
        table.by_id.insert(slot.id.clone(), slot);
        Ok(())
    }

    /// The run `id`, if kept.
    #[must_use]
    pub fn get(&self, id: &RunId) -> Option<Arc<RunSlot>> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner).by_id.get(id).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::task::Task;

    fn slot(name: &str) -> Arc<RunSlot> {
        let id = RunId::new(name).expect("a valid id");
        Arc::new(RunSlot::new(id, Definition { task: Task::Answer, grants: Vec::new() }))
    }

    fn ended() -> Ended {
        Ended { result: Err(Failure::Run(RunError::Cancelled)), pending: None }
    }

    #[test]
    fn a_full_table_forgets_the_oldest_ended_run_and_refuses_when_all_are_live() {
        let runs = Runs::new(2);
        let (a, b) = (slot("a"), slot("b"));
        runs.insert(Arc::clone(&a)).expect("room");
        runs.insert(Arc::clone(&b)).expect("room");
        assert_eq!(runs.insert(slot("c")), Err(Full), "both are in flight");
        b.end(ended());
        runs.insert(slot("c")).expect("b ended, so it makes room");
        assert!(runs.get(b.id()).is_none());
        assert!(runs.get(a.id()).is_some());
        assert!(runs.get(&RunId::new("c").expect("id")).is_some());
    }

    #[test]
    fn a_run_that_waits_for_no_decision_is_never_claimed() {
        let run = slot("a");
        assert!(run.claim().is_none(), "in flight");
        run.end(ended());
        assert!(run.claim().is_none(), "ended for good");
        assert!(!run.phase().is_running());
    }
}
