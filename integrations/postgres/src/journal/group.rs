//! Group commit on PostgreSQL: the commits and lease renewals of many runs that arrive together
//! share one transaction, one round trip and one sync.
//!
//! An attempt's commit (or renewal: a commit without rows) joins its store's queue (one for
//! every journal on the store). While fewer than [`GROUP_WRITERS`] writers are at work, it
//! starts one: a task of its own on the runtime (so that no caller's future, dropped at a run's
//! deadline, can stop a group half done). A writer takes the queued writes (at most
//! [`MAX_GROUP`], at most one per run), sends them to the server as one transaction on a
//! connection of the store's own for groups (see [`many`]: the fences of all, then the rows of
//! the fenced ones, then one `COMMIT`), answers each caller, and takes the writes that arrived
//! meanwhile, until the queue is empty. A host's commands (fenced by the lease being free, not
//! by an epoch) and acquisitions are not grouped.
//!
//! # Invariants
//!
//! - A caller is told its write succeeded only once the transaction that holds it is committed.
//!   A batch whose fence fails in a group is [`LeaseLost`](JournalError::LeaseLost) or
//!   [`UnknownRun`](JournalError::UnknownRun) and writes nothing, alone. When a statement of
//!   the group fails on the server (a key written twice, a deadlock, a serialisation failure),
//!   the group has rolled back whole, and its writes are then committed one by one, each in a
//!   transaction of its own as it would be without groups, so that each gets exactly its own
//!   result: a write that fails fails alone. A connection that fails mid-group fails every write
//!   of the group (a `COMMIT` whose answer is lost may have committed: fail closed), and is
//!   closed rather than returned to its pool.
//! - A group holds at most one write per run, and a run's writes are written in the order they
//!   were queued: a write whose run is in a group being written waits for the next one.
//! - At most [`GROUP_WRITERS`] writers per store (all its journals) at a time, each writing
//!   through a connection of the store's own for groups (never waiting behind reads); the queue
//!   is never left with writes and no writer: a write is queued and a writer's end decided under
//!   one lock, and a writer that ends any other way (its task dropped when the runtime shuts
//!   down) tells the queued writes' callers that it stopped, if no other writer is left to take
//!   them.
//! - A write whose caller gave it up (its future dropped) before its group began is not
//!   written. One given up during its group is written or not with the group, which goes on for
//!   the others.
//! - A group's whole round, taking a connection included, is bounded by the store's query
//!   timeout ([`Config::query_timeout`](crate::Config::query_timeout)); past it every write of
//!   the group fails with a storage error, and the connection (its transaction perhaps still
//!   open) is closed, not pooled.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use loopbound::journal::JournalError;
use loopbound::journal::backend::{Batch, Fence};
use tokio::runtime::Handle;
use tokio::sync::oneshot;

use super::columns::Fenced;
use super::many::{self, Round};
use super::write::Writer;
use crate::id::WorkerId;
use crate::store::Store;

/// How many writes one transaction holds at most: a group this large commits, and the rest go
/// in the next one, so one transaction's size (and the time its callers wait) stays bounded.
pub const MAX_GROUP: usize = 512;

/// How many groups of one store's journals are written at a time, each on a connection of its
/// own (the store's writers, apart from its pool).
pub const GROUP_WRITERS: usize = 2;

/// One fenced write: an attempt's batch (empty for a lease renewal).
pub(super) struct Write {
    pub(super) run: String,
    /// The attempt's epoch, as the database's `bigint` (checked when the write was made).
    pub(super) epoch: i64,
    pub(super) worker: WorkerId,
    pub(super) lease_micros: i64,
    pub(super) batch: Batch,
}

/// A write waiting for its group, and where its caller waits for the answer.
struct Queued {
    write: Write,
    tell: oneshot::Sender<Result<(), JournalError>>,
}

/// The writes waiting for the next group, the writers at work, and what they committed.
#[derive(Default)]
pub(crate) struct Group {
    queue: Mutex<Queue>,
    groups: AtomicU64,
    writes: AtomicU64,
}

#[derive(Default)]
struct Queue {
    waiting: VecDeque<Queued>,
    writers: usize,
    /// The runs of the groups being written.
    busy: HashSet<String>,
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group").field("groups", &self.groups()).field("writes", &self.writes()).finish()
    }
}

impl Group {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many group transactions committed so far.
    pub(super) fn groups(&self) -> u64 {
        self.groups.load(Ordering::SeqCst)
    }

    /// How many writes those transactions held.
    pub(super) fn writes(&self) -> u64 {
        self.writes.load(Ordering::SeqCst)
    }

    /// Queues `write` for the next group of `store`, a writer spawned on `runtime` if fewer than
    /// [`GROUP_WRITERS`] are at work; resolves once its group committed (or its error is known).
    pub(super) async fn write(
        self: Arc<Self>,
        runtime: Handle,
        store: Store,
        write: Write,
    ) -> Result<(), JournalError> {
        let (tell, told) = oneshot::channel();
        let start = {
            let mut queue = self.queue();
            queue.waiting.push_back(Queued { write, tell });
            let start = queue.writers < GROUP_WRITERS;
            queue.writers += usize::from(start);
            start
        };
        if start {
            let writer = Drainer { group: self, store, current: Vec::new(), ended: false };
            // The writer ends once the queue is empty; nothing awaits it.
            drop(runtime.spawn(writer.drain()));
        }
        told.await.unwrap_or_else(|_| Err(JournalError::storage("the journal's group writer stopped")))
    }
}

