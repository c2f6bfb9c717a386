//! A journal in the process's memory: the reference backend for tests, examples and the
//! conformance suite. It survives a run, not the process.
//!
//! # Invariants
//!
//! - Same semantics as every durable backend: one live lease per run, fencing by epoch and lease,
//!   one batch applied whole or not at all, a key written twice refused as a conflict, and a
//!   live lease whose holder is a dead process of this machine taken over at once, only while
//!   it is still that holder's under the same epoch.
//! - [`MemoryJournal::commits`] counts the commits that wrote (acquisitions included, lease
//!   renewals apart), so tests can check the commit budget (two per allowed effect).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::cancel_watch::CancelWatch;
use super::error::JournalError;
use super::holder::is_dead_holder;
use super::id::RunId;
use super::query::RunQuery;
use super::record::valid_actor;
use super::row::{Batch, Entry, Fence, Lease, ListedRow, RunRow, StoredRun, UpdateRow};
use super::store::{DEFAULT_LEASE, Journal, check_lease};
use super::tail::LiveStreams;
use crate::sync::Mutex;

/// A journal held in memory.
///
/// Clones share the journal: two clones with their own [`holder`](Self::with_holder) names
/// stand for two processes on one durable journal. Leases are judged by the system clock.
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
#[derive(Debug, Clone)]
pub struct MemoryJournal {
    inner: Arc<Mutex<Held>>,
    holder: Arc<str>,
    lease: Duration,
    watch: CancelWatch,
    live: Arc<LiveStreams>,
}

impl Default for MemoryJournal {
    fn default() -> Self {
        Self {
            inner: Arc::default(),
            holder: Arc::from("memory"),
            lease: DEFAULT_LEASE,
            watch: CancelWatch::default(),
            live: Arc::default(),
        }
    }
}

/// What the journal holds, behind its one lock.
#[derive(Debug, Default)]
struct Held {
    runs: BTreeMap<RunId, StoredRun>,
    /// Who asked to cancel each run, until an attempt honours it.
    cancels: BTreeMap<RunId, String>,
    /// Each run's recorded stream, by number, in the order of the numbers.
    streams: BTreeMap<RunId, Vec<(u64, String)>>,
    commits: u64,
    renewals: u64,
}

/// Why a grant was refused, and, for a live lease, whose it is and under which epoch.
struct Refusal {
    error: JournalError,
    dead: Option<(String, u64)>,
}

impl From<JournalError> for Refusal {
    fn from(error: JournalError) -> Self {
        Self { error, dead: None }
    }
}

/// `lease` as of `now`: how long it has left.
fn as_of(mut lease: Lease, now: SystemTime) -> Lease {
    lease.remaining = lease.until.duration_since(now).unwrap_or(Duration::ZERO);
    lease
}

