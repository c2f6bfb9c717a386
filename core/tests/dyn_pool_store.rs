//! Pools through a store held as `dyn` (`Arc<dyn DynPoolStore>`): the boxed form passes the
//! pool-store conformance suite as the store inside it does, a scope built from it draws from
//! and charges the store inside, and `Box`, `Arc` and references of a store are stores too.

#![cfg(feature = "pools")]

use std::sync::Arc;

use loopbound::pool::backend::{PoolAsk, PoolBackend, PoolLimit};
use loopbound::pool::{
    Amount, DynPoolStore, ManualClock, MemoryPools, PoolBudget, PoolName, PoolStore, Window,
};
use loopbound::scripted::{Step, sequence};
use loopbound::spend::Micros;
use loopbound::transport::{ModelReply, Usage};
use loopbound::{Message, Runner, Scope, Status, ToolSet};
use loopbound_test::pool::conformance::{self, Stores};

/// Memory stores, each handed out boxed.
struct Boxed;

impl Stores for Boxed {
    type Store = Arc<dyn DynPoolStore>;

    async fn fresh(&self) -> Arc<dyn DynPoolStore> {
        Arc::new(MemoryPools::new())
    }

    async fn fresh_on(&self, clock: ManualClock) -> Option<Arc<dyn DynPoolStore>> {
        Some(Arc::new(MemoryPools::with_clock(Arc::new(clock))))
    }
}

/// The conformance suite through the box: every method of `dyn DynPoolStore` reaches the
/// memory store's, with its results and errors unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_boxed_memory_store_conforms() {
    conformance::check_all(&Boxed).await;
}

/// `PoolStore`'s methods, named through the generic bound a host's own function would use.
async fn settled_tokens(store: &impl PoolStore, pool: &str) -> u64 {
    store.state(pool).await.unwrap().settled.tokens
}

#[tokio::test]
async fn a_run_draws_from_the_store_inside_the_box_and_charges_it() {
    let memory = Arc::new(MemoryPools::new());
    let held: Arc<dyn DynPoolStore> = Arc::clone(&memory) as Arc<dyn DynPoolStore>;
    DynPoolStore::define(&*held, "tenant:acme", PoolBudget::default().with_tokens(1_000).per(Window::Day))
        .await
        .unwrap();
    let model = sequence(vec![Step::Reply(ModelReply::text("Done.").with_usage(Usage::new(10, 50)))]);
    let runtime = Runner::new(&ToolSet::default(), &model);
    let scope = Scope::builder().pools(Arc::clone(&held), ["tenant:acme"]).build().unwrap();
    let outcome = runtime.run(&scope, &mut vec![Message::user("Hi.")], |_| true).await.unwrap();
    assert_eq!(outcome.status(), Status::Completed);
    let state = PoolStore::state(&*memory, "tenant:acme").await.unwrap();
    assert_eq!(state.settled, Amount::new(1, 60, Micros::ZERO), "the box's run charged the memory store");
    assert_eq!(state.reserved, Amount::ZERO);
    assert_eq!(settled_tokens(&held, "tenant:acme").await, 60, "an Arc of the box is a PoolStore");
    assert_eq!(settled_tokens(&memory, "tenant:acme").await, 60, "an Arc of a store is a PoolStore");
    let boxed: Box<dyn DynPoolStore> = Box::new(Arc::clone(&memory));
    assert_eq!(settled_tokens(&boxed, "tenant:acme").await, 60, "a Box of the box is a PoolStore");
    assert_eq!(settled_tokens(&&*memory, "tenant:acme").await, 60, "a reference to a store is a PoolStore");
}

#[tokio::test]
async fn a_scope_of_the_box_and_a_scope_of_the_store_inside_it_share_the_store() {
    let memory = Arc::new(MemoryPools::new());
    PoolStore::define(&*memory, "tenant:acme", PoolBudget::default().with_calls(3)).await.unwrap();
    let held: Arc<dyn DynPoolStore> = memory.clone();
    let parent = Scope::builder().pools(held, ["tenant:acme"]).build().unwrap();
    let child = parent.child().pools(memory.clone(), ["tenant:acme"]).build();
    assert_eq!(child.err(), None, "the same store, whether coerced here or boxed by the host");
}

#[tokio::test]
async fn a_hold_reserved_through_the_box_is_released_through_it() {
    let memory = Arc::new(MemoryPools::new());
    let held: Arc<dyn DynPoolStore> = memory.clone();
    PoolStore::define(&held, "tenant:acme", PoolBudget::default().with_calls(1)).await.unwrap();
    let acme = PoolName::new("tenant:acme").unwrap();
    let mut ask = PoolAsk::new(vec![acme.clone()], 10);
    ask.cap = 100;
    let grant = PoolBackend::reserve(&held, ask.clone()).await.unwrap().unwrap();
    assert_eq!((grant.output, grant.amount), (100, Amount::new(1, 110, Micros::ZERO)));
    assert_eq!(PoolStore::state(&*memory, "tenant:acme").await.unwrap().holds, 1);
    let refusal = PoolBackend::reserve(&held, ask).await.unwrap().unwrap_err();
    assert_eq!(
        (refusal.pool, refusal.limit, refusal.crowded),
        (acme, PoolLimit::Calls, true),
        "the one call is held"
    );
    PoolBackend::release(&held, grant.hold).await.unwrap();
    let state = PoolStore::state(&*memory, "tenant:acme").await.unwrap();
    assert_eq!((state.holds, state.reserved, state.settled), (0, Amount::ZERO, Amount::ZERO));
}
