//! Batches that tests commit straight to a journal store (the group-commit and fence tests):
//! a run of model-call events and a ledger, so that a commit cut in half shows in the events.

use loopbound::journal::backend::{Batch, Entry, EventRow};

/// A batch of `events` model-call events (counts 1 to `events`), then the ledger `ledger`.
#[must_use]
pub fn model_calls(events: u32, ledger: String) -> Batch {
    let mut entries: Vec<Entry> = (1..=events)
        .map(|count| {
            Entry::Event(EventRow {
                kind: "ModelCall".to_owned(),
                name: "model".to_owned(),
                count,
                operation: None,
                by: None,
                reason: None,
            })
        })
        .collect();
    entries.push(Entry::Ledger(ledger));
    Batch { entries }
}
