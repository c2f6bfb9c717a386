//! The fence of a PostgreSQL group commit by the run row's place (SPEC §16, §24): a round's
//! write statement reaches each batch's row by its `ctid`, read by run id in the same statement,
//! and relies on the round's lock statement (`FOR NO KEY UPDATE`, sent before it in the same
//! transaction) to keep the row where it is until the round ends.
//!
//! Shown with real sessions, no hook in the journal: a round is paused between its two
//! statements by another session holding a table the write inserts into (`SHARE` mode lets the
//! lock statement through and stops the write before it runs), and a takeover is a session's
//! uncommitted update of the run's row, the statement a grant makes.
//!
//! - While the round is paused, another session's update of the run's row (a host's cancel
//!   request: a column outside the key, whose new version would be a new row) waits for the
//!   round's transaction; the row stays at its place; once released, the round commits its batch
//!   whole under the same epoch, and the update applies on top of the round's committed row.
//! - A round whose lock waits for a takeover of one of its runs follows the row to its new place
//!   and refuses that run's batch as [`LeaseLost`](JournalError::LeaseLost), writing nothing of
//!   it (the row stays the takeover's, where the takeover put it), while the other batch of the
//!   round commits.

use std::time::Duration;

use loopbound::journal::backend::{Batch, Fence};
use loopbound::journal::{Journal, JournalError, RunId};
use loopbound_postgres::tokio_postgres::{self, NoTls};
use loopbound_postgres::{Config, GROUP_WRITERS, PostgresJournal, WorkerId};
use loopbound_testkit::batches;
use loopbound_testkit::conformance::fresh_row;
use loopbound_testkit::postgres::{Cluster, Durability};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The events of one batch.
const EVENTS: u32 = 5;

/// How long an update of a locked row must stay blocked to count as blocked.
const BLOCKED: Duration = Duration::from_millis(300);

/// The journal's worker.
const WORKER: &str = "fence-test";

/// How a round's write statement (`columns::WRITE`) starts, as `pg_stat_activity` shows it.
const WRITE_START: &str = "WITH batch AS (SELECT x.*,";

/// How a round's lock statement (`many::LOCK`) starts.
const LOCK_START: &str = "SELECT run_id FROM loopbound_runs WHERE run_id = ANY(";

/// A journal on a fresh database of the shared cluster, the cluster, and the database's name
/// and URL; `None` where PostgreSQL is absent (after `SKIPPED`).
async fn journal(hint: &str) -> Option<(PostgresJournal, &'static Cluster, String, String)> {
    let cluster = Cluster::shared(Durability::Fast)?;
    let database = cluster.create_database(hint);
    let journal = PostgresJournal::connect(&Config::new(&database.url).expect("the cluster's URL"))
        .await
        .expect("the fresh database accepts the journal")
        .with_worker(WorkerId::new(WORKER).expect("a worker id"));
    Some((journal, cluster, database.name, database.url))
}

/// A session of its own on `url`, and its server process's id.
async fn session(url: &str) -> (tokio_postgres::Client, i32) {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await.expect("a session");
    tokio::spawn(connection);
    let pid = client.query_one("SELECT pg_backend_pid()", &[]).await.expect("its pid").get(0);
    (client, pid)
}

fn run(name: &str) -> RunId {
    RunId::new(name).expect("a run id")
}

/// A batch of `EVENTS` events (counts 1 to `EVENTS`) and the ledger `ledger of <name>`.
fn batch(name: &str) -> Batch {
    batches::model_calls(EVENTS, format!("ledger of {name}"))
}

/// `run`'s events as `seq:count` pairs in order, its ledger, epoch, holder and place, as
/// `psql` prints them (`|` between columns).
fn stored(cluster: &Cluster, database: &str, run: &str) -> String {
    cluster.execute(
        database,
        &format!(
            "SELECT coalesce((SELECT string_agg(seq || ':' || count, ',' ORDER BY seq) \
                                FROM loopbound_events WHERE run_id = '{run}'), 'none'), \
                    ledger, epoch, lease_holder, ctid \
               FROM loopbound_runs WHERE run_id = '{run}'"
        ),
    )
}

