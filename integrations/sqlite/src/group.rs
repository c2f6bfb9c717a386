//! Group commit: the writes of many runs that arrive together (acquisitions, commits, lease
//! renewals) share one transaction and one sync.
//!
//! A write joins a queue. While no thread is writing, it starts one on the blocking pool; that
//! thread takes every write queued, opens one `BEGIN IMMEDIATE` transaction, runs each write
//! inside a savepoint of its own, commits once, and then answers each caller; writes that
//! arrived meanwhile go in the next transaction. One writer is the most a file has anyway
//! (SQLite's write lock): grouping spends its one sync on many commits instead of one.
//!
//! # Invariants
//!
//! - A caller is told its write succeeded only once the transaction that holds it is committed
//!   (durable under `synchronous = FULL`, as a write of its own would be). A write that fails
//!   rolls back to its savepoint, alone: the others of its group are not touched, and its
//!   caller gets its error at once. A transaction that fails to begin or to commit fails every
//!   write in it, and none of them is written.
//! - Each write is exactly the transaction it would be alone (the same statements, under the
//!   same write lock, with the same fence checks), so a crash anywhere leaves every write of a
//!   group committed or none of them: the crash matrix's cases are those of single writes.
//! - At most one writer thread per connection at a time; the queue is never left with writes
//!   and no writer (a write is queued and the writer's end is decided under one lock; a write
//!   that panics is caught and fails alone, so the writer does not unwind with writes queued
//!   behind it; a writer that unwinds for another reason gives its place up).
//! - A write whose caller gave it up (its future dropped, at a run's deadline) before its group
//!   began is not written; while its group waits for the file's write lock, the wait stops once
//!   every caller of the group has given up.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, PoisonError};

use loopbound::journal::JournalError;
use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::busy;
use crate::error::storage;
use crate::write::{Holder, immediate};

/// What tells a write's caller how its group ended: `Ok` once the group is committed.
type Answer = Box<dyn FnOnce(Result<(), JournalError>) + Send>;

/// One write waiting for its group, and its caller.
trait Pending: Send {
    /// Runs the write inside its savepoint: `Ok` with what tells its caller once the group
    /// ends, or `Err` once it has told its caller its error.
    fn run(self: Box<Self>, connection: &Connection, holder: &Holder<'_>) -> Result<Answer, ()>;

    /// Tells the caller that the write's group failed with `error`, without running it.
    fn fail(self: Box<Self>, error: JournalError);
}

/// A write producing a `T`, and where its caller waits for it.
struct Typed<T, F> {
    work: F,
    tell: oneshot::Sender<Result<T, JournalError>>,
}

impl<T, F> Pending for Typed<T, F>
where
    T: Send + 'static,
    F: FnOnce(&Connection, &Holder<'_>) -> Result<T, JournalError> + Send,
{
    fn run(self: Box<Self>, connection: &Connection, holder: &Holder<'_>) -> Result<Answer, ()> {
        let Self { work, tell } = *self;
        match work(connection, holder) {
            Ok(value) => Ok(Box::new(move |committed: Result<(), JournalError>| {
                let _ = tell.send(committed.map(|()| value));
            })),
            Err(error) => {
                let _ = tell.send(Err(error));
                Err(())
            }
        }
    }

    fn fail(self: Box<Self>, error: JournalError) {
        let _ = self.tell.send(Err(error));
    }
}

/// A write waiting for its group.
struct Queued {
    write: Box<dyn Pending>,
    holder: Arc<str>,
    lease: i64,
    abandoned: Arc<AtomicBool>,
}

/// The writes waiting for the next group, and whether a writer is at work.
#[derive(Default)]
pub(crate) struct Group {
    queue: Mutex<Queue>,
}

#[derive(Default)]
struct Queue {
    writes: Vec<Queued>,
    writing: bool,
}

/// How many writes one transaction holds at most: a group this large commits, and the rest go
/// in the next one, so one transaction's size (and the time its callers wait) stays bounded.
const MAX_GROUP: usize = 512;

/// How many groups and writes a connection committed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    pub(crate) groups: u64,
    pub(crate) writes: u64,
}

/// The connection a group writes through, with its tally.
pub(crate) trait Writer: Send + Sync + 'static {
    fn group(&self) -> &Group;
    fn connection(&self) -> &Mutex<Connection>;
    fn committed(&self, tally: Tally);
}

/// Queues `work` for the next group of `writer`'s connection, as `holder` holding leases for
/// `lease` microseconds; resolves once its group is committed (or its error is known).
pub(crate) async fn write<W, T, F>(
    writer: Arc<W>,
    holder: Arc<str>,
    lease: i64,
    work: F,
) -> Result<T, JournalError>
where
    W: Writer,
    T: Send + 'static,
    F: FnOnce(&Connection, &Holder<'_>) -> Result<T, JournalError> + Send + 'static,
{
    let (tell, told) = oneshot::channel::<Result<T, JournalError>>();
    let write: Box<dyn Pending> = Box::new(Typed { work, tell });
    // Dropped with this future, the flag tells the writer that no one waits for this write.
    let abandon = busy::Abandon::default();
    let queued = Queued { write, holder, lease, abandoned: abandon.flag() };
    let start = {
        let mut queue = writer.group().queue.lock().unwrap_or_else(PoisonError::into_inner);
        queue.writes.push(queued);
        !std::mem::replace(&mut queue.writing, true)
    };
    if start {
        let writer = Arc::clone(&writer);
        // The writer's thread ends once the queue is empty; nothing awaits it.
        drop(tokio::task::spawn_blocking(move || drain(&*writer)));
    }
    let answer =
        told.await.unwrap_or_else(|_| Err(JournalError::storage("the journal's writer thread failed")));
    drop(abandon);
    answer
}

/// Marks the queue without a writer if the writer's thread unwinds, so that the next write
/// starts another instead of waiting for one that is gone (the unwound group's callers are told
/// that the writer failed: their answers are dropped).
struct Unwinding<'w, W: Writer>(&'w W);