/// Whether `stored`'s lease is live at `now`.
fn live(stored: &StoredRun, now: SystemTime) -> bool {
    stored.lease.as_ref().is_some_and(|lease| lease.until > now)
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

    /// This journal (the same one: clones share it) with each grant, renewal and commit holding
    /// a run for `lease` (30 s by default).
    ///
    /// # Errors
    ///
    /// [`JournalError::InvalidLease`] for zero or more than [`MAX_LEASE`](super::MAX_LEASE).
    pub fn with_lease(mut self, lease: Duration) -> Result<Self, JournalError> {
        self.lease = check_lease(lease)?;
        Ok(self)
    }

    /// This journal (the same one) naming its attempts' leases `holder` (`memory` by default).
    ///
    /// # Errors
    ///
    /// [`JournalError::InvalidActor`] for an empty name, one over 64 bytes or with a control
    /// character.
    pub fn with_holder(mut self, holder: &str) -> Result<Self, JournalError> {
        if !valid_actor(holder) {
            return Err(JournalError::InvalidActor);
        }
        self.holder = Arc::from(holder);
        Ok(self)
    }

    /// Lets `run`'s lease run out now, as if its holder had died and the lease's duration had
    /// passed: for tests that stand for a crashed process inside one. Its holder's later commits
    /// are [`LeaseLost`](JournalError::LeaseLost).
    pub fn expire(&self, run: &RunId) {
        let now = SystemTime::now();
        self.with(|held| {
            if let Some(lease) = held.runs.get_mut(run).and_then(|stored| stored.lease.as_mut()) {
                lease.until = now;
            }
        });
    }

    /// How many commits wrote something so far (acquisitions included, renewals not).
    #[must_use]
    pub fn commits(&self) -> u64 {
        self.with(|held| held.commits)
    }

    /// How many renewals extended a lease so far.
    #[must_use]
    pub fn renewals(&self) -> u64 {
        self.with(|held| held.renewals)
    }

    fn with<T>(&self, f: impl FnOnce(&mut Held) -> T) -> T {
        f(&mut self.inner.lock())
    }

    fn grant(&self, now: SystemTime) -> Option<Lease> {
        let until = now.checked_add(self.lease)?;
        Some(Lease { holder: self.holder.to_string(), until, remaining: self.lease })
    }

    fn acquire_now(&self, run: &RunId, fresh: RunRow) -> Result<StoredRun, JournalError> {
        match self.grant_now(run, fresh.clone(), None) {
            // Judged outside the lock (it reads `/proc`), then taken over only if the lease is
            // still that holder's under the same epoch.
            Err(Refusal { error, dead: Some((holder, epoch)) }) => {
                if is_dead_holder(&holder) {
                    self.grant_now(run, fresh, Some((&holder, epoch))).map_err(|refusal| refusal.error)
                } else {
                    Err(error)
                }
            }
            other => other.map_err(|refusal| refusal.error),
        }
    }

    /// Grants `run` unless it is finished or its lease is live; with `dead`, also when its live
    /// lease is held by that holder under that epoch (a holder judged dead).
    fn grant_now(&self, run: &RunId, fresh: RunRow, dead: Option<(&str, u64)>) -> Result<StoredRun, Refusal> {
        let now = SystemTime::now();
        let lease = self
            .grant(now)
            .ok_or_else(|| Refusal::from(JournalError::storage("a lease beyond the clock")))?;
        self.with(|held| {
            let Some(stored) = held.runs.get_mut(run) else {
                let stored = StoredRun {
                    run: RunRow { epoch: 1, attempts: 1, ..fresh },
                    lease: Some(lease),
                    ..StoredRun::default()
                };
                held.runs.insert(run.clone(), stored.clone());
                held.commits += 1;
                return Ok(stored);
            };
            if stored.run.state.is_finished() {
                let mut stored = stored.clone();
                stored.lease = stored.lease.map(|lease| as_of(lease, now));
                return Ok(stored);
            }
            if let Some(held_lease) = stored.lease.as_ref().filter(|lease| lease.until > now) {
                let taken_over = dead
                    .is_some_and(|(holder, epoch)| held_lease.holder == holder && stored.run.epoch == epoch);
                if !taken_over {
                    let held_lease = as_of(held_lease.clone(), now);
                    return Err(Refusal {
                        dead: Some((held_lease.holder.clone(), stored.run.epoch)),
                        error: JournalError::LeaseHeld {
                            holder: held_lease.holder,
                            remaining: held_lease.remaining,
                        },
                    });
                }
            }
            let (Some(epoch), Some(attempts)) =
                (stored.run.epoch.checked_add(1), stored.run.attempts.checked_add(1))
            else {
                return Err(Refusal::from(JournalError::Corrupt(
                    "the run's epoch or attempts out of range".to_owned(),
                )));
            };
            stored.run.epoch = epoch;
            stored.run.attempts = attempts;
            stored.lease = Some(lease);
            let stored = stored.clone();
            held.commits += 1;
            Ok(stored)
        })
    }

    fn renew_now(&self, run: &RunId, epoch: u64) -> Result<(), JournalError> {
        let now = SystemTime::now();
        let lease = self.grant(now);
        self.with(|held| {
            let stored = held.runs.get_mut(run).ok_or(JournalError::UnknownRun)?;
            if stored.run.epoch != epoch || !live(stored, now) {
                return Err(JournalError::LeaseLost);
            }
            stored.lease = lease;
            held.renewals += 1;
            Ok(())
        })
    }

    fn commit_now(&self, run: &RunId, fence: Fence, batch: Batch) -> Result<(), JournalError> {
        let now = SystemTime::now();
        let renewed = self.grant(now);
        self.with(|held| {
            let stored = held.runs.get_mut(run).ok_or(JournalError::UnknownRun)?;
            let mut next = stored.clone();
            match fence {
                Fence::Epoch(epoch) => {
                    if stored.run.epoch != epoch || !live(stored, now) {
                        return Err(JournalError::LeaseLost);
                    }
                    next.lease = renewed;
                }
                Fence::Host => {
                    if let Some(lease) = stored.lease.as_ref().filter(|lease| lease.until > now) {
                        let lease = as_of(lease.clone(), now);
                        return Err(JournalError::LeaseHeld {
                            holder: lease.holder,
                            remaining: lease.remaining,
                        });
                    }
                }
            }
            let mut honoured = false;
            let mut lines = Vec::new();
            for entry in batch.entries {
                match entry {
                    Entry::Release => {
                        if matches!(fence, Fence::Epoch(_)) {
                            next.lease = None;
                        }
                    }
                    Entry::Update(row) => {
                        // Numbers only grow; an attempt after a cut one skips some.
                        if row.seq <= next.stream {
                            return Err(JournalError::Conflict("this stream line".to_owned()));
                        }
                        next.stream = row.seq;
                        lines.push((row.seq, row.line));
                    }
                    entry => {
                        honoured |= entry == Entry::CancelHonoured;
                        apply(&mut next, entry)?;
                    }
                }
            }
            sort(&mut next);
            *stored = next;
            if !lines.is_empty() {
                held.streams.entry(run.clone()).or_default().extend(lines);
            }
            if honoured {
                held.cancels.remove(run);
            }
            held.commits += 1;
            Ok(())
        })
    }

    fn list_now(&self, query: &RunQuery) -> Vec<ListedRow> {
        let now = SystemTime::now();
        let limit = usize::try_from(query.page_size()).unwrap_or(usize::MAX);
        self.with(|held| {
            let after = query.cursor();
            held.runs
                .iter()
                .filter(|(run, _)| after.is_none_or(|cursor| run.as_str() > cursor.as_str()))
                .filter(|(_, stored)| query.matches(stored.run.state, live(stored, now), &stored.run.labels))
                .take(limit)
                .map(|(run, stored)| ListedRow {
                    run: run.as_str().to_owned(),
                    epoch: stored.run.epoch,
                    attempts: stored.run.attempts,
                    state: stored.run.state,
                    lease: stored.lease.clone().map(|lease| as_of(lease, now)),
                    labels: stored.run.labels.clone(),
                })
                .collect()
        })
    }
}

