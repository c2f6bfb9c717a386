//! A journaled run's recorded stream: every step its attempts committed, read from any position
//! and then followed, from any process that opens the journal.
//!
//! Each attempt of a journaled run that records its stream
//! ([`ScopeBuilder::record_stream`](crate::ScopeBuilder::record_stream)) records what a watcher
//! of it gets ([`watch`](crate::watch)):
//! the audit events, each reply's text, each tool call's start and answer, a suspension and the
//! outcome, numbered 1 for the run's first line. The lines ride on the attempt's own commits (no
//! store call of their own), so a number names one line for every reader, in every process,
//! after any restart. That
//! number is what a Server-Sent-Events endpoint sends as the event's id, and what a browser
//! that reconnects hands back as `Last-Event-ID`: [`follow`] from it, and the browser gets
//! every line after it once, in order.
//!
//! ```
//! use loopbound::journal::{self, MemoryJournal, RunId};
//! use loopbound::scripted::{Step, sequence};
//! use loopbound::transport::ModelReply;
//! use loopbound::{Message, Runner, Scope, ToolSet};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let journal = MemoryJournal::default();
//! let run = RunId::new("review-7")?;
//! let runtime = Runner::new(&ToolSet::default(), sequence(vec![Step::Reply(ModelReply::text("Hello."))]));
//! // The run records its stream (kept in its definition, for every attempt).
//! let scope = Scope::builder().record_stream().build()?;
//! runtime.run_journaled(&journal, &run, &scope, &mut vec![Message::user("Hi.")], |_| true).await?;
//!
//! // A reader that saw line 1 and reconnects: it gets line 2 on, then the stream ends after
//! // the outcome (no attempt adds to it any more).
//! let mut lines = journal::follow(&journal, run, 1);
//! let mut seen = Vec::new();
//! while let Some(line) = lines.next().await? {
//!     seen.push((line.id(), line.json().to_owned()));
//! }
//! assert_eq!(seen[0], (2, r#"{"type":"text","reply":1,"text":"Hello."}"#.to_owned()));
//! assert!(seen[1].1.starts_with(r#"{"type":"outcome","status":"Completed""#));
//! assert_eq!(seen.len(), 2);
//! # Ok(())
//! # }
//! ```
//!
//! # What it holds, and when a reader sees it
//!
//! - The lines are the live stream's updates as JSON (the form of [`watch`](crate::watch),
//!   "The JSON of an update", a contract of its own: a line stored by an earlier version is
//!   handed out in the current form), with two differences: a reply's text
//!   comes as at most one line per quarter second (the pieces a streaming transport delivered
//!   meanwhile merge), and a tool call's arguments are never in it.
//! - **In the attempt's own process** (a follower on the journal handle, or a clone of it, that
//!   runs the attempt), a step is a line as it happens, within a quarter second, under the
//!   number it will be committed with: the attempt numbers its steps itself, after the run's
//!   last committed line ([`Journal::live_streams`]).
//! - **In any other process**, a line is readable once its attempt commits it: at each effect
//!   (its start and its result), each model call under a budget or a pool (its reservation),
//!   and the attempt's end (a run that only reads is seen whole at its end). Such a follower
//!   asks the journal every [`FOLLOW_POLL`].
//! - A crash, or a commit that fails, loses the lines after the attempt's last commit, as it
//!   loses what they describe: the next attempt replays it and numbers its own lines after the
//!   last committed one. A reader in the dead attempt's process may have seen lost lines live;
//!   the numbers it saw then name other lines, and a reconnect with one of them skips the
//!   next attempt's lines up to it. Every committed line is seen once by a reader that
//!   reconnects with the number of a committed line.
//! - A host's commands (approve, deny, ask again, reconcile, cancel, close) add no line (their
//!   events are in the run's audit log): the attempt that resumes the run records its own steps.
//!
//! # Invariants
//!
//! - Lines are numbered 1, 2, … per run, in the order the run produced them, across attempts;
//!   a line never changes once published.
//! - A follower holds at most [`FOLLOW_PAGE`] lines it has read and not handed out, whatever
//!   the run's length (the attempt's own tail holds what it has not committed: at most what
//!   its record holds, bounded by the run's limits).
//! - A follower ends once it has handed out (or started after) a final line (an outcome or an
//!   error) that no line follows and no attempt of its handle runs the run: the attempt ended.
//!   A resume adds lines after it; a reader that follows again from its last id gets them.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::time::Duration;

