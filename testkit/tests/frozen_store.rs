//! A journaled run ends on time when its store stops answering (SPEC §24), with real processes:
//! a `freeze-worker` runs the journaled refund under a deadline of 3 s (or a caller's
//! cancellation), and at a chosen point this test freezes its store (PostgreSQL's server
//! processes SIGSTOPped; a SQLite file's write lock held by this process, another process than
//! the worker's) until the attempt returns.
//!
//! At every point (before the attempt takes the run, during op 2's `started` commit, while op
//! 2's body runs and its result's commit follows, while lease renewals hang beside a body that
//! outlives the deadline), on SQLite (FULL and NORMAL) and PostgreSQL:
//!
//! - the attempt returns within the deadline (or the cancellation) plus less than one second,
//!   the bound SPEC §24 sets (the measured overrun, about `STORE_GRACE`, is printed);
//! - it says its end is unconfirmed: `DeadlineExceeded` with `EndRecord::Unconfirmed`, or
//!   `RunError::CancelledUnrecorded`;
//! - once the store answers again, a later attempt finishes the run (waiting out the frozen
//!   attempt's lease, reconciling the refund by the effects file when it is ambiguous), and the
//!   refund's body ran exactly once, counted outside the processes.
//!
//! A run drawing from a shared pool ends on time too when the pool's store freezes (SQLite's
//! write lock held by another connection; the PostgreSQL server SIGSTOPped): during its
//! reservation (nothing is sent to the model) and during its settlement (the call was billed;
//! once the store answers again and the hold's lease expires, the pool is charged at least what
//! the model billed, never less).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

use loopbound::pool::{DynPoolStore, PoolBudget};
use loopbound::{EndRecord, Limits, Message, Runner, Status, ToolSet};
use loopbound_postgres::{Config, PostgresPools};
use loopbound_sqlite::{SqlitePools, Synchronous};
use loopbound_testkit::pool::{Billing, CALL_TOKENS, draw, prompt};
use loopbound_testkit::postgres::{Cluster, Durability};
use loopbound_testkit::{backend, scratch};
use tokio::time::Instant;

/// The points at which the store freezes, and each attempt's lease in milliseconds: longer than
/// the deadline where renewals must hang beside the body until the deadline ends it.
const POINTS: [(&str, u64); 4] =
    [("before-acquire", 2_000), ("during-commit", 2_000), ("during-body", 2_000), ("during-renewal", 6_000)];

/// The most an attempt may return after its deadline or its cancellation (SPEC §24: 1 s).
const BOUND_MS: i64 = 1_000;

/// How long the test waits for a worker's line before it calls the worker stuck.
const STUCK: Duration = Duration::from_secs(60);

/// What stops answering, and how.
enum Store<'a> {
    /// A SQLite file whose write lock this process takes.
    Sqlite { path: &'a Path },
    /// A PostgreSQL cluster whose server processes are stopped.
    Postgres(&'a Cluster),
}

/// What holds the store frozen until dropped.
enum Frozen<'a> {
    Sqlite(rusqlite::Connection),
    Postgres(&'a Cluster),
}

impl Store<'_> {
    fn freeze(&self) -> Frozen<'_> {
        match self {
            Store::Sqlite { path } => {
                let connection = rusqlite::Connection::open(path).expect("the journal's file opens");
                connection.execute_batch("BEGIN IMMEDIATE").expect("this process takes the write lock");
                Frozen::Sqlite(connection)
            }
            Store::Postgres(cluster) => {
                cluster.freeze();
                Frozen::Postgres(cluster)
            }
        }
    }
}

/// A run's deadline in the pool scenarios.
const POOL_DEADLINE: Duration = Duration::from_secs(2);
/// The pool holds' lease in the pool scenarios.
const HOLD_LEASE: Duration = Duration::from_millis(500);

