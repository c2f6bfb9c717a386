//! Many workers on one journal: 8 workers × 1,000 journaled runs of the refund task (a read,
//! one `effect`, the closing text), against one PostgreSQL server (durable: `fsync` and
//! `synchronous_commit` on, each worker its own connection pool) and, in the same process
//! right after, against one SQLite file (`synchronous = FULL`, the 8 workers sharing it).
//!
//! Workers take run ids from one queue. Asserted, on each backend: every run completed once, in
//! one attempt; every run's persisted budgets are exact (3 model calls, 2 tool calls); every
//! refund's body ran exactly once (counted outside the runs). Printed: runs per second, and the
//! time per effect from the start of its `started` commit to the end of its result commit
//! (p50, p99).
//!
//! Run with `cargo bench -p loopbound-benches --bench journal_load` (1,000 runs per worker);
//! `cargo test --benches` runs it as a smoke test with 10 per worker. Without PostgreSQL the
//! PostgreSQL half prints `SKIPPED` (a failure under `LOOPBOUND_REQUIRE_SERVERS=1`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use loopbound::journal::{self, Journal, RunId};
use loopbound::tool::Policy;
use loopbound::{Runner, Scope, Status};
use loopbound_benches::journal::{TimedJournal, percentile};
use loopbound_postgres::{Config, PostgresJournal, WorkerId};
use loopbound_sqlite::SqliteJournal;
use loopbound_testkit::postgres::{Cluster, Durability};
use loopbound_testkit::refund::{self, EffectSink, MemorySink};
use loopbound_testkit::scratch;

const WORKERS: usize = 8;

/// What one backend's load measured.
struct Figures {
    runs: usize,
    elapsed: Duration,
    effects: Vec<Duration>,
}

/// Runs `WORKERS` workers over `runs` run ids, worker `i` journaling through `journals[i]`.
async fn load<J: Journal + 'static>(journals: Vec<J>, runs: usize, sink: Arc<MemorySink>) -> Figures {
    let next = Arc::new(AtomicUsize::new(0));
    let effects = Arc::new(Mutex::new(Vec::new()));
    let began = Instant::now();
    let tasks: Vec<_> = journals
        .into_iter()
        .map(|inner| {
            let (next, sink) = (Arc::clone(&next), Arc::clone(&sink));
            let journal = TimedJournal::sharing(inner, Arc::clone(&effects));
            tokio::spawn(async move {
                let tools = refund::tools(sink as Arc<dyn EffectSink>, Policy::Allow);
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= runs {
                        break;
                    }
                    let run = RunId::new(format!("load-{n}")).expect("a run id");
                    let scope = Scope::builder().grants(refund::CAPABILITIES).build().expect("valid limits");
                    let runtime = Runner::new(&tools.set, refund::model(refund::short_script(), |_| {}));
                    let outcome = runtime
                        .run_journaled(&journal, &run, &scope, &mut refund::conversation(), |_| true)
                        .await
                        .unwrap_or_else(|error| panic!("run {n}: {error}"));
                    assert_eq!(outcome.status(), Status::Completed, "run {n}");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("a worker finished");
    }
    let elapsed = began.elapsed();
    let effects = effects.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    Figures { runs, elapsed, effects }
}

/// Asserts what every backend must hold after the load.
async fn check(journal: &impl Journal, runs: usize, sink: &MemorySink, figures: &Figures) {
    let applied = sink.applied();
    assert_eq!(applied.len(), runs, "one effect per run, no more");
    let mut keys: Vec<&str> = applied.iter().filter_map(|(_, key)| key.as_deref()).collect();
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), runs, "no refund ran twice");
    assert_eq!(figures.effects.len(), runs, "every effect's two commits were timed");
    for n in 0..runs {
        let run = RunId::new(format!("load-{n}")).expect("a run id");
        let record = journal::inspect(journal, &run).await.expect("the run is in the journal");
        assert_eq!(record.state(), journal::RunState::Finished(Status::Completed), "run {n}");
        assert_eq!(record.attempts(), 1, "run {n} completed in one attempt");
        assert_eq!((record.model_calls(), record.tool_calls()), (3, 2), "run {n}'s budgets");
    }
}

fn row(name: &str, figures: &mut Figures) -> f64 {
    figures.effects.sort_unstable();
    let throughput = figures.runs as f64 / figures.elapsed.as_secs_f64();
    println!(
        "| {name} | {} | {:.1} | {throughput:.0} | {:.2} | {:.2} |",
        figures.runs,
        figures.elapsed.as_secs_f64(),
        percentile(&figures.effects, 500).as_secs_f64() * 1e3,
        percentile(&figures.effects, 990).as_secs_f64() * 1e3,
    );
    throughput
}

fn main() {
    let measuring = std::env::args().any(|a| a == "--bench");
    let per_worker = if measuring { 1000 } else { 10 };
    let runs = WORKERS * per_worker;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");

    let postgres = Cluster::start(Durability::Durable).map(|cluster| {
        let database = cluster.create_database("load");
        let config = Config::new(&database.url).expect("the cluster's URL");
        let sink = Arc::new(MemorySink::default());
        let (figures, checker) = runtime.block_on(async {
            let mut journals = Vec::new();
            for i in 0..WORKERS {
                let worker = WorkerId::new(format!("load-worker-{i}")).expect("a worker id");
                journals.push(PostgresJournal::connect(&config).await.expect("connect").with_worker(worker));
            }
            let checker = journals[0].clone();
            (load(journals, runs, Arc::clone(&sink)).await, checker)
        });
        runtime.block_on(check(&checker, runs, &sink, &figures));
        drop(cluster);
        figures
    });

    let dir = scratch::dir("bench-journal-load");
    let sqlite = SqliteJournal::open(dir.join("load.db")).expect("open");
    let sink = Arc::new(MemorySink::default());
    let journals = vec![sqlite.clone(); WORKERS];
    let mut sqlite_figures = runtime.block_on(load(journals, runs, Arc::clone(&sink)));
    runtime.block_on(check(&sqlite, runs, &sink, &sqlite_figures));

    println!(
        "{WORKERS} workers × {per_worker} journaled runs (a read, one effect, the closing text), \
         every run completed once, budgets exact, no effect twice"
    );
    println!("| journal | runs | seconds | runs/s | effect p50 ms | effect p99 ms |");
    println!("|---|---:|---:|---:|---:|---:|");
    let sqlite_throughput = row("SQLite, one file, FULL", &mut sqlite_figures);
    if let Some(mut figures) = postgres {
        let throughput = row("PostgreSQL, one server, fsync on", &mut figures);
        println!("PostgreSQL ÷ SQLite throughput: ×{:.2}", throughput / sqlite_throughput);
    }
}
