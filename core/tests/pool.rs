//! Shared pools under the scope: a call reserved in every pool before it is sent, refused by
//! name when a pool has no room, released when the run's own admission refuses, settled from
//! the provider's usage, charged whole when the run stops during it; and the pool-store
//! conformance suite on the memory store (what the store itself does: holds, refusals,
//! settlement, expiry, UTC days, 64 tasks racing one pool).

#![cfg(feature = "pools")]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use common::Slow;
use loopbound::pool::backend::{Grant, HoldId, PoolAsk, PoolBackend, PoolRefusal, Settled};
use loopbound::pool::{
    Amount, ManualClock, MemoryPools, PoolBudget, PoolError, PoolState, PoolStore, Window, WindowTotals,
};
use loopbound::scripted::{Scripted, Step, sequence};
use loopbound::spend::{ByteCounter, Micros, Price, Prices};
use loopbound::transport::{ModelReply, Usage};
use loopbound::{Limits, LimitsError, Message, RunError, RunErrorKind, Runner, Scope, Status, ToolSet};
use loopbound_test::pool::conformance::{self, Stores};
use loopbound_test::pool::{Billing, CALL_TOKENS};

/// 2026-12-01T10:00:00Z.
const NOW: u64 = 1_796_119_200_000;

async fn store_with(pools: &[(&str, PoolBudget)]) -> (Arc<MemoryPools>, ManualClock) {
    let clock = ManualClock::at(NOW);
    let store = Arc::new(MemoryPools::with_clock(Arc::new(clock.clone())));
    for (pool, budget) in pools {
        store.define(pool, *budget).await.unwrap();
    }
    (store, clock)
}

/// The default counter's estimate of a request holding one message of `bytes` bytes.
fn estimate(bytes: u64) -> u64 {
    bytes + ByteCounter::MESSAGE_OVERHEAD + ByteCounter::REQUEST_OVERHEAD
}

/// A pool where a call asking "Hi." leaves a second one 15 output tokens while in flight.
fn crowded_by_one() -> u64 {
    2 * estimate(3) + u64::from(loopbound::pool::DEFAULT_OUTPUT_CAP) + 15
}

fn answer(usage: Usage) -> Step {
    Step::Reply(ModelReply::text("Done.").with_usage(usage))
}

struct Memory;

impl Stores for Memory {
    type Store = MemoryPools;

    async fn fresh(&self) -> MemoryPools {
        MemoryPools::new()
    }

    async fn fresh_on(&self, clock: ManualClock) -> Option<MemoryPools> {
        Some(MemoryPools::with_clock(Arc::new(clock)))
    }
}

/// The pool-store conformance suite (`loopbound-test`) on the memory store: definitions, all or
/// nothing, crowded and spent refusals, settlement, release, renewal, expiry and late
/// settlement, UTC days, and 64 tasks racing one pool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_pool_store_conforms() {
    conformance::check_all(&Memory).await;
}

#[tokio::test]
async fn a_pool_without_room_halts_the_run_by_name_before_the_call_is_sent() {
    let (acme, user) = ("tenant:acme", "user:7");
    let (store, _) = store_with(&[
        (acme, PoolBudget::default().with_tokens(100_000)),
        (user, PoolBudget::default().with_calls(1).per(Window::Day)),
    ])
    .await;
    let draw = || Scope::builder().pools(store.clone(), [acme, user]).pool_output_cap(100);
    let model = sequence(vec![answer(Usage::new(10, 50)), answer(Usage::new(10, 50))]);
    let runtime = Runner::new(&ToolSet::default(), &model);
    let first = draw().build().unwrap();
    let outcome = runtime.run(&first, &mut vec![Message::user("Hi.")], |_| true).await.unwrap();
    assert_eq!(outcome.status(), Status::Completed);
    let second = draw().build().unwrap();
    let outcome = runtime.run(&second, &mut vec![Message::user("Hi.")], |_| true).await.unwrap();
    assert_eq!(outcome.status(), Status::ModelBudget, "the user's call budget");
    assert_eq!(outcome.detail(), Some("pool user:7 has no room for this call (calls)"));
    assert_eq!(model.calls(), 1, "the refused call was never sent");
    let (acme_state, user_state) = (store.state(acme).await.unwrap(), store.state(user).await.unwrap());
    assert_eq!(acme_state.settled, Amount::new(1, 60, Micros::ZERO));
    assert_eq!(acme_state.reserved, Amount::ZERO, "all or nothing: the tenant holds nothing for it");
    assert_eq!(user_state.settled.calls, 1);
    let events: Vec<String> = outcome.events().iter().map(ToString::to_string).collect();
    assert_eq!(events, ["ModelBudget model 0"]);
}

