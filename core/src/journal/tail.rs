//! The end of a journaled run's recorded stream that its attempt has not committed yet, live in
//! the process that runs the attempt.
//!
//! An attempt numbers its steps as they happen, after the run's last committed line: a small
//! task (the pump) takes them from the attempt's record of its stream ([`Updates`]) as they come,
//! serialises each, and publishes it under its number; each commit of the attempt writes the
//! lines published since the last one, under the same numbers. A follower in this process
//! ([`follow`](super::follow)) reads the committed lines from the journal and the rest from
//! here, so it sees a step as it happens, with the number it keeps in the journal: a reader
//! that reconnects with the last number it got, in this process or another, after a restart or
//! not, gets every later line once.
//!
//! # Invariants
//!
//! - Numbers are given once, in the order of the steps, from the run's last committed line
//!   plus one; a published line never changes, so a number names one line for every reader.
//! - The pump publishes at most once per [`PUBLISH_EVERY`]: pieces of a reply's text that come
//!   meanwhile merge into one line (the record merges unread text), so a streamed reply costs at
//!   most one line per quarter second however its provider cuts it.
//! - The tail holds only lines not committed yet: a commit trims what it wrote. What it holds
//!   is at most what the attempt's record held (bounded by the run's limits).
//! - Nothing here waits for a reader: publishing is a send on a watch channel.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::future::poll_fn;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::watch;

use super::id::RunId;
use super::row::UpdateRow;
use crate::watch::{Update, Updates};

/// How often, at most, the pump publishes what came.
pub(crate) const PUBLISH_EVERY: Duration = Duration::from_millis(250);

/// The live tails of the runs whose attempts this journal handle runs (clones of a handle share
/// them): what lets [`follow`](super::follow) see steps before they are committed. A backend
/// keeps one and returns it from [`Journal::live_streams`](super::Journal::live_streams).
#[derive(Default)]
pub struct LiveStreams {
    tails: Mutex<HashMap<RunId, Weak<Tail>>>,
}

impl fmt::Debug for LiveStreams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tails = self.tails.lock().unwrap_or_else(PoisonError::into_inner).len();
        f.debug_struct("LiveStreams").field("tails", &tails).finish()
    }
}

impl LiveStreams {
    /// Makes `tail` the live tail of `run`, forgetting the tails whose attempts are gone.
    pub(crate) fn register(&self, run: &RunId, tail: &Arc<Tail>) {
        let mut tails = self.tails.lock().unwrap_or_else(PoisonError::into_inner);
        tails.retain(|_, tail| tail.strong_count() > 0);
        tails.insert(run.clone(), Arc::downgrade(tail));
    }

    /// The live tail of `run`, while an attempt of this handle publishes to it.
    pub(crate) fn get(&self, run: &RunId) -> Option<Arc<Tail>> {
        let tails = self.tails.lock().unwrap_or_else(PoisonError::into_inner);
        tails.get(run).and_then(Weak::upgrade).filter(|tail| tail.lines.borrow().open)
    }
}

/// The lines published and not committed, and whether the attempt may publish more.
#[derive(Debug)]
struct Lines {
    /// The number of `held[0]` (or of the next line, when there is none).
    first: u64,
    held: VecDeque<Arc<str>>,
    open: bool,
}

/// What a reader finds in a tail after the line it read last.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Found {
    /// The next lines, at most as many as asked.
    Lines(Vec<UpdateRow>),
    /// The next line is committed (trimmed here): read the journal.
    Committed,
    /// Nothing yet: wait for a change.
    Nothing,
    /// The attempt publishes nothing more.
    Closed,
}

/// One attempt's uncommitted lines.
pub(crate) struct Tail {
    record: Mutex<Updates>,
    lines: watch::Sender<Lines>,
}

impl fmt::Debug for Tail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tail").field("lines", &*self.lines.borrow()).finish_non_exhaustive()
    }
}