/// One run drawing from `pool` in `pools`, its store frozen before the run (during its
/// reservation) or 200 ms into its model call of 500 ms (during its settlement); checks that
/// the run ends within a second of its deadline and what the pool was charged.
async fn pool_scenario(
    store: &Store<'_>,
    pools: Arc<dyn DynPoolStore>,
    pool: &str,
    during_settlement: bool,
) -> i64 {
    let scenario = if during_settlement { "settlement" } else { "reservation" };
    pools.define(pool, PoolBudget::default().with_tokens(1_000_000)).await.expect("the pool is defined");
    let model = Billing::new(500, 500, 7);
    let draw = draw(Arc::clone(&pools), &[pool], HOLD_LEASE, "frozen-store");
    let scope = draw
        .builder()
        .limits(Limits::default().with_deadline(POOL_DEADLINE))
        .build()
        .expect("a scope drawing from a pool");
    let runtime = Runner::new(&ToolSet::default(), &model);
    let started = Instant::now();
    let mut conversation = vec![Message::user(prompt())];
    let (outcome, frozen) = if during_settlement {
        let freezing = async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            store.freeze()
        };
        tokio::join!(runtime.run(&scope, &mut conversation, |_| true), freezing)
    } else {
        let frozen = store.freeze();
        (runtime.run(&scope, &mut conversation, |_| true).await, frozen)
    };
    let returned = Instant::now();
    drop(frozen);
    let outcome = outcome.unwrap_or_else(|error| panic!("{scenario}: {error}"));
    assert_eq!(outcome.status(), Status::DeadlineExceeded, "{scenario}");
    assert_eq!(outcome.end_record(), EndRecord::NotJournaled, "{scenario}");
    let overrun =
        i64::try_from(returned.duration_since(started + POOL_DEADLINE).as_millis()).unwrap_or(i64::MAX);
    assert!(
        returned >= started + POOL_DEADLINE && overrun < BOUND_MS,
        "{scenario}: {overrun} ms past the deadline"
    );
    if during_settlement {
        assert_eq!(
            (model.calls(), model.billed()),
            (1, CALL_TOKENS),
            "{scenario}: the call was answered and billed"
        );
    } else {
        assert_eq!(model.calls(), 0, "{scenario}: nothing was sent without a reservation");
    }
    // Once the hold's lease expires, the store charges it whole at its next write.
    tokio::time::sleep(HOLD_LEASE + Duration::from_millis(100)).await;
    pools.define(pool, PoolBudget::default().with_tokens(1_000_000)).await.expect("the store answers again");
    let state = pools.state(pool).await.expect("the pool's state");
    let charged = state.settled.tokens + state.reserved.tokens;
    assert!(
        charged >= model.billed(),
        "{scenario}: the pool charged {charged}, the model billed {}",
        model.billed()
    );
    overrun
}

/// Both pool scenarios on `pools`.
fn pool_scenarios(
    store: &Store<'_>,
    pools: &Arc<dyn DynPoolStore>,
    runtime: &tokio::runtime::Runtime,
) -> Vec<i64> {
    [false, true]
        .into_iter()
        .enumerate()
        .map(|(n, settlement)| {
            let pool = format!("tenant:frozen-{n}");
            runtime.block_on(pool_scenario(store, Arc::clone(pools), &pool, settlement))
        })
        .collect()
}

fn tokio_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime")
}

impl Drop for Frozen<'_> {
    fn drop(&mut self) {
        match self {
            Frozen::Sqlite(connection) => {
                let _ = connection.execute_batch("ROLLBACK");
            }
            Frozen::Postgres(cluster) => cluster.thaw(),
        }
    }
}

/// A worker's standard output, a line at a time, read on a thread of its own.
fn lines(child: &mut Child) -> Receiver<String> {
    let stdout = child.stdout.take().expect("piped stdout");
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if send.send(line).is_err() {
                break;
            }
        }
    });
    receive
}

/// The worker's next line, or the test fails (killing the worker) when none comes.
fn next(child: &mut Child, lines: &Receiver<String>, waiting_for: &str) -> String {
    match lines.recv_timeout(STUCK) {
        Ok(line) => line,
        Err(_) => {
            let _ = child.kill();
            panic!("the worker printed no {waiting_for} within {STUCK:?}");
        }
    }
}

fn worker(place: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_freeze-worker"));
    command.env("FREEZE_WORKER_PLACE", place);
    command
}