/// A writer: takes groups from the queue and writes them until the queue is empty.
struct Drainer {
    group: Arc<Group>,
    store: Store,
    /// The runs of the group being written.
    current: Vec<String>,
    /// Whether it ended by finding the queue empty (and said so under the queue's lock).
    ended: bool,
}

impl Drop for Drainer {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        // Dropped mid-group (the runtime shut down) or unwound: give the place up, and tell the
        // waiting callers, if no writer is left to take them.
        let mut queue = self.group.queue();
        queue.writers = queue.writers.saturating_sub(1);
        for run in self.current.drain(..) {
            queue.busy.remove(&run);
        }
        if queue.writers == 0 {
            queue.waiting.clear();
        }
    }
}

impl Drainer {
    async fn drain(mut self) {
        loop {
            let taken = self.take();
            if taken.is_empty() {
                return;
            }
            let results = self.commit(&taken).await;
            {
                let mut queue = self.group.queue();
                for run in self.current.drain(..) {
                    queue.busy.remove(&run);
                }
            }
            for (queued, result) in taken.into_iter().zip(results) {
                let _ = queued.tell.send(result);
            }
        }
    }

    /// The next group: the queued writes in order, at most [`MAX_GROUP`], leaving those given up
    /// and, in the queue, those whose run is in this group or another being written. Empty when
    /// nothing is left, and then this writer has ended.
    fn take(&mut self) -> Vec<Queued> {
        let mut queue = self.group.queue();
        let mut taken = Vec::new();
        let mut left = VecDeque::new();
        while taken.len() < MAX_GROUP {
            let Some(queued) = queue.waiting.pop_front() else { break };
            if queued.tell.is_closed() {
                continue;
            }
            if queue.busy.insert(queued.write.run.clone()) {
                self.current.push(queued.write.run.clone());
                taken.push(queued);
            } else {
                left.push_back(queued);
            }
        }
        while let Some(queued) = left.pop_back() {
            queue.waiting.push_front(queued);
        }
        if taken.is_empty() {
            queue.writers = queue.writers.saturating_sub(1);
            self.ended = true;
        }
        taken
    }

    /// Commits `taken` as one group, or one by one when the group rolled back; each write's
    /// result in order.
    async fn commit(&self, taken: &[Queued]) -> Vec<Result<(), JournalError>> {
        let store = &self.store;
        let bounded = store.within(async {
            let mut connection = Pooled { client: Some(store.writer().await?), idle: false };
            let client = connection.client.as_mut().ok_or_else(|| JournalError::storage("no connection"))?;
            let batches: Vec<Fenced<'_>> = taken
                .iter()
                .map(|queued| Fenced {
                    run: &queued.write.run,
                    epoch: queued.write.epoch,
                    holder: queued.write.worker.as_str(),
                    lease_micros: queued.write.lease_micros,
                    batch: &queued.write.batch,
                })
                .collect();
            let results = match many::round(client, store.redactor(), &batches).await? {
                Round::Committed(results) => {
                    let written = results.iter().filter(|result| result.is_ok()).count();
                    self.group.groups.fetch_add(1, Ordering::SeqCst);
                    self.group.writes.fetch_add(written as u64, Ordering::SeqCst);
                    results
                }
                Round::RolledBack => one_by_one(client, store, taken).await,
            };
            connection.idle = true;
            Ok::<_, JournalError>(results)
        });
        let failure = match bounded.await {
            Some(Ok(results)) => return results,
            Some(Err(error)) => error,
            None => JournalError::storage(format!(
                "the database did not answer within {} ms",
                store.config().query_timeout().as_millis()
            )),
        };
        taken.iter().map(|_| Err(failure.clone())).collect()
    }
}

/// Commits each write of `taken` alone, in order, on `client`: those whose caller gave up are
/// left out (nothing of them was written).
async fn one_by_one(
    client: &mut deadpool_postgres::Client,
    store: &Store,
    taken: &[Queued],
) -> Vec<Result<(), JournalError>> {
    let mut results = Vec::with_capacity(taken.len());
    for queued in taken {
        if queued.tell.is_closed() {
            results.push(Err(JournalError::storage("given up before it was written")));
            continue;
        }
        let write = &queued.write;
        let writer =
            Writer { redactor: store.redactor(), worker: &write.worker, lease_micros: write.lease_micros };
        let fence = Fence::Epoch(write.epoch.unsigned_abs());
        results.push(writer.commit_alone(client, &write.run, fence, &write.batch).await);
    }
    results
}

/// A pooled connection, closed instead of returned to the pool unless the round left it idle
/// (its future dropped mid-transaction, or its connection failed).
struct Pooled {
    client: Option<deadpool_postgres::Client>,
    idle: bool,
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if !self.idle
            && let Some(client) = self.client.take()
        {
            drop(deadpool_postgres::Client::take(client));
        }
    }
}
