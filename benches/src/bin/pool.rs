//! `pool`: a shared pool's reservation and settlement latency, side by side per store.
//!
//! ```text
//! cargo run --release -p loopbound-benches --bin pool [-- CALLS]
//! ```
//!
//! Times CALLS reservations and their settlements (one call after another, then 8 tasks at
//! once) on each store: memory, SQLite (`synchronous = FULL`, one file), PostgreSQL (a throwaway
//! local cluster with its durable defaults, `fsync` on), and prints p50 and p99 in microseconds.
//! The overshoot of pools under the peers' shared-budget workload is `spend-peers`' table.

use std::sync::Arc;
use std::time::{Duration, Instant};

use loopbound::pool::backend::PoolAsk;
use loopbound::pool::{Amount, DynPoolStore, MemoryPools, PoolBudget, PoolName};
use loopbound_postgres::{Config, PostgresPools, Store};
use loopbound_sqlite::SqlitePools;
use loopbound_testkit::postgres::{Cluster, Durability};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let cluster =
        Cluster::start(Durability::Durable).expect("PostgreSQL is installed (testkit/postgres/setup.sh)");
    let dir = loopbound_testkit::scratch::dir("pool-bench");
    let calls = args.first().and_then(|n| n.parse().ok()).unwrap_or(2_000);
    runtime.block_on(latency(&cluster, &dir, calls));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The three stores, each with a fresh pool `name` of `budget`.
async fn stores(
    cluster: &Cluster,
    dir: &std::path::Path,
    hint: &str,
) -> Vec<(&'static str, Arc<dyn DynPoolStore>)> {
    let sqlite = SqlitePools::open(dir.join(format!("{hint}.db"))).expect("the SQLite file opens");
    let database = cluster.create_database(hint);
    let store =
        Store::connect(&Config::new(&database.url).expect("a URL")).await.expect("the cluster answers");
    let postgres = PostgresPools::connect(&store).await.expect("the pools' tables");
    vec![
        ("memory", Arc::new(MemoryPools::new())),
        ("SQLite (FULL)", Arc::new(sqlite)),
        ("PostgreSQL (fsync on)", Arc::new(postgres)),
    ]
}

fn ask(pool: &PoolName) -> PoolAsk {
    PoolAsk::new(vec![pool.clone()], 1_000)
        .cap(500)
        .min_output(16)
        .lease(Duration::from_secs(30))
        .holder("bench")
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

/// One reservation and its settlement, timed separately, in microseconds.
async fn cycle(store: &dyn DynPoolStore, pool: &PoolName) -> (f64, f64) {
    let began = Instant::now();
    let grant = store.reserve(ask(pool)).await.expect("the store answers").expect("room");
    let reserved = began.elapsed().as_secs_f64() * 1e6;
    let began = Instant::now();
    store.settle(grant.hold, Amount::new(1, 1_500, loopbound::spend::Micros::ZERO)).await.expect("settled");
    (reserved, began.elapsed().as_secs_f64() * 1e6)
}

async fn latency(cluster: &Cluster, dir: &std::path::Path, calls: usize) {
    println!("Pool reservation latency: {calls} reservations and settlements per row, microseconds");
    println!(
        "{:<24} {:>6} {:>12} {:>12} {:>12} {:>12}",
        "store", "tasks", "reserve p50", "reserve p99", "settle p50", "settle p99"
    );
    let pool = PoolName::new("tenant:bench").expect("a name");
    for (name, store) in stores(cluster, dir, "latency").await {
        store.define(pool.as_str(), PoolBudget::default().with_tokens(u64::MAX / 4)).await.expect("defined");
        for tasks in [1_usize, 8] {
            let mut handles = Vec::new();
            for _ in 0..tasks {
                let (store, pool) = (Arc::clone(&store), pool.clone());
                handles.push(tokio::spawn(async move {
                    let mut samples = Vec::with_capacity(calls / tasks);
                    for _ in 0..calls / tasks {
                        samples.push(cycle(&*store, &pool).await);
                    }
                    samples
                }));
            }
            let mut reserve = Vec::new();
            let mut settle = Vec::new();
            for handle in handles {
                for (r, s) in handle.await.expect("no task panicked") {
                    reserve.push(r);
                    settle.push(s);
                }
            }
            reserve.sort_by(f64::total_cmp);
            settle.sort_by(f64::total_cmp);
            println!(
                "{name:<24} {tasks:>6} {:>12.1} {:>12.1} {:>12.1} {:>12.1}",
                percentile(&reserve, 0.5),
                percentile(&reserve, 0.99),
                percentile(&settle, 0.5),
                percentile(&settle, 0.99)
            );
        }
    }
}
