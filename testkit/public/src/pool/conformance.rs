//! The pool-store conformance suite: what every [`PoolStore`] must do, for a host
//! (`define`, `state`, `windows`) and for the runtime
//! ([`PoolBackend`](loopbound::pool::backend::PoolBackend): `reserve`, `renew`, `settle`,
//! `release`), checked the same way on each (memory, SQLite, PostgreSQL).
//!
//! A store's test implements [`Stores`] (a fresh, empty store; and one on a clock the test moves,
//! for a store that takes one) and awaits [`check_all`] on tokio's multi-thread runtime
//! (`#[tokio::test(flavor = "multi_thread", worker_threads = 2)]`: two checks race tasks, which
//! a current-thread runtime would run one at a time between awaits). It panics with the rule a
//! check found broken, each message beginning with the check's name:
//!
//! - definitions: a name that is not one refused by kind, an unknown pool refused by kind, a budget that bounds nothing refused and
//!   nothing defined, a pool's state as defined, a limit raised in place, its window kept;
//! - all or nothing: a call reserved in every pool of its ask or in none, the refusal naming the
//!   first pool of the ask without room, an unknown pool refused with nothing held;
//! - crowded or spent: a pool whose room is held by calls in flight refuses as crowded, one whose
//!   settled figures leave no room as spent, and a grant's output is what the pool leaves;
//! - cost: a cost bound without a price refused (fail closed), a priced call's output what the
//!   money left buys;
//! - settling and releasing: the provider's usage charged and the rest released, a report above
//!   its hold settled whole and said so, a release charging nothing, each hold concluded once,
//!   a window a hold was made in listed by `windows` even once its figures are all zero;
//! - renewal: a renewed hold held past its first lease, then charged whole when it lapses;
//! - expiry: a hold whose lease lapsed charged whole and no longer counted as reserved, a late
//!   settlement adding only what it reports beyond the hold, a late release charging nothing
//!   back; on a moved clock, the instant: open one millisecond before its lease ends, expired at
//!   it (`now >= expires`);
//! - UTC windows: a day's and a month's bounds by the store's clock; on a clock the test moves,
//!   each UTC day with its own figures, a hold settled and expired in the day it was made in;
//! - racing reservations: 64 tasks released at once, each reserving an exactly known hold on a
//!   pool with room for 10 (and on two pools, the second with room for 7), 2 rounds: exactly the
//!   room granted, the rest refused as crowded by name, every hold concluded at once;
//! - the race ([`check_race`](super::check_race)): 64 tasks × 25 runs on one pool, within it.
//!
//! # Invariants
//!
//! - Every check runs on a fresh store, on pools of its own; the checks use the two traits only.
//! - Time: on a store that takes a clock ([`Stores::fresh_on`]), the checks of leases and windows
//!   run on a [`ManualClock`] from [`NOW`] and are exact; on one that keeps its own (a database
//!   server's), they wait in real time for leases of [`LEASE`], and the days that need the clock
//!   moved are left out.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use loopbound::pool::backend::{Grant, HoldId, PoolAsk, PoolLimit, PoolRefusal, Settled};
use loopbound::pool::{
    Amount, ManualClock, PoolBudget, PoolError, PoolName, PoolState, PoolStore, Window, WindowTotals,
};
use loopbound::spend::{Micros, Price};

#[cfg(test)]
mod gap;
mod reservations;

/// Where a moved clock starts: 2026-12-01T10:00:00Z, in milliseconds.
pub const NOW: u64 = DEC_1 + 10 * HOUR;
/// The lease of the holds a check waits out.
pub const LEASE: Duration = Duration::from_secs(2);
/// How long a check waits for a [`LEASE`] to lapse.
pub const PAST_LEASE: Duration = Duration::from_millis(2_600);

/// 2026-12-01T00:00:00Z.
const DEC_1: u64 = 1_796_083_200_000;
/// 2027-01-01T00:00:00Z.
const JAN_1: u64 = 1_798_761_600_000;
const HOUR: u64 = 3_600_000;
const DAY: u64 = 24 * HOUR;
/// A lease that no check outlives.
const LONG: Duration = Duration::from_secs(60);

/// A pool store under test.
pub trait Stores {
    /// The store.
    type Store: PoolStore + 'static;

