//! Cancel requests pushed with `NOTIFY`: a journal handle's listener tells the attempt that
//! waits, and the watcher's rounds stop asking the server while it listens.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use loopbound::journal::{Journal, JournalError, RunId};
use loopbound::scripted::{Scripted, Step};
use loopbound::{Message, RunError, Runtime, Scope, ToolSet};
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_request_reaches_the_waiting_attempt_by_notify_without_a_poll() {
    let Some((store, database)) = fresh("notify").await else { return };
    let journal = Arc::new(Hooked::new(PostgresJournal::new(store).expect("a journal"), Rounds::default()));
    let host = PostgresJournal::connect(&config(&database.url)).await.expect("a second handle");
    let run = RunId::new("notify-1").unwrap();
    let waiting = {
        let (journal, run) = (Arc::clone(&journal), run.clone());
        tokio::spawn(async move {
            let runtime = Runtime::harness(&ToolSet::default(), Scripted::new(|_, _| Step::Hang));
            let scope = Scope::builder().build().unwrap();
            runtime.run_journaled(&*journal, &run, &scope, &mut vec![Message::user("Hi.")], |_| true).await
        })
    };
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