/// One frozen attempt at `point`, ended by the deadline or by `cancel`; returns its overrun.
fn frozen_attempt(store: &Store<'_>, place: &str, dir: &Path, point: &str, lease: u64, cancel: bool) -> i64 {
    let ending = if cancel { "cancel" } else { "deadline" };
    let mut child = worker(place)
        .args(["attempt", &dir.display().to_string(), point, ending, &lease.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the worker starts");
    let lines = lines(&mut child);
    let mut stdin: ChildStdin = child.stdin.take().expect("piped stdin");
    assert_eq!(next(&mut child, &lines, "point"), format!("at {point}"));
    let frozen = store.freeze();
    writeln!(stdin, "go").expect("the worker reads its go");
    let line = next(&mut child, &lines, "outcome");
    drop(frozen);
    let status = child.wait().expect("the worker is reaped");
    assert!(status.success(), "{point}/{ending}: {line}");
    let expected =
        if cancel { "outcome cancelled Unconfirmed" } else { "outcome DeadlineExceeded Unconfirmed" };
    let (said, overrun) =
        line.split_once(" overrun_ms ").unwrap_or_else(|| panic!("{point}/{ending}: {line}"));
    assert_eq!(said, expected, "{point}/{ending}");
    let overrun: i64 = overrun.parse().expect("a whole number of milliseconds");
    assert!((0..BOUND_MS).contains(&overrun), "{point}/{ending}: returned {overrun} ms past its bound");
    overrun
}

/// Finishes the run with the store answering, and checks the refund's body ran exactly once.
fn finished(place: &str, dir: &Path, scenario: &str) {
    let output =
        worker(place).args(["finish", &dir.display().to_string()]).output().expect("the worker runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(stdout.lines().last(), Some("finished Completed"), "{scenario}: {stdout}");
    let effects = std::fs::read_to_string(dir.join("effects")).unwrap_or_default();
    assert_eq!(
        effects.lines().collect::<Vec<_>>(),
        ["refund frozen-run/op/2"],
        "{scenario}: the refund ran once"
    );
}

/// Every point, ended by the deadline and by the caller, on one SQLite durability.
fn sqlite(synchronous: Synchronous, label: &str) {
    let mut overruns = Vec::new();
    for (point, lease) in POINTS {
        for cancel in [false, true] {
            let dir = scratch::dir(&format!("frozen-{label}"));
            let path = dir.join("runs.db");
            // The file and its schema exist before the lock is taken.
            drop(loopbound_sqlite::SqliteJournal::open_with(&path, synchronous).expect("the journal opens"));
            let place = backend::sqlite_place(&path, synchronous);
            let store = Store::Sqlite { path: &path };
            overruns.push(frozen_attempt(&store, &place, &dir, point, lease, cancel));
            finished(&place, &dir, &format!("{label} {point} cancel={cancel}"));
        }
    }
    println!("SQLite {label}: overrun past the bound, ms: {overruns:?}");
}

#[test]
fn a_run_whose_sqlite_pool_store_stops_answering_ends_on_time_and_the_pool_is_charged_in_full() {
    let dir = scratch::dir("frozen-pools");
    let path = dir.join("pools.db");
    let pools: Arc<dyn DynPoolStore> = Arc::new(SqlitePools::open(&path).expect("the pools' file opens"));
    let overruns = pool_scenarios(&Store::Sqlite { path: &path }, &pools, &tokio_runtime());
    println!("SQLite pools (reservation, settlement): overrun past the deadline, ms: {overruns:?}");
}

#[test]
fn a_sqlite_full_journal_whose_write_lock_another_process_holds_ends_its_attempt_on_time() {
    sqlite(Synchronous::Full, "full");
}

#[test]
fn a_sqlite_normal_journal_whose_write_lock_another_process_holds_ends_its_attempt_on_time() {
    sqlite(Synchronous::Normal, "normal");
}

#[test]
fn a_postgres_journal_whose_server_is_frozen_ends_its_attempt_on_time() {
    // A cluster of its own: freezing it stops every connection to it.
    let Some(cluster) = Cluster::start(Durability::Fast) else { return };
    let mut overruns = Vec::new();
    for (point, lease) in POINTS {
        for cancel in [false, true] {
            let database = cluster.create_database("frozen");
            let dir = scratch::dir("frozen-postgres");
            let place = backend::postgres_place(&database.url);
            overruns.push(frozen_attempt(&Store::Postgres(&cluster), &place, &dir, point, lease, cancel));
            finished(&place, &dir, &format!("postgres {point} cancel={cancel}"));
        }
    }
    println!("PostgreSQL: overrun past the bound, ms: {overruns:?}");
    let runtime = tokio_runtime();
    let database = cluster.create_database("frozen_pools");
    let pools: Arc<dyn DynPoolStore> = runtime.block_on(async {
        let store = loopbound_postgres::Store::connect(&Config::new(&database.url).expect("a URL"))
            .await
            .expect("the database answers");
        Arc::new(PostgresPools::connect(&store).await.expect("the pools' tables are created"))
    });
    let overruns = pool_scenarios(&Store::Postgres(&cluster), &pools, &runtime);
    println!("PostgreSQL pools (reservation, settlement): overrun past the deadline, ms: {overruns:?}");
}