    /// A new, empty store on its own clock (the system's, or its server's).
    fn fresh(&self) -> impl Future<Output = Self::Store>;

    /// A new, empty store that judges leases and windows by `clock`; `None` for a store that
    /// keeps its own clock (a database server's).
    fn fresh_on(&self, clock: ManualClock) -> impl Future<Output = Option<Self::Store>>;
}

/// Runs every check, each on a fresh store from `stores`.
///
/// Await it within tokio's multi-thread runtime: the racing checks spawn tasks, and on a
/// current-thread runtime they would take turns at each await instead of racing.
///
/// # Panics
///
/// With the rule a check found broken (its message begins with the check's name), or when a
/// racing task cannot be spawned (no tokio runtime).
pub async fn check_all<S: Stores>(stores: &S) {
    definitions(&stores.fresh().await).await;
    all_or_nothing(&stores.fresh().await).await;
    crowded_or_spent(&stores.fresh().await).await;
    cost(&stores.fresh().await).await;
    settling_and_releasing(&stores.fresh().await).await;
    let (store, time) = timed(stores).await;
    renewal(&store, &time).await;
    let (store, time) = timed(stores).await;
    expiry(&store, &time).await;
    let clock = ManualClock::at(NOW);
    if let Some(store) = stores.fresh_on(clock.clone()).await {
        expiry_instant(&store, &clock).await;
    }
    let clock = ManualClock::at(NOW);
    match stores.fresh_on(clock.clone()).await {
        Some(store) => utc_days(&store, &clock).await,
        None => utc_windows_now(&stores.fresh().await).await,
    }
    reservations::check(Arc::new(stores.fresh().await)).await;
    super::check_race(Arc::new(stores.fresh().await), "tenant:race", 64, 25).await;
}

/// How a check lets time pass: a moved clock, or real time.
enum Time {
    Moved(ManualClock),
    Real,
}

impl Time {
    async fn pass(&self, by: Duration) {
        match self {
            Self::Moved(clock) => clock.advance(by),
            Self::Real => tokio::time::sleep(by).await,
        }
    }
}

/// A fresh store on a moved clock if it takes one, else on its own.
async fn timed<S: Stores>(stores: &S) -> (S::Store, Time) {
    let clock = ManualClock::at(NOW);
    match stores.fresh_on(clock.clone()).await {
        Some(store) => (store, Time::Moved(clock)),
        None => (stores.fresh().await, Time::Real),
    }
}

fn name(text: &str) -> PoolName {
    PoolName::new(text).unwrap_or_else(|error| panic!("{text} is a valid pool name: {error}"))
}

fn amount(calls: u64, tokens: u64) -> Amount {
    Amount::new(calls, tokens, Micros::ZERO)
}

/// A call of `input` tokens asking `pools` for at most `cap` output tokens (at least 16), held
/// for [`LONG`].
fn ask(pools: &[&PoolName], input: u64, cap: u64) -> PoolAsk {
    PoolAsk::new(pools.iter().map(|&pool| pool.clone()).collect(), input)
        .cap(cap)
        .min_output(16)
        .lease(LONG)
        .holder("conformance")
}

async fn define(store: &impl PoolStore, pool: &PoolName, budget: PoolBudget) {
    store.define(pool.as_str(), budget).await.unwrap_or_else(|error| panic!("{pool} is defined: {error}"));
}

async fn state(store: &impl PoolStore, pool: &PoolName) -> PoolState {
    store.state(pool.as_str()).await.unwrap_or_else(|error| panic!("{pool}'s state is read: {error}"))
}

async fn windows(store: &impl PoolStore, pool: &PoolName) -> Vec<(u64, WindowTotals)> {
    store.windows(pool.as_str()).await.unwrap_or_else(|error| panic!("{pool}'s windows are read: {error}"))
}

async fn grant(store: &impl PoolStore, ask: PoolAsk) -> Grant {
    match store.reserve(ask).await {
        Ok(Ok(grant)) => grant,
        other => panic!("a call that fits is granted: {other:?}"),
    }
}

async fn refusal(store: &impl PoolStore, ask: PoolAsk) -> PoolRefusal {
    match store.reserve(ask).await {
        Ok(Err(refusal)) => refusal,
        other => panic!("a call that does not fit is refused: {other:?}"),
    }
}

