//! Cancelling a run from elsewhere: by its id through a registry, from another task; and, for a
//! journaled run, through the journal's cancel requests, honoured at the next admission or
//! within a second.

#![cfg(feature = "journal")]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use loopbound::journal::backend::{Batch, Fence, ListedRow, RunRow, StoredRun};
use loopbound::journal::{Journal, JournalError, MemoryJournal, RunId, RunQuery};
use loopbound::scripted::{Scripted, Step};
use loopbound::transport::ModelReply;
use loopbound::{Message, RunError, RunErrorKind, RunRegistry, Runner, Scope, ToolSet};
use loopbound_test::hooked::{Call, Hook, Hooked};
use tokio::time::Instant;

fn hanging() -> Scripted<impl Fn(u32, &loopbound::transport::ChatRequest<'_>) -> Step + Send + Sync> {
    Scripted::new(|_, _| Step::Hang)
}

#[tokio::test(start_paused = true)]
async fn a_cancel_by_id_from_another_task_ends_the_run_at_once() {
    let runs = RunRegistry::new();
    let id = RunId::new("review-42").unwrap();
    let scope = Scope::builder().build().unwrap();
    let registration = runs.register(id.clone(), &scope).unwrap();
    let canceller = {
        let (runs, id) = (runs.clone(), id.clone());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            (runs.cancel(&id), Instant::now())
        })
    };
    let runtime = Runner::new(&ToolSet::default(), hanging());
    let started = Instant::now();
    let result = runtime.run(&scope, &mut vec![Message::user("Hi.")], |_| true).await;
    let ended = Instant::now();
    let (found, cancelled_at) = canceller.await.unwrap();
    assert!(found);
    assert_eq!(result, Err(RunError::Cancelled));
    assert_eq!(result.unwrap_err().kind(), RunErrorKind::Cancelled);
    assert_eq!(cancelled_at - started, Duration::from_millis(30));
    assert_eq!(ended, cancelled_at, "no time passes between the cancel and the run's end");
    assert_eq!(scope.events().len(), 1, "the model call, nothing after it");
    drop(registration);
    assert!(runs.is_empty());
}

/// A journal that records cancel requests in memory, as a backend with a cancel table would.
#[derive(Default)]
struct Cancellable {
    inner: MemoryJournal,
    requested: AtomicBool,
    asked: std::sync::atomic::AtomicU32,
}

impl Journal for Cancellable {
    fn lease(&self) -> Duration {
        self.inner.lease()
    }

    async fn acquire(&self, run: &RunId, fresh: RunRow) -> Result<StoredRun, JournalError> {
        self.inner.acquire(run, fresh).await
    }

    async fn renew(&self, run: &RunId, epoch: u64) -> Result<(), JournalError> {
        self.inner.renew(run, epoch).await
    }

    async fn list_rows(&self, query: &RunQuery) -> Result<Vec<ListedRow>, JournalError> {
        self.inner.list_rows(query).await
    }

    async fn load(&self, run: &RunId) -> Result<Option<StoredRun>, JournalError> {
        self.inner.load(run).await
    }

    async fn commit(&self, run: &RunId, fence: Fence, batch: Batch) -> Result<(), JournalError> {
        self.inner.commit(run, fence, batch).await
    }

    async fn cancel_requested(&self, _run: &RunId) -> Result<Option<String>, JournalError> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        Ok(self.requested.load(Ordering::SeqCst).then(|| "ops".to_owned()))
    }
}

#[tokio::test(start_paused = true)]
async fn a_journaled_run_that_waits_honours_a_cancel_request_within_a_second() {
    let journal = Arc::new(Cancellable::default());
    let requester = {
        let journal = Arc::clone(&journal);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(2300)).await;
            journal.requested.store(true, Ordering::SeqCst);
        })
    };
    let runtime = Runner::new(&ToolSet::default(), hanging());
    let scope = Scope::builder().build().unwrap();
    let run = RunId::new("wait-1").unwrap();
    let started = Instant::now();
    let result =
        runtime.run_journaled(&*journal, &run, &scope, &mut vec![Message::user("Hi.")], |_| true).await;
    assert_eq!(result, Err(RunError::Cancelled));
    assert_eq!(started.elapsed(), Duration::from_millis(2500), "the poll after the request");
    requester.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_journaled_run_honours_a_cancel_request_at_its_next_admission() {
    let journal = Arc::new(Cancellable::default());
    let requests = Arc::clone(&journal);
    // The host asks to cancel while the model writes its first reply.
    let model = Scripted::new(move |call, _| {
        if call == 1 {
            requests.requested.store(true, Ordering::SeqCst);
        }
        Step::Reply(ModelReply::call(format!("c{call}"), "missing", "{}"))
    });
    let runtime = Runner::new(&ToolSet::default(), model);
    let scope = Scope::builder().build().unwrap();
    let run = RunId::new("busy-1").unwrap();
    let started = Instant::now();
    let result =
        runtime.run_journaled(&*journal, &run, &scope, &mut vec![Message::user("Hi.")], |_| true).await;
    assert_eq!(result, Err(RunError::Cancelled));
    assert_eq!(started.elapsed(), Duration::ZERO, "no wait for the periodic poll");
    assert_eq!(runtime.transport().calls(), 1, "the next model call was never sent");
    assert_eq!(
        journal.asked.load(Ordering::SeqCst),
        4,
        "asked before the first model call, before the tool call, before the second model call, and at \
         the end for who asked"
    );
}

