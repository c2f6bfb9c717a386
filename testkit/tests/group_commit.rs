//! Group commit on SQLite (SPEC §24): writes of many runs that arrive together share one
//! transaction and one sync; each caller is told only once its write is durable; a write that
//! fails in a group fails alone; and a group cut by a crash (a process killed with SIGKILL while
//! it commits) leaves every write it reported, each whole, and no write half-done.
//!
//! And on PostgreSQL: the commits and renewals of many runs share one transaction; a batch whose
//! fence fails in a group writes nothing, alone; one whose row is refused (a key written twice)
//! gets its `Conflict` alone while the others of its group commit; a commit given up before its
//! group began is not written, one given up during its group does not stop it.

use std::collections::BTreeMap;
use std::sync::Arc;

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use loopbound::journal::backend::{Batch, Entry, Fence, ReplyRow};
use loopbound::journal::{Journal, JournalError, RunId};
use loopbound_postgres::tokio_postgres::{self, NoTls};
use loopbound_postgres::{Config, GROUP_WRITERS, PostgresJournal, WorkerId};
use loopbound_sqlite::SqliteJournal;
use loopbound_testkit::conformance::fresh_row;
use loopbound_testkit::postgres::{Cluster, Durability};
use loopbound_testkit::{batches, child, scratch};

/// The events of one commit: `EVENTS` rows, so a commit cut in half would show.
const EVENTS: u32 = 5;

fn run(n: usize) -> RunId {
    RunId::new(format!("group-{n}")).expect("a run id")
}

/// One commit's batch: `EVENTS` events and the ledger.
fn batch(n: usize) -> Batch {
    batches::model_calls(EVENTS, format!("ledger of {n}"))
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

/// A journal on a fresh database of the shared cluster, and its URL; `None` where PostgreSQL is
/// absent (after `SKIPPED`).
async fn postgres_journal(hint: &str) -> Option<(PostgresJournal, String)> {
    let cluster = Cluster::shared(Durability::Fast)?;
    let url = cluster.create_database(hint).url;
    let journal = PostgresJournal::connect(&Config::new(&url).expect("the cluster's URL"))
        .await
        .expect("the fresh database accepts the journal")
        .with_worker(WorkerId::new("group-test").expect("a worker id"));
    Some((journal, url))
}

/// What a held commit does: commit a batch under an epoch, or renew the lease.
#[derive(Clone)]
enum Ask {
    Commit(u64, Batch),
    Renew(u64),
}

/// What happened to a commit held behind the rows' lock.
#[derive(Debug, PartialEq)]
enum Told {
    Answered(Result<(), JournalError>),
    /// Its caller gave it up, its future dropped.
    GivenUp,
}

/// Waits for `condition` to be met, 30 s at most.
async fn within(condition: impl Future<Output = ()>) {
    tokio::time::timeout(Duration::from_secs(30), condition).await.expect("met within 30 s");
}

/// How many sessions of the database wait for a lock.
async fn waiting(client: &tokio_postgres::Client) -> i64 {
    let row = client
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
            &[],
        )
        .await
        .expect("pg_stat_activity answers");
    row.get(0)
}