/// `pool`'s expected state in a window of all time.
fn whole(pool: &PoolName, budget: PoolBudget, settled: Amount, reserved: Amount, holds: u64) -> PoolState {
    PoolState::new(pool.clone(), budget, 0, None, WindowTotals::new(settled, reserved), holds)
}

async fn definitions(store: &impl PoolStore) {
    let budget = PoolBudget::default().with_tokens(1_000);
    for bad in ["", "tenant acme", "tenant/acme", "é", &"a".repeat(129)] {
        let rule = format!("definitions: {bad:?} is not a name, refused by kind");
        assert_eq!(store.define(bad, budget).await, Err(PoolError::InvalidName), "{rule}");
        assert_eq!(store.state(bad).await, Err(PoolError::InvalidName), "{rule}");
        assert_eq!(store.windows(bad).await, Err(PoolError::InvalidName), "{rule}");
    }
    let longest = "a".repeat(128);
    define(store, &name(&longest), budget).await;
    let named = state(store, &name(&longest)).await.name;
    assert_eq!(named.as_str(), longest, "definitions: 128 bytes are a name");
    let acme = name("tenant:acme");
    let never = "definitions: a pool never defined is refused as unknown";
    assert_eq!(store.state(acme.as_str()).await, Err(PoolError::UnknownPool), "{never}");
    assert_eq!(store.windows(acme.as_str()).await, Err(PoolError::UnknownPool), "{never}");
    let nothing = [
        PoolBudget::default(),
        PoolBudget::default().with_calls(0),
        PoolBudget::default().with_tokens(0),
        PoolBudget::default().with_tokens(10).with_cost(Micros::ZERO),
    ];
    for budget in nothing {
        let refused = store.define(acme.as_str(), budget).await;
        assert_eq!(refused, Err(PoolError::InvalidBudget), "definitions: {budget:?} bounds nothing, refused");
    }
    assert_eq!(
        store.state(acme.as_str()).await,
        Err(PoolError::UnknownPool),
        "definitions: a refused budget defines nothing"
    );

    define(store, &acme, budget).await;
    let defined = whole(&acme, budget, Amount::ZERO, Amount::ZERO, 0);
    assert_eq!(
        state(store, &acme).await,
        defined,
        "definitions: a new pool's state is its budget, nothing used"
    );
    assert_eq!(windows(store, &acme).await, [], "definitions: no window is listed before a call");
    // A host raises the limit in place; the pool keeps its window.
    let raised = PoolBudget::default().with_calls(5).with_tokens(2_000).with_cost(Micros(9_000));
    define(store, &acme, raised).await;
    assert_eq!(state(store, &acme).await.budget, raised, "definitions: a limit is raised in place");
    assert_eq!(
        store.define(acme.as_str(), raised.per(Window::Day)).await,
        Err(PoolError::InvalidBudget),
        "definitions: a pool keeps its window"
    );
    let kept = whole(&acme, raised, Amount::ZERO, Amount::ZERO, 0);
    assert_eq!(state(store, &acme).await, kept, "definitions: a refused change changes nothing");
}

