//! Connecting: a server that is down or refuses gives a typed error without the password; a
//! server that crashes and comes back gives typed errors, then works again.

use std::time::Duration;

use loopbound_postgres::{Error, Store};
use loopbound_testkit::postgres::{Cluster, Durability, unused_port};

use crate::{PASSWORD, assert_no_password, cluster, config, worker};

fn outputs(error: &Error) -> String {
    format!("{error} {error:?}")
}

#[tokio::test]
async fn nothing_listening_is_unavailable() {
    let url = format!("postgres://journal:{PASSWORD}@127.0.0.1:{}/journal", unused_port());
    let error = Store::connect(&config(&url)).await.unwrap_err();
    let Error::Unavailable(message) = &error else { panic!("expected Unavailable, got {error:?}") };
    assert!(message.contains("Connection refused"), "{message}");
    assert!(error.to_string().starts_with("the database is unavailable: "), "{error}");
    assert_no_password(&outputs(&error));
}

#[tokio::test]
async fn a_wrong_password_is_refused_and_the_right_one_accepted() {
    let Some(cluster) = cluster() else { return };
    let database = cluster.create_database("refusal");
    cluster.create_password_role("journal_login", PASSWORD);
    let wrong = format!("{PASSWORD}-but-wrong");
    let error = Store::connect(&config(&cluster.url_with_password("journal_login", &wrong, &database.name)))
        .await
        .unwrap_err();
    assert_eq!(
        error,
        Error::Refused(
            "password authentication failed for user \"journal_login\" (SQLSTATE 28P01)".to_owned()
        )
    );
    assert_no_password(&outputs(&error));

    let _ = cluster.execute(&database.name, "GRANT CREATE ON SCHEMA public TO journal_login");
    let store =
        Store::connect(&config(&cluster.url_with_password("journal_login", PASSWORD, &database.name)))
            .await
            .expect("the right password is accepted");
    assert_no_password(&format!("{store:?} {}", store.config()));
    let lease = store.acquire("refusal-run", &worker("w1"), Duration::from_secs(5)).await.unwrap();
    assert_eq!(lease.epoch(), 1);
}

#[tokio::test]
async fn an_unknown_database_is_refused() {
    let Some(cluster) = cluster() else { return };
    let error = Store::connect(&config(&cluster.url("no_such_database"))).await.unwrap_err();
    assert_eq!(
        error,
        Error::Refused("database \"no_such_database\" does not exist (SQLSTATE 3D000)".to_owned())
    );
}

#[tokio::test]
async fn a_server_that_crashes_gives_typed_errors_and_nothing_half_written_then_recovers() {
    let Some(mut cluster) = Cluster::start(Durability::Durable) else { return };
    let database = cluster.create_database("crash");
    let store = Store::connect(&config(&database.url)).await.unwrap();
    let _ = cluster.execute(&database.name, "CREATE TABLE effects (run_id text, n int)");
    let mut lease = store.acquire("crash-run", &worker("w1"), Duration::from_secs(60)).await.unwrap();

    cluster.crash();
    let error = store.acquire("crash-run-2", &worker("w1"), Duration::from_secs(60)).await.unwrap_err();
    assert!(matches!(error, Error::Unavailable(_)), "{error:?}");
    let error = store
        .fenced(&mut lease, |transaction| {
            Box::pin(async move {
                Ok(transaction.execute("INSERT INTO effects VALUES ('crash-run', 1)", &[]).await?)
            })
        })
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Unavailable(_)), "{error:?}");

    cluster.recover();
    assert_eq!(cluster.execute(&database.name, "SELECT count(*) FROM effects"), "0");
    // The pool drops the connections the crash broke and opens new ones.
    let written = store
        .fenced(&mut lease, |transaction| {
            Box::pin(async move {
                Ok(transaction.execute("INSERT INTO effects VALUES ('crash-run', 2)", &[]).await?)
            })
        })
        .await
        .expect("the lease survived the crash");
    assert_eq!(written, 1);
    assert_eq!(cluster.execute(&database.name, "SELECT n FROM effects"), "2");
    let state = store.lease_state("crash-run").await.unwrap().unwrap();
    assert_eq!((state.epoch, state.attempts, state.live), (1, 1, true));
}

#[tokio::test]
async fn connections_name_themselves_unless_the_url_does() {
    let Some(cluster) = cluster() else { return };
    let database = cluster.create_database("application_name");
    let count = |name: &str| {
        cluster.execute(
            "postgres",
            &format!(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = '{}' AND application_name = '{name}'",
                database.name
            ),
        )
    };
    let default = Store::connect(&config(&database.url)).await.unwrap();
    let named =
        Store::connect(&config(&format!("{}?application_name=worker-7", database.url))).await.unwrap();
    assert_eq!((count("loopbound"), count("worker-7")), ("1".to_owned(), "1".to_owned()));
    drop((default, named));
}
