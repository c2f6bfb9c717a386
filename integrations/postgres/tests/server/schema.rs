//! Migrations on connect: once per version, also when eight workers start at once; a newer
//! schema is refused and left as it is.

use loopbound_postgres::{Error, Store, supported_version};

use crate::{cluster, config};

#[tokio::test]
async fn connecting_again_applies_nothing_more() {
    let Some(cluster) = cluster() else { return };
    let database = cluster.create_database("migrate_twice");
    for _ in 0..2 {
        let _store = Store::connect(&config(&database.url)).await.unwrap();
    }
    assert_eq!(supported_version(), 7);
    assert_eq!(
        cluster.execute(&database.name, "SELECT version FROM loopbound_schema ORDER BY version"),
        "1\n2\n3\n4\n5\n6\n7"
    );
    assert_eq!(
        cluster.execute(
            &database.name,
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'loopbound_runs'"
        ),
        "1"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_workers_starting_at_once_migrate_once() {
    let Some(cluster) = cluster() else { return };
    let database = cluster.create_database("migrate_race");
    let starts: Vec<_> = (0..8)
        .map(|_| {
            let config = config(&database.url);
            tokio::spawn(async move { Store::connect(&config).await.map(|_| ()) })
        })
        .collect();
    for start in starts {
        start.await.expect("no panic").expect("every worker connects");
    }
    assert_eq!(cluster.execute(&database.name, "SELECT count(*), max(version) FROM loopbound_schema"), "7|7");
}

#[tokio::test]
async fn a_database_migrated_by_a_newer_version_is_refused_untouched() {
    let Some(cluster) = cluster() else { return };
    let database = cluster.create_database("migrate_newer");
    drop(Store::connect(&config(&database.url)).await.unwrap());
    let _ = cluster.execute(&database.name, "INSERT INTO loopbound_schema (version) VALUES (8)");
    let error = Store::connect(&config(&database.url)).await.unwrap_err();
    assert_eq!(error, Error::UnsupportedSchema { found: 8, supported: 7 });
    assert_eq!(error.to_string(), "the database's schema version 8 is newer than this build's (7)");
    assert_eq!(
        cluster.execute(&database.name, "SELECT version FROM loopbound_schema ORDER BY version"),
        "1\n2\n3\n4\n5\n6\n7\n8"
    );
}

/// Every commit of an attempt renews its lease: a renewal must change no column that an index of
/// the runs' table covers (in its keys or its predicate), or PostgreSQL adds an entry to every
/// index of the table for each commit instead of rewriting the row in its page. The columns a
/// renewal changes are `lease_until` and `updated_at`; a commit also writes `ledger`,
/// `definition` and `cancel_by` (which changes only when a cancel is requested or honoured), and
/// `state` when the run's state changes (an effect's start and result, the run's end: those
/// commits are not heap-only, as the listings by state must see the new state).
#[tokio::test]
async fn renewing_a_lease_changes_no_indexed_column_of_the_runs() {
    let Some(cluster) = cluster() else { return };
    let database = cluster.create_database("migrate_hot");
    drop(Store::connect(&config(&database.url)).await.unwrap());
    let keys = "SELECT string_agg(DISTINCT a.attname, ',' ORDER BY a.attname) \
                  FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey) \
                 WHERE i.indrelid = 'loopbound_runs'::regclass";
    assert_eq!(cluster.execute(&database.name, keys), "run_id,state,state_status");
    let predicates = "SELECT string_agg(pg_get_expr(indpred, indrelid), ',' ORDER BY indexrelid::regclass::text) \
                        FROM pg_index WHERE indrelid = 'loopbound_runs'::regclass AND indpred IS NOT NULL";
    assert_eq!(
        cluster.execute(&database.name, predicates),
        "(cancel_by IS NOT NULL),(lease_holder IS NOT NULL)"
    );
    let options =
        "SELECT array_to_string(reloptions, ',') FROM pg_class WHERE oid = 'loopbound_runs'::regclass";
    assert_eq!(cluster.execute(&database.name, options), "fillfactor=70");
}
