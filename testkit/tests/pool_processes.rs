//! Shared pools raced by real worker processes (`pool-worker`): 4 processes on one SQLite file,
//! 8 on one PostgreSQL database, and 8 on PostgreSQL with some killed by SIGKILL mid-run. Every
//! run asks for more than the pool has left in the end (the budget covers a fraction of the
//! demand); the pool's settled spend must stay within its budget, account for every billed call,
//! and use nearly all of it.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use loopbound::pool::{Amount, PoolBudget, PoolStore};
use loopbound_postgres::{Config, PostgresPools, Store};
use loopbound_sqlite::SqlitePools;
use loopbound_testkit::pool::CALL_TOKENS;
use loopbound_testkit::postgres::{Cluster, Durability};
use loopbound_testkit::scratch;

/// What one worker told its parent: the tokens it billed, and its last line.
struct Report {
    billed: u64,
    last: Option<String>,
    status: ExitStatus,
}

/// A running worker: its process and the thread reading its output.
struct Worker {
    child: Child,
    reader: JoinHandle<(u64, Option<String>)>,
}

impl Worker {
    fn spawn(
        store: &str,
        pool: &str,
        tasks: u64,
        runs: u64,
        seed: u64,
        lease_ms: u64,
        pause: (u64, u64),
    ) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_pool-worker"))
            .args([store, pool])
            .args([tasks, runs, seed, lease_ms, pause.0, pause.1].map(|n| n.to_string()))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the worker starts");
        let stdout = child.stdout.take().expect("its output is piped");
        let reader = std::thread::spawn(move || {
            let (mut billed, mut last) = (0, None);
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                match line.strip_prefix("billed ") {
                    Some(tokens) => billed += tokens.parse::<u64>().expect("a number of tokens"),
                    None => last = Some(line),
                }
            }
            (billed, last)
        });
        Self { child, reader }
    }

    fn kill(&mut self) {
        self.child.kill().expect("SIGKILL is delivered");
    }

    fn join(mut self) -> Report {
        let status = self.child.wait().expect("the worker is reaped");
        let (billed, last) = self.reader.join().expect("the reader ends");
        Report { billed, last, status }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime")
}

/// Checks a race that ended with every worker alive: every run completed or was refused, the
/// pool settled exactly what was billed, within the budget, at least 95 % of it.
fn check_clean_race(reports: &[Report], settled: Amount, reserved: Amount, budget: u64, runs: u64) {
    let (mut completed, mut refused) = (0, 0);
    for report in reports {
        assert!(report.status.success(), "a worker failed: {:?} {:?}", report.status, report.last);
        let last = report.last.as_deref().unwrap_or_default();
        let mut words = last.strip_prefix("done ").expect("a done line").split(' ');
        completed += words.next().and_then(|n| n.parse::<u64>().ok()).expect("completed runs");
        refused += words.next().and_then(|n| n.parse::<u64>().ok()).expect("refused runs");
    }
    let billed: u64 = reports.iter().map(|report| report.billed).sum();
    eprintln!(
        "race: {completed} runs completed, {refused} refused; billed {billed} of {budget} tokens ({:.2} %)",
        billed as f64 * 100.0 / budget as f64
    );
    assert_eq!(completed + refused, runs);
    assert_eq!(reserved, Amount::ZERO, "nothing left in flight");
    assert_eq!(settled.tokens, billed, "the pool settled exactly what was billed");
    assert_eq!(settled.calls, completed);
    // The last calls may be granted less than the whole output cap: never more.
    assert!(billed <= completed * CALL_TOKENS);
    assert!(settled.tokens <= budget, "{} > {budget}", settled.tokens);
    assert!(settled.tokens * 100 >= budget * 95, "only {} of {budget} used", settled.tokens);
}

