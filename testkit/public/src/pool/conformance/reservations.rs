//! Reservations that race: [`RACERS`] tasks released together by a barrier, each calling
//! `reserve` once with an ask whose hold is known exactly, on a pool with room for a known
//! number of them; then every hold concluded at once. Repeated for [`ROUNDS`] rounds, on one
//! pool and on two.
//!
//! [`check_race`](super::super::check_race) races whole runs whose holds are far larger than
//! what they bill, so a store that grants a hold too many can still settle within the budget.
//! Here each hold is exact, so one grant too many is one hold too many.
//!
//! # Invariants
//!
//! - Every ask holds exactly one call of [`INPUT`] + [`OUTPUT`] tokens: its output is fixed
//!   (`cap` = `min_output`), so a pool of `ROOM` × that many tokens has room for exactly
//!   [`ROOM`] of them, in whatever order the racers come.
//! - Each round defines pools of its own, so a round's figures are its racers' alone.
//! - The asks on two pools name the roomy pool first: a store that writes a hold into the first
//!   pool before it finds the second one full leaves a hold the refusal says was never made.

use std::collections::BTreeSet;
use std::sync::Arc;

use loopbound::pool::backend::{Grant, PoolAsk, PoolBackend, PoolLimit, PoolRefusal, Settled};
use loopbound::pool::{Amount, PoolBudget, PoolName, PoolStore, WindowTotals};
use tokio::sync::Barrier;

use super::{amount, define, name, state, whole, windows};

/// The tasks that reserve at once.
pub(super) const RACERS: u64 = 64;
/// The rounds, each on pools of its own.
const ROUNDS: u64 = 2;
/// Every ask's input tokens.
const INPUT: u64 = 50;
/// Every ask's output: its cap and its minimum.
const OUTPUT: u64 = 50;
/// The holds the token pool has room for.
const ROOM: u64 = 10;
/// The calls the second pool of the two-pool round has room for (fewer than [`ROOM`]).
const CALLS: u64 = 7;
/// What a settled call reports: less than its hold.
const CHARGED: u64 = 80;

/// The rule the first assertion of a round checks: the one an oversubscribing store breaks.
pub(super) const EXACTLY_THE_ROOM: &str = "racing reservations: exactly the calls that fit are granted";

/// Every round, on one pool and on two.
pub(super) async fn check<S: PoolStore + 'static>(store: Arc<S>) {
    for round in 0..ROUNDS {
        one_pool(&store, round).await;
        two_pools(&store, round).await;
    }
}

/// The hold of `calls` calls.
fn held(calls: u64) -> Amount {
    amount(calls, calls * (INPUT + OUTPUT))
}

/// `RACERS` tasks reserving the same ask on `pools` at once: the grants and the refusals.
async fn race<S: PoolStore + 'static>(store: &Arc<S>, pools: &[&PoolName]) -> (Vec<Grant>, Vec<PoolRefusal>) {
    let pools: Vec<PoolName> = pools.iter().map(|&pool| pool.clone()).collect();
    let barrier = Arc::new(Barrier::new(usize::try_from(RACERS).unwrap_or(usize::MAX)));
    let racers: Vec<_> = (0..RACERS)
        .map(|_| {
            let (store, barrier) = (Arc::clone(store), Arc::clone(&barrier));
            let ask = PoolAsk::new(pools.clone(), INPUT).cap(OUTPUT).min_output(OUTPUT).holder("racer");
            tokio::spawn(async move {
                barrier.wait().await;
                store.reserve(ask).await
            })
        })
        .collect();
    let (mut grants, mut refusals) = (Vec::new(), Vec::new());
    for racer in racers {
        match racer.await.expect("racing reservations: a racer's task ends") {
            Ok(Ok(grant)) => grants.push(grant),
            Ok(Err(refusal)) => refusals.push(refusal),
            Err(error) => panic!("racing reservations: a reservation fails: {error}"),
        }
    }
    (grants, refusals)
}

/// Checks the grants of a race that had room for `room` calls, and the refusals, each `refused`.
fn judge(grants: &[Grant], refusals: &[PoolRefusal], room: u64, refused: &PoolRefusal) {
    assert_eq!(grants.len() as u64, room, "{EXACTLY_THE_ROOM}");
    let figures: Vec<_> = grants.iter().map(|grant| (grant.output, grant.amount)).collect();
    let each = vec![(OUTPUT, held(1)); grants.len()];
    assert_eq!(figures, each, "racing reservations: each grant holds exactly its ask");
    let distinct: BTreeSet<_> = grants.iter().map(|grant| grant.hold).collect();
    assert_eq!(distinct.len(), grants.len(), "racing reservations: each grant is its own hold");
    let expected = vec![refused.clone(); refusals.len()];
    assert_eq!(refusals, expected, "racing reservations: the rest are refused as crowded, by name");
}