impl<W: Writer> Drop for Unwinding<'_, W> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.group().queue.lock().unwrap_or_else(PoisonError::into_inner).writing = false;
        }
    }
}

/// Writes groups until the queue is empty.
fn drain<W: Writer>(into: &W) {
    let _unwinding = Unwinding(into);
    loop {
        let writes: Vec<Queued> = {
            let mut queue = into.group().queue.lock().unwrap_or_else(PoisonError::into_inner);
            if queue.writes.is_empty() {
                queue.writing = false;
                return;
            }
            let take = queue.writes.len().min(MAX_GROUP);
            queue.writes.drain(..take).collect()
        };
        // A write given up before its group began is not written.
        let wanted: Vec<Queued> =
            writes.into_iter().filter(|queued| !busy::given_up(&queued.abandoned)).collect();
        if wanted.is_empty() {
            continue;
        }
        let flags = wanted.iter().map(|queued| Arc::clone(&queued.abandoned)).collect();
        let mut connection = into.connection().lock().unwrap_or_else(PoisonError::into_inner);
        busy::under_all(flags, busy::BUSY_TIMEOUT, || commit_group(&mut connection, wanted, into));
    }
}

/// One transaction for `writes`, each in a savepoint; counts it in `into`'s tally, then answers
/// every caller (so a caller that reads the tally once answered finds its group in it).
fn commit_group<W: Writer>(connection: &mut Connection, writes: Vec<Queued>, into: &W) {
    let mut transaction = match immediate(connection) {
        Ok(transaction) => transaction,
        Err(error) => {
            for queued in writes {
                queued.write.fail(error.clone());
            }
            return;
        }
    };
    let mut answers = Vec::with_capacity(writes.len());
    for queued in writes {
        let holder = Holder { name: &queued.holder, lease: queued.lease };
        let mut savepoint = match transaction.savepoint() {
            Ok(savepoint) => savepoint,
            Err(error) => {
                queued.write.fail(storage(error));
                continue;
            }
        };
        // A failed write rolls back to its savepoint when the savepoint is dropped. A write that
        // panics is one that failed: its caller is told so (its answer dropped with it), and
        // the writer goes on with the others (were it to unwind, a write queued while it did
        // could find the writer's place still taken, and wait with no writer).
        let written =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| queued.write.run(&savepoint, &holder)));
        if let Ok(Ok(answer)) = written {
            match savepoint.commit() {
                Ok(()) => answers.push(answer),
                Err(error) => answer(Err(storage(error))),
            }
        } else {
            savepoint.rollback().ok();
        }
    }
    let writes = answers.len() as u64;
    match transaction.commit() {
        Ok(()) => {
            into.committed(Tally { groups: 1, writes });
            for answer in answers {
                answer(Ok(()));
            }
        }
        Err(error) => {
            let error = storage(error);
            for answer in answers {
                answer(Err(error.clone()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    /// A connection to an in-memory database, as a group's writer.
    struct Memory {
        group: Group,
        connection: Mutex<Connection>,
        groups: AtomicU64,
    }

    impl Writer for Memory {
        fn group(&self) -> &Group {
            &self.group
        }

        fn connection(&self) -> &Mutex<Connection> {
            &self.connection
        }

        fn committed(&self, tally: Tally) {
            self.groups.fetch_add(tally.groups, Ordering::SeqCst);
        }
    }

    fn memory() -> Arc<Memory> {
        let connection = Connection::open_in_memory().unwrap();
        connection.execute_batch("CREATE TABLE t (n INTEGER PRIMARY KEY)").unwrap();
        Arc::new(Memory {
            group: Group::default(),
            connection: Mutex::new(connection),
            groups: AtomicU64::new(0),
        })
    }

    async fn insert(writer: &Arc<Memory>, n: i64) -> Result<(), JournalError> {
        write(Arc::clone(writer), Arc::from("test"), 1, move |connection, _| {
            connection.execute("INSERT INTO t (n) VALUES (?1)", [n]).map(drop).map_err(storage)
        })
        .await
    }

    #[tokio::test]
    async fn a_write_that_panics_fails_alone_and_the_writer_goes_on() {
        let writer = memory();
        let panicked = write(Arc::clone(&writer), Arc::from("test"), 1, |_, _| -> Result<(), JournalError> {
            panic!("a write that panics")
        })
        .await;
        assert_eq!(panicked, Err(JournalError::storage("the journal's writer thread failed")));
        assert_eq!(insert(&writer, 1).await, Ok(()), "the next write is written");
        let refused = insert(&writer, 1).await;
        assert!(matches!(refused, Err(JournalError::Conflict(_))), "a key written twice: {refused:?}");
        assert!(!writer.connection.is_poisoned(), "the writer did not unwind");
        let count: i64 = writer
            .connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .query_row("SELECT count(*) FROM t", [], |row| row.get(0))
            .unwrap();
        assert_eq!(count, 1, "the refused write left nothing");
    }
}
