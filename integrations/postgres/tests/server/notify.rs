//! Cancel requests pushed with `NOTIFY`: a journal handle's listener tells the attempt that
//! waits, and the watcher's rounds stop asking the server while it listens; a listener whose
//! connection the server ends listens again on a new one.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use loopbound::journal::{Journal, JournalError, RunId};
use loopbound::scripted::{Scripted, Step};
use loopbound::{Message, RunError, Runner, Scope, ToolSet};
use loopbound_postgres::PostgresJournal;
use loopbound_testkit::hooked::{Call, Hook, Hooked};

use crate::{config, fresh};

/// A hook that counts the watcher's rounds that asked the server.
#[derive(Default)]
struct Rounds(AtomicU32);

impl Hook for Rounds {
    async fn before(&self, call: Call<'_>) -> Result<(), JournalError> {
        if matches!(call, Call::CancelRequests { .. }) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }
}

/// A journaled attempt of `run` on `journal` whose model never answers, spawned.
fn hang(
    journal: &Arc<Hooked<PostgresJournal, Rounds>>,
    run: &RunId,
) -> tokio::task::JoinHandle<Result<loopbound::Outcome, RunError>> {
    let (journal, run) = (Arc::clone(journal), run.clone());
    tokio::spawn(async move {
        let runtime = Runner::new(&ToolSet::default(), Scripted::new(|_, _| Step::Hang));
        let scope = Scope::builder().build().unwrap();
        runtime.run_journaled(&*journal, &run, &scope, &mut vec![Message::user("Hi.")], |_| true).await
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_request_reaches_the_waiting_attempt_by_notify_without_a_poll() {
    let Some((store, database)) = fresh("notify").await else { return };
    let journal = Arc::new(Hooked::new(PostgresJournal::new(store).expect("a journal"), Rounds::default()));
    let host = PostgresJournal::connect(&config(&database.url)).await.expect("a second handle");
    let run = RunId::new("notify-1").unwrap();
    let waiting = hang(&journal, &run);
    let watch = journal.inner.cancel_watch().expect("the handle keeps a watcher");
    let mut tries = 0;
    while !watch.is_pushed() {
        tries += 1;
        assert!(tries < 200, "the listener did not confirm within 10 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A round or two pass: while the listener listens they ask nothing but to catch up.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let asked = journal.hook.0.load(Ordering::SeqCst);
    assert!(asked <= 2, "{asked} rounds asked the server while it pushed");
    host.request_cancel(&run, "ops").await.expect("the request");
    let result =
        tokio::time::timeout(Duration::from_secs(10), waiting).await.expect("the run ended").unwrap();
    assert_eq!(result, Err(RunError::Cancelled));
    assert_eq!(
        journal.hook.0.load(Ordering::SeqCst),
        asked,
        "the push told the attempt: no round asked for it"
    );
}

/// The pid of the backend that `LISTEN`s on the database `name`, if one does: its last query is
/// the `LISTEN` or a liveness check (an empty query), which no other connection sends.
fn listener(cluster: &loopbound_testkit::postgres::Cluster, name: &str) -> Option<String> {
    let sql = "SELECT pid FROM pg_stat_activity WHERE query IN ('LISTEN loopbound_cancel', '') \
               AND datname = current_database() AND pid <> pg_backend_pid()";
    let pid = cluster.execute(name, sql);
    let pid = pid.trim();
    (!pid.is_empty()).then(|| pid.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_whose_connection_is_killed_listens_again_and_the_request_still_reaches_the_attempt() {
    let Some((store, database)) = fresh("notify_lost").await else { return };
    let Some(cluster) = crate::cluster() else { return };
    let journal = Arc::new(Hooked::new(PostgresJournal::new(store).expect("a journal"), Rounds::default()));
    let host = PostgresJournal::connect(&config(&database.url)).await.expect("a second handle");
    let run = RunId::new("notify-lost").unwrap();
    let waiting = hang(&journal, &run);
    let watch = journal.inner.cancel_watch().expect("the handle keeps a watcher");
    let confirmed = || async {
        for _ in 0..400 {
            if watch.is_pushed()
                && let Some(pid) = listener(cluster, &database.name)
            {
                return pid;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("the listener did not confirm within 10 s");
    };
    let first = confirmed().await;
    // The server ends the listening connection, as a restart or a network cut would.
    let killed = cluster.execute(&database.name, &format!("SELECT pg_terminate_backend({first})"));
    assert_eq!(killed.trim(), "t");
    let mut again = confirmed().await;
    for _ in 0..400 {
        if again != first {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
        again = confirmed().await;
    }
    assert_ne!(again, first, "a new connection listens");
    assert!(!waiting.is_finished(), "the attempt still waits on its model");
    host.request_cancel(&run, "ops").await.expect("the request");
    let result = tokio::time::timeout(Duration::from_secs(3), waiting).await.expect("the run ended").unwrap();
    assert_eq!(result, Err(RunError::Cancelled), "the request reached the attempt after the loss");
}
