//! The journal conformance suite, run by this one entry point on every backend: the in-memory
//! reference, SQLite (under both durabilities), and PostgreSQL (a throwaway cluster, a fresh
//! database per check; `SKIPPED` where PostgreSQL is absent, a failure in CI).

use loopbound::journal::MemoryJournal;
use loopbound_postgres::{Config, PostgresJournal, WorkerId};
use loopbound_sqlite::{SqliteJournal, Synchronous};
use loopbound_testkit::postgres::{Cluster, Durability};
use loopbound_testkit::{conformance, scratch};

#[tokio::test]
async fn the_memory_journal_conforms() {
    conformance::check_all(|| async { MemoryJournal::default() }).await;
}

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

#[tokio::test]
async fn the_postgres_journal_conforms() {
    let Some(cluster) = Cluster::shared(Durability::Fast) else { return };
    conformance::check_all(|| async {
        let database = cluster.create_database("conform");
        let config = Config::new(&database.url).expect("the cluster's URL");
        let worker = WorkerId::new("conformance").expect("a worker id");
        PostgresJournal::connect(&config, worker).await.expect("the fresh database accepts the journal")
    })
    .await;
}
