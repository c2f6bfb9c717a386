//! The journal conformance suite on the database backends: SQLite (under both durabilities) and
//! PostgreSQL (a throwaway cluster, a fresh database per check; `SKIPPED` where PostgreSQL is
//! absent, a failure in CI). The in-memory reference runs it in `core/tests/conformance.rs`.

use std::path::PathBuf;
use std::time::Duration;

use loopbound_postgres::{Config, PostgresJournal, WorkerId};
use loopbound_sqlite::{SqliteJournal, Synchronous};
use loopbound_testkit::conformance::{self, Backend};
use loopbound_testkit::postgres::{Cluster, Durability};
use loopbound_testkit::scratch;

struct Sqlite(Synchronous);

impl Backend for Sqlite {
    type Place = PathBuf;
    type Journal = SqliteJournal;

    async fn fresh(&self) -> PathBuf {
        scratch::dir("conform").join("j.db")
    }

    async fn open(&self, place: &PathBuf, holder: &str, lease: Duration) -> SqliteJournal {
        SqliteJournal::open_with(place, self.0)
            .and_then(|journal| journal.with_holder(holder))
            .and_then(|journal| journal.with_lease(lease))
            .expect("the file opens")
    }
}

struct Postgres(&'static Cluster);

impl Backend for Postgres {
    type Place = String;
    type Journal = PostgresJournal;

    async fn fresh(&self) -> String {
        self.0.create_database("conform").url
    }

    async fn open(&self, place: &String, holder: &str, lease: Duration) -> PostgresJournal {
        let config = Config::new(place).expect("the cluster's URL");
        let worker = WorkerId::new(holder).expect("a worker id");
        PostgresJournal::connect(&config)
            .await
            .and_then(|journal| journal.with_worker(worker).with_lease(lease))
            .expect("the fresh database accepts the journal")
    }
}

#[tokio::test]
async fn the_sqlite_journal_conforms_with_synchronous_full() {
    conformance::check_all(&Sqlite(Synchronous::Full)).await;
}

#[tokio::test]
async fn the_sqlite_journal_conforms_with_synchronous_normal() {
    conformance::check_all(&Sqlite(Synchronous::Normal)).await;
}

#[tokio::test]
async fn the_postgres_journal_conforms() {
    let Some(cluster) = Cluster::shared(Durability::Fast) else { return };
    conformance::check_all(&Postgres(cluster)).await;
}
