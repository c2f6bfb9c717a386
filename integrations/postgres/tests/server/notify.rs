//! Cancel requests pushed with `NOTIFY`: a journal handle's listener tells the attempt that
//! waits, and the watcher's rounds stop asking the server while it listens.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use loopbound::journal::{
    Batch, CancelWatch, Fence, Journal, JournalError, ListedRow, RunId, RunQuery, RunRow, StoredRun,
};
use loopbound::scripted::{Scripted, Step};
use loopbound::{Message, RunError, Runtime, Scope, ToolSet};
use loopbound_postgres::PostgresJournal;

use crate::{config, fresh};

/// A journal that counts the watcher's rounds that asked the server.
struct Counting {
    inner: PostgresJournal,
    asked: AtomicU32,
}

impl Journal for Counting {
    fn lease(&self) -> Duration {
        self.inner.lease()
    }

    async fn acquire(&self, run: &RunId, fresh: RunRow) -> Result<StoredRun, JournalError> {
        self.inner.acquire(run, fresh).await
    }

    async fn renew(&self, run: &RunId, epoch: u64) -> Result<(), JournalError> {
        self.inner.renew(run, epoch).await
    }

    async fn list(&self, query: &RunQuery) -> Result<Vec<ListedRow>, JournalError> {
        self.inner.list(query).await
    }

    async fn load(&self, run: &RunId) -> Result<Option<StoredRun>, JournalError> {
        self.inner.load(run).await
    }

    async fn commit(&self, run: &RunId, fence: Fence, batch: Batch) -> Result<(), JournalError> {
        self.inner.commit(run, fence, batch).await
    }

    async fn cancel_requested(&self, run: &RunId) -> Result<Option<String>, JournalError> {
        self.inner.cancel_requested(run).await
    }

    async fn cancel_requests(&self, runs: &[RunId]) -> Result<Vec<RunId>, JournalError> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        self.inner.cancel_requests(runs).await
    }

    fn cancel_watch(&self) -> Option<&CancelWatch> {
        self.inner.cancel_watch()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_request_reaches_the_waiting_attempt_by_notify_without_a_poll() {
    let Some((store, database)) = fresh("notify").await else { return };
    let journal = Arc::new(Counting {
        inner: PostgresJournal::new(store).expect("a journal"),
        asked: AtomicU32::new(0),
    });
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
    let asked = journal.asked.load(Ordering::SeqCst);
    assert!(asked <= 2, "{asked} rounds asked the server while it pushed");
    host.request_cancel(&run, "ops").await.expect("the request");
    let result =
        tokio::time::timeout(Duration::from_secs(10), waiting).await.expect("the run ended").unwrap();
    assert_eq!(result, Err(RunError::Cancelled));
    assert_eq!(
        journal.asked.load(Ordering::SeqCst),
        asked,
        "the push told the attempt: no round asked for it"
    );
}
