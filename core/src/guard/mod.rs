//! The guard of one request: its limits and grants, the ledger behind one lock, and the
//! cancellation that links the caller, the deadline and the guard's own halts.
//!
//! A [`Scope`](crate::Scope) owns one guard; tools, the model budget and the runtime reach it
//! through the scope. Nothing here knows about tools, transports or the host's state.
//!
//! # The order of checks
//!
//! A tool call, in [`Guard::admit_tool`]'s one critical section: cancellation (the caller, a
//! recorded stop, the deadline) → permission → tool budget (this scope's, then each ancestor's)
//! → the tool's own limit → its price under a cost budget → repetition (exact, or by result with
//! the tool's poll limit, for a tool the scope's progress policy names) → cycle (the policy's
//! cycle rule) → reserve. The progress checks sit with the repetition check, after permission and
//! every budget: a call a budget or a grant refuses halts for that reason, and a repeat is judged
//! before the cycle it may close. A repetition or cycle the policy nudges is answered without a
//! halt and without a reservation ([`Refused::Nudge`]). The error streak is decided where a call's
//! failure becomes known ([`Guard::note_result`] after a body, [`Guard::note_failure`] for a
//! call of no known tool or that did not bind), under the same lock. A model call: cancellation
//! → model budget → spend reservation. A reservation that does not fit only because of holds
//! in flight in the scope's tree ([`Ledger::waits_for_holds`]) records nothing and halts
//! nothing: the call waits for a settlement of the tree ([`Crowded`]) and asks again; the look
//! and the admission are one critical section, so two calls cannot both see room. A call that
//! asks while others of its tree wait lets them ask first ([`Guard::yield_to_waiting`]).
//!
//! # Invariants
//!
//! - Every decision goes through one critical section ([`Guard::decide`]): the ledger's mutex,
//!   held for one synchronous check-and-reserve and never across an `.await`. A decision's
//!   critical section is exactly [`Guard::locked`] (a child scope: [`Guard::locked_chain`]), a
//!   function of its own so that a profiler can count it.
//! - Under the lock: reading the gate (the caller's token, the clock), the ledger's decision,
//!   queueing the events it recorded in the feed, and setting the "no tool can be admitted"
//!   hint; the other holders only copy plain data out (reads, the journal's counters) or in
//!   (a restore, a journal's append, which queue their events too). Not under it: waking
//!   anything (a watcher's waker, a token's waiters) and formatting text (the remaining-budget
//!   notice is made after the lock from numbers copied out under it; a pool's refusal detail
//!   is made before the lock is taken and shared, not copied, under it).
//! - The caller's token and the deadline are read *inside* that critical section, so a call that
//!   waited for the lock is judged on what holds when it gets it. Reading a tokio-util token
//!   takes that token's own lock: the guard reads its own child of the caller's token, so the
//!   only locks on the admission path belong to this scope (a service that hands one token to
//!   every request does not make them queue on it; making the child locks the caller's once,
//!   when the scope is built, and dropping it once more).
//! - Cancelling the guard's token happens after the lock is released (it wakes the tasks that
//!   wait on it); stickiness does not depend on the token, because every check reads the stop
//!   reason under the lock first.
//! - The guard's token is a child of the caller's token: it fires when the caller cancels, when a
//!   halt is recorded, and when a bounded wait sees the deadline pass.
//! - Capabilities and limits never change after the guard is built: nothing a model or a tool
//!   returns can grant a capability or raise a limit.
//! - A watched scope's [`Feed`] is handed every event the ledger records, inside the critical
//!   section that recorded it: the events are queued there, under the ledger's lock, so a
//!   watcher sees the log's own order whatever the threads. The watcher's waker is taken there
//!   too and woken only once every ledger lock is released ([`Released`]): a wake that comes
//!   late finds the events queued, and one that comes after the watcher read them is spurious,
//!   never lost (a watcher that waits again registers a new waker, which the next queueing
//!   takes).

pub(crate) mod ledger;
mod progress;
mod stop;
mod waiting;

use std::collections::BTreeSet;
use std::future::{Future, poll_fn};
use std::pin::pin;
use std::sync::Arc;
use std::task::{Poll, Waker};

use tokio::time::Instant;

pub(crate) use ledger::{Activity, Refuse, SpendAsk};
#[cfg(feature = "journal")]
pub(crate) use ledger::{Below, Counters};
use ledger::{Branch, Detail, Gate, Ledger, ToolPrice, ToolTerms};
#[cfg(feature = "journal")]
pub(crate) use progress::{Entry, Seen, Tracker};
use progress::{Rules, digest};
pub use stop::Stop;
pub use waiting::STORE_GRACE;

use crate::canonical::Signature;
use crate::event::{ControlEvent, HaltReason};
use crate::limits::Limits;
#[cfg(feature = "pools")]
use crate::pool::backend::{PoolLimit, PoolRefusal};
use crate::pooled::Draw;
#[cfg(feature = "journal")]
use crate::spend::Account;
use crate::spend::{Price, Prices, Reserved, Spend};
use crate::sync::{AtomicBool, CancellationToken, Mutex, Ordering};
use crate::transport::Usage;
use crate::watch::Feed;

/// What a scope's spend and tools are priced by, besides its [`Limits`], and the scope it was
/// opened from.
#[derive(Clone, Default)]
pub(crate) struct Terms {
    /// The host's price table, if it gave one.
    pub(crate) prices: Option<Arc<Prices>>,
    /// The parent scope, for a child opened from a tool's call: every admission here is one
    /// there too.
    pub(crate) parent: Option<Arc<dyn Ancestor>>,
    /// The shared pools the scope draws from, if any.
    pub(crate) pools: Option<Draw>,
    /// The run's progress policy (inactive unless the host set one).
    pub(crate) progress: crate::progress::Progress,
}

impl std::fmt::Debug for Terms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Terms")
            .field("prices", &self.prices)
            .field("child", &self.parent.is_some())
            .field("pools", &self.pools)
            .field("progress", &self.progress)
            .finish()
    }
}

/// A scope that others may be opened from: what a child reaches of its parent.
pub(crate) trait Ancestor: Send + Sync {
    /// The parent's guard.
    fn guard(&self) -> &Guard;
}

