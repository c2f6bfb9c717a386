//! A journal in the process's memory: the reference backend for tests, examples and the
//! conformance suite. It survives a run, not the process.
//!
//! # Invariants
//!
//! - Same semantics as every durable backend: fencing by epoch, one batch applied whole or not at
//!   all, a key written twice refused as a conflict.
//! - [`MemoryJournal::commits`] counts the commits that wrote (acquisitions included), so tests
//!   can check the commit budget (two commits per allowed effect).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use super::error::JournalError;
use super::id::RunId;
use super::row::{Batch, Entry, Fence, RunRow, StoredRun};
use super::store::Journal;
use crate::sync::Mutex;

/// A journal held in memory.
///
/// ```
/// use loopbound::journal::{Journal, MemoryJournal, RunId};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), loopbound::journal::JournalError> {
/// let journal = MemoryJournal::default();
/// assert_eq!(journal.load(&RunId::new("r")?).await?, None);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Default, Clone)]
pub struct MemoryJournal {
    inner: Arc<Mutex<Held>>,
}

/// What the journal holds, behind its one lock.
#[derive(Debug, Default)]
struct Held {
    runs: BTreeMap<RunId, StoredRun>,
    commits: u64,
}

impl MemoryJournal {
    /// A journal that holds `stored` as the rows of `run`, as they are: for tools and tests that
    /// examine what a resume does with given rows (corrupt ones included).
    #[must_use]
    pub fn holding(run: RunId, stored: StoredRun) -> Self {
        let journal = Self::default();
        journal.with(|held| held.runs.insert(run, stored));
        journal
    }

    /// How many commits wrote something so far.
    #[must_use]
    pub fn commits(&self) -> u64 {
        self.with(|held| held.commits)
    }

    fn with<T>(&self, f: impl FnOnce(&mut Held) -> T) -> T {
        f(&mut self.inner.lock())
    }
}

impl Journal for MemoryJournal {
    fn acquire(
        &self,
        run: &RunId,
        fresh: RunRow,
    ) -> impl Future<Output = Result<StoredRun, JournalError>> + Send {
        let fresh_state = fresh.state.clone();
        let result = self.with(|held| {
            let stored = held.runs.entry(run.clone()).or_insert_with(|| StoredRun {
                run: RunRow { epoch: 0, attempts: 0, ..fresh },
                ..StoredRun::default()
            });
            if stored.run.state.starts_with("finished:") {
                return Ok(stored.clone());
            }
            let (Some(epoch), Some(attempts)) =
                (stored.run.epoch.checked_add(1), stored.run.attempts.checked_add(1))
            else {
                return Err(JournalError::Corrupt("the run's epoch or attempts out of range".to_owned()));
            };
            stored.run.epoch = epoch;
            stored.run.attempts = attempts;
            stored.run.state.clone_from(&fresh_state);
            let stored = stored.clone();
            held.commits += 1;
            Ok(stored)
        });
        std::future::ready(result)
    }

    fn load(&self, run: &RunId) -> impl Future<Output = Result<Option<StoredRun>, JournalError>> + Send {
        std::future::ready(Ok(self.with(|held| held.runs.get(run).cloned())))
    }

    fn commit(
        &self,
        run: &RunId,
        fence: Fence,
        batch: Batch,
    ) -> impl Future<Output = Result<(), JournalError>> + Send {
        let result = self.with(|held| {
            let stored = held.runs.get_mut(run).ok_or(JournalError::UnknownRun)?;
            if let Fence::Epoch(epoch) = fence
                && stored.run.epoch != epoch
            {
                return Err(JournalError::LeaseLost);
            }
            let mut next = stored.clone();
            for entry in batch.entries {
                apply(&mut next, entry)?;
            }
            sort(&mut next);
            *stored = next;
            held.commits += 1;
            Ok(())
        });
        std::future::ready(result)
    }
}

/// Puts the rows in key order, as a backend reads them back (events stay in append order).
fn sort(stored: &mut StoredRun) {
    stored.replies.sort_by_key(|r| r.ordinal);
    stored.calls.sort_by_key(|c| (c.reply, c.index));
    stored.proposals.sort_by_key(|p| p.ordinal);
    stored.decisions.sort_by_key(|d| d.ordinal);
    stored.started.sort_by_key(|s| (s.ordinal, s.start));
    stored.reconciliations.sort_by_key(|r| (r.ordinal, r.start));
}

/// Applies one write to `stored`, refusing a key that exists.
fn apply(stored: &mut StoredRun, entry: Entry) -> Result<(), JournalError> {
    fn insert<T>(
        rows: &mut Vec<T>,
        row: T,
        same: impl Fn(&T) -> bool,
        what: &str,
    ) -> Result<(), JournalError> {
        if rows.iter().any(same) {
            return Err(JournalError::Conflict(what.to_owned()));
        }
        rows.push(row);
        Ok(())
    }
    match entry {
        Entry::Reply(row) => {
            let key = row.ordinal;
            insert(&mut stored.replies, row, |r| r.ordinal == key, "this reply")
        }
        Entry::Call(row) => {
            let key = (row.reply, row.index);
            let operation = row.operation;
            if operation.is_some() && stored.calls.iter().any(|c| c.operation == operation) {
                return Err(JournalError::Conflict("a result for this operation".to_owned()));
            }
            insert(&mut stored.calls, row, |c| (c.reply, c.index) == key, "a result for this call")
        }
        Entry::Proposal(row) => {
            let key = row.ordinal;
            insert(&mut stored.proposals, row, |p| p.ordinal == key, "a proposal for this operation")
        }
        Entry::Decision(row) => {
            let key = row.ordinal;
            insert(&mut stored.decisions, row, |d| d.ordinal == key, "a decision for this operation")
        }
        Entry::Started(row) => {
            let key = (row.ordinal, row.start);
            insert(&mut stored.started, row, |s| (s.ordinal, s.start) == key, "this start")
        }
        Entry::Reconciliation(row) => {
            let key = (row.ordinal, row.start);
            insert(
                &mut stored.reconciliations,
                row,
                |r| (r.ordinal, r.start) == key,
                "a reconciliation of this start",
            )
        }
        Entry::Event(row) => {
            stored.events.push(row);
            Ok(())
        }
        Entry::Ledger(ledger) => {
            stored.run.ledger = ledger;
            Ok(())
        }
        Entry::State(state) => {
            stored.run.state = state;
            Ok(())
        }
    }
}
