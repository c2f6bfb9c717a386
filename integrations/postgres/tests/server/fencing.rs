//! Fenced writes: a stale worker's write is refused before it runs and writes nothing; a failing
//! write rolls back whole; a takeover waits for a fenced write in flight and is ordered after it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use loopbound_postgres::{Error, Lease, Store};

use crate::{fresh, worker};

/// Inserts `(run, who)` into `effects` under `lease`, noting in `ran` that the statements ran.
async fn record(store: &Store, lease: &mut Lease, who: &str, ran: &Arc<AtomicBool>) -> Result<u64, Error> {
    let (run, who, ran) = (lease.run().to_owned(), who.to_owned(), Arc::clone(ran));
    store
        .fenced(lease, |transaction| {
            Box::pin(async move {
                ran.store(true, Ordering::SeqCst);
                Ok(transaction.execute("INSERT INTO effects VALUES ($1, $2)", &[&run, &who]).await?)
            })
        })
        .await
}

#[tokio::test]
async fn a_stale_workers_write_is_refused_before_it_runs_and_writes_nothing() {
    let Some((store, database)) = fresh("fence_stale").await else { return };
    let cluster = crate::cluster().expect("running");
    let _ = cluster.execute(&database.name, "CREATE TABLE effects (run_id text, worker text)");
    let mut stale = store.acquire("run-1", &worker("a"), Duration::from_millis(300)).await.unwrap();
    let ran = Arc::new(AtomicBool::new(false));
    assert_eq!(record(&store, &mut stale, "a", &ran).await.unwrap(), 1);

    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut current = store.acquire("run-1", &worker("b"), Duration::from_secs(60)).await.unwrap();
    assert_eq!(current.epoch(), 2);

    let refused = Arc::new(AtomicBool::new(false));
    let error = record(&store, &mut stale, "a", &refused).await.unwrap_err();
    assert_eq!(error, Error::LeaseLost { run: "run-1".into(), epoch: 1 });
    assert_eq!(error.to_string(), "run run-1: another worker took it over (this worker's epoch 1 is stale)");
    assert!(!refused.load(Ordering::SeqCst), "the stale worker's statements never ran");
    assert_eq!(record(&store, &mut current, "b", &ran).await.unwrap(), 1);
    assert_eq!(cluster.execute(&database.name, "SELECT worker FROM effects ORDER BY worker"), "a\nb");
}

#[tokio::test]
async fn a_failing_write_rolls_back_whole_and_keeps_the_lease() {
    let Some((store, database)) = fresh("fence_rollback").await else { return };
    let cluster = crate::cluster().expect("running");
    let _ = cluster.execute(&database.name, "CREATE TABLE effects (run_id text PRIMARY KEY, worker text)");
    let mut lease = store.acquire("run-1", &worker("a"), Duration::from_secs(60)).await.unwrap();

    let error = store
        .fenced(&mut lease, |transaction| {
            Box::pin(async move {
                transaction.execute("INSERT INTO effects VALUES ('run-1', 'a')", &[]).await?;
                transaction.execute("INSERT INTO effects VALUES ('run-1', 'again')", &[]).await?;
                Ok(())
            })
        })
        .await
        .unwrap_err();
    let Error::Conflict(message) = &error else { panic!("expected Conflict: {error:?}") };
    assert!(message.ends_with("(SQLSTATE 23505)"), "{message}");

    let error = store
        .fenced(&mut lease, |transaction| {
            Box::pin(async move {
                transaction.execute("INSERT INTO effects VALUES ('run-1', 'a')", &[]).await?;
                transaction.execute("INSERT INTO no_such_table VALUES (1)", &[]).await?;
                Ok(())
            })
        })
        .await
        .unwrap_err();
    assert_eq!(error, Error::Storage("relation \"no_such_table\" does not exist (SQLSTATE 42P01)".into()));
    assert_eq!(cluster.execute(&database.name, "SELECT count(*) FROM effects"), "0");

    let ran = Arc::new(AtomicBool::new(false));
    assert_eq!(record(&store, &mut lease, "a", &ran).await.unwrap(), 1);
    assert_eq!(store.lease_state("run-1").await.unwrap().unwrap().epoch, 1);
}