async fn all_or_nothing(store: &impl PoolStore) {
    let (acme, user, ghost) = (name("tenant:acme"), name("user:7"), name("tenant:ghost"));
    let (tenant, one_call) = (PoolBudget::default().with_tokens(1_000), PoolBudget::default().with_calls(1));
    define(store, &acme, tenant).await;
    define(store, &user, one_call).await;

    let first = grant(store, ask(&[&acme, &user], 100, 300)).await;
    let held = amount(1, 400);
    let both = "all or nothing: a grant holds the input and the whole cap in every pool of its ask";
    assert_eq!((first.output, first.amount), (300, held), "{both}");
    assert_eq!(state(store, &acme).await, whole(&acme, tenant, Amount::ZERO, held, 1), "{both}");
    assert_eq!(state(store, &user).await, whole(&user, one_call, Amount::ZERO, held, 1), "{both}");

    // The user's one call is in flight: crowded, and the tenant holds nothing for the refused call.
    let refused = refusal(store, ask(&[&acme, &user], 100, 300)).await;
    let crowded = PoolRefusal::new(user.clone(), PoolLimit::Calls).crowded();
    assert_eq!(refused, crowded, "all or nothing: a pool whose room is in flight refuses as crowded");
    let nothing = "all or nothing: a refused call holds nothing in any pool";
    assert_eq!(state(store, &acme).await, whole(&acme, tenant, Amount::ZERO, held, 1), "{nothing}");
    let unknown = store.reserve(ask(&[&acme, &ghost], 100, 300)).await;
    assert_eq!(unknown, Err(PoolError::UnknownPool), "all or nothing: a pool never defined is unknown");
    assert_eq!(state(store, &acme).await, whole(&acme, tenant, Amount::ZERO, held, 1), "{nothing}");

    let settled = store.settle(first.hold, amount(1, 250)).await;
    assert_eq!(settled, Ok(Settled::InTime { over: false }), "all or nothing: an open hold settles in time");
    let refused = refusal(store, ask(&[&acme, &user], 100, 300)).await;
    let spent = PoolRefusal::new(user.clone(), PoolLimit::Calls);
    assert_eq!(refused, spent, "all or nothing: a pool whose settled calls fill it is spent, not crowded");
    // Both pools refuse an input of 800 (750 tokens left): the first of the ask is named.
    let first_named = "all or nothing: the refusal names the first pool of the ask without room";
    let refused = refusal(store, ask(&[&acme, &user], 800, 300)).await;
    assert_eq!(refused, PoolRefusal::new(acme.clone(), PoolLimit::Tokens), "{first_named}");
    let refused = refusal(store, ask(&[&user, &acme], 800, 300)).await;
    assert_eq!(refused, PoolRefusal::new(user.clone(), PoolLimit::Calls), "{first_named}");
    let settled = amount(1, 250);
    let charged = "all or nothing: a settlement charges every pool of its hold";
    assert_eq!(state(store, &acme).await, whole(&acme, tenant, settled, Amount::ZERO, 0), "{charged}");
    assert_eq!(state(store, &user).await, whole(&user, one_call, settled, Amount::ZERO, 0), "{charged}");
    let listed = [(0, WindowTotals::new(settled, Amount::ZERO))];
    assert_eq!(windows(store, &acme).await, listed, "{charged}");
}

async fn crowded_or_spent(store: &impl PoolStore) {
    let acme = name("tenant:acme");
    let budget = PoolBudget::default().with_tokens(1_000);
    define(store, &acme, budget).await;
    let first = grant(store, ask(&[&acme], 100, 800)).await;
    let whole_cap = "crowded or spent: a grant holds the input and the whole cap when the pool has room";
    assert_eq!((first.output, first.amount), (800, amount(1, 900)), "{whole_cap}");
    // Beside the hold, 100 of input leave no output: the pool is crowded, not spent.
    let refused = refusal(store, ask(&[&acme], 100, 800)).await;
    let crowded = PoolRefusal::new(acme.clone(), PoolLimit::Tokens).crowded();
    assert_eq!(refused, crowded, "crowded or spent: room held by a call in flight refuses as crowded");
    let in_time = Ok(Settled::InTime { over: false });
    let settled = store.settle(first.hold, amount(1, 400)).await;
    assert_eq!(settled, in_time, "crowded or spent: a report below its hold settles in time, not over");
    let after = whole(&acme, budget, amount(1, 400), Amount::ZERO, 0);
    assert_eq!(
        state(store, &acme).await,
        after,
        "crowded or spent: the report is charged, the rest released"
    );
    // 600 left: 100 of input, and an output of what the pool leaves.
    let second = grant(store, ask(&[&acme], 100, 800)).await;
    let left = "crowded or spent: a grant's output is what the pool leaves";
    assert_eq!((second.output, second.amount), (500, amount(1, 600)), "{left}");
    let settled = store.settle(second.hold, amount(1, 600)).await;
    assert_eq!(settled, in_time, "crowded or spent: a report equal to its hold is not over");
    let refused = refusal(store, ask(&[&acme], 1, 800)).await;
    let spent = PoolRefusal::new(acme.clone(), PoolLimit::Tokens);
    assert_eq!(refused, spent, "crowded or spent: settled figures that leave no room refuse as spent");
    let after = whole(&acme, budget, amount(2, 1_000), Amount::ZERO, 0);
    assert_eq!(state(store, &acme).await, after, "crowded or spent: both reports charged");
}