/// The place (`ctid`) of `run`'s row now.
async fn place(client: &tokio_postgres::Client, run: &str) -> String {
    client
        .query_one("SELECT ctid::text FROM loopbound_runs WHERE run_id = $1", &[&run])
        .await
        .expect("the run's row")
        .get(0)
}

/// The sessions `pid` waits for, sorted (none when it does not wait).
async fn blockers(client: &tokio_postgres::Client, pid: i32) -> Vec<i32> {
    let row = client
        .query_one("SELECT array(SELECT unnest(pg_blocking_pids($1)) ORDER BY 1)", &[&pid])
        .await
        .expect("pg_blocking_pids answers");
    row.get(0)
}

/// The client sessions of this database that `blocker` holds up, sorted, each with whether it
/// is in a transaction that has written or locked rows (an id assigned) and its statement's text.
async fn held_up_by(client: &tokio_postgres::Client, blocker: i32) -> Vec<(i32, bool, String)> {
    let rows = client
        .query(
            "SELECT pid, backend_xid IS NOT NULL, query FROM pg_stat_activity \
              WHERE datname = current_database() AND backend_type = 'client backend' \
                AND $1 = ANY(pg_blocking_pids(pid)) ORDER BY pid",
            &[&blocker],
        )
        .await
        .expect("pg_stat_activity answers");
    rows.iter().map(|row| (row.get(0), row.get(1), row.get(2))).collect()
}

/// A task committing `id`'s batch under epoch 1, once its commit is queued (its first poll
/// queues it while the group writers are busy).
async fn queued(journal: &PostgresJournal, id: &RunId) -> JoinHandle<Result<(), JournalError>> {
    let (polled, first) = oneshot::channel();
    let (journal, id) = (journal.clone(), id.clone());
    let task = tokio::spawn(async move {
        let mut commit = std::pin::pin!(journal.commit(&id, Fence::Epoch(1), batch(id.as_str())));
        let mut polled = Some(polled);
        std::future::poll_fn(|cx| {
            let poll = commit.as_mut().poll(cx);
            if let Some(polled) = polled.take() {
                let _ = polled.send(());
            }
            poll
        })
        .await
    });
    first.await.expect("the commit was polled");
    task
}

