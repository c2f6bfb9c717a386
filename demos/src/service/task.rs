//! The tasks a request may ask for, each with the host's own completion condition.
//!
//! # Invariants
//!
//! - `Completed` is decided here, from the calls that succeeded in the run's journal, never from
//!   the model's text nor from host memory: a resume replays recorded results without running
//!   their bodies, so only the journal knows what an earlier attempt, in any process, did.
//! - A task's name ([`Task::as_str`]) is what a run's journal stores, and [`Task::from_label`]
//!   reads it back: renaming one strands the runs stored under the old name.

use loopbound::Ended;
use serde::Deserialize;

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

    /// The task a request (or a run's stored label) names, if any.
    #[must_use]
    pub fn from_label(name: &str) -> Option<Self> {
        [Self::Answer, Self::Save].into_iter().find(|task| task.as_str() == name)
    }

    /// The host's completion condition over what the run's tools did, in every attempt.
    #[must_use]
    pub fn is_done(self, ended: Ended<'_, ()>) -> bool {
        match self {
            Self::Answer => ended.has_succeeded("read_ticket"),
            Self::Save => ended.has_succeeded("write_file"),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_task_name_reads_back_as_its_task() {
        assert_eq!(Task::from_label(Task::Answer.as_str()), Some(Task::Answer));
        assert_eq!(Task::from_label(Task::Save.as_str()), Some(Task::Save));
        assert_eq!(Task::from_label("Save"), None);
        assert_eq!(Task::from_label(""), None);
    }
}