use super::codec_stream::decode_line;
use super::error::JournalError;
use super::id::RunId;
use super::row::UpdateRow;
use super::store::Journal;
use super::tail::{Found, TailReader};

/// How often a follower that has read everything asks the journal for more.
pub const FOLLOW_POLL: Duration = Duration::from_millis(250);

/// The most lines a follower reads in one store call, and so holds at once.
pub const FOLLOW_PAGE: usize = 64;

/// Follows `run`'s recorded stream from the line after `after` (0: from the first line).
///
/// The follower owns `journal`: pass `&journal` (a reference is a journal) or a clone of the
/// handle (clones share its live tails).
///
/// A run the journal does not know (yet) has no lines: the follower waits for its first. A run
/// that does not record its stream ([`ScopeBuilder::record_stream`](crate::ScopeBuilder::record_stream))
/// is refused with [`JournalError::StreamNotRecorded`] once the follower has read what there is.
#[must_use]
pub fn follow<J: Journal>(journal: J, run: RunId, after: u64) -> Follow<J> {
    Follow { journal, run, after, read: VecDeque::new(), last_final: None, live: None, checked: false }
}

/// A reader of one run's recorded stream ([`follow`]).
#[derive(Debug)]
pub struct Follow<J> {
    journal: J,
    run: RunId,
    /// The last line handed out (or the one the reader started after).
    after: u64,
    /// Lines read and not handed out yet.
    read: VecDeque<UpdateRow>,
    /// Whether line `after` is final, once known.
    last_final: Option<bool>,
    /// The live end of the run's stream, while an attempt of this journal handle runs it.
    live: Option<TailReader>,
    /// Whether the run was found to record its stream.
    checked: bool,
}

impl<J: Journal> Follow<J> {
    /// The next line, waiting for it while the run may still add one; `None` once the stream
    /// ended: after a final line that nothing follows (see [`follow`]).
    ///
    /// # Errors
    ///
    /// The journal's: [`StreamUnsupported`](JournalError::StreamUnsupported) for a backend
    /// that keeps no stream, a storage error, [`Corrupt`](JournalError::Corrupt) for a stored
    /// line of a format this version does not know (a later version wrote it): that line is
    /// not handed out. The follower can be asked again after an error.
    pub async fn next(&mut self) -> Result<Option<StreamLine>, JournalError> {
        loop {
            if let Some(row) = self.read.pop_front() {
                let converted = match decode_line(&row.line) {
                    Ok(Cow::Owned(line)) => Some(line),
                    Ok(Cow::Borrowed(_)) => None,
                    Err(error) => {
                        // Not handed out, not passed: asked again, the follower refuses it again.
                        self.read.push_front(row);
                        return Err(error);
                    }
                };
                let json = converted.unwrap_or(row.line);
                let last = is_final(&json);
                self.after = row.seq;
                self.last_final = Some(last);
                return Ok(Some(StreamLine { id: row.seq, json, last }));
            }
            let rows = self.journal.updates(&self.run, self.after, FOLLOW_PAGE).await?;
            if !rows.is_empty() {
                self.read = rows.into();
                continue;
            }
            // Caught up with the journal: an attempt that this handle runs has the rest.
            if self.live.is_none() {
                self.live = self
                    .journal
                    .live_streams()
                    .and_then(|live| live.get(&self.run))
                    .map(|tail| tail.reader());
            }
            if let Some(live) = &mut self.live {
                match live.after(self.after, FOLLOW_PAGE) {
                    Found::Lines(rows) => self.read = rows.into(),
                    // The next line was committed meanwhile: the journal has it.
                    Found::Committed => {}
                    Found::Nothing => {
                        if !live.changed().await {
                            self.live = None;
                        }
                    }
                    // The attempt ended: what it committed is in the journal, and the handle
                    // hands out no closed tail.
                    Found::Closed => self.live = None,
                }
                continue;
            }
            if self.after_final().await? {
                return Ok(None);
            }
            self.check_recorded().await?;
            tokio::time::sleep(FOLLOW_POLL).await;
        }
    }

