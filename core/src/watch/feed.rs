//! The channel between a run and its watcher: the run pushes, never waits; the watcher reads
//! when it likes.
//!
//! # Invariants
//!
//! - Pushing never blocks and never fails: the run goes on at its own pace whatever the
//!   watcher does, so a watcher cannot change the run's outcome.
//! - Updates come out in the order they were pushed. The guard queues events inside its
//!   critical section, under the ledger's lock ([`Feed::queue_events`]), so events come out in
//!   the order the scope recorded them, whatever the threads; it wakes the watcher only after
//!   that lock is released, so a watcher's waker never runs inside the ledger's lock. Every
//!   other push wakes the watcher itself, after the feed's own lock is released.
//! - A text piece is merged into the update before it when that one is unread text of the same
//!   reply, so between two other updates at most one text update waits.
//! - Nothing else is merged or dropped while the watcher holds its end: memory grows with what
//!   the run does, which its limits bound, never with how long the watcher takes.
//! - A watcher that waits on an empty queue frees its buffer: a run waiting on its model with
//!   its watcher waiting too holds no queued-update memory, only the shared state.
//! - Once the final update is pushed, or the run's end is dropped, the stream ends after what is
//!   queued; later pushes are dropped. Once the watcher's end is dropped, the queue is freed and
//!   every push is dropped.

use std::collections::VecDeque;
use std::fmt;
use std::future::poll_fn;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use futures_core::Stream;

use super::update::{Suspension, Text, ToolResult, ToolStarted, Update};
use crate::event::ControlEvent;
use crate::outcome::{Outcome, RunError, Status};
use crate::sync::{AtomicBool, Mutex, Ordering};
use crate::transport::ToolCall;

struct Shared {
    state: Mutex<State>,
    arguments: AtomicBool,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Update>,
    waker: Option<Waker>,
    /// The run will push nothing more.
    closed: bool,
    /// The watcher dropped its end.
    abandoned: bool,
    /// The reply whose text the loop is reading, and whether a piece of it was pushed.
    reply: u32,
    reply_streamed: bool,
}

/// Opens a live stream: the [`Feed`] goes to the run's scope
/// ([`ScopeBuilder::watch`](crate::ScopeBuilder::watch)), the [`Updates`] to whoever shows the
/// run.
#[must_use]
pub fn channel() -> (Feed, Updates) {
    let shared = Arc::new(Shared { state: Mutex::new(State::default()), arguments: AtomicBool::new(false) });
    (Feed { shared: Arc::clone(&shared) }, Updates { shared })
}

/// The run's end of a live stream, held by its scope.
pub struct Feed {
    shared: Arc<Shared>,
}

impl fmt::Debug for Feed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Feed").field("arguments", &self.wants_arguments()).finish_non_exhaustive()
    }
}

impl Feed {
    /// This feed, with each [`ToolStarted`] carrying the call's arguments as the model sent
    /// them. Off by default: arguments never appear in audit events, and a host that puts them
    /// in its own stream does so here, knowingly.
    #[must_use]
    pub fn with_arguments(self) -> Self {
        self.shared.arguments.store(true, Ordering::Relaxed);
        self
    }

    fn wants_arguments(&self) -> bool {
        self.shared.arguments.load(Ordering::Relaxed)
    }

