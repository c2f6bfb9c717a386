//! The runs this process holds in memory: each run's task and where it stands (in flight, ended
//! with an attempt's outcome or error, or as the journal recorded it), with a bounded number
//! kept.
//!
//! Nothing here is the source of truth for a run: the journal is, its stream included. A run
//! this process does not hold (forgotten, or started by a process that stopped) is rebuilt from
//! its journal record ([`Recorded`]).
//!
//! # Invariants
//!
//! - A run has at most one slot in the table: a run loaded from the journal while another
//!   request loaded it too is kept once ([`Runs::adopt`]).
//! - At most one attempt of a run is started through its slot at a time: an attempt, a
//!   decision or a closing starts only from a phase change that one caller wins
//!   ([`RunSlot::claim`]). (The run registry refuses a second attempt of a run in this
//!   process whatever the slots, and the journal's lease one across processes.)
//! - At most `capacity` runs are kept; to take in another, the oldest run with no attempt in
//!   flight is forgotten (it can be rebuilt from the journal); when every kept run is in
//!   flight, a new one is refused ([`Full`]) rather than growing without bound.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use loopbound::journal::{self, RunId, RunRecord, RunState};
use loopbound::{ControlEvent, Outcome, RunError};
use tokio::sync::watch;

use super::durable::Pending;
use super::task::Task;

/// Why an attempt has no outcome.
#[derive(Clone, Debug)]
pub enum Failure {
    /// The run ended without an outcome (cancelled, a provider or journal error).
    Run(RunError),
    /// The journal could not give what the attempt needs (the run's definition).
    Journal(loopbound::journal::JournalError),
    /// The attempt could not start: the host's setup does not fit (a fault of this service).
    Setup(String),
}

/// How a run's last attempt in this process ended.
#[derive(Clone, Debug)]
pub struct Ended {
    /// The attempt's outcome, or why it has none.
    pub result: Result<Outcome, Failure>,
    /// The proposal it waits on, for `AwaitingApproval`.
    pub pending: Option<Pending>,
}

/// A run as its journal holds it, for a run whose last attempt did not end in this process (it
/// ran before a restart, or in another process), or that a host command changed since.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// Where the run stands.
    pub state: RunState,
    /// Whether another process's attempt held it when it was read ([`is_held`]).
    pub held: bool,
    /// How many attempts took it.
    pub attempts: u32,
    /// Its audit log.
    pub events: Vec<ControlEvent>,
    /// The proposal it waits on, for `AwaitingApproval`.
    pub pending: Option<Pending>,
}

impl Recorded {
    /// What `record` says.
    #[must_use]
    pub fn of(record: &RunRecord) -> Self {
        Self {
            state: record.state(),
            held: is_held(record),
            attempts: record.attempts(),
            events: record.events().to_vec(),
            pending: record.pending().map(Pending::from),
        }
    }
}

/// Whether an attempt held a live lease on `record`'s run when it was read, by a process that
/// may be alive: a process of this machine known to be gone holds nothing (the journal lets the
/// next attempt take its run over at once).
#[must_use]
pub fn is_held(record: &RunRecord) -> bool {
    record.lease().is_some_and(journal::Lease::is_held)
}

/// Where a run stands.
#[derive(Clone, Debug)]
pub enum Phase {
    /// An attempt is in flight in this process (or a host command on the run is being recorded).
    Running,
    /// The last attempt in this process ended.
    Ended(Arc<Ended>),
    /// As the journal recorded it.
    Recorded(Arc<Recorded>),
}

impl Phase {
    /// Whether the run can change in this process without a host's command.
    #[must_use]
    pub fn is_running(&self) -> bool {
        matches!(self, Self::Running)
    }

    /// The proposal the run waits on, if any.
    #[must_use]
    pub fn pending(&self) -> Option<&Pending> {
        match self {
            Self::Running => None,
            Self::Ended(ended) => ended.pending.as_ref(),
            Self::Recorded(recorded) => recorded.pending.as_ref(),
        }
    }
}

/// One run.
#[derive(Debug)]
pub struct RunSlot {
    id: RunId,
    task: Task,
    phase: watch::Sender<Phase>,
}

impl RunSlot {
    /// A run about to start its first attempt.
    #[must_use]
    pub fn new(id: RunId, task: Task) -> Self {
        Self::with_phase(id, task, Phase::Running)
    }

    /// A run rebuilt from its journal record, with no attempt in flight in this process.
    #[must_use]
    pub fn recorded(id: RunId, task: Task, recorded: Recorded) -> Self {
        Self::with_phase(id, task, Phase::Recorded(Arc::new(recorded)))
    }

    fn with_phase(id: RunId, task: Task, phase: Phase) -> Self {
        Self { id, task, phase: watch::Sender::new(phase) }
    }

    /// The run's id.
    #[must_use]
    pub fn id(&self) -> &RunId {
        &self.id
    }