async fn cost(store: &impl PoolStore) {
    let acme = name("tenant:acme");
    let budget = PoolBudget::default().with_cost(Micros(1_000));
    define(store, &acme, budget).await;
    let refused = refusal(store, ask(&[&acme], 10, 100)).await;
    let closed = PoolRefusal::new(acme.clone(), PoolLimit::Cost);
    assert_eq!(refused, closed, "cost: a call without a price under a cost bound is refused (fail closed)");
    // 400 input tokens cost 400 at 1 per token; the 600 left buy 300 output tokens at 2.
    let price = Price::per_million(Micros(1_000_000), Micros(2_000_000));
    let priced = grant(store, ask(&[&acme], 400, u64::MAX).price(Some(price))).await;
    let bought = (300, Amount::new(1, 700, Micros(1_000)));
    assert_eq!((priced.output, priced.amount), bought, "cost: the output is what the money left buys");
    let charge = Amount::new(1, 300, Micros(500));
    let settled = store.settle(priced.hold, charge).await;
    assert_eq!(settled, Ok(Settled::InTime { over: false }), "cost: a report below its hold is not over");
    let after = whole(&acme, budget, charge, Amount::ZERO, 0);
    assert_eq!(state(store, &acme).await, after, "cost: the reported cost is charged, the rest released");
}

async fn settling_and_releasing(store: &impl PoolStore) {
    let (acme, idle) = (name("tenant:acme"), name("tenant:idle"));
    let budget = PoolBudget::default().with_calls(10).with_tokens(10_000);
    define(store, &acme, budget).await;
    let (a, b, c) = (
        grant(store, ask(&[&acme], 100, 300)).await,
        grant(store, ask(&[&acme], 100, 300)).await,
        grant(store, ask(&[&acme], 100, 300)).await,
    );
    let own = "settling: each grant is a hold of its own";
    assert!(a.hold != b.hold && b.hold != c.hold && a.hold != c.hold, "{own}: {a:?} {b:?} {c:?}");
    let three = whole(&acme, budget, Amount::ZERO, amount(3, 1_200), 3);
    assert_eq!(state(store, &acme).await, three, "settling: every hold is reserved");
    let settled = store.settle(a.hold, amount(1, 250)).await;
    assert_eq!(settled, Ok(Settled::InTime { over: false }), "settling: a report below its hold is not over");
    // A provider past its cap: the report is settled whole, and said to be over its hold.
    let over = store.settle(b.hold, amount(1, 450)).await;
    assert_eq!(over, Ok(Settled::InTime { over: true }), "settling: a report above its hold is over");
    assert_eq!(store.release(c.hold).await, Ok(()), "releasing: an open hold is released");
    let settled = amount(2, 700);
    let after = whole(&acme, budget, settled, Amount::ZERO, 0);
    let charged = "settling: each report charged whole, a release charging nothing";
    assert_eq!(state(store, &acme).await, after, "{charged}");
    assert_eq!(windows(store, &acme).await, [(0, WindowTotals::new(settled, Amount::ZERO))], "{charged}");
    // Each hold is concluded once; a hold never made is unknown.
    let once = "settling and releasing: a hold is concluded once, then unknown";
    assert_eq!(store.settle(a.hold, amount(1, 250)).await, Err(PoolError::UnknownHold), "{once}");
    assert_eq!(store.release(b.hold).await, Err(PoolError::UnknownHold), "{once}");
    assert_eq!(store.settle(c.hold, amount(1, 1)).await, Err(PoolError::UnknownHold), "{once}");
    assert_eq!(store.release(c.hold).await, Err(PoolError::UnknownHold), "{once}");
    for never in [HoldId::new(u64::MAX), HoldId::new(i64::MAX.unsigned_abs())] {
        let unknown = format!("settling and releasing: a hold never made ({never:?}) is unknown");
        assert_eq!(store.settle(never, amount(1, 1)).await, Err(PoolError::UnknownHold), "{unknown}");
        assert_eq!(store.release(never).await, Err(PoolError::UnknownHold), "{unknown}");
        assert_eq!(store.renew(never, LONG).await, Ok(false), "{unknown}: renewing it is no error");
    }
    assert_eq!(store.renew(c.hold, LONG).await, Ok(false), "renewal: a released hold is not renewed");
    assert_eq!(store.renew(a.hold, LONG).await, Ok(false), "renewal: a settled hold is not renewed");
    let unchanged = "settling and releasing: a refused conclusion changes nothing";
    assert_eq!(state(store, &acme).await, whole(&acme, budget, settled, Amount::ZERO, 0), "{unchanged}");

    // A window a hold was made in stays listed once its holds are released, its figures zero.
    define(store, &idle, budget).await;
    let dropped = grant(store, ask(&[&idle], 100, 300)).await;
    assert_eq!(store.release(dropped.hold).await, Ok(()), "releasing: an open hold is released");
    let zero = [(0, WindowTotals::default())];
    assert_eq!(windows(store, &idle).await, zero, "windows: a window a hold was made in stays listed");
}