#[tokio::test(start_paused = true)]
async fn a_run_refused_only_by_another_runs_hold_waits_for_it_and_goes_on() {
    // A call holds its input and the default cap of 4,096 while in flight: beside it, the
    // second run's call would get 15 output tokens, less than the smallest output (16). The
    // pool is crowded, not spent, and the second run waits its turn.
    let acme = "tenant:acme";
    let (store, _) = store_with(&[(acme, PoolBudget::default().with_tokens(crowded_by_one()))]).await;
    let model = Slow::new(Scripted::new(|_, _| answer(Usage::new(100, 50))), Duration::from_millis(500));
    let runtime = Runner::new(&ToolSet::default(), &model);
    let scope = || Scope::builder().pools(store.clone(), [acme]).build().unwrap();
    let (first, second) = (scope(), scope());
    let (mut one, mut two) = (vec![Message::user("Hi.")], vec![Message::user("Hi.")]);
    let started = tokio::time::Instant::now();
    let (a, b) = tokio::join!(runtime.run(&first, &mut one, |_| true), async {
        tokio::time::sleep(Duration::from_millis(1)).await;
        runtime.run(&second, &mut two, |_| true).await
    });
    assert_eq!((a.unwrap().status(), b.unwrap().status()), (Status::Completed, Status::Completed));
    assert_eq!(model.most.load(Ordering::SeqCst), 1, "one call in flight at a time");
    // The second run asked again 25, 75, 175 and 375 ms after the first ask, then at 775 ms
    // (the first call settled at 500 ms), and its call took 500 ms.
    assert_eq!(started.elapsed(), Duration::from_millis(1 + 775 + 500));
    let state = store.state(acme).await.unwrap();
    assert_eq!((state.settled.calls, state.settled.tokens, state.reserved), (2, 300, Amount::ZERO));
}