/// Why a deferring admission did not admit a call: a stop already in force, or a refusal whose
/// halt is decided but not recorded yet.
#[derive(Debug)]
pub(crate) enum Refused {
    Stop(Stop),
    Deferred(Deferred),
    /// The run's one nudge: not a halt, the batch goes on.
    Nudge(crate::progress::Nudge),
}

impl Refused {
    fn new(refuse: Refuse, described: Option<(HaltReason, ControlEvent)>) -> Self {
        match (refuse, described) {
            (Refuse::Nudge(nudge), _) => Self::Nudge(nudge),
            (Refuse::Stop(_), Some((reason, event))) => Self::Deferred(Deferred { reason, event }),
            (Refuse::Stop(stop), None) => Self::Stop(stop),
        }
    }
}

/// A halt the guard decided for a call of a parallel batch and did not record: the calls
/// admitted before it run first, as they would have one after another, then
/// [`Guard::record_deferred`] records it with the event it would have had.
#[derive(Debug)]
pub(crate) struct Deferred {
    reason: HaltReason,
    event: ControlEvent,
}

/// What a critical section leaves for after the ledger's lock is released: the watcher to wake
/// (the events it is woken for are queued already, in the log's order) and whether a halt is in
/// force (the guard's token to cancel).
#[derive(Debug)]
struct Released {
    wakers: Wakers,
    halted: bool,
}

/// The wakers of a scope's readers of its events (its watcher, and a journaled attempt's record
/// of its stream), taken under the ledger's lock and woken after it.
#[derive(Debug, Default)]
struct Wakers([Option<Waker>; 2]);

impl Wakers {
    fn is_some(&self) -> bool {
        self.0.iter().any(Option::is_some)
    }

    fn wake(self) {
        for waker in self.0.into_iter().flatten() {
            waker.wake();
        }
    }
}

impl Released {
    /// Whether anything is left to do.
    fn is_some(&self) -> bool {
        self.wakers.is_some() || self.halted
    }

    /// Does it, on `guard`, once every ledger lock is released: wakes the watcher, then cancels
    /// the token if a halt is in force.
    fn finish(self, guard: &Guard) {
        self.wakers.wake();
        if self.halted {
            guard.token.cancel();
        }
    }
}

/// The non-generic part of a scope: everything the guard decides with.
pub(crate) struct Guard {
    limits: Limits,
    capabilities: BTreeSet<Box<str>>,
    /// The run-level rules of the progress policy, copied once.
    rules: Rules,
    ledger: Mutex<Ledger>,
    /// Set, under the ledger's lock, once no tool call can be admitted any more (a stop is
    /// recorded or the tool budget is spent). Both conditions are permanent, so the flag never
    /// goes back; it lets a caller skip computing a signature that the guard cannot reach.
    /// Decisions are still taken under the lock only.
    tools_closed: AtomicBool,
    /// The host's token, as given.
    caller: CancellationToken,
    /// This scope's own child of the caller's token, the one every decision reads: reading a
    /// tokio-util token locks that token's node, and the caller's may be shared by every request
    /// of a service, while this one is locked by this scope alone.
    caller_view: CancellationToken,
    token: CancellationToken,
    deadline: Instant,
    terms: Terms,
    /// The live stream of a watched scope, told of every event as it is recorded.
    feed: Option<Feed>,
    /// A journaled attempt's record of the run's stream, set once when the attempt has restored
    /// the run, and told of everything the watcher is.
    tap: std::sync::OnceLock<Feed>,
    /// Whether this scope was cancelled by its run id (as its caller would), not through its
    /// parent: a child's own cancellation, told apart from its parent's halt.
    cancelled_by_id: AtomicBool,
    /// In a journaled run, the attempt's epoch (its fencing token), set once when the attempt
    /// takes the run.
    #[cfg(feature = "journal")]
    epoch: Mutex<Option<u64>>,
    /// When a store call first saw the caller's cancellation: with the deadline, the stop
    /// instant that bounds every later store call ([`waiting`]).
    #[cfg(any(feature = "journal", feature = "pools"))]
    cancel_seen: Mutex<Option<Instant>>,
    /// Told, on a tree's root, each time a model call of the tree settles (after every lock is
    /// released): what a call refused only because of holds in flight waits for ([`Crowded`]).
    settled: tokio::sync::Notify,
    /// On a tree's root, how many calls of the tree wait for a settlement ([`Crowded`]): a call
    /// that asks while others wait lets them ask first ([`Guard::yield_to_waiting`]).
    waiting: std::sync::atomic::AtomicUsize,
    /// How many times a root scope's ledger lock was taken for a decision (tests only).
    #[cfg(test)]
    pub(crate) decisions: std::sync::atomic::AtomicUsize,
}