async fn renewal(store: &impl PoolStore, time: &Time) {
    let acme = name("tenant:acme");
    let budget = PoolBudget::default().with_tokens(1_000);
    define(store, &acme, budget).await;
    let held = grant(store, ask(&[&acme], 100, 300).lease(LEASE)).await;
    time.pass(Duration::from_millis(1_200)).await;
    assert_eq!(store.renew(held.hold, LEASE).await, Ok(true), "renewal: an open hold is renewed");
    time.pass(Duration::from_millis(1_200)).await;
    let state_now = state(store, &acme).await;
    let open = whole(&acme, budget, Amount::ZERO, amount(1, 400), 1);
    assert_eq!(state_now, open, "renewal: a renewed hold is held past its first lease");
    time.pass(Duration::from_millis(1_400)).await;
    let state_now = state(store, &acme).await;
    let lapsed = whole(&acme, budget, amount(1, 400), Amount::ZERO, 0);
    assert_eq!(state_now, lapsed, "renewal: a renewed hold is charged whole once its new lease lapses");
    assert_eq!(store.renew(held.hold, LEASE).await, Ok(false), "renewal: a lapsed hold is not renewed");
}

async fn expiry(store: &impl PoolStore, time: &Time) {
    let acme = name("tenant:acme");
    let budget = PoolBudget::default().with_tokens(800);
    define(store, &acme, budget).await;
    let late = grant(store, ask(&[&acme], 100, 300).lease(LEASE)).await;
    let cheap = grant(store, ask(&[&acme], 100, 100).lease(LEASE)).await;
    let dropped = grant(store, ask(&[&acme], 100, 100).lease(LEASE)).await;
    let amounts = [late.amount, cheap.amount, dropped.amount];
    let each = [amount(1, 400), amount(1, 200), amount(1, 200)];
    assert_eq!(amounts, each, "expiry: each grant holds its input and its whole cap");
    let refused = refusal(store, ask(&[&acme], 1, 100)).await;
    let crowded = PoolRefusal::new(acme.clone(), PoolLimit::Tokens).crowded();
    assert_eq!(refused, crowded, "expiry: a pool held whole by open holds is crowded");

    time.pass(PAST_LEASE).await;
    // Their holders died: the holds are charged whole, and hold nothing any more.
    let charged = amount(3, 800);
    let lapsed = whole(&acme, budget, charged, Amount::ZERO, 0);
    assert_eq!(
        state(store, &acme).await,
        lapsed,
        "expiry: a lapsed hold is charged whole, no longer reserved"
    );
    let refused = refusal(store, ask(&[&acme], 1, 100)).await;
    let spent = PoolRefusal::new(acme.clone(), PoolLimit::Tokens);
    assert_eq!(refused, spent, "expiry: lapsed holds are spent, not refunded");
    // A settlement after the expiry adds only what it reports beyond the hold, and refunds nothing.
    let late_settled = "expiry: a settlement after the expiry is late";
    assert_eq!(store.settle(late.hold, amount(1, 450)).await, Ok(Settled::Late), "{late_settled}");
    assert_eq!(store.settle(cheap.hold, amount(1, 50)).await, Ok(Settled::Late), "{late_settled}");
    let settled = amount(3, 850);
    let excess = whole(&acme, budget, settled, Amount::ZERO, 0);
    assert_eq!(
        state(store, &acme).await,
        excess,
        "expiry: a late settlement adds only its excess over the hold, refunds nothing"
    );
    assert_eq!(store.release(dropped.hold).await, Ok(()), "expiry: a lapsed hold can be released, late");
    let unrefunded = "expiry: a late release refunds nothing";
    assert_eq!(state(store, &acme).await, excess, "{unrefunded}");
    let once = "expiry: a lapsed hold is concluded once, then unknown";
    assert_eq!(store.settle(late.hold, amount(1, 450)).await, Err(PoolError::UnknownHold), "{once}");
    assert_eq!(store.release(dropped.hold).await, Err(PoolError::UnknownHold), "{once}");
    let listed = [(0, WindowTotals::new(settled, Amount::ZERO))];
    assert_eq!(windows(store, &acme).await, listed, "expiry: the window holds the charges, once each");
}

