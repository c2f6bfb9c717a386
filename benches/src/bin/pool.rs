//! `pool`: shared pools measured, side by side per store.
//!
//! ```text
//! cargo run --release -p loopbound-benches --bin pool -- latency [CALLS]
//! cargo run --release -p loopbound-benches --bin pool -- overshoot [K ...]
//! ```
//!
//! `latency` times CALLS reservations and their settlements (one call after another, then 8
//! tasks at once) on each store: memory, SQLite (`synchronous = FULL`, one file), PostgreSQL (a
//! throwaway local cluster with its durable defaults, `fsync` on), and prints p50 and p99 in
//! microseconds.
//!
//! `overshoot` is the shared-budget case of `../shared/bench/spend-peers`: K concurrent runaway
//! runs share one budget of 1,000,000 tokens; every call bills 1,000 input + 500 output tokens
//! after 200 to 600 ms; a run stops only when the budget refuses it. A reserving gate admits
//! floor(B / 1,500) = 666 calls. It prints, per store and K, the calls made, what was billed and
//! how far past the budget it went.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use loopbound::pool::{Amount, MemoryPools, PoolAsk, PoolBudget, PoolDraw, PoolName, PoolStore};
use loopbound::transport::{
    Budgeted, CallError, ChatOptions, ChatRequest, ModelReply, Transport, TransportError, Usage,
};
use loopbound::{Limits, Message, Scope};
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
    match args.first().map(String::as_str) {
        Some("latency") => {
            let calls = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(2_000);
            runtime.block_on(latency(&cluster, &dir, calls));
        }
        Some("overshoot") => {
            let ks: Vec<u64> = args[1..].iter().filter_map(|k| k.parse().ok()).collect();
            let ks = if ks.is_empty() { vec![8, 64] } else { ks };
            runtime.block_on(overshoot(&cluster, &dir, &ks));
        }
        _ => eprintln!("usage: pool latency [CALLS] | pool overshoot [K ...]"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The three stores, each with a fresh pool `name` of `budget`.
async fn stores(
    cluster: &Cluster,
    dir: &std::path::Path,
    hint: &str,
) -> Vec<(&'static str, Arc<dyn PoolStore>)> {
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
    PoolAsk {
        pools: vec![pool.clone()],
        input: 1_000,
        cap: 500,
        price: None,
        min_output: 16,
        lease: Duration::from_secs(30),
        holder: Arc::from("bench"),
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

/// One reservation and its settlement, timed separately, in microseconds.
async fn cycle(store: &dyn PoolStore, pool: &PoolName) -> (f64, f64) {
    let began = Instant::now();
    let grant = store.reserve(ask(pool)).await.expect("the store answers").expect("room");
    let reserved = began.elapsed().as_secs_f64() * 1e6;
    let began = Instant::now();
    store
        .settle(grant.hold, Amount { calls: 1, tokens: 1_500, cost: loopbound::spend::Micros::ZERO })
        .await
        .expect("settled");
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
        store.define(&pool, PoolBudget::default().with_tokens(u64::MAX / 4)).await.expect("defined");
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
                "{name:<24} {tasks:>6} {:>12.0} {:>12.0} {:>12.0} {:>12.0}",
                percentile(&reserve, 0.5),
                percentile(&reserve, 0.99),
                percentile(&settle, 0.5),
                percentile(&settle, 0.99)
            );
        }
    }
}

/// The peers' model: every call bills 1,000 input and 500 output tokens (its cap allowing)
/// after 200 to 600 ms.
struct Peer {
    billed: AtomicU64,
    calls: AtomicU64,
    seed: AtomicU64,
}

impl Transport for Peer {
    async fn complete<'a>(&'a self, request: ChatRequest<'a>) -> Result<ModelReply, TransportError> {
        let mut x = self.seed.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed);
        x ^= x >> 29;
        tokio::time::sleep(Duration::from_millis(200 + x % 401)).await;
        let output = request.options.max_output_tokens.map_or(500, |cap| u64::from(cap).min(500));
        self.billed.fetch_add(1_000 + output, Ordering::SeqCst);
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(ModelReply::text("again").with_usage(Usage::new(1_000, output)))
    }
}

async fn overshoot(cluster: &Cluster, dir: &std::path::Path, ks: &[u64]) {
    const BUDGET: u64 = 1_000_000;
    println!(
        "Shared budget B = {BUDGET} tokens, 1000 in + 500 out per call, 200-600 ms per call; a reserving gate admits 666 calls"
    );
    println!(
        "{:<34} {:>4} {:>11} {:>10} {:>10} {:>11} {:>9}",
        "framework / store", "K", "calls made", "billed", "overshoot", "overshoot %", "time s"
    );
    for &k in ks {
        for (name, store) in stores(cluster, dir, &format!("overshoot_{k}")).await {
            let pool = PoolName::new("tenant:peers").expect("a name");
            store.define(&pool, PoolBudget::default().with_tokens(BUDGET)).await.expect("defined");
            let draw = PoolDraw::new(Arc::clone(&store), [pool]).output_cap(500);
            let model = Arc::new(Peer {
                billed: AtomicU64::new(0),
                calls: AtomicU64::new(0),
                seed: AtomicU64::new(k),
            });
            let began = Instant::now();
            let mut handles = Vec::new();
            for _ in 0..k {
                let (draw, model) = (draw.clone(), Arc::clone(&model));
                handles.push(tokio::spawn(async move { runaway(draw, &model).await }));
            }
            for handle in handles {
                handle.await.expect("no run panicked");
            }
            let billed = model.billed.load(Ordering::SeqCst);
            let over = billed.saturating_sub(BUDGET);
            println!(
                "{:<34} {k:>4} {:>11} {billed:>10} {over:>10} {:>11.2} {:>9.1}",
                format!("loopbound pool, {name}"),
                model.calls.load(Ordering::SeqCst),
                over as f64 * 100.0 / BUDGET as f64,
                began.elapsed().as_secs_f64()
            );
        }
    }
}

/// One runaway run: calls the model until the pool refuses it.
async fn runaway(draw: PoolDraw, model: &Peer) {
    let limits = Limits::default().with_model_calls(100_000).with_deadline(Duration::from_secs(3_600));
    let scope = Scope::builder().pools(draw).limits(limits).build().expect("a scope");
    // About 1,000 input tokens by the default counter (bytes and per-message overhead).
    let conversation = vec![Message::user("t".repeat(968))];
    let budgeted = Budgeted::new(&scope, model);
    loop {
        match budgeted.complete(&conversation, &[], &ChatOptions::default()).await {
            Ok(_) => {}
            Err(CallError::Stopped(_)) => return,
            Err(error) => panic!("a call failed: {error}"),
        }
    }
}
