//! The journal conformance suite on SQLite, under both durabilities.

use loopbound_sqlite::{SqliteJournal, Synchronous};
use loopbound_testkit::{conformance, scratch};

#[tokio::test]
async fn the_sqlite_journal_conforms_with_synchronous_full() {
    conformance::check_all(|| async {
        SqliteJournal::open(scratch::dir("conform-full").join("j.db")).unwrap()
    })
    .await;
}

#[tokio::test]
async fn the_sqlite_journal_conforms_with_synchronous_normal() {
    conformance::check_all(|| async {
        SqliteJournal::open_with(scratch::dir("conform-normal").join("j.db"), Synchronous::Normal).unwrap()
    })
    .await;
}