impl Tail {
    /// A tail whose first line will be number `next`, taking its steps from `record`.
    pub(crate) fn new(record: Updates, next: u64) -> Arc<Self> {
        let lines = Lines { first: next, held: VecDeque::new(), open: true };
        Arc::new(Self { record: Mutex::new(record), lines: watch::Sender::new(lines) })
    }

    /// Publishes every step the record holds now, in order, under the next numbers; returns
    /// whether the record ended. The record's lock is held while the lines are published, so
    /// that the pump and a commit publish in the record's order.
    fn drain(&self) -> bool {
        let mut record = self.record.lock().unwrap_or_else(PoisonError::into_inner);
        let taken: Vec<Arc<str>> =
            std::iter::from_fn(|| record.try_next()).map(|update| Arc::from(line(&update))).collect();
        if !taken.is_empty() {
            self.lines.send_modify(|lines| lines.held.extend(taken));
        }
        record.is_ended()
    }

    /// Waits until the record holds a step or ends.
    async fn ready(&self) {
        poll_fn(|cx| self.record.lock().unwrap_or_else(PoisonError::into_inner).poll_ready(cx)).await;
    }

    /// The lines not committed yet, with their numbers, after publishing what the record
    /// holds: what the attempt's next commit writes.
    pub(crate) fn uncommitted(&self) -> Vec<UpdateRow> {
        self.drain();
        let lines = self.lines.borrow();
        (lines.first..)
            .zip(lines.held.iter())
            .map(|(seq, line)| UpdateRow { seq, line: line.to_string() })
            .collect()
    }

    /// The lines up to `last` are committed: they leave the tail.
    pub(crate) fn committed(&self, last: u64) {
        self.lines.send_if_modified(|lines| {
            let mut trimmed = false;
            while lines.first <= last && lines.held.pop_front().is_some() {
                lines.first += 1;
                trimmed = true;
            }
            trimmed
        });
    }

    /// The attempt publishes nothing more.
    pub(crate) fn close(&self) {
        self.drain();
        self.lines.send_modify(|lines| lines.open = false);
    }

    /// A reader of this tail's lines.
    pub(crate) fn reader(&self) -> TailReader {
        TailReader { changes: self.lines.subscribe() }
    }
}

/// One follower's view of a [`Tail`].
#[derive(Debug)]
pub(crate) struct TailReader {
    changes: watch::Receiver<Lines>,
}

impl TailReader {
    /// What follows line `after`: at most `limit` lines.
    pub(crate) fn after(&mut self, after: u64, limit: usize) -> Found {
        let lines = self.changes.borrow_and_update();
        let next = after.saturating_add(1);
        if next < lines.first {
            return Found::Committed;
        }
        let skip = usize::try_from(next - lines.first).unwrap_or(usize::MAX);
        let found: Vec<UpdateRow> = (next..)
            .zip(lines.held.iter().skip(skip).take(limit))
            .map(|(seq, line)| UpdateRow { seq, line: line.to_string() })
            .collect();
        match (found.is_empty(), lines.open) {
            (false, _) => Found::Lines(found),
            (true, true) => Found::Nothing,
            (true, false) => Found::Closed,
        }
    }

    /// Waits for the tail to change since [`after`](Self::after) last looked; `false` if the
    /// tail is gone (its attempt and its pump ended).
    pub(crate) async fn changed(&mut self) -> bool {
        self.changes.changed().await.is_ok()
    }
}

/// `update` as a line: the JSON a live stream serialises it to.
pub(crate) fn line(update: &Update) -> String {
    serde_json::to_string(update).unwrap_or_else(|error| {
        serde_json::json!({"type": "unserialisable", "error": error.to_string()}).to_string()
    })
}

/// Publishes `tail`'s steps as they come, at most once per [`PUBLISH_EVERY`], until its record
/// ends (the attempt's end, or its scope dropped).
pub(crate) async fn pump(tail: Arc<Tail>) {
    loop {
        tail.ready().await;
        if tail.drain() {
            tail.close();
            return;
        }
        tokio::time::sleep(PUBLISH_EVERY).await;
    }
}