    /// The run's task, which decides its completion.
    #[must_use]
    pub fn task(&self) -> Task {
        self.task
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
        self.restore(Phase::Ended(Arc::new(ended)));
    }

    /// Sets where the run stands: hands back a phase after a refused command, or records what
    /// the journal says after one.
    pub fn restore(&self, phase: Phase) {
        self.phase.send_replace(phase);
    }

    /// If no attempt is in flight and `wanted` holds for the run's phase, marks it in flight and
    /// returns the phase it had (to hand back with [`restore`](Self::restore) if the command is
    /// refused); else `None`, and nothing changes. Of two callers racing, one wins.
    #[must_use]
    pub fn claim(&self, wanted: impl Fn(&Phase) -> bool) -> Option<Phase> {
        let mut claimed = None;
        self.phase.send_if_modified(|phase| {
            if phase.is_running() || !wanted(phase) {
                return false;
            }
            claimed = Some(std::mem::replace(phase, Phase::Running));
            true
        });
        claimed
    }
}

/// Every run kept is in flight: a new one is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Full;

impl std::fmt::Display for Full {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("too many runs in flight; retry later")
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

    /// Adds `slot`, forgetting the oldest run with no attempt in flight if the table is full.
    ///
    /// # Errors
    ///
    /// [`Full`] if every run kept is in flight; nothing changes then.
    pub fn insert(&self, slot: Arc<RunSlot>) -> Result<(), Full> {
        self.adopt(slot).map(drop)
    }

    /// The slot kept for `slot`'s run if there is one, else `slot`, added as by
    /// [`insert`](Self::insert).
    ///
    /// # Errors
    ///
    /// As [`insert`](Self::insert).
    pub fn adopt(&self, slot: Arc<RunSlot>) -> Result<Arc<RunSlot>, Full> {
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(kept) = table.by_id.get(&slot.id) {
            return Ok(Arc::clone(kept));
        }
        if table.by_id.len() >= self.capacity {
            let table = &mut *table;
            let evictable = table
                .order
                .iter()
                .position(|id| table.by_id.get(id).is_none_or(|slot| !slot.phase.borrow().is_running()));
            let index = evictable.ok_or(Full)?;
            if let Some(id) = table.order.remove(index) {
                table.by_id.remove(&id);
            }
        }
        table.order.push_back(slot.id.clone());
        table.by_id.insert(slot.id.clone(), Arc::clone(&slot));
        Ok(slot)
    }

    /// Forgets run `id`: the next request for it rebuilds it from the journal.
    pub fn forget(&self, id: &RunId) {
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        if table.by_id.remove(id).is_some() {
            table.order.retain(|kept| kept != id);
        }
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

    fn id(name: &str) -> RunId {
        RunId::new(name).expect("a valid id")
    }

    fn slot(name: &str) -> Arc<RunSlot> {
        Arc::new(RunSlot::new(id(name), Task::Answer))
    }

    fn ended() -> Ended {
        Ended { result: Err(Failure::Run(RunError::Cancelled)), pending: None }
    }

    #[test]
    fn a_full_table_forgets_the_oldest_run_not_in_flight_and_refuses_when_all_are() {
        let runs = Runs::new(2);
        let (a, b) = (slot("a"), slot("b"));
        runs.insert(Arc::clone(&a)).expect("room");
        runs.insert(Arc::clone(&b)).expect("room");
        assert_eq!(runs.insert(slot("c")), Err(Full), "both are in flight");
        b.end(ended());
        runs.insert(slot("c")).expect("b ended, so it makes room");
        assert!(runs.get(b.id()).is_none());
        assert!(runs.get(a.id()).is_some());
        assert!(runs.get(&id("c")).is_some());
    }

    #[test]
    fn a_run_loaded_twice_is_kept_once() {
        let runs = Runs::new(4);
        let first = slot("a");
        let kept = runs.adopt(Arc::clone(&first)).expect("room");
        assert!(Arc::ptr_eq(&kept, &first));
        let again = runs.adopt(slot("a")).expect("kept already");
        assert!(Arc::ptr_eq(&again, &first), "the slot already kept wins");
        runs.forget(first.id());
        assert!(runs.get(first.id()).is_none());
        runs.insert(slot("b")).expect("room");
        runs.insert(slot("c")).expect("room");
        runs.insert(slot("d")).expect("room");
        runs.insert(slot("e")).expect("a forgotten run takes no room");
    }

    #[test]
    fn a_claim_wins_once_and_only_on_a_phase_it_wants() {
        let run = slot("a");
        assert!(run.claim(|_| true).is_none(), "in flight");
        run.end(ended());
        assert!(run.claim(|phase| phase.pending().is_some()).is_none(), "waits for no decision");
        assert!(!run.phase().is_running());
        let before = run.claim(|_| true).expect("no attempt in flight");
        assert!(matches!(before, Phase::Ended(_)));
        assert!(run.claim(|_| true).is_none(), "claimed already");
        run.restore(before);
        assert!(!run.phase().is_running());
    }
}
