//! A journal written by an earlier version, restored from its `pg_dump` into a fresh database,
//! opens (migrating its schema if it moved on), lists, reads and resumes to the right outcome;
//! see `loopbound_testkit::journal_fixture`.

use loopbound_testkit::{backend, journal_fixture};

/// The plain-SQL dump of `testkit/fixtures/journal-2026-12-06/`.
const DUMP: &str = include_str!("../../../../testkit/fixtures/journal-2026-12-06/journal.sql");

#[tokio::test]
async fn the_2026_12_06_dump_restores_lists_reads_and_resumes_every_run_to_its_outcome() {
    let Some(cluster) = super::cluster() else { return };
    let database = cluster.create_database("upgrade");
    cluster.execute(&database.name, DUMP);
    journal_fixture::check(&backend::postgres_place(&database.url)).await;
}