impl Guard {
    /// A guard whose clock starts now. The limits must have been validated and the deadline
    /// computed by the caller.
    pub(crate) fn new(
        limits: Limits,
        capabilities: BTreeSet<Box<str>>,
        caller: CancellationToken,
        deadline: Instant,
        terms: Terms,
        feed: Option<Feed>,
    ) -> Self {
        let caller_view = caller.child_token();
        let token = caller_view.child_token();
        let tools_closed = AtomicBool::new(limits.tool_calls() == 0);
        Self {
            limits,
            capabilities,
            rules: Rules::of(&terms.progress),
            ledger: Mutex::new(Ledger::default()),
            tools_closed,
            caller,
            caller_view,
            token,
            deadline,
            terms,
            feed,
            tap: std::sync::OnceLock::new(),
            cancelled_by_id: AtomicBool::new(false),
            #[cfg(feature = "journal")]
            epoch: Mutex::new(None),
            #[cfg(any(feature = "journal", feature = "pools"))]
            cancel_seen: Mutex::new(None),
            settled: tokio::sync::Notify::new(),
            waiting: std::sync::atomic::AtomicUsize::new(0),
            #[cfg(test)]
            decisions: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Marks this guard's run as a journaled attempt under `epoch`.
    #[cfg(feature = "journal")]
    pub(crate) fn set_epoch(&self, epoch: u64) {
        *self.epoch.lock() = Some(epoch);
    }

    /// The journaled attempt's epoch, if any.
    #[cfg(feature = "journal")]
    pub(crate) fn epoch(&self) -> Option<u64> {
        *self.epoch.lock()
    }

    /// The live stream of a watched scope (the host's watcher only).
    pub(crate) fn feed(&self) -> Option<&Feed> {
        self.feed.as_ref()
    }

    /// Every feed the loop's steps go to: the host's watcher and a journaled attempt's record.
    pub(crate) fn feeds(&self) -> Feeds<'_> {
        Feeds([self.feed.as_ref(), self.tap.get()])
    }

    /// Gives the scope's steps from now on to `tap` too: a journaled attempt's record of the
    /// run's stream. Returns whether it was set (once per scope).
    #[cfg(feature = "journal")]
    pub(crate) fn set_tap(&self, tap: Feed) -> bool {
        self.tap.set(tap).is_ok()
    }

    /// A journaled attempt's record of the run's stream, once set.
    #[cfg(feature = "journal")]
    pub(crate) fn tap(&self) -> Option<&Feed> {
        self.tap.get()
    }

    /// Queues the events recorded since `before` in the feeds, under the ledger's lock; returns
    /// their readers' wakers, for the caller to wake once the lock is released.
    fn tell(&self, ledger: &Ledger, before: usize) -> Wakers {
        let events = ledger.events().get(before..).unwrap_or_default();
        let Feeds(feeds) = self.feeds();
        Wakers(feeds.map(|feed| feed.and_then(|feed| feed.queue_events(events))))
    }

    /// The host's price table, if the scope has one.
    pub(crate) fn prices(&self) -> Option<&Arc<Prices>> {
        self.terms.prices.as_ref()
    }

    /// What a call of `tool` is subject to besides the limits; nothing is looked up for a scope
    /// without per-tool limits or prices.
    fn tool_terms(&self, tool: &str, granted: bool) -> ToolTerms {
        ToolTerms {
            granted,
            limit: self.limits.tool_calls_of(tool),
            price: match &self.terms.prices {
                None => ToolPrice::NoTable,
                Some(prices) => prices.tool_price(tool).map_or(ToolPrice::Unpriced, ToolPrice::Priced),
            },
            polls: if self.rules.active { self.terms.progress.poll_limit(tool) } else { None },
            rules: self.rules,
        }
    }

    /// The run's progress policy.
    pub(crate) fn progress(&self) -> &crate::progress::Progress {
        &self.terms.progress
    }

    /// Notes the result of tool call `count` of `tool` for the progress checks (see
    /// [`Ledger::note_result`]); its digest is computed before the lock is taken. Nothing is
    /// done for a run without an active policy.
    pub(crate) fn note_result(
        &self,
        tool: &Arc<str>,
        count: u32,
        text: &str,
        failed: bool,
    ) -> Result<(), Stop> {
        if !self.rules.active {
            return Ok(());
        }
        let noted = (digest(text, failed), failed);
        self.decide(|ledger, gate, _| ledger.note_result(gate, self.rules, tool, count, noted))
    }

    /// As [`note_result`](Self::note_result) for a body's `output`, whichever it is.
    pub(crate) fn note_output(
        &self,
        tool: &Arc<str>,
        count: u32,
        output: &Result<String, crate::tool::BodyError>,
    ) -> Result<(), Stop> {
        if !self.rules.active {
            return Ok(());
        }
        match output {
            Ok(text) => self.note_result(tool, count, text, false),
            Err(error) => self.note_result(tool, count, &error.to_string(), true),
        }
    }

    /// Notes a call that named no known tool (`None`) or did not bind (see
    /// [`Ledger::note_failure`]). Nothing is done for a run without an active policy.
    pub(crate) fn note_failure(&self, tool: Option<&Arc<str>>) -> Result<(), Stop> {
        if !self.rules.active {
            return Ok(());
        }
        self.decide(|ledger, gate, _| ledger.note_failure(gate, self.rules, tool))
    }

    /// The run's spend so far.
    pub(crate) fn spend(&self) -> Spend {
        self.ledger.lock().spend(&self.limits)
    }

    pub(crate) fn limits(&self) -> &Limits {
        &self.limits
    }

    pub(crate) fn is_granted(&self, capability: &str) -> bool {
        self.capabilities.contains(capability)
    }

    pub(crate) fn capabilities(&self) -> impl Iterator<Item = &str> {
        self.capabilities.iter().map(AsRef::as_ref)
    }

    pub(crate) fn deadline(&self) -> Instant {
        self.deadline
    }

    pub(crate) fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// Whether this scope or an ancestor has a token or cost budget: every model call is then
    /// reserved, in each scope of the chain.
    pub(crate) fn spend_budgeted(&self) -> bool {
        self.limits.has_spend_budget()
            || self.terms.parent.as_ref().is_some_and(|parent| parent.guard().spend_budgeted())
    }

    /// Whether this scope or an ancestor has a cost budget: every model and tool must then be
    /// priced.
    pub(crate) fn cost_budgeted(&self) -> bool {
        self.limits.cost().is_some()
            || self.terms.parent.as_ref().is_some_and(|parent| parent.guard().cost_budgeted())
    }

    pub(crate) fn caller(&self) -> &CancellationToken {
        &self.caller
    }

    /// Whether the host's caller cancelled the run: this scope's caller (or a cancel by run id),
    /// or, for a child, its own cancel by id or its root's caller (a parent's halt stops its
    /// children, but it is not their caller's cancellation).
    pub(crate) fn cancelled_by_caller(&self) -> bool {
        match &self.terms.parent {
            Some(parent) => {
                self.cancelled_by_id.load(Ordering::SeqCst) || parent.guard().cancelled_by_caller()
            }
            None => self.caller_view.is_cancelled(),
        }
    }

    /// Cancels this scope as its caller would: its own view of the caller's token fires, so
    /// every check sees the caller's cancellation and the guard's token fires with it.
    pub(crate) fn cancel_as_caller(&self) {
        self.cancelled_by_id.store(true, Ordering::SeqCst);
        self.caller_view.cancel();
    }

    /// A handle that cancels this scope as its caller would (see
    /// [`cancel_as_caller`](Self::cancel_as_caller)). Cancelling the handle alone is not told
    /// apart from a parent's halt in a child: the registry cancels through
    /// [`cancel_as_caller`](Self::cancel_as_caller).
    pub(crate) fn caller_handle(&self) -> CancellationToken {
        self.caller_view.clone()
    }

    /// Whether the caller cancelled, read on this scope's own view of the caller's token.
    pub(crate) fn caller_cancelled(&self) -> bool {
        self.caller_view.is_cancelled()
    }

    pub(crate) fn events(&self) -> Vec<ControlEvent> {
        self.ledger.lock().events().to_vec()
    }

    pub(crate) fn stop_reason(&self) -> Option<HaltReason> {
        self.ledger.lock().stop()
    }

    pub(crate) fn model_calls(&self) -> u32 {
        self.ledger.lock().model_calls()
    }

    pub(crate) fn tool_calls(&self) -> u32 {
        self.ledger.lock().tool_calls()
    }

    pub(crate) fn tree_calls(&self) -> (u32, u32) {
        self.ledger.lock().tree_calls()
    }

    /// What holds now: read by every critical section right after it takes the lock.
    ///
    /// In a child, the caller is the root's (or a cancel by this scope's id): a parent's halt is
    /// not its children's caller cancelling, and they halt for the parent's reason instead.
    fn gate(&self) -> Gate {
        let caller_cancelled =
            if self.terms.parent.is_some() { self.cancelled_by_caller() } else { self.caller_cancelled() };
        Gate { caller_cancelled, deadline_passed: Instant::now() >= self.deadline }
    }

    /// The one way into the ledger for a decision: takes the lock (a child scope takes its
    /// ancestors' first, root first, so that every path locks in one order), reads the gate
    /// under it, runs `section` and queues the events it recorded in each scope's feed, then,
    /// once every lock is released, wakes the watchers and cancels the token of each scope that
    /// a halt is in force in.
    fn decide<T>(&self, section: impl FnOnce(&mut Ledger, Gate, &mut [Branch<'_>]) -> T) -> T {
        let Some(parent) = &self.terms.parent else {
            let (decision, released) = self.locked(section);
            released.finish(self);
            return decision;
        };
        let (decision, released) = self.locked_chain(parent, section);
        for (guard, released) in released {
            released.finish(guard);
        }
        decision
    }

    /// The critical section of a root scope's decision: everything between taking the ledger's
    /// lock and releasing it, and nothing else. It is a function of its own, never inlined, so
    /// that a profiler counts exactly what runs under the lock (`benches/README.md`, "The
    /// ledger's lock"). Returns the decision and what is left to do once the lock is released.
    #[inline(never)]
    fn locked<T>(&self, section: impl FnOnce(&mut Ledger, Gate, &mut [Branch<'_>]) -> T) -> (T, Released) {
        #[cfg(test)]
        self.decisions.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut ledger = self.ledger.lock();
        let before = ledger.events().len();
        let decision = section(&mut ledger, self.gate(), &mut []);
        (decision, self.release(&ledger, before))
    }

    /// As [`locked`](Self::locked) for a child scope: its ancestors' ledgers are locked first,
    /// root first. Returns the decision and, for each scope of the chain that has something
    /// left to do once the locks are released, what it is.
    #[inline(never)]
    fn locked_chain<'a, T>(
        &'a self,
        parent: &'a Arc<dyn Ancestor>,
        section: impl FnOnce(&mut Ledger, Gate, &mut [Branch<'_>]) -> T,
    ) -> (T, Vec<(&'a Self, Released)>) {
        let mut chain = vec![parent.guard()];
        while let Some(up) = &chain[chain.len() - 1].terms.parent {
            chain.push(up.guard());
        }
        chain.reverse();
        let mut released = Vec::with_capacity(chain.len() + 1);
        let mut locked: Vec<_> = chain.iter().map(|guard| guard.ledger.lock()).collect();
        let mut ledger = self.ledger.lock();
        let befores: Vec<usize> = locked.iter().map(|ledger| ledger.events().len()).collect();
        let before = ledger.events().len();
        let mut branches: Vec<Branch<'_>> = chain
            .iter()
            .zip(locked.iter_mut())
            .map(|(guard, ledger)| Branch { limits: &guard.limits, ledger })
            .collect();
        let decision = section(&mut ledger, self.gate(), &mut branches);
        let own = self.release(&ledger, before);
        for ((guard, branch), before) in chain.iter().zip(&branches).zip(befores) {
            let left = guard.release(branch.ledger, before);
            if left.is_some() {
                released.push((*guard, left));
            }
        }
        if own.is_some() {
            released.push((self, own));
        }
        (decision, released)
    }

    /// The end of a critical section on this guard's own `ledger`: queues the events recorded
    /// since `before` in the feed and sets the "no tool can be admitted" hint; returns what is
    /// left for after the lock.
    fn release(&self, ledger: &Ledger, before: usize) -> Released {
        let wakers = self.tell(ledger, before);
        Released { wakers, halted: self.settle_flags(ledger) }
    }

    /// Sets the "no tool can be admitted" hint from `ledger` (this guard's own); returns whether
    /// a halt is in force.
    fn settle_flags(&self, ledger: &Ledger) -> bool {
        if ledger.tools_closed(&self.limits) {
            self.tools_closed.store(true, Ordering::Relaxed);
        }
        ledger.stop().is_some()
    }

    /// Checks, without counting anything, whether the run may go on; a passed deadline is
    /// recorded as a halt charged to `activity`.
    pub(crate) fn check(&self, activity: Activity<'_>) -> Result<(), Stop> {
        self.decide(|ledger, gate, _| ledger.check(gate, activity))
    }

    /// Counts one model call before it is sent: cancellation, then the model budget, then, under
    /// a spend budget, its reservation (`ask`; a call under a spend budget without one is
    /// refused, since nothing says what it will cost).
    pub(crate) fn admit_model(&self, ask: Option<SpendAsk>) -> Result<(u32, Option<Reserved>), Stop> {
        let ask = self.spend_ask(ask);
        self.decide(|ledger, gate, ancestors| ledger.admit_model(gate, &self.limits, ask, ancestors))
    }

    /// As [`admit_model`](Self::admit_model), except that a call refused only because of holds
    /// in flight in this scope's tree is not refused: it is told to wait for one of them to
    /// settle ([`Crowded`]), then to ask again. The look and the admission are one decision.
    pub(crate) fn admit_model_sharing(
        &self,
        ask: Option<SpendAsk>,
    ) -> Result<Result<(u32, Option<Reserved>), Crowded<'_>>, Stop> {
        let ask = self.spend_ask(ask);
        if ask.is_none() {
            // Nothing is reserved, so nothing held can crowd it: no registration to make.
            return self
                .decide(|ledger, gate, ancestors| ledger.admit_model(gate, &self.limits, None, ancestors))
                .map(Ok);
        }
        let settled = self.watch_settlements();
        let decided = self.decide(|ledger, gate, ancestors| {
            if ledger.waits_for_holds(gate, &self.limits, ask, ancestors) {
                return None;
            }
            Some(ledger.admit_model(gate, &self.limits, ask, ancestors))
        });
        match decided {
            None => Ok(Err(Crowded { guard: self, settled })),
            Some(admitted) => admitted.map(Ok),
        }
    }

    /// As [`peek_model`](Self::peek_model), except that a call refused only because of holds in
    /// flight is told to wait for one of them to settle ([`Crowded`]).
    pub(crate) fn peek_model_sharing(&self, ask: Option<SpendAsk>) -> Result<Option<u64>, Crowded<'_>> {
        let cap = ask.map_or(u64::MAX, |ask| ask.cap);
        let local = self.spend_ask(ask);
        let settled = self.watch_settlements();
        let decided = self.decide(|ledger, gate, ancestors| {
            if ledger.waits_for_holds(gate, &self.limits, local, ancestors) {
                return Err(());
            }
            Ok(ledger.peek_model(gate, &self.limits, local, ancestors))
        });
        match decided {
            Err(()) => Err(Crowded { guard: self, settled }),
            Ok(room) => Ok(room.map(|output| if local.is_some() { output } else { cap })),
        }
    }

    /// What a model call asks of the spend budgets: `ask` under a spend budget (a call without
    /// one asks for unbounded input, capped at nothing, which fits no budget), else nothing.
    fn spend_ask(&self, ask: Option<SpendAsk>) -> Option<SpendAsk> {
        self.spend_budgeted().then(|| ask.unwrap_or(SpendAsk { input: u64::MAX, cap: 0, price: None }))
    }

    /// The root of this scope's tree (the scope itself when it has no parent).
    fn root(&self) -> &Self {
        match &self.terms.parent {
            Some(parent) => parent.guard().root(),
            None => self,
        }
    }

    /// Whether this scope was opened from a parent's call.
    pub(crate) fn has_parent(&self) -> bool {
        self.terms.parent.is_some()
    }

    /// A registration for the next settlement in this scope's tree, made before the look that may
    /// decide to wait for it, so that a settlement between the look and the wait is not missed.
    fn watch_settlements(&self) -> std::pin::Pin<Box<tokio::sync::futures::Notified<'_>>> {
        let mut settled = Box::pin(self.root().settled.notified());
        settled.as_mut().enable();
        settled
    }

    /// Lets the calls of this scope's tree that wait for a settlement ask before this one does:
    /// a call that has just settled would otherwise take back the room it freed before the
    /// siblings it woke could ask for it. A hint, read without the lock; every admission is
    /// still decided under it.
    pub(crate) async fn yield_to_waiting(&self) {
        if self.root().waiting.load(Ordering::Acquire) > 0 {
            tokio::task::yield_now().await;
        }
    }

    /// Tells the calls waiting for room in this scope's tree that a call settled. Called once
    /// every ledger lock is released.
    fn told_settled(&self) {
        self.root().settled.notify_waiters();
    }

    /// The shared pools the scope draws from, if any.
    pub(crate) fn pools(&self) -> Option<&Draw> {
        self.terms.pools.as_ref()
    }

    /// The largest output a model call would be granted by the run's own checks now, or `None`
    /// if [`admit_model`](Self::admit_model) would refuse it (see [`Ledger::peek_model`]).
    pub(crate) fn peek_model(&self, ask: Option<SpendAsk>) -> Option<u64> {
        let cap = ask.map_or(u64::MAX, |ask| ask.cap);
        let local = self.spend_ask(ask);
        let output =
            self.decide(|ledger, gate, ancestors| ledger.peek_model(gate, &self.limits, local, ancestors))?;
        Some(if local.is_some() { output } else { cap })
    }

    /// Halts the run for a pool's refusal: `ModelBudget` for its call bound, `TokenBudget` or
    /// `CostBudget` for the others, the pool named in the outcome's detail.
    #[cfg(feature = "pools")]
    pub(crate) fn refuse_pool(&self, refusal: &PoolRefusal) -> Stop {
        let reason = match refusal.limit {
            PoolLimit::Calls => HaltReason::ModelBudget,
            PoolLimit::Cost => HaltReason::CostBudget,
            _ => HaltReason::TokenBudget,
        };
        // Made before the lock is taken, moved into the ledger under it.
        let detail: Arc<str> =
            format!("pool {} has no room for this call ({})", refusal.pool, refusal.limit.as_str()).into();
        self.decide(|ledger, gate, _| ledger.refuse_pool(gate, reason, detail))
    }

    /// What the recorded halt says beyond its reason (the pool that refused a call): shared
    /// under the lock, copied into a `String` after it is released.
    pub(crate) fn halt_detail(&self) -> Option<String> {
        let detail = self.ledger.lock().detail();
        detail.map(|detail| match detail {
            #[cfg(feature = "pools")]
            Detail::Text(text) => String::from(&*text),
            Detail::Cycle(tools, repeats) => {
                let names: Vec<&str> = tools.iter().map(|tool| &**tool).collect();
                format!(
                    "no progress: the cycle {} came round {repeats} times with no new result",
                    names.join(" → ")
                )
            }
            Detail::Streak(calls) => format!("no progress: {calls} tool calls in a row failed"),
        })
    }

    /// Admits the call a wrap-up kept aside (see [`Ledger::admit_wrap_up`]).
    pub(crate) fn admit_wrap_up(&self, ask: Option<SpendAsk>) -> Result<Option<Reserved>, Stop> {
        let ask = if self.spend_budgeted() { ask } else { None };
        self.decide(|ledger, gate, ancestors| ledger.admit_wrap_up(gate, &self.limits, ask, ancestors))
    }

    /// What the run has left, as the model is told when the host discloses it: the numbers are
    /// read under the lock, the text is made after it is released.
    pub(crate) fn remaining(&self, price: Option<&Price>) -> String {
        let left = self.ledger.lock().remaining(&self.limits, price);
        left.to_string()
    }

    /// Races `future` against the caller's cancellation and the deadline only: the wrap-up's
    /// call runs after a halt, whose cancellation of the guard's token it must outlive.
    pub(crate) async fn bounded_past_halt<F: Future>(&self, future: F) -> Result<F::Output, Stop> {
        tokio::select! {
            biased;
            () = self.caller_view.cancelled() => Err(Stop::Cancelled),
            () = tokio::time::sleep_until(self.deadline) => Err(self.stop_now(Activity::Model)),
            output = future => Ok(output),
        }
    }

    /// Settles a model call's spend (see [`Ledger::settle`]).
    pub(crate) fn settle(
        &self,
        price: Option<&Price>,
        reserved: Option<Reserved>,
        reported: Option<Usage>,
    ) -> Result<(), Stop> {
        let settled = self
            .decide(|ledger, _, ancestors| ledger.settle(&self.limits, price, reserved, reported, ancestors));
        if reserved.is_some() {
            self.told_settled();
        }
        settled
    }

    /// Charges a stream cut past its reservation and halts `TokenBudget`.
    pub(crate) fn settle_cut(&self, price: Option<&Price>, reserved: Reserved, output: u64) -> Stop {
        let stop = self.decide(|ledger, _, ancestors| ledger.settle_cut(price, reserved, output, ancestors));
        self.told_settled();
        stop
    }

    /// Counts one observation of a call to `tool`, after the cancellation checks, and, when
    /// `middleware`, records the built-in middleware's event for it under the same lock (what
    /// [`record_middleware`](Self::record_middleware) would record right after).
    pub(crate) fn observe_call(&self, tool: &Arc<str>, middleware: bool) -> Result<u32, Stop> {
        self.decide(|ledger, gate, _| {
            let count = ledger.observe_call(gate, tool)?;
            if middleware {
                // The check just passed under this lock: nothing can have stopped the run since.
                ledger.record_middleware(gate, tool, count)?;
            }
            Ok(count)
        })
    }

    /// Records the built-in middleware's event for observation `count` of a call to `tool`.
    pub(crate) fn record_middleware(&self, tool: &Arc<str>, count: u32) -> Result<(), Stop> {
        self.decide(|ledger, gate, _| ledger.record_middleware(gate, tool, count))
    }

    /// Refuses a model reply that asked for more tool calls than the bound: the `TooManyCalls`
    /// halt, charged to the model, unless something stopped the run first.
    pub(crate) fn refuse_reply(&self) -> Stop {
        self.decide(|ledger, gate, _| ledger.refuse_reply(gate))
    }

    /// Whether no tool call can be admitted any more: a stop is recorded or the tool budget is
    /// spent. A hint read without the lock; `true` is final.
    pub(crate) fn tools_closed(&self) -> bool {
        self.tools_closed.load(Ordering::Relaxed)
    }

    /// The checks before repetition for a call not signed yet (see [`Ledger::precheck_tool`]).
    pub(crate) fn precheck_tool(&self, tool: &Arc<str>, granted: bool) -> Result<(), Stop> {
        self.decide(|ledger, gate, ancestors| {
            ledger.precheck_tool(gate, &self.limits, tool, granted, ancestors)
        })
    }

    /// The guard's one check-and-reserve for a signed tool call (see [`Ledger::admit_tool`]).
    pub(crate) fn admit_tool(
        &self,
        tool: &Arc<str>,
        granted: bool,
        signature: Signature,
    ) -> Result<u32, Refuse> {
        let terms = self.tool_terms(tool, granted);
        self.decide(|ledger, gate, ancestors| {
            ledger.admit_tool(gate, &self.limits, tool, terms, signature, ancestors)
        })
    }

    /// As [`precheck_tool`](Self::precheck_tool), with a refusal's halt described, not recorded
    /// (see [`Deferred`]).
    pub(crate) fn precheck_tool_deferring(&self, tool: &Arc<str>, granted: bool) -> Result<(), Refused> {
        self.decide(|ledger, gate, ancestors| {
            let (decided, described) = ledger
                .tentatively(|ledger| ledger.precheck_tool(gate, &self.limits, tool, granted, ancestors));
            decided.map_err(|stop| Refused::new(stop.into(), described))
        })
    }

    /// As [`admit_tool`](Self::admit_tool), with a refusal's halt described, not recorded (see
    /// [`Deferred`]).
    pub(crate) fn admit_tool_deferring(
        &self,
        tool: &Arc<str>,
        granted: bool,
        signature: Signature,
    ) -> Result<u32, Refused> {
        let terms = self.tool_terms(tool, granted);
        self.decide(|ledger, gate, ancestors| {
            let (decided, described) = ledger.tentatively(|ledger| {
                ledger.admit_tool(gate, &self.limits, tool, terms, signature, ancestors)
            });
            decided.map_err(|refuse| Refused::new(refuse, described))
        })
    }

    /// Records a halt decided earlier (the first halt still wins, and the caller's cancellation
    /// wins over it).
    pub(crate) fn record_deferred(&self, deferred: Deferred) -> Stop {
        self.halt_with(deferred.reason, deferred.event)
    }

    /// Continues a logical run from a journal: `counters` and `events` become this guard's, if
    /// nothing was counted or recorded yet. Returns whether they were restored.
    #[cfg(feature = "journal")]
    pub(crate) fn restore(&self, counters: Counters, events: Vec<ControlEvent>) -> bool {
        let mut ledger = self.ledger.lock();
        if !ledger.is_fresh() || ledger.stop().is_some() {
            return false;
        }
        let closed = counters.tool_calls + counters.below.tool_calls >= self.limits.tool_calls();
        let above = self.terms.parent.as_ref().map(|parent| (Arc::clone(parent), counters.charged_above()));
        ledger.restore(counters, events);
        let wakers = self.tell(&ledger, 0);
        if closed {
            self.tools_closed.store(true, Ordering::Relaxed);
        }
        drop(ledger);
        wakers.wake();
        // A child's journal holds what its earlier attempts charged its ancestors; theirs do not
        // (a parent commits nothing while a body of its runs, and the call whose body this is
        // has no result yet): charged again here.
        if let Some((parent, charged)) = above {
            parent.guard().absorb(&charged);
        }
        true
    }

    /// Charges this scope and each of its ancestors what a descendant's logical run charged in
    /// attempts their journals do not hold (`charged`: its calls and its spend); a budget that
    /// it takes past its limit halts that scope.
    #[cfg(feature = "journal")]
    pub(crate) fn absorb(&self, charged: &(Below, Account)) {
        self.decide(|ledger, _, ancestors| {
            let (calls, account) = charged;
            ledger.absorb(&self.limits, (*calls, account));
            for branch in ancestors.iter_mut() {
                branch.ledger.absorb(branch.limits, (*calls, account));
            }
        });
    }

    /// The counters a journal persists, and the events from `from` on.
    #[cfg(feature = "journal")]
    pub(crate) fn counters_and_events(&self, from: usize) -> (Counters, Vec<ControlEvent>) {
        let ledger = self.ledger.lock();
        let events = ledger.events().get(from..).map(<[ControlEvent]>::to_vec).unwrap_or_default();
        (ledger.counters(), events)
    }

    /// Appends a journal's event, unless the run is stopped (caller first, then a halt).
    #[cfg(feature = "journal")]
    pub(crate) fn record(&self, event: ControlEvent) -> Result<(), Stop> {
        self.decide(|ledger, gate, _| ledger.record(gate, event))
    }

    /// Appends a journal's event whatever stopped the run: what it records (an effect's
    /// committed result) happened.
    #[cfg(feature = "journal")]
    pub(crate) fn append(&self, event: ControlEvent) {
        let wakers = {
            let mut ledger = self.ledger.lock();
            let before = ledger.events().len();
            ledger.append(event);
            self.tell(&ledger, before)
        };
        wakers.wake();
    }

    /// Records `event` as the halt for `reason` (the first halt wins) and cancels the token.
    pub(crate) fn halt_with(&self, reason: HaltReason, event: ControlEvent) -> Stop {
        self.decide(|ledger, gate, _| ledger.halt_with(gate, reason, event))
    }

    /// The stop in force when the token fired: the caller first, then the recorded halt, then
    /// (in a child) an ancestor's halt, recorded here charged to `activity`.
    fn stop_now(&self, activity: Activity<'_>) -> Stop {
        self.decide(|ledger, gate, ancestors| ledger.stop_now_under(gate, activity, ancestors))
    }

    /// Records the deadline (unless something stopped first) and cancels the token.
    fn expire(&self, activity: Activity<'_>) -> Stop {
        self.decide(|ledger, gate, _| ledger.expire(gate, activity))
    }

    /// Races `future` against the guard's token and deadline; callers re-check the guard
    /// afterwards.
    ///
    /// The future is polled once on its own first, so a ready future costs no timer. After
    /// that, the token and the deadline are polled before the future on every wake-up: a future
    /// that is always ready to make progress (a fast stream, say) cannot starve the deadline,
    /// since tokio's cooperative budget makes it yield and the deadline is looked at first.
    pub(crate) async fn bounded<F: Future>(
        &self,
        activity: Activity<'_>,
        future: F,
    ) -> Result<F::Output, Stop> {
        let mut future = pin!(future);
        if let Poll::Ready(output) = poll_fn(|cx| Poll::Ready(future.as_mut().poll(cx))).await {
            return Ok(output);
        }
        tokio::select! {
            biased;
            () = self.token.cancelled() => Err(self.stop_now(activity)),
            () = tokio::time::sleep_until(self.deadline) => Err(self.expire(activity)),
            output = &mut future => Ok(output),
        }
    }
}

/// A model call refused only because of holds in flight in its tree ([`Guard::admit_model_sharing`]):
/// it waits for a call of the tree to settle, within the run's deadline and cancellation, then
/// asks again. A hold is a call in flight, which ends within its own deadline, and a call that
/// waits holds nothing, so waits do not wait on each other.
pub(crate) struct Crowded<'g> {
    guard: &'g Guard,
    settled: std::pin::Pin<Box<tokio::sync::futures::Notified<'g>>>,
}

impl std::fmt::Debug for Crowded<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Crowded").finish_non_exhaustive()
    }
}

impl Crowded<'_> {
    /// Waits for the next settlement in the tree, or the run's stop (its deadline, its caller's
    /// cancellation, a halt of the tree), whichever comes first.
    pub(crate) async fn settled(self) -> Result<(), Stop> {
        let waiting = &self.guard.root().waiting;
        waiting.fetch_add(1, Ordering::AcqRel);
        // Counted off however the wait ends, its future dropped included.
        let _done = OnDrop(|| {
            waiting.fetch_sub(1, Ordering::AcqRel);
        });
        self.guard.bounded(Activity::Model, self.settled).await
    }
}

