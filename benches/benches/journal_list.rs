//! Listing runs by state and by label on a journal of 10,000 runs: how long one page takes,
//! on one SQLite file (`synchronous = FULL`) and on one PostgreSQL server, in one process.
//!
//! The runs are `run-00000` to `run-09999`, a quarter in each state (open, awaiting approval,
//! ambiguous, finished `Completed`), each labelled `tenant` = `t-<n mod 10>`, none running.
//! Each listing walks every page of 100 runs of one filter (by state; by label and state) three
//! times; a page's time is one call of `journal::list`, the labels of its runs included.
//! Asserted: every listing returns exactly its runs, once each, in id order. Printed: pages
//! timed, p50, p99 and the slowest page, per backend.
//!
//! Run with `cargo bench -p loopbound-benches --bench journal_list` (10,000 runs);
//! `cargo test --benches` runs it as a smoke test with 400. The runs are written through the
//! journal's own `acquire` and `commit` (on SQLite with `synchronous = NORMAL`, which changes how
//! writes reach the disk, not what a read does). Without PostgreSQL the PostgreSQL half prints
//! `SKIPPED` (a failure under `LOOPBOUND_REQUIRE_SERVERS=1`).

use std::time::{Duration, Instant};

use loopbound::Status;
use loopbound::journal::backend::{Batch, Entry, Fence, LabelRow, RunRow};
use loopbound::journal::{self, Journal, RunId, RunQuery, RunState, StateFilter};
use loopbound_benches::journal::percentile;
use loopbound_postgres::{Config, PostgresJournal};
use loopbound_sqlite::{SqliteJournal, Synchronous};
use loopbound_testkit::conformance;
use loopbound_testkit::postgres::{Cluster, Durability};
use loopbound_testkit::scratch;

const PAGE: u32 = 100;
const PASSES: usize = 3;

fn state_of(n: usize) -> RunState {
    match n % 4 {
        0 => RunState::Open,
        1 => RunState::AwaitingApproval(1),
        2 => RunState::Ambiguous(1),
        _ => RunState::Finished(Status::Completed),
    }
}

/// Writes `runs` runs into `journal`.
async fn seed(journal: &impl Journal, runs: usize) {
    for n in 0..runs {
        let run = RunId::new(format!("run-{n:05}")).expect("a valid id");
        let fresh = RunRow {
            labels: vec![LabelRow { key: "tenant".to_owned(), value: format!("t-{}", n % 10) }],
            ..conformance::fresh_row()
        };
        journal.acquire(&run, fresh).await.expect("a new run");
        let end = Batch { entries: vec![Entry::State(state_of(n)), Entry::Release] };
        journal.commit(&run, Fence::Epoch(1), end).await.expect("its state");
    }
}

/// The filters listed, with the runs each must return.
fn filters(runs: usize) -> Vec<(RunQuery, Vec<usize>)> {
    let by_state = |filter, remainder| {
        (RunQuery::new().state(filter).limit(PAGE), (0..runs).filter(|n| n % 4 == remainder).collect())
    };
    let tenant = RunQuery::new().label("tenant", "t-3").expect("a valid label");
    vec![
        by_state(StateFilter::Open, 0),
        by_state(StateFilter::AwaitingApproval, 1),
        by_state(StateFilter::Ambiguous, 2),
        by_state(StateFilter::Finished(Some(Status::Completed)), 3),
        (tenant.clone().limit(PAGE), (0..runs).filter(|n| n % 10 == 3).collect()),
        (
            tenant.state(StateFilter::AwaitingApproval).limit(PAGE),
            (0..runs).filter(|n| n % 10 == 3 && n % 4 == 1).collect(),
        ),
    ]
}

/// Every page's time, over every filter, `PASSES` times.
async fn pages(journal: &impl Journal, runs: usize) -> Vec<Duration> {
    let mut times = Vec::new();
    for _ in 0..PASSES {
        for (query, expected) in filters(runs) {
            let mut query = query;
            let mut listed = Vec::new();
            loop {
                let started = Instant::now();
                let page = journal::list(journal, &query).await.expect("a page");
                times.push(started.elapsed());
                listed.extend(page.runs().iter().map(|summary| summary.run().as_str().to_owned()));
                let Some(next) = page.next() else { break };
                query = query.after(next.clone());
            }
            let expected: Vec<String> = expected.iter().map(|n| format!("run-{n:05}")).collect();
            assert_eq!(listed, expected, "a listing returns exactly its runs, in id order");
        }
    }
    times.sort();
    times
}

fn row(label: &str, times: &[Duration]) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{label:<28} {:>6} {:>10.3} {:>10.3} {:>10.3}",
        times.len(),
        ms(percentile(times, 500)),
        ms(percentile(times, 990)),
        ms(times[times.len() - 1])
    );
}

fn main() {
    let measuring = std::env::args().any(|a| a == "--bench");
    let runs = if measuring { 10_000 } else { 400 };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");

    let path = scratch::dir("bench-journal-list").join("list.db");
    let seeding = SqliteJournal::open_with(&path, Synchronous::Normal).expect("open");
    runtime.block_on(seed(&seeding, runs));
    drop(seeding);
    let sqlite = SqliteJournal::open(&path).expect("open");
    let sqlite_times = runtime.block_on(pages(&sqlite, runs));

    let postgres_times = Cluster::start(Durability::Durable).map(|cluster| {
        let database = cluster.create_database("list");
        let config = Config::new(&database.url).expect("the cluster's URL");
        let times = runtime.block_on(async {
            let journal = PostgresJournal::connect(&config).await.expect("connect");
            seed(&journal, runs).await;
            pages(&journal, runs).await
        });
        drop(cluster);
        times
    });

    println!("listing {runs} runs, {PAGE} per page: ms per page");
    println!("{:<28} {:>6} {:>10} {:>10} {:>10}", "journal", "pages", "p50", "p99", "max");
    row("SQLite, one file, FULL", &sqlite_times);
    match &postgres_times {
        Some(times) => row("PostgreSQL, one server", times),
        None => println!("{:<28} SKIPPED (no PostgreSQL)", "PostgreSQL, one server"),
    }
}
