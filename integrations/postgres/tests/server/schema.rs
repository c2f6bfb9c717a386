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
    assert_eq!(supported_version(), 6);
    assert_eq!(
        cluster.execute(&database.name, "SELECT version FROM loopbound_schema ORDER BY version"),
        "1\n2\n3\n4\n5\n6"
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
    assert_eq!(cluster.execute(&database.name, "SELECT count(*), max(version) FROM loopbound_schema"), "6|6");
}

#[tokio::test]
async fn a_database_migrated_by_a_newer_version_is_refused_untouched() {
    let Some(cluster) = cluster() else { return };
    let database = cluster.create_database("migrate_newer");
    drop(Store::connect(&config(&database.url)).await.unwrap());
    let _ = cluster.execute(&database.name, "INSERT INTO loopbound_schema (version) VALUES (7)");
    let error = Store::connect(&config(&database.url)).await.unwrap_err();
    assert_eq!(error, Error::UnsupportedSchema { found: 7, supported: 6 });
    assert_eq!(error.to_string(), "the database's schema version 7 is newer than this build's (6)");
    assert_eq!(
        cluster.execute(&database.name, "SELECT version FROM loopbound_schema ORDER BY version"),
        "1\n2\n3\n4\n5\n6\n7"
    );
}
