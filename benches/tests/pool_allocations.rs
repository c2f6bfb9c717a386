//! What a pool operation allocates for its future: nothing through a concrete store (the pool
//! traits' futures are `impl Future`), one box through a store held as `dyn`
//! (`DynPoolStore`), which is what a run holds. Allocations are counted by dhat's heap profiler
//! in testing mode, this binary's global allocator (the footprint bench's choice too).

use std::time::Duration;

use loopbound::pool::backend::{HoldId, PoolAsk, PoolBackend};
use loopbound::pool::{DynPoolStore, MemoryPools, PoolBudget, PoolName, PoolStore};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// The heap allocations made while the future `make` returns is made and awaited on
/// `runtime`, and its output.
fn allocations<F: Future>(runtime: &tokio::runtime::Runtime, make: impl FnOnce() -> F) -> (u64, F::Output) {
    let before = dhat::HeapStats::get().total_blocks;
    let output = runtime.block_on(make());
    (dhat::HeapStats::get().total_blocks - before, output)
}

async fn one_hold(store: &MemoryPools) -> HoldId {
    PoolStore::define(store, "tenant:acme", PoolBudget::default().with_calls(1)).await.unwrap();
    let ask = PoolAsk::new(vec![PoolName::new("tenant:acme").unwrap()], 10);
    PoolBackend::reserve(store, ask).await.unwrap().unwrap().hold
}

#[test]
fn renewing_a_hold_allocates_nothing_through_the_store_and_one_box_through_dyn() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let store = MemoryPools::new();
    let hold = runtime.block_on(one_hold(&store));
    let lease = Duration::from_secs(60);
    let held: &dyn DynPoolStore = &store;

    let (direct, renewed) = allocations(&runtime, || PoolBackend::renew(&store, hold, lease));
    assert_eq!((direct, renewed.unwrap()), (0, true), "a concrete store's future is not boxed");
    let (boxed, renewed) = allocations(&runtime, || held.renew(hold, lease));
    assert_eq!((boxed, renewed.unwrap()), (1, true), "one box through dyn");
}