/// The instant a lease ends, on a moved clock: one millisecond before it, a hold is open; at it
/// (`now >= expires`), the hold is expired: not renewed, charged whole, settled late.
async fn expiry_instant(store: &impl PoolStore, clock: &ManualClock) {
    let acme = name("tenant:acme");
    let budget = PoolBudget::default().with_tokens(1_000);
    define(store, &acme, budget).await;
    let (a, b) = (
        grant(store, ask(&[&acme], 100, 300).lease(LEASE)).await,
        grant(store, ask(&[&acme], 100, 100).lease(LEASE)).await,
    );
    clock.advance(LEASE - Duration::from_millis(1));
    let open = whole(&acme, budget, Amount::ZERO, amount(2, 600), 2);
    assert_eq!(state(store, &acme).await, open, "expiry instant: a hold is open until its lease ends");
    clock.advance(Duration::from_millis(1));
    let ended = "expiry instant: a hold is expired at the instant its lease ends (now >= expires)";
    assert_eq!(store.renew(a.hold, LEASE).await, Ok(false), "{ended}: not renewed");
    assert_eq!(store.settle(b.hold, amount(1, 150)).await, Ok(Settled::Late), "{ended}: settled late");
    let charged = whole(&acme, budget, amount(2, 600), Amount::ZERO, 0);
    assert_eq!(state(store, &acme).await, charged, "{ended}: charged whole");
}

/// Defines `tenant:daily`, one call per UTC day, and `tenant:monthly`, 10,000 tokens per UTC
/// month.
async fn day_and_month(store: &impl PoolStore) -> ((PoolName, PoolBudget), (PoolName, PoolBudget)) {
    let (daily, monthly) = (name("tenant:daily"), name("tenant:monthly"));
    let (day, month) = (
        PoolBudget::default().with_calls(1).per(Window::Day),
        PoolBudget::default().with_tokens(10_000).per(Window::Month),
    );
    define(store, &daily, day).await;
    define(store, &monthly, month).await;
    ((daily, day), (monthly, month))
}

