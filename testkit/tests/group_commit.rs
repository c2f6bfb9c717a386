//! Group commit on SQLite (SPEC §24): writes of many runs that arrive together share one
//! transaction and one sync; each caller is told only once its write is durable; a write that
//! fails in a group fails alone; and a group cut by a crash (a process killed with SIGKILL while
//! it commits) leaves every write it reported, each whole, and no write half-done.

use std::collections::BTreeMap;
use std::sync::Arc;

use loopbound::journal::{Batch, Entry, EventRow, Fence, Journal, JournalError, RunId};
use loopbound_sqlite::SqliteJournal;
use loopbound_testkit::conformance::fresh_row;
use loopbound_testkit::{child, scratch};

/// The events of one commit: `EVENTS` rows, so a commit cut in half would show.
const EVENTS: u32 = 5;

fn run(n: usize) -> RunId {
    RunId::new(format!("group-{n}")).expect("a run id")
}

/// One commit's batch: `EVENTS` events and the ledger.
fn batch(n: usize) -> Batch {
    let mut entries: Vec<Entry> = (1..=EVENTS)
        .map(|count| {
            Entry::Event(EventRow {
                kind: "ModelCall".to_owned(),
                name: "model".to_owned(),
                count,
                operation: None,
                by: None,
                reason: None,
            })
        })
        .collect();
    entries.push(Entry::Ledger(format!("ledger of {n}")));
    Batch { entries }
}

/// How many events each run holds in the journal at `path`.
async fn events(path: &std::path::Path, runs: usize) -> BTreeMap<usize, usize> {
    let journal = SqliteJournal::open(path).expect("the journal opens");
    let mut counts = BTreeMap::new();
    for n in 0..runs {
        let stored = journal.load(&run(n)).await.expect("a read").expect("the run exists");
        counts.insert(n, stored.events.len());
    }
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_that_arrive_together_share_a_sync_and_a_refused_one_fails_alone() {
    let dir = scratch::dir("group-commit");
    let path = dir.join("runs.db");
    let journal = Arc::new(SqliteJournal::open(&path).expect("the journal opens"));
    for n in 0..100 {
        journal.acquire(&run(n), fresh_row()).await.expect("a new run");
    }
    let (commits, groups) = (journal.commits(), journal.groups());
    // Another connection holds the write lock while the hundred commits arrive: they queue, and
    // the writer waits for the lock with the first of them.
    let lock = rusqlite::Connection::open(&path).expect("a second connection");
    lock.execute_batch("BEGIN IMMEDIATE").expect("the write lock");
    let mut tasks = Vec::new();
    let started = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for n in 0..100 {
        let (journal, started) = (Arc::clone(&journal), Arc::clone(&started));
        // Run 50's commit is under a stale epoch: refused, alone.
        let epoch = if n == 50 { 7 } else { 1 };
        tasks.push(tokio::spawn(async move {
            let id = run(n);
            let commit = journal.commit(&id, Fence::Epoch(epoch), batch(n));
            // Counted in the poll that queues the commit: once all are counted, all are queued.
            started.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            commit.await
        }));
    }
    while started.load(std::sync::atomic::Ordering::SeqCst) < 100 {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(tasks.iter().all(|task| !task.is_finished()), "no commit is told before it is durable");
    lock.execute_batch("ROLLBACK").expect("the lock released");
    for (n, task) in tasks.into_iter().enumerate() {
        let result = task.await.expect("no task panicked");
        let expected = if n == 50 { Err(JournalError::LeaseLost) } else { Ok(()) };
        assert_eq!(result, expected, "run {n}");
    }
    assert_eq!(journal.commits() - commits, 99, "each commit counted once");
    let took = journal.groups() - groups;
    assert!((1..=2).contains(&took), "ninety-nine commits in {took} transactions");
    let counts = events(&path, 100).await;
    for (n, count) in counts {
        assert_eq!(count, if n == 50 { 0 } else { EVENTS as usize }, "run {n}");
    }
}

/// The crash test's runs, and how many commits each makes one after another.
const RUNS: usize = 100;
const ROUNDS: usize = 100;

#[test]
fn a_group_cut_by_a_crash_keeps_every_commit_it_reported_and_leaves_none_half_done() {
    const TEST: &str = "a_group_cut_by_a_crash_keeps_every_commit_it_reported_and_leaves_none_half_done";
    if let Some(path) = child::role() {
        // The child: every run commits `ROUNDS` times, one after another, all runs at once, so
        // groups of many runs' commits follow one another until the parent kills it.
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        runtime.block_on(async move {
            let journal = Arc::new(SqliteJournal::open(&path).expect("the journal opens"));
            for n in 0..RUNS {
                journal.acquire(&run(n), fresh_row()).await.expect("a new run");
            }
            child::report("ready");
            let mut tasks = Vec::new();
            for n in 0..RUNS {
                let journal = Arc::clone(&journal);
                tasks.push(tokio::spawn(async move {
                    for round in 1..=ROUNDS {
                        journal.commit(&run(n), Fence::Epoch(1), batch(n)).await.expect("a commit");
                        child::report(&format!("committed {n} {round}"));
                    }
                }));
            }
            for task in tasks {
                task.await.expect("no task panicked");
            }
            child::report("done");
        });
        return;
    }
    let dir = scratch::dir("group-crash");
    let path = dir.join("runs.db");
    let mut worker = child::command(TEST, &path.display().to_string()).spawn().expect("the child starts");
    let mut lines = child::output(&mut worker);
    assert_eq!(child::next_report(&mut lines).as_deref(), Some("ready"));
    // The last commit each run reported.
    let mut reported: BTreeMap<usize, usize> = BTreeMap::new();
    let mut note = |line: &str| {
        if line == "done" {
            panic!("the child committed everything before the kill: nothing was cut");
        }
        let parsed = line.strip_prefix("committed ").and_then(|rest| {
            let (n, round) = rest.split_once(' ')?;
            Some((n.parse::<usize>().ok()?, round.parse::<usize>().ok()?))
        });
        let (n, round) = parsed.unwrap_or_else(|| panic!("an unexpected report: {line}"));
        reported.insert(n, round);
    };
    // Killed in the middle: some rounds reported, many commits in flight.
    for _ in 0..RUNS * ROUNDS / 4 {
        let line = child::next_report(&mut lines).expect("the child reports");
        note(&line);
    }
    worker.kill().expect("SIGKILL");
    worker.wait().expect("the child is reaped");
    // What it reported before it died, still in the pipe.
    while let Some(line) = child::next_report(&mut lines) {
        note(&line);
    }
    let counts = child::runtime().block_on(events(&path, RUNS));
    let mut in_flight = 0;
    for (n, count) in &counts {
        let done = reported.get(n).copied().unwrap_or(0);
        assert_eq!(count % EVENTS as usize, 0, "run {n} holds {count} events: a commit half-done");
        let commits = count / EVENTS as usize;
        // Every reported commit is durable; at most the one in flight is there unreported.
        assert!(
            commits == done || commits == done + 1,
            "run {n}: {commits} commits in the file, {done} reported"
        );
        in_flight += commits - done;
    }
    let total: usize = reported.values().sum();
    println!("{total} commits reported before the kill; {in_flight} more were durable unreported");
}