/// An error that a write's own code returns, quoting the password by mistake, leaves the store
/// without it.
#[tokio::test]
async fn an_error_from_a_write_loses_the_password_on_the_way_out() {
    let Some(cluster) = crate::cluster() else { return };
    let database = cluster.create_database("fence_redact");
    cluster.create_password_role("fence_writer", crate::PASSWORD);
    let _ = cluster.execute(&database.name, "GRANT CREATE ON SCHEMA public TO fence_writer");
    let url = cluster.url_with_password("fence_writer", crate::PASSWORD, &database.name);
    let store = Store::connect(&crate::config(&url)).await.unwrap();
    let mut lease = store.acquire("run-1", &worker("a"), Duration::from_secs(60)).await.unwrap();
    let error = store
        .fenced(&mut lease, |_| {
            Box::pin(async { Err::<(), _>(Error::Storage(format!("cannot use {}", crate::PASSWORD))) })
        })
        .await
        .unwrap_err();
    assert_eq!(error, Error::Storage("cannot use [redacted]".into()));
    crate::assert_no_password(&format!("{error} {error:?}"));
}

#[tokio::test]
async fn a_fenced_write_renews_its_lease() {
    let Some((store, database)) = fresh("fence_renews").await else { return };
    let cluster = crate::cluster().expect("running");
    let _ = cluster.execute(&database.name, "CREATE TABLE effects (run_id text, worker text)");
    let mut lease = store.acquire("run-1", &worker("a"), Duration::from_millis(600)).await.unwrap();
    let ran = Arc::new(AtomicBool::new(false));
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        record(&store, &mut lease, "a", &ran).await.unwrap();
    }
    let error = store.acquire("run-1", &worker("b"), Duration::from_secs(60)).await.unwrap_err();
    assert!(matches!(error, Error::LeaseHeld { ref holder, .. } if holder == "a"), "{error:?}");
}

/// A takeover that arrives while a fenced write is in flight waits for its commit; the write
/// renewed the lease, so the takeover is refused, and the write stands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_during_a_fenced_write_is_ordered_after_it() {
    let Some((store, database)) = fresh("fence_order").await else { return };
    let cluster = crate::cluster().expect("running");
    let _ = cluster.execute(&database.name, "CREATE TABLE effects (run_id text, worker text)");
    let mut lease = store.acquire("run-1", &worker("a"), Duration::from_secs(5)).await.unwrap();
    let writer = {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .fenced(&mut lease, |transaction| {
                    Box::pin(async move {
                        transaction.execute("INSERT INTO effects VALUES ('run-1', 'a')", &[]).await?;
                        // Hold the run's row locked for a while, well inside the lease (the
                        // server ends a transaction idle for longer than the store's lease).
                        tokio::time::sleep(Duration::from_millis(300)).await;
                        transaction.execute("SELECT 1", &[]).await?;
                        Ok(())
                    })
                })
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let began = Instant::now();
    let error = store.acquire("run-1", &worker("b"), Duration::from_secs(60)).await.unwrap_err();
    assert!(began.elapsed() >= Duration::from_millis(200), "the takeover waited for the write's commit");
    assert!(matches!(error, Error::LeaseHeld { ref holder, .. } if holder == "a"), "{error:?}");
    writer.await.unwrap().expect("the write committed");
    assert_eq!(cluster.execute(&database.name, "SELECT worker FROM effects"), "a");
}

/// A fenced transaction left idle for longer than the lease is ended by the server, so a worker
/// stuck inside one cannot hold its run's row; its write is lost whole and another worker
/// takes the run over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_transaction_idle_past_the_lease_is_ended_by_the_server() {
    let Some(cluster) = crate::cluster() else { return };
    let database = cluster.create_database("fence_idle");
    let config = crate::config(&database.url).with_lease(Duration::from_millis(300)).unwrap();
    let store = Store::connect(&config).await.unwrap();
    let _ = cluster.execute(&database.name, "CREATE TABLE effects (run_id text, worker text)");
    let mut lease = store.acquire("run-1", &worker("a"), config.lease()).await.unwrap();
    let stuck = store
        .fenced(&mut lease, |transaction| {
            Box::pin(async move {
                transaction.execute("INSERT INTO effects VALUES ('run-1', 'a')", &[]).await?;
                tokio::time::sleep(Duration::from_millis(800)).await;
                Ok(())
            })
        })
        .await
        .unwrap_err();
    assert!(matches!(stuck, Error::Unavailable(_)), "{stuck:?}");
    assert_eq!(cluster.execute(&database.name, "SELECT count(*) FROM effects"), "0");
    assert_eq!(store.acquire("run-1", &worker("b"), config.lease()).await.unwrap().epoch(), 2);
}