/// Polls `check` every 5 ms until it returns `Some`, 30 s at most.
async fn until<T, F: Future<Output = Option<T>>>(mut check: impl FnMut() -> F) -> T {
    let waited = async {
        loop {
            if let Some(found) = check().await {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), waited).await.expect("met within 30 s")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_a_round_locked_cannot_move_before_its_write_and_an_update_waits_for_the_round() {
    let Some((journal, cluster, database, url)) = journal("fence_place").await else { return };
    let (warm, fenced) = (run("fence-warm"), run("fence-paused"));
    for id in [&warm, &fenced] {
        journal.acquire(id, fresh_row()).await.expect("a new run");
    }
    // A first group alone: the group writers' one connection prepares the round's statements,
    // so that the paused round's only wait is its write's lock on the table (preparing the
    // write would wait for that lock too, before the round begins).
    journal.commit(&warm, Fence::Epoch(1), batch("warm")).await.expect("the first group");
    let (groups, writes) = (journal.groups(), journal.grouped_writes());
    let (watch, _) = session(&url).await;
    let (pause, pause_pid) = session(&url).await;
    pause.batch_execute("BEGIN; LOCK TABLE loopbound_replies IN SHARE MODE").await.expect("the table held");
    let before = place(&watch, fenced.as_str()).await;

    let commit = tokio::spawn({
        let (journal, fenced) = (journal.clone(), fenced.clone());
        async move { journal.commit(&fenced, Fence::Epoch(1), batch("paused")).await }
    });
    // The round waits for the table in its write, its lock statement done: its transaction
    // has an id (locking a row assigns one), and it is at the write statement.
    let round = until(|| async {
        match held_up_by(&watch, pause_pid).await.as_slice() {
            [(pid, true, statement)] if statement.starts_with(WRITE_START) => Some(*pid),
            _ => None,
        }
    })
    .await;
    let waits: Vec<(String, bool)> = watch
        .query(
            "SELECT mode, granted FROM pg_locks WHERE pid = $1 AND relation = 'loopbound_replies'::regclass",
            &[&round],
        )
        .await
        .expect("pg_locks answers")
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    assert_eq!(waits, [("RowExclusiveLock".to_owned(), false)], "the write waits to insert");

    // A host's cancel request: an update of a column outside the key, which would write the
    // row's new version at another place.
    let (host, host_pid) = session(&url).await;
    let update = tokio::spawn({
        let fenced = fenced.clone();
        async move {
            let row = host
                .query_one(
                    "UPDATE loopbound_runs SET cancel_by = 'host' WHERE run_id = $1 \
                     RETURNING ledger, epoch, lease_holder",
                    &[&fenced.as_str()],
                )
                .await
                .expect("the update");
            (row.get::<_, String>(0), row.get::<_, i64>(1), row.get::<_, Option<String>>(2))
        }
    });
    // Until it waits, or has ended (which it must not).
    let blocked_by = until(|| async {
        let blocked_by = blockers(&watch, host_pid).await;
        (!blocked_by.is_empty() || update.is_finished()).then_some(blocked_by)
    })
    .await;
    assert_eq!(blocked_by, [round], "the update waits for the round's transaction, only");
    tokio::time::sleep(BLOCKED).await;
    assert!(!update.is_finished(), "the update is blocked while the round is paused");
    assert!(!commit.is_finished(), "the commit is not told before its round commits");
    assert_eq!(blockers(&watch, host_pid).await, [round], "still the round's");
    assert_eq!(blockers(&watch, round).await, [pause_pid], "the round still paused");
    assert_eq!(place(&watch, fenced.as_str()).await, before, "the locked row has not moved");

    pause.batch_execute("ROLLBACK").await.expect("the table released");
    assert_eq!(commit.await.expect("no panic"), Ok(()), "the paused round commits");
    // The update ran on the row the round committed: it could not before the round ended.
    let updated = update.await.expect("no panic");
    assert_eq!(
        updated,
        ("ledger of paused".to_owned(), 1, Some(WORKER.to_owned())),
        "updated after the round"
    );
    assert_eq!(journal.groups() - groups, 1, "one group");
    assert_eq!(journal.grouped_writes() - writes, 1, "its one write");
    let now = place(&watch, fenced.as_str()).await;
    assert_ne!(now, before, "the round's and the update's versions are new rows");
    assert_eq!(
        stored(cluster, &database, fenced.as_str()),
        format!("1:1,2:2,3:3,4:4,5:5|ledger of paused|1|{WORKER}|{now}"),
        "the batch whole, under the same epoch and holder"
    );
    let lease = journal.store().lease_state(fenced.as_str()).await.expect("a read").expect("leased");
    assert_eq!(
        (lease.epoch, lease.attempts, lease.live),
        (1, 1, true),
        "the fence's epoch unchanged, renewed"
    );
    assert_eq!(journal.cancel_requested(&fenced).await, Ok(Some("host".to_owned())), "the update kept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_whose_lock_waits_for_a_takeover_follows_the_row_and_refuses_that_batch_alone() {
    let Some((journal, cluster, database, url)) = journal("fence_takeover").await else { return };
    // Runs ordered by id as the round locks them: the kept run first, then the taken one.
    let (kept, taken) = (run("fence-a-kept"), run("fence-b-taken"));
    let blockers_runs: Vec<RunId> = (0..GROUP_WRITERS).map(|n| run(&format!("fence-busy-{n}"))).collect();
    for id in blockers_runs.iter().chain([&kept, &taken]) {
        journal.acquire(id, fresh_row()).await.expect("a new run");
    }
    let (watch, _) = session(&url).await;
    // Every group writer busy with a run whose row another session holds, so that the two
    // commits below queue and go in one round.
    let (hold, hold_pid) = session(&url).await;
    hold.batch_execute(
        "BEGIN; SELECT run_id FROM loopbound_runs WHERE run_id LIKE 'fence-busy-%' FOR UPDATE",
    )
    .await
    .expect("the busy runs' rows held");
    let (groups, writes) = (journal.groups(), journal.grouped_writes());
    let mut busy = Vec::new();
    for (n, id) in blockers_runs.iter().enumerate() {
        let (journal, id) = (journal.clone(), id.clone());
        busy.push(tokio::spawn(
            async move { journal.commit(&id, Fence::Epoch(1), batch(id.as_str())).await },
        ));
        until(|| async { (held_up_by(&watch, hold_pid).await.len() == n + 1).then_some(()) }).await;
    }
    let kept_commit = queued(&journal, &kept).await;
    let taken_commit = queued(&journal, &taken).await;
    // Another worker takes the run over (its grant's update, not yet committed): the row's
    // new version is at another place.
    let (taker, taker_pid) = session(&url).await;
    let before = place(&watch, taken.as_str()).await;
    taker
        .batch_execute(&format!(
            "BEGIN; UPDATE loopbound_runs \
                       SET epoch = epoch + 1, attempts = attempts + 1, lease_holder = 'other-worker', \
                           lease_until = now() + interval '1 hour', updated_at = now() \
                     WHERE run_id = '{taken}'"
        ))
        .await
        .expect("the takeover, uncommitted");
    assert!(!kept_commit.is_finished() && !taken_commit.is_finished(), "both queued behind the busy writers");
    hold.batch_execute("ROLLBACK").await.expect("the busy runs released");
    for commit in busy {
        assert_eq!(commit.await.expect("no panic"), Ok(()), "a busy run's commit");
    }
    // The round of the two waits for the takeover in its lock statement (the kept run locked
    // first, the taken one awaited), not later in its write.
    let (round, statement) = until(|| async {
        match held_up_by(&watch, taker_pid).await.as_slice() {
            [(pid, true, statement)] => Some((*pid, statement.clone())),
            _ => None,
        }
    })
    .await;
    let start: String = statement.chars().take(LOCK_START.len()).collect();
    assert_eq!(start, LOCK_START, "the round waits in its lock statement");
    assert_eq!(blockers(&watch, round).await, [taker_pid], "the round waits for the takeover only");
    tokio::time::sleep(BLOCKED).await;
    assert!(!kept_commit.is_finished() && !taken_commit.is_finished(), "neither told while the round waits");
    taker.batch_execute("COMMIT").await.expect("the takeover committed");
    let moved = place(&watch, taken.as_str()).await;
    assert_ne!(moved, before, "the takeover wrote the row at another place");

    assert_eq!(taken_commit.await.expect("no panic"), Err(JournalError::LeaseLost), "the taken run's batch");
    assert_eq!(kept_commit.await.expect("no panic"), Ok(()), "the kept run's batch");
    assert_eq!(journal.groups() - groups, GROUP_WRITERS as u64 + 1, "the busy runs' groups, then the round");
    assert_eq!(journal.grouped_writes() - writes, GROUP_WRITERS as u64 + 1, "all but the refused batch");
    let fresh_ledger = fresh_row().ledger;
    assert_eq!(
        stored(cluster, &database, taken.as_str()),
        format!("none|{fresh_ledger}|2|other-worker|{moved}"),
        "nothing of the refused batch: the row is the takeover's, where the takeover put it"
    );
    let kept_place = place(&watch, kept.as_str()).await;
    assert_eq!(
        stored(cluster, &database, kept.as_str()),
        format!("1:1,2:2,3:3,4:4,5:5|ledger of fence-a-kept|1|{WORKER}|{kept_place}"),
        "the kept run's batch whole"
    );
}
