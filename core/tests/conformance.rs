//! The journal conformance suite (`loopbound-test`) on the in-memory journal, the reference
//! every other backend is held to. SQLite and PostgreSQL run the same suite in
//! `testkit/tests/conformance.rs`.

#![cfg(feature = "journal")]

use std::time::Duration;

use loopbound::journal::MemoryJournal;
use loopbound_test::conformance::{self, Backend};

struct Memory;

impl Backend for Memory {
    type Place = MemoryJournal;
    type Journal = MemoryJournal;

    async fn fresh(&self) -> MemoryJournal {
        MemoryJournal::default()
    }

    async fn open(&self, place: &MemoryJournal, holder: &str, lease: Duration) -> MemoryJournal {
        place
            .clone()
            .with_holder(holder)
            .and_then(|journal| journal.with_lease(lease))
            .expect("a valid holder and lease")
    }
}

#[tokio::test]
async fn the_memory_journal_conforms() {
    conformance::check_all(&Memory).await;
}