/// Concludes every grant at once: the first half settled with [`CHARGED`] tokens, the rest
/// released.
async fn conclude<S: PoolStore + 'static>(store: &Arc<S>, grants: &[Grant]) {
    let half = grants.len() / 2;
    let concluders: Vec<_> = grants
        .iter()
        .enumerate()
        .map(|(index, grant)| {
            let (store, hold) = (Arc::clone(store), grant.hold);
            tokio::spawn(async move {
                if index < half {
                    let settled = store.settle(hold, amount(1, CHARGED)).await;
                    assert_eq!(
                        settled,
                        Ok(Settled::InTime { over: false }),
                        "racing settlements: each in time"
                    );
                } else {
                    assert_eq!(store.release(hold).await, Ok(()), "racing releases: each released");
                }
            })
        })
        .collect();
    for concluder in concluders {
        if let Err(error) = concluder.await {
            std::panic::resume_unwind(error.into_panic());
        }
    }
}

/// One pool of [`ROOM`] holds' tokens.
async fn one_pool<S: PoolStore + 'static>(store: &Arc<S>, round: u64) {
    let pool = name(&format!("tenant:room-{round}"));
    let budget = PoolBudget::default().with_tokens(held(ROOM).tokens);
    define(&**store, &pool, budget).await;
    let (grants, refusals) = race(store, &[&pool]).await;
    judge(&grants, &refusals, ROOM, &PoolRefusal::new(pool.clone(), PoolLimit::Tokens).crowded());
    let full = whole(&pool, budget, Amount::ZERO, held(ROOM), ROOM);
    assert_eq!(state(&**store, &pool).await, full, "racing reservations: the pool holds every grant, once");

    conclude(store, &grants).await;
    let half = ROOM / 2;
    let settled = amount(half, half * CHARGED);
    let after = whole(&pool, budget, settled, Amount::ZERO, 0);
    assert_eq!(state(&**store, &pool).await, after, "racing conclusions: each hold settled or released once");
}

/// A token pool of [`ROOM`] holds and a pool of [`CALLS`] calls, asked together (the roomy one
/// first): only the calls both have room for are granted, and the token pool holds no more.
async fn two_pools<S: PoolStore + 'static>(store: &Arc<S>, round: u64) {
    let (roomy, narrow) = (name(&format!("tenant:roomy-{round}")), name(&format!("user:narrow-{round}")));
    let (tokens, calls) =
        (PoolBudget::default().with_tokens(held(ROOM).tokens), PoolBudget::default().with_calls(CALLS));
    define(&**store, &roomy, tokens).await;
    define(&**store, &narrow, calls).await;
    let (grants, refusals) = race(store, &[&roomy, &narrow]).await;
    judge(&grants, &refusals, CALLS, &PoolRefusal::new(narrow.clone(), PoolLimit::Calls).crowded());
    let all_or_nothing = "racing reservations on two pools: a hold in both or in neither";
    let full = whole(&roomy, tokens, Amount::ZERO, held(CALLS), CALLS);
    assert_eq!(state(&**store, &roomy).await, full, "{all_or_nothing}");
    let full = whole(&narrow, calls, Amount::ZERO, held(CALLS), CALLS);
    assert_eq!(state(&**store, &narrow).await, full, "{all_or_nothing}");

    conclude(store, &grants).await;
    let half = CALLS / 2;
    let settled = amount(half, half * CHARGED);
    let conclusions = "racing conclusions on two pools: each hold settled or released once in both";
    assert_eq!(
        state(&**store, &roomy).await,
        whole(&roomy, tokens, settled, Amount::ZERO, 0),
        "{conclusions}"
    );
    assert_eq!(
        state(&**store, &narrow).await,
        whole(&narrow, calls, settled, Amount::ZERO, 0),
        "{conclusions}"
    );
    let listed = [(0, WindowTotals::new(settled, Amount::ZERO))];
    assert_eq!(windows(&**store, &narrow).await, listed, "{conclusions}");
}