impl Journal for MemoryJournal {
    fn lease(&self) -> Duration {
        self.lease
    }

    fn acquire(
        &self,
        run: &RunId,
        fresh: RunRow,
    ) -> impl Future<Output = Result<StoredRun, JournalError>> + Send {
        std::future::ready(self.acquire_now(run, fresh))
    }

    fn renew(&self, run: &RunId, epoch: u64) -> impl Future<Output = Result<(), JournalError>> + Send {
        std::future::ready(self.renew_now(run, epoch))
    }

    fn load(&self, run: &RunId) -> impl Future<Output = Result<Option<StoredRun>, JournalError>> + Send {
        let now = SystemTime::now();
        let stored = self.with(|held| held.runs.get(run).cloned()).map(|mut stored| {
            stored.lease = stored.lease.map(|lease| as_of(lease, now));
            stored
        });
        std::future::ready(Ok(stored))
    }

    fn commit(
        &self,
        run: &RunId,
        fence: Fence,
        batch: Batch,
    ) -> impl Future<Output = Result<(), JournalError>> + Send {
        std::future::ready(self.commit_now(run, fence, batch))
    }

    fn list_rows(
        &self,
        query: &RunQuery,
    ) -> impl Future<Output = Result<Vec<ListedRow>, JournalError>> + Send {
        std::future::ready(Ok(self.list_now(query)))
    }

    fn cancel_requested(
        &self,
        run: &RunId,
    ) -> impl Future<Output = Result<Option<String>, JournalError>> + Send {
        std::future::ready(Ok(self.with(|held| held.cancels.get(run).cloned())))
    }

    fn cancel_requests(
        &self,
        runs: &[RunId],
    ) -> impl Future<Output = Result<Vec<RunId>, JournalError>> + Send {
        let requested =
            self.with(|held| runs.iter().filter(|run| held.cancels.contains_key(*run)).cloned().collect());
        std::future::ready(Ok(requested))
    }

    fn cancel_watch(&self) -> Option<&CancelWatch> {
        Some(&self.watch)
    }

    fn live_streams(&self) -> Option<&LiveStreams> {
        Some(&self.live)
    }

    fn updates(
        &self,
        run: &RunId,
        after: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<UpdateRow>, JournalError>> + Send {
        let rows = self.with(|held| {
            let Some(lines) = held.streams.get(run) else { return Vec::new() };
            let skip = lines.partition_point(|(seq, _)| *seq <= after);
            lines[skip..]
                .iter()
                .take(limit)
                .map(|(seq, line)| UpdateRow { seq: *seq, line: line.clone() })
                .collect()
        });
        std::future::ready(Ok(rows))
    }

    fn request_cancel(&self, run: &RunId, by: &str) -> impl Future<Output = Result<(), JournalError>> + Send {
        std::future::ready(self.with(|held| {
            if !held.runs.contains_key(run) {
                return Err(JournalError::UnknownRun);
            }
            held.cancels.insert(run.clone(), by.to_owned());
            held.commits += 1;
            Ok(())
        }))
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
        Entry::Expiry(row) => {
            let proposal = stored.proposals.iter_mut().find(|p| p.ordinal == row.ordinal);
            let proposal = proposal
                .ok_or_else(|| JournalError::Conflict("no proposal for this operation".to_owned()))?;
            proposal.expires = Some(row.expires);
            Ok(())
        }
        Entry::Ledger(ledger) => {
            stored.run.ledger = ledger;
            Ok(())
        }
        Entry::ExpectState(state) => {
            if stored.run.state == state {
                Ok(())
            } else {
                Err(JournalError::Conflict("another state than the one expected".to_owned()))
            }
        }
        Entry::State(state) => {
            stored.run.state = state;
            Ok(())
        }
        Entry::Definition(definition) => {
            stored.run.definition = definition;
            Ok(())
        }
        // Applied by the commit, which knows the fence, holds every run's cancel requests and
        // its recorded streams.
        Entry::Release | Entry::CancelHonoured | Entry::Update(_) => Ok(()),
    }
}