#[test]
fn four_processes_racing_one_sqlite_pool_settle_within_it_and_use_at_least_95_percent() {
    let dir = scratch::dir("pool-sqlite-race");
    let file = dir.join("pools.db");
    let pool = "tenant:race";
    let (processes, tasks, runs) = (4, 4, 60);
    let budget = processes * tasks * runs * CALL_TOKENS * 6 / 10;
    let store = SqlitePools::open(&file).unwrap();
    let runtime = runtime();
    runtime.block_on(store.define(pool, PoolBudget::default().with_tokens(budget))).unwrap();
    let spec = format!("sqlite:{}", file.display());
    let workers: Vec<Worker> = (0..processes)
        .map(|seed| Worker::spawn(&spec, pool, tasks, runs, seed + 1, 30_000, (0, 3)))
        .collect();
    let reports: Vec<Report> = workers.into_iter().map(Worker::join).collect();
    let state = runtime.block_on(store.state(pool)).unwrap();
    check_clean_race(&reports, state.settled, state.reserved, budget, processes * tasks * runs);
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A fresh database on the shared cluster and the pools in it, or `None` (after `SKIPPED`).
fn postgres(hint: &str) -> Option<(String, Arc<PostgresPools>, tokio::runtime::Runtime)> {
    let cluster = Cluster::shared(Durability::Fast)?;
    let database = cluster.create_database(hint);
    let runtime = runtime();
    let pools = runtime.block_on(async {
        let store = Store::connect(&Config::new(&database.url).unwrap()).await.expect("the database answers");
        PostgresPools::connect(&store).await.expect("the pools' tables are created")
    });
    Some((database.url, Arc::new(pools), runtime))
}

#[test]
fn eight_processes_racing_one_postgres_pool_settle_within_it_and_use_at_least_95_percent() {
    let Some((url, store, runtime)) = postgres("pool_race") else { return };
    let pool = "tenant:race";
    let (processes, tasks, runs) = (8, 4, 250);
    let budget = processes * tasks * runs * CALL_TOKENS * 6 / 10;
    runtime.block_on(store.define(pool, PoolBudget::default().with_tokens(budget))).unwrap();
    let spec = format!("postgres:{url}");
    let began = Instant::now();
    let workers: Vec<Worker> = (0..processes)
        .map(|seed| Worker::spawn(&spec, pool, tasks, runs, seed + 1, 30_000, (0, 3)))
        .collect();
    let reports: Vec<Report> = workers.into_iter().map(Worker::join).collect();
    eprintln!("8 PostgreSQL workers × {} runs: {} ms", tasks * runs, began.elapsed().as_millis());
    let state = runtime.block_on(store.state(pool)).unwrap();
    check_clean_race(&reports, state.settled, state.reserved, budget, processes * tasks * runs);
}

#[test]
fn killed_postgres_workers_holds_are_charged_whole_after_their_lease_and_the_pool_still_holds() {
    let Some((url, store, runtime)) = postgres("pool_kills") else { return };
    let pool = "tenant:kills";
    let (processes, tasks, runs, lease) = (8, 4, 300, Duration::from_millis(1_500));
    // Less than half the demand: the survivors alone exhaust it.
    let budget = processes * tasks * runs * CALL_TOKENS * 45 / 100;
    runtime.block_on(store.define(pool, PoolBudget::default().with_tokens(budget))).unwrap();
    let spec = format!("postgres:{url}");
    let lease_ms = u64::try_from(lease.as_millis()).unwrap();
    let mut workers: Vec<Worker> = (0..processes)
        .map(|seed| Worker::spawn(&spec, pool, tasks, runs, seed + 11, lease_ms, (20, 60)))
        .collect();
    // Three workers die mid-run, calls in flight, at fixed moments before the pool runs out.
    let killed = [1_usize, 4, 6];
    let started = Instant::now();
    for (at, &index) in [800_u64, 1_500, 2_200].iter().zip(&killed) {
        std::thread::sleep(Duration::from_millis(*at).saturating_sub(started.elapsed()));
        workers[index].kill();
    }
    let reports: Vec<Report> = workers.into_iter().map(Worker::join).collect();
    let billed: u64 = reports.iter().map(|report| report.billed).sum();
    for (index, report) in reports.iter().enumerate() {
        if killed.contains(&index) {
            assert!(!report.status.success(), "worker {index} was killed");
        } else {
            assert!(report.status.success(), "worker {index}: {:?} {:?}", report.status, report.last);
        }
    }
    // Before the dead holds' lease ran out they still count as reserved; after it, whole.
    std::thread::sleep(lease + Duration::from_millis(500));
    let state = runtime.block_on(store.state(pool)).unwrap();
    eprintln!(
        "kills: billed {billed}, settled {} of {budget} tokens ({:.2} %), dead holds charged {} beyond what they billed",
        state.settled.tokens,
        state.settled.tokens as f64 * 100.0 / budget as f64,
        state.settled.tokens - billed.min(state.settled.tokens)
    );
    assert_eq!((state.reserved, state.holds), (Amount::ZERO, 0), "every dead hold expired");
    assert!(state.settled.tokens <= budget, "{} > {budget}", state.settled.tokens);
    assert!(state.settled.tokens > billed, "the dead holds were charged whole, beyond what they billed");
    assert!(state.settled.tokens * 100 >= budget * 95, "only {} of {budget} used", state.settled.tokens);
}