    /// Refuses a run the journal holds that does not record its stream (read once): waiting
    /// for its lines would wait for ever. A run the journal does not hold yet may start, and
    /// is waited for.
    async fn check_recorded(&mut self) -> Result<(), JournalError> {
        if self.checked {
            return Ok(());
        }
        match super::host::inspect(&self.journal, &self.run).await {
            Ok(record) => {
                if record.definition().is_some_and(|definition| !definition.records_stream()) {
                    return Err(JournalError::StreamNotRecorded);
                }
                self.checked = true;
                Ok(())
            }
            Err(JournalError::UnknownRun) => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// The last line handed out, or the one the reader started after: what a reconnecting
    /// reader follows again from.
    #[must_use]
    pub fn position(&self) -> u64 {
        self.after
    }

    /// Whether line `after` is final (read once, for a reader that started after it).
    async fn after_final(&mut self) -> Result<bool, JournalError> {
        if let Some(last) = self.last_final {
            return Ok(last);
        }
        if self.after == 0 {
            return Ok(false);
        }
        let line = self.journal.updates(&self.run, self.after - 1, 1).await?;
        let last = line.first().is_some_and(|row| {
            row.seq == self.after && decode_line(&row.line).is_ok_and(|line| is_final(&line))
        });
        self.last_final = Some(last);
        Ok(last)
    }
}

/// Whether `line` (of the current format) is an outcome or an error: the last of an attempt.
pub(crate) fn is_final(line: &str) -> bool {
    line.starts_with(r#"{"type":"outcome""#) || line.starts_with(r#"{"type":"error""#)
}

/// One line of a run's recorded stream.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct StreamLine {
    id: u64,
    json: String,
    last: bool,
}

impl StreamLine {
    /// Its number in the run's stream: 1 for the first line. A Server-Sent Event's id.
    #[must_use]
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The update, as the JSON a live stream serialises it to
    /// ([`Update`](crate::watch::Update)): a Server-Sent Event's data.
    #[must_use]
    pub fn json(&self) -> &str {
        &self.json
    }

    /// Whether it is an attempt's last line (an outcome or an error).
    #[must_use]
    pub fn is_final(&self) -> bool {
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::MemoryJournal;
    use crate::journal::backend::{Batch, Entry, Fence, RunRow};
    use crate::outcome::RunError;
    use crate::watch::Update;

    fn text(n: u64) -> String {
        format!(r#"{{"type":"text","reply":1,"text":"{n}"}}"#)
    }

    /// A new run's row as its first attempt acquires it: epoch 1, an empty conversation, no
    /// counter spent.
    fn fresh_row() -> RunRow {
        RunRow {
            epoch: 1,
            attempts: 1,
            conversation: crate::journal::codec::encode_conversation(&[]),
            ledger: crate::journal::codec::encode_counters(&crate::guard::Counters::default()),
            ..RunRow::default()
        }
    }

    async fn commit(journal: &MemoryJournal, run: &RunId, lines: impl IntoIterator<Item = (u64, String)>) {
        let batch = Batch {
            entries: lines.into_iter().map(|(seq, line)| Entry::Update(UpdateRow { seq, line })).collect(),
        };
        journal.commit(run, Fence::Epoch(1), batch).await.expect("a commit under the attempt's lease");
    }

    #[tokio::test(start_paused = true)]
    async fn a_follower_holds_a_page_at_most_waits_while_the_run_goes_on_and_ends_after_its_outcome() {
        let journal = MemoryJournal::default();
        let run = RunId::new("followed").expect("an id");
        journal.acquire(&run, fresh_row()).await.expect("the run is free");
        commit(&journal, &run, (1..=130).map(|n| (n, text(n)))).await;
        let mut follower = follow(&journal, run.clone(), 0);
        for n in 1..=130 {
            let line = follower.next().await.expect("read").expect("a line");
            assert_eq!((line.id(), line.json(), line.is_final()), (n, text(n).as_str(), false));
            assert!(follower.read.len() < FOLLOW_PAGE, "at most a page held: {}", follower.read.len());
        }
        let waiting = tokio::time::timeout(FOLLOW_POLL * 8, follower.next()).await;
        assert!(waiting.is_err(), "no final line yet: the follower waits");
        let outcome = r#"{"type":"outcome","status":"Completed"}"#.to_owned();
        commit(&journal, &run, [(131, text(131)), (132, outcome.clone())]).await;
        let next = follower.next().await.expect("read").map(|line| line.id());
        assert_eq!(next, Some(131), "a line committed while it waited");
        let last = follower.next().await.expect("read").expect("the outcome");
        assert_eq!((last.id(), last.json(), last.is_final()), (132, outcome.as_str(), true));
        assert_eq!(follower.next().await, Ok(None), "nothing follows the outcome: the stream ends");
        assert_eq!(follower.position(), 132);
        assert_eq!(
            follow(&journal, run.clone(), 132).next().await,
            Ok(None),
            "started after it: ends at once"
        );
        let mut late = follow(&journal, run, 131);
        assert_eq!(late.next().await.expect("read").map(|line| line.id()), Some(132));
    }

    #[tokio::test]
    async fn a_line_of_a_format_this_version_does_not_know_is_refused_and_not_passed() {
        let journal = MemoryJournal::default();
        let run = RunId::new("from-later").expect("an id");
        journal.acquire(&run, fresh_row()).await.expect("the run is free");
        commit(&journal, &run, [(1, text(1)), (2, r#"{"format":9,"type":"text"}"#.to_owned())]).await;
        let mut follower = follow(&journal, run, 0);
        assert_eq!(follower.next().await.map(|line| line.map(|line| line.id())), Ok(Some(1)));
        let refused = Err(JournalError::Corrupt(
            "a recorded stream line of a format this version does not know".to_owned(),
        ));
        assert_eq!(follower.next().await, refused);
        assert_eq!(follower.next().await, refused, "asked again: refused again");
        assert_eq!(follower.position(), 1, "the line was not passed");
    }

    #[tokio::test]
    async fn a_journal_without_streams_is_refused_typed() {
        struct Plain;
        impl Journal for Plain {
            fn lease(&self) -> Duration {
                Duration::from_secs(1)
            }
            async fn acquire(
                &self,
                _: &RunId,
                _: RunRow,
            ) -> Result<crate::journal::backend::StoredRun, JournalError> {
                Err(JournalError::UnknownRun)
            }
            async fn renew(&self, _: &RunId, _: u64) -> Result<(), JournalError> {
                Ok(())
            }
            async fn load(
                &self,
                _: &RunId,
            ) -> Result<Option<crate::journal::backend::StoredRun>, JournalError> {
                Ok(None)
            }
            async fn commit(&self, _: &RunId, _: Fence, _: Batch) -> Result<(), JournalError> {
                Ok(())
            }
            async fn list_rows(
                &self,
                _: &crate::journal::RunQuery,
            ) -> Result<Vec<crate::journal::backend::ListedRow>, JournalError> {
                Ok(Vec::new())
            }
        }
        let run = RunId::new("r").expect("an id");
        assert_eq!(follow(Plain, run, 0).next().await, Err(JournalError::StreamUnsupported));
    }

    #[test]
    fn an_outcome_and_an_error_are_final_and_nothing_else_is() {
        let error = serde_json::to_string(&Update::Error(RunError::Cancelled)).unwrap_or_default();
        assert!(is_final(&error), "{error}");
        assert!(!is_final(r#"{"type":"text","reply":1,"text":"{\"type\":\"outcome\""}"#));
        assert!(!is_final(r#"{"type":"suspended","status":"AwaitingApproval"}"#));
    }
}