/// Sends `asks` (one per run, in order) while another session holds every run's row locked:
/// the first [`GROUP_WRITERS`] one at a time, each its own writer's group, blocked on the lock;
/// the rest queued behind them. Gives up the commits of `drop_queued` while they are queued and
/// those of `drop_blocked` while their group waits for the lock, then releases the rows;
/// returns what each commit was told, once every one ended.
async fn behind_a_lock(
    journal: &PostgresJournal,
    url: &str,
    asks: Vec<(RunId, Ask)>,
    drop_queued: &[usize],
    drop_blocked: &[usize],
) -> Vec<Told> {
    let session = || async {
        let (client, connection) = tokio_postgres::connect(url, NoTls).await.expect("a session");
        tokio::spawn(connection);
        client
    };
    // The lock's session, and one outside its transaction that watches who waits (a
    // transaction's statistics are a snapshot).
    let (lock, watch) = (session().await, session().await);
    lock.batch_execute("BEGIN; SELECT run_id FROM loopbound_runs FOR UPDATE")
        .await
        .expect("every run's row locked");
    let queued = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for (n, (run, ask)) in asks.into_iter().enumerate() {
        let (journal, queued) = (journal.clone(), Arc::clone(&queued));
        tasks.push(tokio::spawn(async move {
            let mut answer: std::pin::Pin<Box<dyn Future<Output = Result<(), JournalError>> + Send>> =
                match ask {
                    Ask::Commit(epoch, batch) => Box::pin(journal.commit(&run, Fence::Epoch(epoch), batch)),
                    Ask::Renew(epoch) => Box::pin(journal.renew(&run, epoch)),
                };
            // Counted after the poll that queues the commit.
            let mut counted = false;
            std::future::poll_fn(|cx| {
                let poll = answer.as_mut().poll(cx);
                if !counted {
                    counted = true;
                    queued.fetch_add(1, Ordering::SeqCst);
                }
                poll
            })
            .await
        }));
        if n < GROUP_WRITERS {
            let blocked = i64::try_from(n + 1).expect("a few");
            within(async {
                while waiting(&watch).await < blocked {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
            .await;
        }
    }
    let all = tasks.len();
    within(async {
        while queued.load(Ordering::SeqCst) < all {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    for &n in drop_queued.iter().chain(drop_blocked) {
        tasks[n].abort();
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    for (n, task) in tasks.iter().enumerate() {
        let gone = drop_queued.contains(&n) || drop_blocked.contains(&n);
        assert_eq!(task.is_finished(), gone, "commit {n}: none is told before its group is committed");
    }
    assert_eq!(waiting(&watch).await, i64::try_from(GROUP_WRITERS).expect("a few"), "each writer waits");
    lock.batch_execute("ROLLBACK").await.expect("the rows released");
    let mut told = Vec::new();
    for task in tasks {
        told.push(match task.await {
            Ok(answer) => Told::Answered(answer),
            Err(error) if error.is_cancelled() => Told::GivenUp,
            Err(error) => panic!("a commit panicked: {error}"),
        });
    }
    told
}

/// How many events each of `runs` holds (0 for a run never created).
async fn events_of(journal: &PostgresJournal, runs: &[RunId]) -> Vec<usize> {
    let mut counts = Vec::new();
    for run in runs {
        counts.push(journal.load(run).await.expect("a read").map_or(0, |stored| stored.events.len()));
    }
    counts
}

fn with_release(n: usize) -> Batch {
    let mut batch = batch(n);
    batch.entries.push(Entry::Release);
    batch
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_commits_that_arrive_together_share_a_transaction_and_a_refused_one_fails_alone() {
    let Some((journal, url)) = postgres_journal("group_commit").await else { return };
    let runs: Vec<RunId> = (0..100).map(run).collect();
    // Run 99 is never acquired.
    for id in &runs[..99] {
        journal.acquire(id, fresh_row()).await.expect("a new run");
    }
    let asks = (0..100)
        .map(|n| {
            let ask = match n {
                // Under a stale epoch: refused, alone.
                50 => Ask::Commit(7, batch(n)),
                // A lease renewal, in the group like a commit.
                30 => Ask::Renew(1),
                // The attempt's last commit: releases the lease.
                40 => Ask::Commit(1, with_release(n)),
                _ => Ask::Commit(1, batch(n)),
            };
            (runs[n].clone(), ask)
        })
        .collect();
    let (groups, writes) = (journal.groups(), journal.grouped_writes());
    // Commit 70 is given up while queued; commit 0 while its group waits for the lock.
    let told = behind_a_lock(&journal, &url, asks, &[70], &[0]).await;
    for (n, told) in told.into_iter().enumerate() {
        let expected = match n {
            0 | 70 => Told::GivenUp,
            50 => Told::Answered(Err(JournalError::LeaseLost)),
            99 => Told::Answered(Err(JournalError::UnknownRun)),
            _ => Told::Answered(Ok(())),
        };
        assert_eq!(told, expected, "commit {n}");
    }
    // All but the refused two and the one given up while queued: the blocked writers' groups
    // (one commit each), then one group for every queued commit.
    let (expected_groups, expected_writes) = (GROUP_WRITERS as u64 + 1, 97);
    // Every answered commit's group was counted before its callers were told; commit 0's was
    // not awaited by anyone (given up), and its writer may still be committing it, or counting
    // it, when the last answer arrives (seen under load: two groups, 96 writes). A writer counts
    // a group's writes after the group itself, so once the writes are all counted the groups
    // are too; an extra or a lost group still shows below.
    let counted = tokio::time::Instant::now() + Duration::from_secs(30);
    while journal.grouped_writes() - writes < expected_writes && tokio::time::Instant::now() < counted {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(journal.grouped_writes() - writes, expected_writes, "writes in groups");
    assert_eq!(journal.groups() - groups, expected_groups, "groups");
    let counts = events_of(&journal, &runs).await;
    for (n, count) in counts.into_iter().enumerate() {
        let expected = match n {
            // Given up during its group: the group went on, and wrote it (committed: counted above).
            0 => EVENTS as usize,
            30 | 50 | 70 | 99 => 0,
            _ => EVENTS as usize,
        };
        assert_eq!(count, expected, "run {n}");
    }
    let store = journal.store();
    let released = store.lease_state(runs[40].as_str()).await.expect("a read").expect("leased");
    assert_eq!((released.epoch, released.holder, released.live), (1, None, false), "run 40 released");
    let renewed = store.lease_state(runs[30].as_str()).await.expect("a read").expect("leased");
    assert_eq!((renewed.epoch, renewed.live), (1, true), "run 30 renewed");
    let ledger = journal.load(&runs[41]).await.expect("a read").expect("the run exists").run.ledger;
    assert_eq!(ledger, "ledger of 41");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_commit_whose_row_conflicts_in_a_group_fails_alone_and_the_others_commit() {
    let Some((journal, url)) = postgres_journal("group_conflict").await else { return };
    let runs: Vec<RunId> = (0..20).map(run).collect();
    for id in &runs {
        journal.acquire(id, fresh_row()).await.expect("a new run");
    }
    let reply = || Entry::Reply(ReplyRow { ordinal: 1, reply: "{}".to_owned() });
    journal.commit(&runs[5], Fence::Epoch(1), Batch { entries: vec![reply()] }).await.expect("a first reply");
    let asks = (0..20)
        .map(|n| {
            let mut batch = batch(n);
            if n == 5 {
                // Its reply 1 again: a key written twice.
                batch.entries.push(reply());
            }
            (runs[n].clone(), Ask::Commit(1, batch))
        })
        .collect();
    let (groups, writes) = (journal.groups(), journal.grouped_writes());
    let told = behind_a_lock(&journal, &url, asks, &[], &[]).await;
    for (n, told) in told.into_iter().enumerate() {
        match (n, told) {
            (5, Told::Answered(Err(JournalError::Conflict(_)))) => {}
            (5, other) => panic!("commit 5: {other:?}, not a conflict"),
            (n, told) => assert_eq!(told, Told::Answered(Ok(())), "commit {n}"),
        }
    }
    // The blocked writers' groups; the queued commits' group rolled back, and each of its
    // commits was then written alone.
    assert_eq!(journal.groups() - groups, GROUP_WRITERS as u64, "groups");
    assert_eq!(journal.grouped_writes() - writes, GROUP_WRITERS as u64, "writes in groups");
    let counts = events_of(&journal, &runs).await;
    for (n, count) in counts.into_iter().enumerate() {
        assert_eq!(count, if n == 5 { 0 } else { EVENTS as usize }, "run {n}");
    }
    let replies = journal.load(&runs[5]).await.expect("a read").expect("the run exists").replies;
    assert_eq!(replies, vec![ReplyRow { ordinal: 1, reply: "{}".to_owned() }], "run 5 as it was");
}