    /// Queues `update` (merging text into unread text of the same reply) and wakes the watcher.
    fn push(&self, update: Update) {
        let waker = {
            let mut state = self.shared.state.lock();
            if state.closed || state.abandoned {
                return;
            }
            match (state.queue.back_mut(), update) {
                (Some(Update::Text(last)), Update::Text(piece)) if last.reply == piece.reply => {
                    last.text.push_str(&piece.text);
                }
                (_, update) => state.queue.push_back(update),
            }
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Queues audit events just recorded, in order, and returns the watcher's waker instead of
    /// waking it: the guard calls this under the ledger's lock, so that events are queued in the
    /// log's order, and wakes the watcher once the lock is released. Nothing is locked for no
    /// events.
    #[must_use = "the watcher waits until the returned waker is woken"]
    pub(crate) fn queue_events(&self, events: &[ControlEvent]) -> Option<Waker> {
        if events.is_empty() {
            return None;
        }
        let mut state = self.shared.state.lock();
        if state.closed || state.abandoned {
            return None;
        }
        state.queue.extend(events.iter().cloned().map(Update::Event));
        state.waker.take()
    }

    /// The loop asks for reply `reply`.
    pub(crate) fn begin_reply(&self, reply: u32) {
        let mut state = self.shared.state.lock();
        state.reply = reply;
        state.reply_streamed = false;
    }

    /// A piece of the current reply's text, as a streaming transport delivered it.
    pub(crate) fn text_piece(&self, piece: &str) {
        if piece.is_empty() {
            return;
        }
        let reply = {
            let mut state = self.shared.state.lock();
            state.reply_streamed = true;
            state.reply
        };
        self.push(Update::Text(Text { reply, text: piece.to_owned() }));
    }

    /// The current reply is complete: its whole text, unless pieces of it were pushed already.
    pub(crate) fn end_reply(&self, content: Option<&str>) {
        let (reply, streamed) = {
            let state = self.shared.state.lock();
            (state.reply, state.reply_streamed)
        };
        if let Some(text) = content.filter(|text| !streamed && !text.is_empty()) {
            self.push(Update::Text(Text { reply, text: text.to_owned() }));
        }
    }

    /// The loop takes call `index` of reply `reply` up.
    pub(crate) fn tool_started(&self, reply: u32, index: usize, call: &ToolCall) {
        let arguments = self.wants_arguments().then(|| call.arguments.clone());
        self.push(Update::ToolStarted(ToolStarted {
            reply,
            index: u32::try_from(index).unwrap_or(u32::MAX),
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments,
        }));
    }

    /// The answer call `index` of reply `reply` gives the model.
    pub(crate) fn tool_result(&self, reply: u32, index: usize, call_id: &str, text: &str, is_error: bool) {
        self.push(Update::ToolResult(ToolResult {
            reply,
            index: u32::try_from(index).unwrap_or(u32::MAX),
            call_id: call_id.to_owned(),
            text: text.to_owned(),
            is_error,
        }));
    }

    /// The run's end: a suspension first when the outcome is one, then the final update. The
    /// stream ends after it.
    pub(crate) fn finish(&self, result: &Result<Outcome, RunError>) {
        match result {
            Ok(outcome) => {
                if matches!(outcome.status(), Status::AwaitingApproval | Status::Ambiguous) {
                    let operation = outcome.operation().map(Arc::from);
                    let pending = outcome.pending_copy();
                    self.push(Update::Suspended(Suspension { status: outcome.status(), operation, pending }));
                }
                self.push(Update::Outcome(outcome.clone()));
            }
            Err(error) => self.push(Update::Error(error.clone())),
        }
        self.close();
    }

    fn close(&self) {
        let waker = {
            let mut state = self.shared.state.lock();
            state.closed = true;
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl Drop for Feed {
    /// The scope is gone: the stream ends after what is queued.
    fn drop(&mut self) {
        self.close();
    }
}

/// The watcher's end of a live stream: a [`Stream`] of [`Update`]s in the order they happened,
/// ending after the run's outcome (or its error), or when the run's scope is dropped.
pub struct Updates {
    shared: Arc<Shared>,
}

impl fmt::Debug for Updates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Updates").field("pending", &self.pending()).finish_non_exhaustive()
    }
}

impl Updates {
    /// The next update, waiting for it if none is queued; `None` once the stream has ended.
    pub async fn next(&mut self) -> Option<Update> {
        poll_fn(|cx| Pin::new(&mut *self).poll_next(cx)).await
    }

    /// The next update if one is queued, without waiting.
    pub fn try_next(&mut self) -> Option<Update> {
        self.shared.state.lock().queue.pop_front()
    }

    /// How many updates are queued, unread.
    #[must_use]
    pub fn pending(&self) -> usize {
        self.shared.state.lock().queue.len()
    }

    /// Whether the stream has ended: the run pushes nothing more and everything was read.
    #[cfg(feature = "journal")]
    pub(crate) fn is_ended(&self) -> bool {
        let state = self.shared.state.lock();
        state.closed && state.queue.is_empty()
    }

    /// Ready once an update is queued or the run pushes nothing more; otherwise `cx` is woken
    /// by the next push. Reads nothing: [`try_next`](Self::try_next) takes what is queued.
    #[cfg(feature = "journal")]
    pub(crate) fn poll_ready(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = self.shared.state.lock();
        if !state.queue.is_empty() || state.closed {
            return Poll::Ready(());
        }
        state.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl Stream for Updates {
    type Item = Update;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Update>> {
        let mut state = self.shared.state.lock();
        if let Some(update) = state.queue.pop_front() {
            return Poll::Ready(Some(update));
        }
        if state.closed {
            return Poll::Ready(None);
        }
        // The watcher waits, most often for a model reply: the drained queue gives its buffer
        // back, so a waiting run keeps none (the next burst of updates allocates one again).
        state.queue = VecDeque::new();
        state.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for Updates {
    /// Nobody watches any more: free the queue, and drop every later push.
    fn drop(&mut self) {
        let mut state = self.shared.state.lock();
        state.abandoned = true;
        state.queue = VecDeque::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(updates: &mut Updates) -> Vec<(u32, String)> {
        std::iter::from_fn(|| updates.try_next())
            .filter_map(|update| match update {
                Update::Text(text) => Some((text.reply, text.text)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn unread_pieces_of_one_reply_merge_into_one_update() {
        let (feed, mut updates) = channel();
        feed.begin_reply(1);
        for piece in ["Rev", "iew ", "finished."] {
            feed.text_piece(piece);
        }
        feed.end_reply(Some("Review finished."));
        assert_eq!(updates.pending(), 1);
        assert_eq!(texts(&mut updates), [(1, "Review finished.".to_owned())]);
    }

    #[test]
    fn a_read_piece_is_not_merged_and_replies_never_merge() {
        let (feed, mut updates) = channel();
        feed.begin_reply(1);
        feed.text_piece("a");
        assert_eq!(updates.try_next(), Some(Update::Text(Text { reply: 1, text: "a".to_owned() })));
        feed.text_piece("b");
        feed.begin_reply(2);
        feed.end_reply(Some("whole"));
        assert_eq!(texts(&mut updates), [(1, "b".to_owned()), (2, "whole".to_owned())]);
    }

    #[test]
    fn the_stream_ends_after_the_final_update_and_drops_later_pushes() {
        let (feed, mut updates) = channel();
        feed.finish(&Err(RunError::Cancelled));
        feed.text_piece("late");
        assert_eq!(updates.try_next(), Some(Update::Error(RunError::Cancelled)));
        assert_eq!(updates.try_next(), None);
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert_eq!(Pin::new(&mut updates).poll_next(&mut cx), Poll::Ready(None));
    }

    #[test]
    fn a_watcher_that_waits_on_an_empty_queue_frees_its_buffer() {
        let (feed, mut updates) = channel();
        feed.begin_reply(1);
        feed.end_reply(Some("a reply"));
        feed.tool_result(1, 0, "call-1", "a result", false);
        assert!(feed.shared.state.lock().queue.capacity() >= 2);
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert!(matches!(Pin::new(&mut updates).poll_next(&mut cx), Poll::Ready(Some(Update::Text(_)))));
        assert!(matches!(
            Pin::new(&mut updates).poll_next(&mut cx),
            Poll::Ready(Some(Update::ToolResult(_)))
        ));
        assert!(feed.shared.state.lock().queue.capacity() >= 2, "a queue being read keeps its buffer");
        assert_eq!(Pin::new(&mut updates).poll_next(&mut cx), Poll::Pending);
        assert_eq!(feed.shared.state.lock().queue.capacity(), 0);
        feed.begin_reply(2);
        feed.end_reply(Some("the next reply"));
        assert_eq!(
            updates.try_next(),
            Some(Update::Text(Text { reply: 2, text: "the next reply".to_owned() }))
        );
    }

    #[test]
    fn an_abandoned_stream_keeps_nothing() {
        let (feed, updates) = channel();
        drop(updates);
        feed.begin_reply(1);
        feed.text_piece("nobody reads this");
        assert!(feed.shared.state.lock().queue.is_empty());
    }
}