/// Runs `then` when dropped.
struct OnDrop<F: FnMut()>(F);

impl<F: FnMut()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        (self.0)();
    }
}

/// The feeds a scope's steps go to (see [`Guard::feeds`]): each step is pushed to each.
#[derive(Clone, Copy)]
pub(crate) struct Feeds<'a>([Option<&'a Feed>; 2]);

impl<'a> Feeds<'a> {
    /// Whether any feed listens.
    pub(crate) fn any(self) -> bool {
        self.0.iter().any(Option::is_some)
    }

    fn each(self) -> impl Iterator<Item = &'a Feed> {
        self.0.into_iter().flatten()
    }

    /// See [`Feed::begin_reply`].
    pub(crate) fn begin_reply(self, reply: u32) {
        self.each().for_each(|feed| feed.begin_reply(reply));
    }

    /// See [`Feed::end_reply`].
    pub(crate) fn end_reply(self, content: Option<&str>) {
        self.each().for_each(|feed| feed.end_reply(content));
    }

    /// See [`Feed::text_piece`].
    pub(crate) fn text_piece(self, piece: &str) {
        self.each().for_each(|feed| feed.text_piece(piece));
    }

    /// See [`Feed::tool_started`].
    pub(crate) fn tool_started(self, reply: u32, index: usize, call: &crate::transport::ToolCall) {
        self.each().for_each(|feed| feed.tool_started(reply, index, call));
    }

    /// See [`Feed::tool_result`].
    pub(crate) fn tool_result(self, reply: u32, index: usize, call_id: &str, text: &str, is_error: bool) {
        self.each().for_each(|feed| feed.tool_result(reply, index, call_id, text, is_error));
    }
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::sync::Weak;
    use std::sync::atomic::AtomicU32;
    use std::task::{Context, Wake};
    use std::time::Duration;

    use futures_core::Stream;

    use super::*;
    #[cfg(feature = "journal")]
    use crate::event::{EventKind, Subject};
    use crate::watch::{self, Update, Updates};

    /// A guard that others may be opened from.
    struct Node(Guard);

    impl Ancestor for Node {
        fn guard(&self) -> &Guard {
            &self.0
        }
    }

    fn node(limits: Limits, parent: Option<&Arc<Node>>, feed: Option<Feed>) -> Arc<Node> {
        let terms = Terms {
            parent: parent.map(|parent| Arc::clone(parent) as Arc<dyn Ancestor>),
            ..Terms::default()
        };
        let deadline = Instant::now() + Duration::from_hours(1);
        Arc::new(Node(Guard::new(limits, BTreeSet::new(), CancellationToken::new(), deadline, terms, feed)))
    }

    /// A watcher's waker that records, when it is woken, whether any of `guards`' ledgers was
    /// locked.
    #[derive(Default)]
    struct Probe {
        guards: Vec<Weak<Node>>,
        woken: AtomicU32,
        locked_at_wake: AtomicU32,
    }

    impl Wake for Probe {
        fn wake(self: Arc<Self>) {
            let locked = self.guards.iter().filter_map(Weak::upgrade).any(|node| node.0.ledger.is_locked());
            self.woken.fetch_add(1, Ordering::SeqCst);
            self.locked_at_wake.fetch_add(u32::from(locked), Ordering::SeqCst);
        }
    }

    /// Makes the watcher wait on an empty stream with `probe` as its waker.
    fn wait(updates: &mut Updates, probe: &Arc<Probe>) {
        let waker = Waker::from(Arc::clone(probe));
        let polled = Pin::new(updates).poll_next(&mut Context::from_waker(&waker));
        assert_eq!(polled, Poll::Pending, "nothing queued yet");
    }

    fn events(updates: &mut Updates) -> Vec<String> {
        std::iter::from_fn(|| updates.try_next())
            .map(|update| match update {
                Update::Event(event) => event.to_string(),
                other => format!("{other:?}"),
            })
            .collect()
    }

    fn woken(probe: &Probe) -> (u32, u32) {
        (probe.woken.load(Ordering::SeqCst), probe.locked_at_wake.load(Ordering::SeqCst))
    }

    #[test]
    fn a_watcher_is_woken_once_the_lock_is_released() {
        let (feed, mut updates) = watch::channel();
        let root = node(Limits::default().with_model_calls(1), None, Some(feed));
        let guard = &root.0;
        let probe = Arc::new(Probe { guards: vec![Arc::downgrade(&root)], ..Probe::default() });

        wait(&mut updates, &probe);
        assert_eq!(guard.admit_model(None), Ok((1, None)));
        assert_eq!(woken(&probe), (1, 0), "woken once, with the lock released");
        assert_eq!(events(&mut updates), ["ModelCall model 1"]);

        wait(&mut updates, &probe);
        assert_eq!(guard.admit_model(None), Err(Stop::Halted(HaltReason::ModelBudget)));
        assert_eq!(woken(&probe), (2, 0), "a refusal's halt too");
        assert!(guard.token().is_cancelled(), "the halt cancelled the token, after the lock too");
        assert_eq!(events(&mut updates), ["ModelBudget model 1"]);

        #[cfg(feature = "journal")]
        {
            wait(&mut updates, &probe);
            guard.append(ControlEvent::new(EventKind::Resumed, Subject::Run, 1));
            assert_eq!(woken(&probe), (3, 0), "a journal's append too");
            assert_eq!(events(&mut updates), ["Resumed run 1"]);
        }

        let before = woken(&probe);
        wait(&mut updates, &probe);
        assert_eq!(guard.check(Activity::Model), Err(Stop::Halted(HaltReason::ModelBudget)));
        assert_eq!(woken(&probe), before, "nothing recorded, nobody woken");
    }

    #[cfg(feature = "journal")]
    #[test]
    fn a_restored_log_wakes_the_watcher_once_the_lock_is_released() {
        let (feed, mut updates) = watch::channel();
        let root = node(Limits::default(), None, Some(feed));
        let probe = Arc::new(Probe { guards: vec![Arc::downgrade(&root)], ..Probe::default() });
        wait(&mut updates, &probe);
        let counters = Counters { model_calls: 1, ..Counters::default() };
        let log = vec![ControlEvent::new(EventKind::ModelCall, Subject::Model, 1)];
        assert!(root.0.restore(counters, log));
        assert_eq!(woken(&probe), (1, 0));
        assert_eq!(events(&mut updates), ["ModelCall model 1"]);
    }

    #[test]
    fn a_childs_decision_wakes_its_ancestors_watchers_once_every_lock_is_released() {
        let (parent_feed, mut parent_updates) = watch::channel();
        let (child_feed, mut child_updates) = watch::channel();
        let parent = node(Limits::default().with_model_calls(1), None, Some(parent_feed));
        let child = node(Limits::default(), Some(&parent), Some(child_feed));
        let both = || vec![Arc::downgrade(&parent), Arc::downgrade(&child)];
        let (to_parent, to_child) = (
            Arc::new(Probe { guards: both(), ..Probe::default() }),
            Arc::new(Probe { guards: both(), ..Probe::default() }),
        );

        wait(&mut child_updates, &to_child);
        assert_eq!(child.0.admit_model(None), Ok((1, None)));
        assert_eq!(woken(&to_child), (1, 0));
        assert_eq!(events(&mut child_updates), ["ModelCall model 1"]);

        wait(&mut parent_updates, &to_parent);
        wait(&mut child_updates, &to_child);
        assert_eq!(child.0.admit_model(None), Err(Stop::Halted(HaltReason::ModelBudget)));
        assert_eq!(woken(&to_parent), (1, 0), "the parent's halt, with both locks released");
        assert_eq!(woken(&to_child), (2, 0), "the child's halt, with both locks released");
        assert_eq!(events(&mut parent_updates), ["ModelBudget model 0"]);
        assert_eq!(events(&mut child_updates), ["ModelBudget model 1"]);
        assert!(parent.0.token().is_cancelled() && child.0.token().is_cancelled());
    }
}
