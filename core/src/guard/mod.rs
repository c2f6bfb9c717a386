//! The guard of one request: its limits and grants, the ledger behind one lock, and the
//! cancellation that links the caller, the deadline and the guard's own halts.
//!
//! A [`Scope`](crate::Scope) owns one guard; tools, the model budget and the runtime reach it
//! through the scope. Nothing here knows about tools, transports or the host's state.
//!
//! # Invariants
//!
//! - Every decision goes through one critical section ([`Guard::decide`]): the ledger's mutex,
//!   held for one synchronous check-and-reserve and never across an `.await`.
//! - The caller's token and the deadline are read *inside* that critical section, so a call that
//!   waited for the lock is judged on what holds when it gets it. Reading a tokio-util token
//!   takes that token's own lock: the guard reads its own child of the caller's token, so the
//!   only locks on the admission path belong to this scope (a service that hands one token to
//!   every request does not make them queue on it; making the child locks the caller's once,
//!   when the scope is built, and dropping it once more).
//! - Cancelling the guard's token happens after the lock is released; stickiness does not depend
//!   on the token, because every check reads the stop reason under the lock first.
//! - The guard's token is a child of the caller's token: it fires when the caller cancels, when a
//!   halt is recorded, and when a bounded wait sees the deadline pass.
//! - Capabilities and limits never change after the guard is built: nothing a model or a tool
//!   returns can grant a capability or raise a limit.

pub(crate) mod ledger;
mod stop;

use std::collections::BTreeSet;
use std::future::{Future, poll_fn};
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;

use tokio::time::Instant;

pub(crate) use ledger::{Activity, Counters};
use ledger::{Gate, Ledger};
pub use stop::Stop;

use crate::canonical::Signature;
use crate::event::{ControlEvent, HaltReason};
use crate::limits::Limits;
use crate::sync::{AtomicBool, CancellationToken, Mutex, Ordering};

/// The non-generic part of a scope: everything the guard decides with.
pub(crate) struct Guard {
    limits: Limits,
    capabilities: BTreeSet<Box<str>>,
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
    /// In a journaled run, the attempt's epoch (its fencing token), set once when the attempt
    /// takes the run.
    epoch: Mutex<Option<u64>>,
}

impl Guard {
    /// A guard whose clock starts now. The limits must have been validated and the deadline
    /// computed by the caller.
    pub(crate) fn new(
        limits: Limits,
        capabilities: BTreeSet<Box<str>>,
        caller: CancellationToken,
        deadline: Instant,
    ) -> Self {
        let caller_view = caller.child_token();
        let token = caller_view.child_token();
        Self {
            limits,
            capabilities,
            ledger: Mutex::new(Ledger::default()),
            tools_closed: AtomicBool::new(limits.tool_calls() == 0),
            caller,
            caller_view,
            token,
            deadline,
            epoch: Mutex::new(None),
        }
    }

    /// Marks this guard's run as a journaled attempt under `epoch`.
    pub(crate) fn set_epoch(&self, epoch: u64) {
        *self.epoch.lock() = Some(epoch);
    }

    /// The journaled attempt's epoch, if any.
    pub(crate) fn epoch(&self) -> Option<u64> {
        *self.epoch.lock()
    }