#[tokio::test(start_paused = true)]
async fn a_cancel_command_ends_the_memory_journals_run_records_who_asked_and_leaves_it_resumable() {
    let journal = Arc::new(MemoryJournal::default());
    let run = RunId::new("wait-2").unwrap();
    let host = {
        let (journal, run) = (Arc::clone(&journal), run.clone());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(1200)).await;
            loopbound::journal::cancel(&*journal, &run, "ops").await
        })
    };
    let runtime = Runner::new(&ToolSet::default(), hanging());
    let scope = Scope::builder().build().unwrap();
    let started = Instant::now();
    let result =
        runtime.run_journaled(&*journal, &run, &scope, &mut vec![Message::user("Hi.")], |_| true).await;
    assert_eq!(result, Err(RunError::Cancelled));
    assert_eq!(started.elapsed(), Duration::from_millis(1500), "the first poll after the request");
    assert_eq!(host.await.unwrap(), Ok(()));
    let record = loopbound::journal::inspect(&*journal, &run).await.unwrap();
    let last = record.events().last().unwrap();
    assert_eq!(
        (last.to_string(), last.decided_by()),
        ("Cancelled run 1 by ops".to_owned(), Some("ops")),
        "the attempt's last commit names who asked"
    );
    assert_eq!(record.state(), loopbound::journal::RunState::Open);
    assert_eq!(journal.cancel_requested(&run).await, Ok(None), "the request was honoured and cleared");
    assert_eq!(
        loopbound::journal::cancel(&*journal, &RunId::new("nope").unwrap(), "ops").await,
        Err(JournalError::UnknownRun)
    );
    assert_eq!(loopbound::journal::cancel(&*journal, &run, "").await, Err(JournalError::InvalidActor));
}

/// A hook that counts a journal's cancel queries: per run, and for many runs at once through
/// the watcher its attempts share (how many runs each asked about).
#[derive(Default)]
struct Counting {
    one_run: std::sync::atomic::AtomicU32,
    many_runs: std::sync::Mutex<Vec<usize>>,
}

impl Hook for Counting {
    async fn before(&self, call: Call<'_>) -> Result<(), JournalError> {
        match call {
            Call::CancelRequested { .. } => self.one_run.fetch_add(1, Ordering::SeqCst),
            Call::CancelRequests { runs } => {
                self.many_runs.lock().unwrap().push(runs.len());
                // A store's round trip: the checks that arrive meanwhile wait for the next call.
                tokio::time::sleep(Duration::from_millis(1)).await;
                0
            }
            _ => 0,
        };
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn a_thousand_waiting_runs_on_one_handle_share_one_cancel_query_per_period() {
    let journal = Arc::new(Hooked::new(MemoryJournal::default(), Counting::default()));
    let runtime = Arc::new(Runner::new(&ToolSet::default(), hanging()));
    let started = Instant::now();
    let mut runs = Vec::new();
    for n in 0..1000 {
        let (journal, runtime) = (Arc::clone(&journal), Arc::clone(&runtime));
        runs.push(tokio::spawn(async move {
            let scope = Scope::builder().build().unwrap();
            let run = RunId::new(format!("wait-{n}")).unwrap();
            let result = runtime
                .run_journaled(&*journal, &run, &scope, &mut vec![Message::user("Hi.")], |_| true)
                .await;
            (result, started.elapsed())
        }));
    }
    tokio::time::sleep(Duration::from_millis(5_100)).await;
    assert_eq!(journal.hook.one_run.load(Ordering::SeqCst), 0, "no query for one run alone");
    assert_eq!(
        *journal.hook.many_runs.lock().unwrap(),
        [[1, 999].as_slice(), &[1000; 10]].concat(),
        "the checks before the thousand model calls in two queries (the first run's alone, the \
         others queued while it was in flight), then one query per 500 ms for all thousand"
    );
    journal.request_cancel(&RunId::new("wait-500").unwrap(), "ops").await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let cancelled = runs.remove(500);
    assert!(cancelled.is_finished());
    let (result, ended) = cancelled.await.unwrap();
    assert_eq!(result, Err(RunError::Cancelled));
    assert_eq!(ended, Duration::from_millis(5_501), "the round after the request, and its store's 1 ms");
    assert!(runs.iter().all(|run| !run.is_finished()), "the others still wait");
    for run in runs {
        run.abort();
    }
}