#[tokio::test(start_paused = true)]
async fn a_run_waiting_for_a_crowded_pool_ends_at_its_deadline_holding_nothing() {
    let acme = "tenant:acme";
    let (store, _) = store_with(&[(acme, PoolBudget::default().with_tokens(crowded_by_one()))]).await;
    let model = Slow::new(Scripted::new(|_, _| answer(Usage::new(100, 50))), Duration::from_secs(30));
    let runtime = Runner::new(&ToolSet::default(), &model);
    let draw = || Scope::builder().pools(store.clone(), [acme]);
    let patient = draw().build().unwrap();
    let hurried = draw().limits(Limits::default().with_deadline(Duration::from_secs(2))).build().unwrap();
    let (mut one, mut two) = (vec![Message::user("Hi.")], vec![Message::user("Hi.")]);
    let (a, b) = tokio::join!(runtime.run(&patient, &mut one, |_| true), async {
        tokio::time::sleep(Duration::from_millis(1)).await;
        let outcome = runtime.run(&hurried, &mut two, |_| true).await.unwrap();
        (outcome.status(), store.state(acme).await.unwrap().holds)
    });
    assert_eq!(a.unwrap().status(), Status::Completed);
    assert_eq!(b, (Status::DeadlineExceeded, 1), "only the first run's hold was in the pool");
    assert_eq!(model.sent.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn the_request_goes_out_capped_at_the_grant_and_the_unused_part_is_released() {
    let acme = "tenant:acme";
    let (store, _) = store_with(&[(acme, PoolBudget::default().with_tokens(1_000))]).await;
    let seen = Arc::new(AtomicU32::new(0));
    let cap = Arc::clone(&seen);
    let model = Scripted::new(move |_, request| {
        cap.store(request.options.max_output_tokens.unwrap_or(0), Ordering::SeqCst);
        answer(Usage::new(50, 20))
    });
    let draw = || Scope::builder().pools(store.clone(), [acme]);
    let scope = draw().build().unwrap();
    let runtime = Runner::new(&ToolSet::default(), &model);
    let mut conversation = vec![Message::user("x".repeat(300))];
    let outcome = runtime.run(&scope, &mut conversation, |_| true).await.unwrap();
    assert_eq!(outcome.status(), Status::Completed);
    // The byte counter's estimate of the request, and what the pool leaves after it.
    let input = estimate(300);
    assert_eq!(u64::from(seen.load(Ordering::SeqCst)), 1_000 - input, "capped at what the pool leaves");
    let state = store.state(acme).await.unwrap();
    assert_eq!((state.settled.tokens, state.reserved.tokens, state.holds), (70, 0, 0));
}

#[tokio::test]
async fn the_runs_own_budget_narrows_the_pools_hold_and_its_refusal_reaches_no_pool() {
    let acme = "tenant:acme";
    let (store, _) = store_with(&[(acme, PoolBudget::default().with_tokens(1_000_000))]).await;
    let seen = Arc::new(AtomicU32::new(0));
    let cap = Arc::clone(&seen);
    let model = Scripted::new(move |_, request| {
        cap.store(request.options.max_output_tokens.unwrap_or(0), Ordering::SeqCst);
        answer(Usage::new(10, 10))
    });
    let draw = || Scope::builder().pools(store.clone(), [acme]);
    let limits = Limits::default().with_total_tokens(500);
    let scope = draw().limits(limits.clone()).build().unwrap();
    let runtime = Runner::new(&ToolSet::default(), &model);
    let outcome = runtime.run(&scope, &mut vec![Message::user("x".repeat(100))], |_| true).await.unwrap();
    assert_eq!(outcome.status(), Status::Completed);
    let input = estimate(100);
    assert_eq!(u64::from(seen.load(Ordering::SeqCst)), 500 - input, "the run's budget is tighter");
    // A request that does not fit the run's own budget is refused without asking the pool.
    let scope = draw().limits(limits).build().unwrap();
    let outcome = runtime.run(&scope, &mut vec![Message::user("x".repeat(600))], |_| true).await.unwrap();
    assert_eq!((outcome.status(), outcome.detail()), (Status::TokenBudget, None));
    let state = store.state(acme).await.unwrap();
    assert_eq!((state.settled.calls, state.settled.tokens, state.reserved), (1, 20, Amount::ZERO));
}

#[tokio::test]
async fn a_cost_bound_prices_the_call_and_fails_closed_without_a_price() {
    let acme = "tenant:acme";
    let (store, _) = store_with(&[(acme, PoolBudget::default().with_cost(Micros(1_000)))]).await;
    let price = Price::per_million(Micros(1_000_000), Micros(2_000_000));
    let prices = Prices::new().model("m", price).shared();
    let model = Scripted::new(|_, _| answer(Usage::new(100, 100))).with_model("m");
    let draw = || Scope::builder().pools(store.clone(), [acme]);
    let scope = draw().prices(prices).build().unwrap();
    let runtime = Runner::new(&ToolSet::default(), &model);
    let outcome = runtime.run(&scope, &mut vec![Message::user("Hi.")], |_| true).await.unwrap();
    assert_eq!(outcome.status(), Status::Completed);
    assert_eq!(store.state(acme).await.unwrap().settled.cost, Micros(300), "100 in at 1, 100 out at 2");
    let unpriced = Scripted::new(|_, _| answer(Usage::new(1, 1)));
    let scope = draw().build().unwrap();
    let runtime = Runner::new(&ToolSet::default(), &unpriced);
    let outcome = runtime.run(&scope, &mut vec![Message::user("Hi.")], |_| true).await.unwrap();
    assert_eq!(outcome.status(), Status::CostBudget);
    assert_eq!(outcome.detail(), Some("pool tenant:acme has no room for this call (cost)"));
    assert_eq!(unpriced.calls(), 0);
}

#[tokio::test]
async fn a_scope_with_priced_tools_or_a_childs_foreign_store_is_refused() {
    let acme = "tenant:acme";
    let (store, _) = store_with(&[(acme, PoolBudget::default().with_calls(5))]).await;
    let draw = || Scope::builder().pools(store.clone(), [acme]);
    let prices = Prices::new().tool("refund", Micros(10)).shared();
    let refused = draw().prices(prices).build();
    assert_eq!(refused.err(), Some(LimitsError::PricedToolsWithPools));
    let free = Prices::new().other_tools(Micros::ZERO).shared();
    assert!(draw().prices(free).build().is_ok(), "free tools are fine");
    let parent = draw().build().unwrap();
    let elsewhere: Arc<dyn loopbound::pool::DynPoolStore> = Arc::new(MemoryPools::new());
    assert_eq!(parent.child().pools(elsewhere, [acme]).build().err(), Some(LimitsError::PoolStores));
}

#[tokio::test]
async fn a_child_draws_from_its_parents_pools_and_its_own() {
    let (acme, search) = ("tenant:acme", "feature:search");
    let (store, _) = store_with(&[
        (acme, PoolBudget::default().with_calls(10)),
        (search, PoolBudget::default().with_calls(1)),
    ])
    .await;
    let parent = Scope::builder().pools(store.clone(), [acme]).build().unwrap();
    let child = parent.child().pools(store.clone(), [search]).build().unwrap();
    let model = sequence(vec![answer(Usage::new(1, 1)), answer(Usage::new(1, 1))]);
    let runtime = Runner::new(&ToolSet::default(), &model);
    let outcome = runtime.run(&child, &mut vec![Message::user("Hi.")], |_| true).await.unwrap();
    assert_eq!(outcome.status(), Status::Completed);
    assert_eq!(store.state(acme).await.unwrap().settled.calls, 1);
    assert_eq!(store.state(search).await.unwrap().settled.calls, 1);
    let again = parent.child().pools(store.clone(), [search]).build().unwrap();
    let outcome = runtime.run(&again, &mut vec![Message::user("Hi.")], |_| true).await.unwrap();
    assert_eq!(outcome.detail(), Some("pool feature:search has no room for this call (calls)"));
    assert_eq!(store.state(acme).await.unwrap().reserved, Amount::ZERO);
}

#[tokio::test]
async fn a_stop_during_the_call_charges_its_hold_whole() {
    let acme = "tenant:acme";
    let (store, _) = store_with(&[(acme, PoolBudget::default().with_tokens(10_000))]).await;
    let draw = || Scope::builder().pools(store.clone(), [acme]).pool_output_cap(500);
    let limits = Limits::default().with_deadline(Duration::from_millis(50));
    let scope = draw().limits(limits).build().unwrap();
    let model = sequence(vec![Step::Hang]);
    let runtime = Runner::new(&ToolSet::default(), &model);
    let outcome = runtime.run(&scope, &mut vec![Message::user("x".repeat(100))], |_| true).await.unwrap();
    assert_eq!(outcome.status(), Status::DeadlineExceeded);
    let input = estimate(100);
    let state = store.state(acme).await.unwrap();
    assert_eq!(
        (state.settled.tokens, state.reserved.tokens),
        (input + 500, 0),
        "the provider may have billed it"
    );
}

#[tokio::test]
async fn a_pool_store_that_fails_stops_the_run_before_anything_is_sent() {
    let model = sequence(vec![answer(Usage::new(1, 1))]);
    let runtime = Runner::new(&ToolSet::default(), &model);
    // A pool the store does not know: the store refuses, the call is not sent.
    let store = Arc::new(MemoryPools::new());
    let scope = Scope::builder().pools(store, ["tenant:ghost"]).build().unwrap();
    let error = runtime.run(&scope, &mut vec![Message::user("Hi.")], |_| true).await.unwrap_err();
    assert!(matches!(error, RunError::Pool(_)), "{error:?}");
    assert_eq!(error.kind(), RunErrorKind::Configuration);
    assert_eq!(error.to_string(), "the pool is not defined in this store");
    assert_eq!(model.calls(), 0);
}

/// A store that runs `during` inside each reservation (between the run's look and its
/// admission), and can fail every reservation as a server that is down.
#[derive(Debug)]
struct Interfering {
    inner: MemoryPools,
    during: loopbound::CancellationToken,
    down: bool,
}

impl PoolStore for Interfering {
    async fn define(&self, pool: &str, budget: PoolBudget) -> Result<(), PoolError> {
        PoolStore::define(&self.inner, pool, budget).await
    }
    async fn state(&self, pool: &str) -> Result<PoolState, PoolError> {
        PoolStore::state(&self.inner, pool).await
    }
    async fn windows(&self, pool: &str) -> Result<Vec<(u64, WindowTotals)>, PoolError> {
        PoolStore::windows(&self.inner, pool).await
    }
}

impl PoolBackend for Interfering {
    async fn reserve(&self, ask: PoolAsk) -> Result<Result<Grant, PoolRefusal>, PoolError> {
        self.during.cancel();
        if self.down {
            let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
            return Err(PoolError::storage("a reservation", refused));
        }
        PoolBackend::reserve(&self.inner, ask).await
    }
    async fn renew(&self, hold: HoldId, lease: Duration) -> Result<bool, PoolError> {
        PoolBackend::renew(&self.inner, hold, lease).await
    }
    async fn settle(&self, hold: HoldId, charge: Amount) -> Result<Settled, PoolError> {
        PoolBackend::settle(&self.inner, hold, charge).await
    }
    async fn release(&self, hold: HoldId) -> Result<(), PoolError> {
        PoolBackend::release(&self.inner, hold).await
    }
}

#[tokio::test]
async fn a_refusal_by_the_run_after_the_pools_grant_releases_the_hold() {
    let acme = "tenant:acme";
    let caller = loopbound::CancellationToken::new();
    let store = Arc::new(Interfering { inner: MemoryPools::new(), during: caller.clone(), down: false });
    store.define(acme, PoolBudget::default().with_tokens(10_000)).await.unwrap();
    let scope = Scope::builder().caller(caller).pools(store.clone(), [acme]).build().unwrap();
    let model = sequence(vec![answer(Usage::new(1, 1))]);
    let runtime = Runner::new(&ToolSet::default(), &model);
    let error = runtime.run(&scope, &mut vec![Message::user("Hi.")], |_| true).await.unwrap_err();
    assert_eq!(error, RunError::Cancelled, "the caller cancelled while the pool reserved");
    assert_eq!(model.calls(), 0);
    let state = store.state(acme).await.unwrap();
    assert_eq!((state.settled, state.reserved, state.holds), (Amount::ZERO, Amount::ZERO, 0), "released");
}

#[tokio::test]
async fn a_pool_store_that_is_down_fails_closed_with_its_cause() {
    let acme = "tenant:acme";
    let store = Arc::new(Interfering {
        inner: MemoryPools::new(),
        during: loopbound::CancellationToken::new(),
        down: true,
    });
    store.define(acme, PoolBudget::default().with_tokens(10_000)).await.unwrap();
    let scope = Scope::builder().pools(store, [acme]).build().unwrap();
    let model = sequence(vec![answer(Usage::new(1, 1))]);
    let runtime = Runner::new(&ToolSet::default(), &model);
    let error = runtime.run(&scope, &mut vec![Message::user("Hi.")], |_| true).await.unwrap_err();
    assert_eq!(error.kind(), RunErrorKind::PoolUnavailable);
    assert_eq!(error.to_string(), "the pool store failed: a reservation");
    let source = std::error::Error::source(&error).map(ToString::to_string);
    assert_eq!(source.as_deref(), Some("connection refused"));
    assert_eq!(model.calls(), 0);
}

#[tokio::test]
async fn a_call_longer_than_the_lease_keeps_its_hold_by_renewing_it() {
    let acme = "tenant:acme";
    let store = Arc::new(MemoryPools::new());
    store.define(acme, PoolBudget::default().with_tokens(10_000)).await.unwrap();
    let draw = loopbound_test::pool::draw(
        store.clone(),
        std::slice::from_ref(&acme),
        Duration::from_millis(60),
        "slow",
    );
    // Each answer takes more than three leases.
    let model = Billing::new(200, 200, 1);
    let (status, _) = loopbound_test::pool::one_run(&draw, &model).await.unwrap();
    assert_eq!(status, Status::Completed);
    let state = store.state(acme).await.unwrap();
    assert_eq!(state.settled.tokens, CALL_TOKENS, "settled in time, not charged whole at expiry");
}
