//! What one request's tools touch in host memory, and the tasks a request may ask for, each
//! with the host's own completion condition.
//!
//! # Invariants
//!
//! - A [`Desk`] belongs to one attempt of one run (its scope's state): nothing leaks from one
//!   request to another.
//! - `Completed` is decided here, from what the tools did, never from the model's text.

use std::sync::{Mutex, PoisonError};

use serde::Deserialize;

/// One attempt's record of what its tools did: the tickets it read, the files it wrote.
#[derive(Debug, Default)]
pub struct Desk {
    read: Mutex<Vec<u32>>,
    written: Mutex<u32>,
}

impl Desk {
    /// Notes that ticket `id` was read.
    pub fn note_read(&self, id: u32) {
        self.read.lock().unwrap_or_else(PoisonError::into_inner).push(id);
    }

    /// Notes that a file was written.
    pub fn note_written(&self) {
        *self.written.lock().unwrap_or_else(PoisonError::into_inner) += 1;
    }

    /// The tickets read, in order.
    #[must_use]
    pub fn read(&self) -> Vec<u32> {
        self.read.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// How many files were written.
    #[must_use]
    pub fn written(&self) -> u32 {
        *self.written.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What a request asks the agent to do; each task has its own completion condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Task {
    /// Answer a question from the tickets: done when a ticket was read and the model answered.
    Answer,
    /// Save something to a file: done when a file was written and the model answered.
    Save,
}

impl Task {
    /// The task's name, as a request spells it.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Answer => "answer",
            Self::Save => "save",
        }
    }

    /// The host's completion condition over what this attempt's tools did.
    ///
    /// It reads host memory, so it sees what this attempt ran: a result that a resume replays
    /// from the journal did not run here. Each task's deciding tool (the read of `answer`, the
    /// write of `save`) runs in the attempt that ends the run, so this holds for the runs this
    /// service serves, unless a crash fell between that tool's result and the run's end.
    #[must_use]
    pub fn is_done(self, desk: &Desk) -> bool {
        match self {
            Self::Answer => !desk.read().is_empty(),
            Self::Save => desk.written() > 0,
        }
    }

    /// The instructions the model gets before the request's prompt.
    #[must_use]
    pub fn instructions(self, files: &str) -> String {
        match self {
            Self::Answer => {
                "Answer the user's question. Read the tickets you need with read_ticket, then answer in one sentence."
                    .to_owned()
            }
            Self::Save => format!(
                "Do what the user asks, then save the result with write_file, as a file in the folder {files}. \
                 A person approves every write before it happens. Then say which file you wrote."
            ),
        }
    }
}