    pub(crate) fn limits(&self) -> Limits {
        self.limits
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

    pub(crate) fn caller(&self) -> &CancellationToken {
        &self.caller
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

    /// What holds now: read by every critical section right after it takes the lock.
    fn gate(&self) -> Gate {
        Gate { caller_cancelled: self.caller_cancelled(), deadline_passed: Instant::now() >= self.deadline }
    }

    /// The one way into the ledger for a decision: takes the lock, reads the gate under it, runs
    /// `section`, then, once the lock is released, cancels the guard's token if a halt is in
    /// force.
    fn decide<T>(&self, section: impl FnOnce(&mut Ledger, Gate) -> T) -> T {
        let (decision, halted) = {
            let mut ledger = self.ledger.lock();
            let decision = section(&mut ledger, self.gate());
            let halted = ledger.stop().is_some();
            if halted || ledger.tool_calls() >= self.limits.tool_calls() {
                self.tools_closed.store(true, Ordering::Relaxed);
            }
            (decision, halted)
        };
        if halted {
            self.token.cancel();
        }
        decision
    }

    /// Checks, without counting anything, whether the run may go on; a passed deadline is
    /// recorded as a halt charged to `activity`.
    pub(crate) fn check(&self, activity: Activity<'_>) -> Result<(), Stop> {
        self.decide(|ledger, gate| ledger.check(gate, activity))
    }

    /// Counts one model call before it is sent: cancellation, then the model budget.
    pub(crate) fn admit_model(&self) -> Result<u32, Stop> {
        self.decide(|ledger, gate| ledger.admit_model(gate, &self.limits))
    }

    /// Records one middleware observation of a call to `tool`.
    pub(crate) fn observe_middleware(&self, tool: &Arc<str>) -> Result<u32, Stop> {
        self.decide(|ledger, gate| ledger.observe_middleware(gate, tool))
    }

    /// Refuses a model reply that asked for more tool calls than the bound: the `TooManyCalls`
    /// halt, charged to the model, unless something stopped the run first.
    pub(crate) fn refuse_reply(&self) -> Stop {
        self.decide(Ledger::refuse_reply)
    }

    /// Whether no tool call can be admitted any more: a stop is recorded or the tool budget is
    /// spent. A hint read without the lock; `true` is final.
    pub(crate) fn tools_closed(&self) -> bool {
        self.tools_closed.load(Ordering::Relaxed)
    }

    /// The checks before repetition for a call not signed yet (see [`Ledger::precheck_tool`]).
    pub(crate) fn precheck_tool(&self, tool: &Arc<str>, granted: bool) -> Result<(), Stop> {
        self.decide(|ledger, gate| ledger.precheck_tool(gate, &self.limits, tool, granted))
    }

    /// The guard's one check-and-reserve for a signed tool call (see [`Ledger::admit_tool`]).
    pub(crate) fn admit_tool(
        &self,
        tool: &Arc<str>,
        granted: bool,
        signature: Signature,
    ) -> Result<u32, Stop> {
        self.decide(|ledger, gate| ledger.admit_tool(gate, &self.limits, tool, granted, signature))
    }

    /// Continues a logical run from a journal: `counters` and `events` become this guard's, if
    /// nothing was counted or recorded yet. Returns whether they were restored.
    pub(crate) fn restore(&self, counters: Counters, events: Vec<ControlEvent>) -> bool {
        let mut ledger = self.ledger.lock();
        if !ledger.is_fresh() || ledger.stop().is_some() {
            return false;
        }
        let closed = counters.tool_calls >= self.limits.tool_calls();
        ledger.restore(counters, events);
        if closed {
            self.tools_closed.store(true, Ordering::Relaxed);
        }
        true
    }

    /// The counters a journal persists, and the events from `from` on.
    pub(crate) fn counters_and_events(&self, from: usize) -> (Counters, Vec<ControlEvent>) {
        let ledger = self.ledger.lock();
        let events = ledger.events().get(from..).map(<[ControlEvent]>::to_vec).unwrap_or_default();
        (ledger.counters(), events)
    }

    /// Appends a journal's event, unless the run is stopped (caller first, then a halt).
    pub(crate) fn record(&self, event: ControlEvent) -> Result<(), Stop> {
        self.decide(|ledger, gate| ledger.record(gate, event))
    }

    /// Appends a journal's event whatever stopped the run: what it records (an effect's
    /// committed result) happened.
    pub(crate) fn append(&self, event: ControlEvent) {
        self.ledger.lock().append(event);
    }

    /// Records `event` as the halt for `reason` (the first halt wins) and cancels the token.
    pub(crate) fn halt_with(&self, reason: HaltReason, event: ControlEvent) -> Stop {
        self.decide(|ledger, gate| ledger.halt_with(gate, reason, event))
    }

    /// The stop in force when the token fired: the caller first, then the recorded halt.
    fn stop_now(&self) -> Stop {
        self.decide(|ledger, gate| ledger.stop_now(gate))
    }

    /// Records the deadline (unless something stopped first) and cancels the token.
    fn expire(&self, activity: Activity<'_>) -> Stop {
        self.decide(|ledger, gate| ledger.expire(gate, activity))
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
            () = self.token.cancelled() => Err(self.stop_now()),
            () = tokio::time::sleep_until(self.deadline) => Err(self.expire(activity)),
            output = &mut future => Ok(output),
        }
    }
}