/// Each UTC day has its own figures; a hold settles, and expires, in the day it was made in.
async fn utc_days(store: &impl PoolStore, clock: &ManualClock) {
    let ((daily, day), (monthly, month)) = day_and_month(store).await;
    let empty = WindowTotals::default();
    assert_eq!(
        state(store, &daily).await,
        PoolState::new(daily.clone(), day, DEC_1, Some(DEC_1 + DAY), empty, 0),
        "UTC days: a day pool's window is the clock's UTC day"
    );
    assert_eq!(
        state(store, &monthly).await,
        PoolState::new(monthly.clone(), month, DEC_1, Some(JAN_1), empty, 0),
        "UTC days: a month pool's window is the clock's UTC month"
    );

    let both = || ask(&[&daily, &monthly], 1, 10).lease(Duration::from_secs(20 * 3_600));
    let today = grant(store, both()).await;
    assert_eq!(today.amount, amount(1, 11), "UTC days: a grant holds its input and its whole cap");
    let refused = refusal(store, both()).await;
    let crowded = PoolRefusal::new(daily.clone(), PoolLimit::Calls).crowded();
    assert_eq!(refused, crowded, "UTC days: one call a day, in flight: crowded");

    clock.advance(Duration::from_secs(14 * 3_600));
    let dec_2 = DEC_1 + DAY;
    assert_eq!(
        state(store, &daily).await,
        PoolState::new(daily.clone(), day, dec_2, Some(dec_2 + DAY), empty, 0),
        "UTC days: a new day starts empty, yesterday's hold not in it"
    );
    let tomorrow = grant(store, both()).await;
    let in_time = "UTC days: an open hold settles in time, whatever the day";
    assert_eq!(
        store.settle(today.hold, amount(1, 5)).await,
        Ok(Settled::InTime { over: false }),
        "{in_time}"
    );
    assert_eq!(
        store.settle(tomorrow.hold, amount(1, 7)).await,
        Ok(Settled::InTime { over: false }),
        "{in_time}"
    );
    let settled = WindowTotals::new(amount(1, 7), Amount::ZERO);
    let today_state = PoolState::new(daily.clone(), day, dec_2, Some(dec_2 + DAY), settled, 0);
    assert_eq!(state(store, &daily).await, today_state, "UTC days: a settlement lands in its hold's day");
    let month_state = PoolState::new(
        monthly.clone(),
        month,
        DEC_1,
        Some(JAN_1),
        WindowTotals::new(amount(2, 12), Amount::ZERO),
        0,
    );
    assert_eq!(state(store, &monthly).await, month_state, "UTC days: one month holds both days' settlements");

    // A raised limit admits one more call today; its holder dies, and its hold is charged whole
    // to today when it expires tomorrow.
    let raised = PoolBudget::default().with_calls(2).per(Window::Day);
    define(store, &daily, raised).await;
    let dead = grant(store, ask(&[&daily], 1, 10).lease(Duration::from_secs(3_600))).await;
    clock.advance(Duration::from_secs(24 * 3_600));
    let dec_3 = dec_2 + DAY;
    assert_eq!(
        state(store, &daily).await,
        PoolState::new(daily.clone(), raised, dec_3, Some(dec_3 + DAY), empty, 0),
        "UTC days: a hold that expires later is charged to its own day, not today's"
    );
    let days = [
        (DEC_1, WindowTotals::new(amount(1, 5), Amount::ZERO)),
        (dec_2, WindowTotals::new(amount(2, 18), Amount::ZERO)),
    ];
    assert_eq!(
        windows(store, &daily).await,
        days,
        "UTC days: an expired hold is charged whole to its own day"
    );
    assert_eq!(
        store.settle(dead.hold, amount(1, 30)).await,
        Ok(Settled::Late),
        "UTC days: settled after expiry: late"
    );
    let days = [
        (DEC_1, WindowTotals::new(amount(1, 5), Amount::ZERO)),
        (dec_2, WindowTotals::new(amount(2, 37), Amount::ZERO)),
    ];
    assert_eq!(windows(store, &daily).await, days, "UTC days: a late settlement lands in its hold's day");
}

/// A day's and a month's windows by the store's own clock (read twice, in case a day ends
/// between the reads).
async fn utc_windows_now(store: &impl PoolStore) {
    let ((daily, day), (monthly, month)) = day_and_month(store).await;
    for _ in 0..2 {
        let before = system_now();
        let (day_state, month_state) = (state(store, &daily).await, state(store, &monthly).await);
        if Window::Day.start(before) != Window::Day.start(system_now()) {
            continue;
        }
        let empty = WindowTotals::default();
        let (start, end) = (Window::Day.start(before), Window::Day.end(before));
        assert_eq!(end, Some(start + DAY), "UTC windows: a day is 24 hours");
        let today = PoolState::new(daily.clone(), day, start, end, empty, 0);
        assert_eq!(day_state, today, "UTC windows: a day pool's window is the store clock's UTC day");
        let (start, end) = (Window::Month.start(before), Window::Month.end(before));
        let this_month = PoolState::new(monthly.clone(), month, start, end, empty, 0);
        assert_eq!(
            month_state, this_month,
            "UTC windows: a month pool's window is the store clock's UTC month"
        );
        return;
    }
    panic!("UTC windows: two days ended during two reads");
}

fn system_now() -> u64 {
    let since = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}
