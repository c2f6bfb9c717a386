//! Shared pools against a reference model (`loopbound_proptests::pool_model`): random
//! interleavings of reservations across pools, settlements (honest and over their hold),
//! releases, renewals, lease expiries, window rollovers (days and a month) and limit changes,
//! on every store. After every step the store answers what the model answers, every window's
//! figures are the model's, no bound is exceeded unless a settlement reported more than its
//! hold or a host lowered a bound, and no window's settled figures ever go down. The memory
//! store and the SQLite store play the same interleavings.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use loopbound::pool::backend::{PoolAsk, Settled};
use loopbound::pool::{
    Amount, DynPoolStore, ManualClock, MemoryPools, PoolBudget, PoolError, PoolName, Window,
};
use loopbound::spend::{Micros, Price};
use loopbound_proptests::config::with_cases;
use loopbound_proptests::pool_model::{Bounds, Figures, INPUT_PRICE, Model, OUTPUT_PRICE, Reserved};
use loopbound_proptests::regressions;
use loopbound_sqlite::{SqlitePools, Synchronous};
use proptest::prelude::*;

/// 2026-11-30T20:00:00Z: a day and a month end within the first hours.
const START: u64 = 1_796_068_800_000;

#[derive(Clone, Debug)]
enum Op {
    Reserve { pools: Vec<usize>, input: u64, cap: u64, min_output: u64, lease: u64 },
    Settle { pick: usize, percent: u64 },
    Release { pick: usize },
    Renew { pick: usize, lease: u64 },
    Advance { ms: u64 },
    SetTokens { pool: usize, tokens: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    let pools = Just(vec![0_usize, 1, 2])
        .prop_shuffle()
        .prop_flat_map(|all| (1..=3_usize).prop_map(move |n| all[..n].to_vec()));
    prop_oneof![
        5 => (pools, 0..400_u64, 0..700_u64, 1..40_u64, 1..120_u64)
            .prop_map(|(pools, input, cap, min_output, lease)| Op::Reserve { pools, input, cap, min_output, lease }),
        3 => (any::<usize>(), prop_oneof![4 => 0..=100_u64, 1 => 101..=150_u64])
            .prop_map(|(pick, percent)| Op::Settle { pick, percent }),
        1 => any::<usize>().prop_map(|pick| Op::Release { pick }),
        1 => (any::<usize>(), 1..7_200_u64).prop_map(|(pick, lease)| Op::Renew { pick, lease }),
        2 => prop_oneof![0..600_000_u64, 3_600_000..30_000_000_u64, (1..120_u64).prop_map(|s| s * 1_000)]
            .prop_map(|ms| Op::Advance { ms }),
        1 => (0..3_usize, 500..3_000_u64).prop_map(|(pool, tokens)| Op::SetTokens { pool, tokens }),
    ]
}

fn bounds() -> Vec<Bounds> {
    vec![
        Bounds { calls: None, tokens: Some(2_000), cost: None, window: Window::Whole },
        Bounds { calls: Some(6), tokens: None, cost: Some(3_000), window: Window::Day },
        Bounds { calls: None, tokens: Some(1_500), cost: None, window: Window::Month },
    ]
}

fn budget(bounds: &Bounds) -> PoolBudget {
    let mut budget = PoolBudget::default().per(bounds.window);
    if let Some(calls) = bounds.calls {
        budget = budget.with_calls(calls);
    }
    if let Some(tokens) = bounds.tokens {
        budget = budget.with_tokens(tokens);
    }
    if let Some(cost) = bounds.cost {
        budget = budget.with_cost(Micros(cost));
    }
    budget
}

fn names() -> Vec<PoolName> {
    ["tenant:a", "user:b", "feature:c"].into_iter().map(|name| PoolName::new(name).unwrap()).collect()
}

fn figures(amount: Amount) -> Figures {
    Figures { calls: amount.calls, tokens: amount.tokens, cost: amount.cost.0 }
}

fn amount(figures: Figures) -> Amount {
    Amount::new(figures.calls, figures.tokens, Micros(figures.cost))
}

/// Plays `ops` on `store` (on `clock`) and on the model, comparing after every step.
async fn play(store: &dyn DynPoolStore, clock: &ManualClock, ops: &[Op]) -> Result<(), TestCaseError> {
    let names = names();
    let mut model = Model::new(bounds(), START);
    clock.set(START);
    for (pool, bounds) in model.bounds.iter().enumerate() {
        store.define(names[pool].as_str(), budget(bounds)).await.unwrap();
    }
    let price = Price::per_million(Micros(INPUT_PRICE * 1_000_000), Micros(OUTPUT_PRICE * 1_000_000));
    let mut ids: Vec<u64> = Vec::new();
    let mut seen: BTreeMap<(usize, u64), Figures> = BTreeMap::new();
    for op in ops {
        match op {
            Op::Reserve { pools, input, cap, min_output, lease } => {
                let lease = Duration::from_secs(*lease);
                let ask = PoolAsk::new(pools.iter().map(|&pool| names[pool].clone()).collect(), *input)
                    .cap(*cap)
                    .price(Some(price))
                    .min_output(*min_output)
                    .lease(lease)
                    .holder("model");
                let got = store.reserve(ask).await.unwrap();
                let id = got.as_ref().map_or(0, |grant| grant.hold.get());
                let expected = model.reserve(pools, *input, *cap, *min_output, lease, id);
                match (&got, expected) {
                    (Ok(grant), Reserved::Granted(output, held)) => {
                        prop_assert_eq!((grant.output, figures(grant.amount)), (output, held));
                        prop_assert!(!ids.contains(&id), "a hold id is never reused");
                        ids.push(id);
                    }
                    (Err(refusal), Reserved::Refused(pool, bound)) => {
                        prop_assert_eq!((&refusal.pool, refusal.limit.as_str()), (&names[pool], bound));
                    }
                    (got, expected) => prop_assert!(false, "store {:?}, model {:?}", got, expected),
                }
            }
            Op::Settle { pick, percent } => {
                let Some(&id) = ids.get(pick % ids.len().max(1)) else { continue };
                let held =
                    model.holds.iter().find(|hold| hold.id == id).map(|hold| hold.amount).unwrap_or_default();
                let charge = Figures {
                    calls: 1,
                    tokens: held.tokens * percent / 100,
                    cost: held.cost * percent / 100,
                };
                let got = store.settle(loopbound::pool::backend::HoldId::new(id), amount(charge)).await;
                match (got, model.settle(id, charge)) {
                    (Ok(Settled::Late), Some(true)) | (Err(PoolError::UnknownHold), None) => {}
                    (Ok(Settled::InTime { over }), Some(false)) => {
                        prop_assert_eq!(over, charge.tokens > held.tokens || charge.cost > held.cost);
                    }
                    (got, expected) => prop_assert!(false, "settle: store {:?}, model {:?}", got, expected),
                }
            }
            Op::Release { pick } => {
                let Some(&id) = ids.get(pick % ids.len().max(1)) else { continue };
                let got = store.release(loopbound::pool::backend::HoldId::new(id)).await;
                prop_assert_eq!(got.is_ok(), model.release(id), "release: {:?}", got);
            }
            Op::Renew { pick, lease } => {
                let Some(&id) = ids.get(pick % ids.len().max(1)) else { continue };
                let lease = Duration::from_secs(*lease);
                let got = store.renew(loopbound::pool::backend::HoldId::new(id), lease).await.unwrap();
                prop_assert_eq!(got, model.renew(id, lease));
            }
            Op::Advance { ms } => {
                clock.advance(Duration::from_millis(*ms));
                model.now += ms;
            }
            Op::SetTokens { pool, tokens } => {
                let mut bounds = model.bounds[*pool];
                if bounds.tokens.is_none_or(|old| *tokens < old) {
                    model.excused = true;
                }
                bounds.tokens = Some(*tokens);
                store.define(names[*pool].as_str(), budget(&bounds)).await.unwrap();
                model.bounds[*pool] = bounds;
            }
        }
        model.expire();
        for (pool, name) in names.iter().enumerate() {
            let state = store.state(name.as_str()).await.unwrap();
            let start = model.current(pool);
            let (reserved, holds) = model.reserved(pool, start);
            let settled = model.settled(pool, start);
            prop_assert_eq!(state.window_start, start);
            prop_assert_eq!(
                (figures(state.settled), figures(state.reserved), state.holds),
                (settled, reserved, holds)
            );
            let bounds = model.bounds[pool];
            if !model.excused {
                let within = |bound: Option<u64>, used: u64| bound.is_none_or(|bound| used <= bound);
                prop_assert!(within(bounds.calls, settled.calls + reserved.calls), "calls past the bound");
                prop_assert!(
                    within(bounds.tokens, settled.tokens + reserved.tokens),
                    "tokens past the bound"
                );
                prop_assert!(within(bounds.cost, settled.cost + reserved.cost), "cost past the bound");
            }
            for (window, line) in store.windows(name.as_str()).await.unwrap() {
                let settled = figures(line.settled);
                prop_assert_eq!(settled, model.settled(pool, window), "window {} of pool {}", window, pool);
                prop_assert_eq!(figures(line.reserved), model.reserved(pool, window).0);
                let before = seen.insert((pool, window), settled).unwrap_or_default();
                prop_assert!(
                    settled.calls >= before.calls
                        && settled.tokens >= before.tokens
                        && settled.cost >= before.cost,
                    "a settled unit was lost in window {} of pool {}",
                    window,
                    pool
                );
            }
        }
    }
    Ok(())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

proptest! {
    #![proptest_config(with_cases(256, regressions!("pool")))]

    #[test]
    fn the_memory_store_follows_the_model_and_never_oversubscribes(ops in prop::collection::vec(op(), 1..80)) {
        let clock = ManualClock::at(START);
        let store = MemoryPools::with_clock(Arc::new(clock.clone()));
        runtime().block_on(play(&store, &clock, &ops))?;
    }
}

proptest! {
    // Each case is a fresh file and a few hundred transactions with `fsync` off.
    #![proptest_config(with_cases(48, regressions!("pool_sqlite")))]

    #[test]
    fn the_sqlite_store_follows_the_model_and_never_oversubscribes(ops in prop::collection::vec(op(), 1..60)) {
        let clock = ManualClock::at(START);
        let dir = loopbound_testkit::scratch::dir("pool-model");
        let store = SqlitePools::open_with(dir.join("pools.db"), Synchronous::Normal, Arc::new(clock.clone())).unwrap();
        let played = runtime().block_on(play(&store, &clock, &ops));
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
        played?;
    }
}
