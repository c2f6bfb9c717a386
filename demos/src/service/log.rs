//! A run's live stream, kept so that any number of Server-Sent-Events clients can read it from
//! the start or from where they left off (`Last-Event-ID`), across the run's attempts.
//!
//! One task per attempt drains the attempt's [`Updates`] into the log
//! as fast as they come, so the run never waits for a client: a slow or absent reader only
//! leaves lines in the log.
//!
//! # Invariants
//!
//! - Lines are appended in the order the run produced them and never change: line `n` is the
//!   same for every reader, so an event id names one update.
//! - The log is *open* while an attempt runs and *closed* once that attempt's last update is in;
//!   a reader that has read everything of a closed log ends its stream. A resume reopens it.
//! - What a log holds is one copy of what the run's own live stream holds (its events, texts,
//!   tool starts and answers, suspension and outcome, per attempt), so it is bounded by the
//!   run's limits like that stream.

use std::sync::Arc;

use loopbound::watch::Updates;
use serde::Serialize;
use tokio::sync::watch;

/// The lines so far, and whether an attempt is still adding to them.
#[derive(Debug, Default)]
struct Lines {
    lines: Vec<Arc<str>>,
    open: bool,
}

/// A run's updates, each serialised once as the JSON data of one event.
#[derive(Debug)]
pub struct Log {
    lines: watch::Sender<Lines>,
}

impl Default for Log {
    fn default() -> Self {
        Self { lines: watch::Sender::new(Lines::default()) }
    }
}

impl Log {
    /// Marks an attempt as started: readers wait for its lines.
    pub fn open(&self) {
        self.lines.send_modify(|lines| lines.open = true);
    }

    /// Appends one update (any value that serialises, in tests).
    pub fn push(&self, update: &impl Serialize) {
        let line = serde_json::to_string(update).unwrap_or_else(|error| {
            serde_json::json!({"type": "unserialisable", "error": error.to_string()}).to_string()
        });
        self.lines.send_modify(|lines| lines.lines.push(Arc::from(line)));
    }

    /// Marks the attempt as ended: readers end once they have read everything.
    pub fn close(&self) {
        self.lines.send_modify(|lines| lines.open = false);
    }

    /// How many lines the log holds.
    #[must_use]
    pub fn len(&self) -> usize {
        self.lines.borrow().lines.len()
    }

    /// Whether the log holds no line.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies `updates` into the log until the attempt's stream ends, then closes the log.
    pub async fn drain(self: Arc<Self>, mut updates: Updates) {
        while let Some(update) = updates.next().await {
            self.push(&update);
        }
        self.close();
    }

    /// A reader that starts after line `after` (0: from the first line).
    #[must_use]
    pub fn reader(self: &Arc<Self>, after: usize) -> Reader {
        Reader { next: after, changes: self.lines.subscribe() }
    }
}

/// One client's position in a [`Log`].
#[derive(Debug)]
pub struct Reader {
    next: usize,
    changes: watch::Receiver<Lines>,
}

impl Reader {
    /// The next line and its number (1, 2, …), waiting for it while an attempt runs; `None`
    /// once the log is closed and everything was read.
    pub async fn next(&mut self) -> Option<(usize, Arc<str>)> {
        loop {
            {
                let lines = self.changes.borrow_and_update();
                if let Some(line) = lines.lines.get(self.next) {
                    self.next += 1;
                    return Some((self.next, Arc::clone(line)));
                }
                if !lines.open {
                    return None;
                }
            }
            if self.changes.changed().await.is_err() {
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn event(count: u32) -> Value {
        json!({"type": "event", "kind": "ModelCall", "name": "model", "count": count})
    }

    #[tokio::test]
    async fn every_reader_gets_every_line_in_order_and_ends_when_the_attempt_closes() {
        let log = Arc::new(Log::default());
        log.open();
        log.push(&event(1));
        let mut early = log.reader(0);
        assert_eq!(early.next().await.map(|(n, _)| n), Some(1));
        let waiting = tokio::spawn({
            let mut late = log.reader(0);
            async move {
                let mut seen = Vec::new();
                while let Some((n, line)) = late.next().await {
                    seen.push((n, line.to_string()));
                }
                seen
            }
        });
        log.push(&event(2));
        log.close();
        let seen = waiting.await.expect("the reader");
        assert_eq!(seen, [(1, event(1).to_string()), (2, event(2).to_string())]);
        assert_eq!(early.next().await.map(|(n, _)| n), Some(2));
        assert_eq!(early.next().await, None);
        let mut resumed = log.reader(1);
        assert_eq!(resumed.next().await.map(|(n, _)| n), Some(2));
        assert_eq!(resumed.next().await, None);
    }
}
