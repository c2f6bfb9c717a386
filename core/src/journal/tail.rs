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
//! - A reader sees at most [`LIVE_AHEAD`] lines past the last committed one; the others wait
//!   for the next commit. So no reader ever saw a number above the last committed line plus
//!   [`LIVE_AHEAD`], and an attempt that takes over a run whose last attempt did not end with
//!   a committed final line numbers its own lines after that bound ([`first_number`]): a
//!   reader that reconnects with a number it saw live from a crashed attempt gets every line
//!   of the next attempt, once.
//! - Nothing here waits for a reader: publishing is a send on a watch channel.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::future::poll_fn;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::watch;

use super::codec_stream::{decode_line, encode_line};
use super::id::RunId;
use super::row::UpdateRow;
use super::stream::is_final;
use crate::watch::Updates;

/// How often, at most, the pump publishes what came.
pub(crate) const PUBLISH_EVERY: Duration = Duration::from_millis(250);

/// How many lines past its last committed one a recorded stream shows live, at most; the
/// numbers an attempt skips after one that was cut before it committed its end.
///
/// At most one text line per quarter second, this is over four minutes of a streamed reply
/// between two commits (an attempt commits each reply, each effect and its end).
pub const LIVE_AHEAD: u64 = 1024;

/// The number of the first line of an attempt whose run's last committed line is `last`
/// (0: none) and is `last_line`: right after it for a new run or after an attempt that
/// committed its final line (its outcome or its error); after [`LIVE_AHEAD`] more for a run
/// whose last attempt was cut (it may have shown that many lines live, never committed).
pub(crate) fn first_number(resumed: bool, last: u64, last_line: Option<&str>) -> u64 {
    // A line of no format this build knows is taken as not final: the numbers it may have
    // shown live are skipped, which loses none.
    let ended = last_line.is_some_and(|line| decode_line(line).is_ok_and(|line| is_final(&line)));
    if resumed && !ended { last + LIVE_AHEAD + 1 } else { last + 1 }
}

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
    /// The number of the attempt's first line: the lines before it are earlier attempts' (all
    /// committed before this one started) or numbers skipped.
    start: u64,
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
        let lines = Lines { start: next, first: next, held: VecDeque::new(), open: true };
        Arc::new(Self { record: Mutex::new(record), lines: watch::Sender::new(lines) })
    }

    /// Publishes every step the record holds now, in order, under the next numbers; returns
    /// whether the record ended. The record's lock is held while the lines are published, so
    /// that the pump and a commit publish in the record's order.
    fn drain(&self) -> bool {
        let mut record = self.record.lock().unwrap_or_else(PoisonError::into_inner);
        let taken: Vec<Arc<str>> =
            std::iter::from_fn(|| record.try_next()).map(|update| Arc::from(encode_line(&update))).collect();
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
    /// What follows line `after`, for a reader that found no committed line after it: at most
    /// `limit` lines, and none numbered more than [`LIVE_AHEAD`] past the last committed line.
    /// A reader before the attempt's first line goes on from it (the numbers between were
    /// skipped: no committed line has them).
    pub(crate) fn after(&mut self, after: u64, limit: usize) -> Found {
        let lines = self.changes.borrow_and_update();
        let next = after.saturating_add(1).max(lines.start);
        if next < lines.first {
            return Found::Committed;
        }
        let skip = usize::try_from(next - lines.first).unwrap_or(usize::MAX);
        let shown = usize::try_from(LIVE_AHEAD).unwrap_or(usize::MAX);
        let found: Vec<UpdateRow> = (next..)
            .zip(lines.held.iter().take(shown).skip(skip).take(limit))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attempt_after_one_that_was_cut_numbers_past_all_it_could_have_shown() {
        assert_eq!(first_number(false, 0, None), 1, "a new run");
        let outcome = r#"{"type":"outcome","status":"AwaitingApproval"}"#;
        assert_eq!(first_number(true, 8, Some(outcome)), 9, "after a committed outcome");
        assert_eq!(first_number(true, 8, Some(r#"{"type":"error","kind":"cancelled"}"#)), 9);
        let text = r#"{"type":"text","reply":1,"text":"{\"type\":\"outcome\"}"}"#;
        assert_eq!(first_number(true, 8, Some(text)), 8 + LIVE_AHEAD + 1, "cut after a text line");
        assert_eq!(first_number(true, 0, None), LIVE_AHEAD + 1, "cut before its first commit");
        assert_eq!(first_number(true, 5, Some("not a line")), 5 + LIVE_AHEAD + 1);
    }

    #[test]
    fn a_reader_sees_at_most_live_ahead_lines_past_the_last_commit() {
        let (_feed, record) = crate::watch::channel();
        let tail = Tail::new(record, 1);
        let held = (0..LIVE_AHEAD + 5).map(|n| Arc::<str>::from(n.to_string()));
        tail.lines.send_modify(|lines| lines.held.extend(held));
        let mut reader = tail.reader();
        let Found::Lines(shown) = reader.after(0, usize::MAX) else { panic!("lines") };
        assert_eq!(shown.iter().map(|row| row.seq).collect::<Vec<_>>(), (1..=LIVE_AHEAD).collect::<Vec<_>>());
        assert_eq!(reader.after(LIVE_AHEAD, 10), Found::Nothing, "the rest waits for a commit");
        tail.committed(3);
        let Found::Lines(more) = reader.after(LIVE_AHEAD, 10) else { panic!("lines") };
        let numbers: Vec<u64> = more.iter().map(|row| row.seq).collect();
        assert_eq!(
            numbers,
            [LIVE_AHEAD + 1, LIVE_AHEAD + 2, LIVE_AHEAD + 3],
            "three more once three are committed"
        );
        assert_eq!(reader.after(2, 10), Found::Committed);
    }

    #[test]
    fn a_reader_before_an_attempt_that_skipped_numbers_goes_on_from_its_first_line() {
        let (_feed, record) = crate::watch::channel();
        let start = first_number(true, 8, None);
        let tail = Tail::new(record, start);
        let mut reader = tail.reader();
        assert_eq!(reader.after(8, 10), Found::Nothing, "nothing published yet, nothing committed between");
        tail.lines.send_modify(|lines| lines.held.extend(["a", "b"].map(Arc::<str>::from)));
        let Found::Lines(shown) = reader.after(8, 10) else { panic!("lines") };
        assert_eq!(shown.iter().map(|row| row.seq).collect::<Vec<_>>(), [start, start + 1]);
        tail.committed(start);
        assert_eq!(reader.after(8, 10), Found::Committed, "its first line is in the journal now");
    }
}
