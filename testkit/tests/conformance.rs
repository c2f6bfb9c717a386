//! The journal conformance suite on the in-memory reference backend.

use loopbound::journal::MemoryJournal;
use loopbound_testkit::conformance;

#[tokio::test]
async fn the_memory_journal_conforms() {
    conformance::check_all(|| async { MemoryJournal::default() }).await;
}
