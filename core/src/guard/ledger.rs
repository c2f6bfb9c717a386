//! The scope's mutable state and its one critical section: check, then reserve.
//!
//! Everything here is synchronous and free of clocks and tokens: the guard samples "has the
//! caller cancelled?" and "has the deadline passed?" into a [`Gate`] *after* taking the lock and
//! hands it in, so the loom models in `loom-tests/` can explore every interleaving of the
//! decisions and a call that waited for the lock is judged on what holds when it gets it.
//!
//! # Invariants
//!
//! - Checks run in this order and the first failing one decides: cancellation
//!   (caller, then an existing stop, then the deadline) → permission → tool budget → the tool's
//!   own limit and price → repetition (exact; or, for a tool the progress policy judges by
//!   result, its poll limit then the repetition limit on its charged attempts) → cycle → reserve.
//!   A model call: cancellation → model budget → spend reservation.
//! - The progress checks ([`progress`](super::progress)) share the repetition check's place:
//!   after permission and every budget, so a call a budget refuses halts for that budget, never
//!   `NoProgress`; a repetition or cycle that the policy nudges records a `Nudged` event and
//!   reserves nothing. The error streak is decided where a failure becomes known
//!   ([`Ledger::note_result`], [`Ledger::note_failure`]), under this same lock.
//! - A priced tool's call is charged, and a model call's spend reserved, only once every check
//!   before it passed, in the same critical section; a spend reservation is settled once
//!   ([`Ledger::settle`]).
//! - `model_calls <= limits.model_calls()`, `tool_calls <= limits.tool_calls()`, and every
//!   signature's count is `<= limits.repetitions()` (for a tool judged by result: its charged
//!   attempts, and its attempts are `<=` its poll limit): a reservation happens only after the
//!   matching check passed under the same lock.
//! - Reservations are never rolled back.
//! - `stop` goes from `None` to `Some` at most once (the first halt wins) and never back; a halt
//!   event is appended exactly when that happens, so the log has at most one halt event.
//! - Once `stop` is set, nothing more is admitted, observed or recorded (halts are sticky),
//!   except [`Ledger::append`]'s record of something that already happened.
//! - A tool call is admitted only with its [`Signature`]: [`Ledger::admit_tool`] takes one.
//!   [`Ledger::precheck_tool`] runs the checks before repetition for a caller that has not
//!   signed yet, and never admits.
//! - The n-th `ModelCall`, `ToolCall` and `Middleware` events carry count n.
//! - [`Ledger::tentatively`] runs one decision in which a halt is described instead of
//!   recorded: the decision is the same, nothing about the stop changes, and the caller records
//!   the described halt later ([`Ledger::halt_with`]) or not at all. A parallel batch uses it to
//!   let the calls admitted before a refusal run, as they would have one after another.
//! - Everything here runs under the ledger's lock, so nothing here wakes a task or formats
//!   text: what the model is told of the budgets left is read out as numbers ([`Remaining`])
//!   and put into words by the guard after the lock is released, and a halt's detail comes in
//!   made and leaves shared (an `Arc<str>`), never copied here.
//! - Events name tools with the scope's own copy of each name ([`Names`]), never with the tool
//!   set's shared `Arc`: tools are shared by every request on every thread, and a reference count
//!   bumped by each event would be one cache line that all of them write. Journal events may hold
//!   the shared name: they come with a durable commit anyway.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use super::progress::{Digest, Rules, Tracker, Verdict};
use super::stop::Stop;
use crate::canonical::Signature;
use crate::event::{ControlEvent, EventKind, HaltReason, Subject};
use crate::limits::Limits;
use crate::progress::Nudge;
use crate::spend::{Account, Micros, Price, Refusal, Reserved, Spend};
use crate::transport::Usage;

/// What held when the lock was taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Gate {
    /// The caller's cancellation token has fired.
    pub(crate) caller_cancelled: bool,
    /// The scope's deadline has passed.
    pub(crate) deadline_passed: bool,
}

/// Events a scope has room for before its log first grows: a short run's whole log (a review
/// records about ten), so most runs allocate it once, when the scope is built.
const EVENTS_AT_FIRST: usize = 8;

/// Counters, repetition map, events and stop reason of one scope.
#[derive(Debug)]
#[cfg_attr(test, derive(Clone))]
pub(crate) struct Ledger {
    model_calls: u32,
    tool_calls: u32,
    middleware: u32,
    repetitions: BTreeMap<String, u32>,
    events: Vec<ControlEvent>,
    names: Names,
    stop: Option<HaltReason>,
    account: Account,
    /// Admitted attempts of each tool that has its own limit.
    per_tool: BTreeMap<Box<str>, u32>,
    /// What this scope's descendants were admitted: counted against this scope's limits too.
    below: Below,
    /// Whether the wrap-up call was admitted.
    wrapped: bool,
    /// Whether [`tentatively`](Self::tentatively) runs: a halt is then described in
    /// `described` instead of being recorded.
    tentative: bool,
    described: Option<(HaltReason, ControlEvent)>,
    /// What the recorded halt says beyond its reason: the pool that refused a call (made before
    /// the lock was taken, shared, so that reading it under the lock copies no text), or the
    /// cycle or streak a progress check halted on (put into words after the lock).
    detail: Option<Detail>,
    /// What the progress checks remember (empty unless the scope's policy is active).
    progress: Tracker,
}

/// What a halt says beyond its reason, as the ledger keeps it: no text is made under the lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Detail {
    /// Words made before the lock (a pool's refusal).
    #[cfg(feature = "pools")]
    Text(Arc<str>),
    /// A cycle of these tools, in call order, that came round this many times.
    Cycle(Vec<Arc<str>>, u32),
    /// This many tool calls in a row failed.
    Streak(u32),
}

/// Why the ledger admitted no tool call: a stop, or the run's one nudge (answered instead of
/// run; not a halt).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Refuse {
    Stop(Stop),
    Nudge(Nudge),
}

impl From<Stop> for Refuse {
    fn from(stop: Stop) -> Self {
        Self::Stop(stop)
    }
}

impl Default for Ledger {
    fn default() -> Self {
        Self {
            model_calls: 0,
            tool_calls: 0,
            middleware: 0,
            repetitions: BTreeMap::new(),
            events: Vec::with_capacity(EVENTS_AT_FIRST),
            names: Names::default(),
            stop: None,
            account: Account::default(),
            per_tool: BTreeMap::new(),
            below: Below::default(),
            wrapped: false,
            tentative: false,
            described: None,
            detail: None,
            progress: Tracker::default(),
        }
    }
}

/// What a run has left of each of its budgets: the numbers of the notice the model is told
/// when the host discloses them, copied out of the ledger under its lock and formatted after.
/// Token and cost budgets that are not set are `None`, and left out of the notice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Remaining {
    pub(crate) model_calls: u32,
    pub(crate) tool_calls: u32,
    pub(crate) input_tokens: Option<u64>,
    pub(crate) output_tokens: Option<u64>,
    pub(crate) total_tokens: Option<u64>,
    pub(crate) cost: Option<Micros>,
}

impl fmt::Display for Remaining {
    /// `Remaining budget: 3 model calls, 2 tool calls, 1200 total tokens, 400µ.` (only the
    /// token and cost budgets that are set).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Remaining budget: {} model calls, {} tool calls", self.model_calls, self.tool_calls)?;
        for (name, left) in [
            ("input tokens", self.input_tokens),
            ("output tokens", self.output_tokens),
            ("total tokens", self.total_tokens),
        ] {
            if let Some(left) = left {
                write!(f, ", {left} {name}")?;
            }
        }
        if let Some(cost) = self.cost {
            write!(f, ", {cost}")?;
        }
        f.write_str(".")
    }
}

/// Model and tool calls admitted in a scope's descendants (their spend is in its account).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Below {
    pub(crate) model_calls: u32,
    pub(crate) tool_calls: u32,
}

/// One ancestor of a scope, locked for one of the scope's admissions: its limits and its
/// ledger. A child's admission is an admission in each ancestor too.
pub(crate) struct Branch<'a> {
    pub(crate) limits: &'a Limits,
    pub(crate) ledger: &'a mut Ledger,
}

impl Branch<'_> {
    /// Halts this ancestor for `reason`, charged to `subject` (an admission of a descendant
    /// exhausted its budget).
    fn halt(&mut self, reason: HaltReason, subject: Subject) {
        let count = match subject {
            Subject::Model => self.ledger.model_calls,
            _ => self.ledger.tool_calls,
        };
        self.ledger.halt(reason, subject, count);
    }
}

/// The halt of the nearest stopped ancestor, if one is stopped.
fn ancestors_stop(ancestors: &[Branch<'_>]) -> Option<HaltReason> {
    ancestors.iter().rev().find_map(|branch| branch.ledger.stop)
}

/// What a model call asks of the spend budgets: its estimated input, its own output cap, and
/// the price of the model's tokens.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SpendAsk {
    pub(crate) input: u64,
    pub(crate) cap: u64,
    pub(crate) price: Option<Price>,
}

/// What a tool's call is subject to besides the scope's limits: its own per-run limit, and its
/// price.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ToolTerms {
    /// Whether the scope grants the tool's capability.
    pub(crate) granted: bool,
    pub(crate) limit: Option<u32>,
    pub(crate) price: ToolPrice,
    /// The tool's poll limit, if its repeats are judged by result.
    pub(crate) polls: Option<u32>,
    /// The run's progress rules.
    pub(crate) rules: Rules,
}

/// A tool's price, as the scope's table gives it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) enum ToolPrice {
    /// The scope has no price table.
    #[default]
    NoTable,
    /// The table has no price for this tool.
    Unpriced,
    /// Each admitted call costs this.
    Priced(Micros),
}

/// The scope's own copies of the tool names its events hold: one per tool the scope has seen,
/// looked up by content (a run sees a handful of tools, all from its set).
#[derive(Debug, Default)]
#[cfg_attr(test, derive(Clone))]
struct Names(Vec<Arc<str>>);

impl Names {
    /// The scope's copy of `name`, made on its first use.
    fn local(&mut self, name: &Arc<str>) -> Arc<str> {
        if let Some(held) = self.0.iter().find(|held| ***held == **name) {
            return Arc::clone(held);
        }
        let held: Arc<str> = Arc::from(&**name);
        self.0.push(Arc::clone(&held));
        held
    }
}

/// The counters of a logical run that a journal persists and restores: model calls, tool calls,
/// middleware observations, and admitted attempts per signature.
#[cfg(feature = "journal")]
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counters {
    pub(crate) model_calls: u32,
    pub(crate) tool_calls: u32,
    pub(crate) middleware: u32,
    pub(crate) repetitions: BTreeMap<String, u32>,
    /// Admitted attempts of each tool that has its own limit.
    pub(crate) per_tool: BTreeMap<String, u32>,
    /// Settled tokens and money, reservations in flight, calls over their reservation.
    pub(crate) spend: (Usage, Micros, Reserved, u32),
    /// Model and tool calls admitted by descendants (child scopes) and charged here.
    pub(crate) below: Below,
    /// What the progress checks remember (empty unless the run's policy is active).
    pub(crate) progress: Tracker,
}

#[cfg(feature = "journal")]
impl Counters {
    /// What the logical run these counters persist charged each of its ancestors: its model and
    /// tool calls with its descendants', and its spend (reservations in flight included).
    pub(crate) fn charged_above(&self) -> (Below, Account) {
        let calls = Below {
            model_calls: self.model_calls.saturating_add(self.below.model_calls),
            tool_calls: self.tool_calls.saturating_add(self.below.tool_calls),
        };
        let (settled, cost, reserved, over) = self.spend;
        (calls, Account::from_parts(settled, cost, reserved, over))
    }
}

/// What a deadline expiry is charged to: the model call or the tool in flight, or the run as a
/// whole while it waited on its store (a journal's commit, a pool's reservation).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Activity<'a> {
    Model,
    Tool(&'a Arc<str>),
    #[cfg(any(feature = "journal", feature = "pools"))]
    Store,
}

impl Ledger {
    /// The cancellation check shared by every admission: the caller first, so that the caller's
    /// cancellation wins every race; then a recorded stop; then the deadline, which is recorded
    /// as a halt the first time it is seen.
    pub(crate) fn check(&mut self, gate: Gate, activity: Activity<'_>) -> Result<(), Stop> {
        if gate.caller_cancelled {
            return Err(Stop::Cancelled);
        }
        if let Some(reason) = self.stop {
            return Err(Stop::Halted(reason));
        }
        if gate.deadline_passed {
            return Err(self.halt_for(HaltReason::DeadlineExceeded, activity));
        }
        Ok(())
    }

    /// Records a halt charged to `activity` at its current count.
    fn halt_for(&mut self, reason: HaltReason, activity: Activity<'_>) -> Stop {
        match activity {
            Activity::Model => self.halt(reason, Subject::Model, self.model_calls),
            Activity::Tool(name) => {
                let subject = self.tool(name);
                self.halt(reason, subject, self.tool_calls)
            }
            #[cfg(any(feature = "journal", feature = "pools"))]
            Activity::Store => self.halt(reason, Subject::Run, self.model_calls),
        }
    }

    /// The subject for `name`, with the scope's own copy of it.
    fn tool(&mut self, name: &Arc<str>) -> Subject {
        Subject::Tool(self.names.local(name))
    }

    /// Records `reason` unless a stop is already recorded; returns the stop in force. While
    /// [`tentatively`](Self::tentatively) runs, the halt is described, not recorded.
    fn halt(&mut self, reason: HaltReason, subject: Subject, count: u32) -> Stop {
        if let Some(first) = self.stop {
            return Stop::Halted(first);
        }
        let event = ControlEvent::new(EventKind::Halt(reason), subject, count);
        if self.tentative {
            self.described = Some((reason, event));
            return Stop::Halted(reason);
        }
        self.stop = Some(reason);
        self.events.push(event);
        Stop::Halted(reason)
    }

    /// Runs `decision` with its halt, if it halts, described instead of recorded: returns the
    /// decision and the halt it would have recorded (its reason and event).
    pub(crate) fn tentatively<T>(
        &mut self,
        decision: impl FnOnce(&mut Self) -> T,
    ) -> (T, Option<(HaltReason, ControlEvent)>) {
        self.tentative = true;
        let decided = decision(self);
        self.tentative = false;
        (decided, self.described.take())
    }

    /// Admits one model call, or halts with `ModelBudget`; under a spend budget (`ask`), holds
    /// its reservation or halts with `TokenBudget` or `CostBudget`. Returns the new model-call
    /// count and the reservation. The call is an admission in every ancestor too: refused if
    /// one is stopped, and an ancestor whose budget it would exceed halts with this scope.
    pub(crate) fn admit_model(
        &mut self,
        gate: Gate,
        limits: &Limits,
        ask: Option<SpendAsk>,
        ancestors: &mut [Branch<'_>],
    ) -> Result<(u32, Option<Reserved>), Stop> {
        self.check(gate, Activity::Model)?;
        self.inherit(ancestors, Subject::Model, self.model_calls)?;
        // What a wrap-up keeps aside is not the run's to spend.
        let limits = &*before_wrap_up(limits, ask.as_ref().and_then(|ask| ask.price.as_ref()));
        if self.model_calls + self.below.model_calls >= limits.model_calls() {
            return Err(self.halt(HaltReason::ModelBudget, Subject::Model, self.model_calls));
        }
        if let Some(branch) = ancestors
            .iter_mut()
            .find(|b| b.ledger.model_calls + b.ledger.below.model_calls >= b.limits.model_calls())
        {
            branch.halt(HaltReason::ModelBudget, Subject::Model);
            return Err(self.halt(HaltReason::ModelBudget, Subject::Model, self.model_calls));
        }
        let reserved = match ask {
            Some(ask) => Some(self.reserve(limits, ask, ancestors)?),
            None => None,
        };
        self.model_calls += 1;
        self.events.push(ControlEvent::new(EventKind::ModelCall, Subject::Model, self.model_calls));
        for branch in ancestors {
            branch.ledger.below.model_calls += 1;
        }
        Ok((self.model_calls, reserved))
    }

    /// Holds a model call's reservation in this scope and every ancestor, its output the
    /// smallest room any of them leaves, or halts. An ancestor halts with this scope when the
    /// call does not fit its own budgets (no room at all, or less than its own minimum output).
    fn reserve(
        &mut self,
        limits: &Limits,
        ask: SpendAsk,
        ancestors: &mut [Branch<'_>],
    ) -> Result<Reserved, Stop> {
        let price = ask.price.as_ref();
        let own = self.account.room(limits, price, ask.input, ask.cap);
        let mut tightest = own.and_then(|room| Account::enough(limits, room).map(|_| room));
        for branch in ancestors.iter_mut() {
            let room = branch.ledger.account.room(branch.limits, price, ask.input, ask.cap);
            match room.and_then(|room| Account::enough(branch.limits, room).map(|_| room)) {
                Ok(room) => {
                    if let Ok(current) = &mut tightest
                        && room.output < current.output
                    {
                        *current = room;
                    }
                }
                Err(refusal) => {
                    branch.halt(refusal_reason(refusal), Subject::Model);
                    tightest = tightest.and(Err(refusal));
                }
            }
        }
        let output = match tightest.and_then(|room| Account::enough(limits, room)) {
            Ok(output) => output,
            Err(refusal) => return Err(self.refuse_spend(refusal)),
        };
        for branch in ancestors {
            branch.ledger.account.hold(price, ask.input, output);
        }
        Ok(self.account.hold(price, ask.input, output))
    }

    /// The largest output a model call may be granted if [`admit_model`](Self::admit_model) ran
    /// now, or `None` if it would refuse: the same checks, nothing recorded or held. A caller
    /// that must reserve elsewhere first (a shared pool) asks this, so that a call the run
    /// would refuse reaches no pool.
    pub(crate) fn peek_model(
        &self,
        gate: Gate,
        limits: &Limits,
        ask: Option<SpendAsk>,
        ancestors: &[Branch<'_>],
    ) -> Option<u64> {
        self.room_for_model(gate, limits, ask, ancestors, Holds::Counted)
    }

    /// Whether a model call of `ask` is refused now only because of holds in flight: it does not
    /// fit this scope's and its ancestors' spend budgets as they are, and would fit them once
    /// every call in flight settled, at most at what it holds. Such a call waits for a hold to
    /// settle instead of halting the tree (§27's fair shares): a budget is exhausted only when
    /// what is settled leaves no room. Nothing is recorded or held.
    pub(crate) fn waits_for_holds(
        &self,
        gate: Gate,
        limits: &Limits,
        ask: Option<SpendAsk>,
        ancestors: &[Branch<'_>],
    ) -> bool {
        ask.is_some()
            && self.room_for_model(gate, limits, ask, ancestors, Holds::Counted).is_none()
            && self.room_for_model(gate, limits, ask, ancestors, Holds::Released).is_some()
    }

    /// [`peek_model`](Self::peek_model), with the holds in flight counted or released.
    fn room_for_model(
        &self,
        gate: Gate,
        limits: &Limits,
        ask: Option<SpendAsk>,
        ancestors: &[Branch<'_>],
        holds: Holds,
    ) -> Option<u64> {
        if gate.caller_cancelled || gate.deadline_passed || self.stop.is_some() {
            return None;
        }
        if ancestors.iter().any(|branch| branch.ledger.stop.is_some()) {
            return None;
        }
        let limits = &*before_wrap_up(limits, ask.as_ref().and_then(|ask| ask.price.as_ref()));
        let spent = |ledger: &Ledger| ledger.model_calls + ledger.below.model_calls;
        if spent(self) >= limits.model_calls()
            || ancestors.iter().any(|branch| spent(branch.ledger) >= branch.limits.model_calls())
        {
            return None;
        }
        let Some(ask) = ask else { return Some(u64::MAX) };
        let price = ask.price.as_ref();
        let mut output = ask.cap;
        let own = std::iter::once((limits, &self.account));
        let chain = ancestors.iter().map(|branch| (branch.limits, &branch.ledger.account));
        for (limits, account) in own.chain(chain) {
            let room = match holds {
                Holds::Counted => account.room(limits, price, ask.input, ask.cap),
                Holds::Released => account.without_holds().room(limits, price, ask.input, ask.cap),
            }
            .ok()?;
            output = output.min(Account::enough(limits, room).ok()?);
        }
        Some(output)
    }

    /// Halts the run for a shared pool's refusal (`reason`, charged to the model at its current
    /// count), with `detail` naming the pool, unless the caller cancelled or a stop came first.
    #[cfg(feature = "pools")]
    pub(crate) fn refuse_pool(&mut self, gate: Gate, reason: HaltReason, detail: Arc<str>) -> Stop {
        if gate.caller_cancelled {
            return Stop::Cancelled;
        }
        if let Some(first) = self.stop {
            return Stop::Halted(first);
        }
        self.detail = Some(Detail::Text(detail));
        self.halt(reason, Subject::Model, self.model_calls)
    }

    /// What the recorded halt says beyond its reason, if anything. A progress check's detail is
    /// the recorded halt's only when that halt is `NoProgress` (a parallel batch may describe
    /// one that another stop overtakes).
    pub(crate) fn detail(&self) -> Option<Detail> {
        match &self.detail {
            Some(Detail::Cycle(..) | Detail::Streak(_)) if self.stop != Some(HaltReason::NoProgress) => None,
            detail => detail.clone(),
        }
    }

    /// Admits the one call a wrap-up kept aside, after a limit stopped the run: not if the caller
    /// cancelled, the deadline passed, the stop was not a limit's, or it was admitted already.
    /// Its reservation is held within the whole budgets (what was kept aside included).
    pub(crate) fn admit_wrap_up(
        &mut self,
        gate: Gate,
        limits: &Limits,
        ask: Option<SpendAsk>,
        ancestors: &mut [Branch<'_>],
    ) -> Result<Option<Reserved>, Stop> {
        let stop = self.stop_now(gate);
        let eligible = matches!(self.stop, Some(reason) if reason.is_limit());
        if gate.caller_cancelled
            || gate.deadline_passed
            || !eligible
            || self.wrapped
            || limits.wrap_up_tokens().is_none()
        {
            return Err(stop);
        }
        if self.model_calls + self.below.model_calls >= limits.model_calls() {
            return Err(stop);
        }
        let reserved = match ask {
            Some(ask) => {
                let price = ask.price.as_ref();
                let room = self.account.room(limits, price, ask.input, ask.cap);
                match room.and_then(|room| Account::enough(limits, room)) {
                    Ok(output) => {
                        for branch in ancestors.iter_mut() {
                            branch.ledger.account.hold(price, ask.input, output);
                        }
                        Some(self.account.hold(price, ask.input, output))
                    }
                    Err(_) => return Err(stop),
                }
            }
            None => None,
        };
        self.wrapped = true;
        self.model_calls += 1;
        self.events.push(ControlEvent::new(EventKind::WrapUp, Subject::Model, self.model_calls));
        for branch in ancestors {
            branch.ledger.below.model_calls += 1;
        }
        Ok(reserved)
    }

    /// What the run has left, as plain numbers: read under the lock, put into the words the
    /// model is told ([`Remaining`]'s `Display`) once it is released.
    pub(crate) fn remaining(&self, limits: &Limits, price: Option<&Price>) -> Remaining {
        let limits = before_wrap_up(limits, price);
        let spend = self.account.report(&limits);
        let held = |settled: u64, reserved: u64| settled.saturating_add(reserved);
        let (settled, reserved) = (spend.settled, spend.reserved);
        let left = |budget: Option<u64>, used: u64| budget.map(|budget| budget.saturating_sub(used));
        Remaining {
            model_calls: limits.model_calls().saturating_sub(self.model_calls + self.below.model_calls),
            tool_calls: limits.tool_calls().saturating_sub(self.tool_calls + self.below.tool_calls),
            input_tokens: left(limits.input_tokens(), held(settled.input_tokens, reserved.input_tokens)),
            output_tokens: left(limits.output_tokens(), held(settled.output_tokens, reserved.output_tokens)),
            total_tokens: left(
                limits.total_tokens(),
                held(settled.total_tokens(), reserved.input_tokens.saturating_add(reserved.output_tokens)),
            ),
            cost: limits.cost().map(|cost| cost.saturating_sub(spend.cost.saturating_add(reserved.cost))),
        }
    }

    /// Halts for a spend refusal, charged to the model at its current count.
    fn refuse_spend(&mut self, refusal: Refusal) -> Stop {
        self.halt(refusal_reason(refusal), Subject::Model, self.model_calls)
    }

    /// Settles a model call's spend: its reservation (if it had one) replaced by the provider's
    /// `reported` usage, or charged whole without a report. A settlement that takes the run past
    /// a budget halts it, whatever else happened.
    pub(crate) fn settle(
        &mut self,
        limits: &Limits,
        price: Option<&Price>,
        reserved: Option<Reserved>,
        reported: Option<Usage>,
        ancestors: &mut [Branch<'_>],
    ) -> Result<(), Stop> {
        let mut crossed = None;
        for branch in ancestors.iter_mut() {
            if let Err(refusal) = branch.ledger.account.settle(branch.limits, price, reserved, reported) {
                branch.halt(refusal_reason(refusal), Subject::Model);
                let past = branch.ledger.account.report(branch.limits);
                self.account.crossed_above(past.overshoot_tokens, past.overshoot_cost);
                crossed = Some(refusal);
            }
        }
        match self.account.settle(limits, price, reserved, reported).err().or(crossed) {
            None => Ok(()),
            Some(refusal) => Err(self.refuse_spend(refusal)),
        }
    }

    /// Charges a stream cut past its reservation (here and in every ancestor), and halts
    /// `TokenBudget`.
    pub(crate) fn settle_cut(
        &mut self,
        price: Option<&Price>,
        reserved: Reserved,
        output: u64,
        ancestors: &mut [Branch<'_>],
    ) -> Stop {
        for branch in ancestors.iter_mut() {
            branch.ledger.account.settle_cut(price, reserved, output);
            let past = branch.ledger.account.report(branch.limits);
            if past.overshoot_tokens > 0 {
                branch.halt(HaltReason::TokenBudget, Subject::Model);
                self.account.crossed_above(past.overshoot_tokens, past.overshoot_cost);
            }
        }
        self.account.settle_cut(price, reserved, output);
        self.refuse_spend(Refusal::Tokens)
    }

    /// Whether this scope can admit no tool call any more: stopped, or its tool budget spent by
    /// itself and its descendants.
    pub(crate) fn tools_closed(&self, limits: &Limits) -> bool {
        self.stop.is_some() || self.tool_calls + self.below.tool_calls >= limits.tool_calls()
    }

    /// The run's spend under `limits`.
    pub(crate) fn spend(&self, limits: &Limits) -> Spend {
        self.account.report(limits)
    }

    /// Counts one observation of a call to `tool`, after the cancellation checks. Returns the
    /// observation count. Records nothing: the built-in middleware records its event itself
    /// ([`record_middleware`](Self::record_middleware)).
    pub(crate) fn observe_call(&mut self, gate: Gate, tool: &Arc<str>) -> Result<u32, Stop> {
        self.check(gate, Activity::Tool(tool))?;
        self.middleware += 1;
        Ok(self.middleware)
    }

    /// Records the built-in middleware's `Middleware` event for observation `count` of a call to
    /// `tool`, unless the run stopped since.
    pub(crate) fn record_middleware(&mut self, gate: Gate, tool: &Arc<str>, count: u32) -> Result<(), Stop> {
        let subject = self.tool(tool);
        self.record(gate, ControlEvent::new(EventKind::Middleware, subject, count))
    }

    /// The checks of a tool call before repetition: cancellation → permission → tool budget.
    /// Nothing is recorded when they pass.
    pub(crate) fn precheck_tool(
        &mut self,
        gate: Gate,
        limits: &Limits,
        tool: &Arc<str>,
        granted: bool,
        ancestors: &mut [Branch<'_>],
    ) -> Result<(), Stop> {
        self.check(gate, Activity::Tool(tool))?;
        // The subject is looked up only when a halt records it.
        if let Some(reason) = ancestors_stop(ancestors) {
            let subject = self.tool(tool);
            return Err(self.halt(reason, subject, self.tool_calls));
        }
        if !granted {
            let subject = self.tool(tool);
            return Err(self.halt(HaltReason::PermissionDenied, subject, self.tool_calls));
        }
        if self.tool_calls + self.below.tool_calls >= limits.tool_calls() {
            let subject = self.tool(tool);
            return Err(self.halt(HaltReason::ToolBudget, subject, self.tool_calls));
        }
        if let Some(branch) = ancestors
            .iter_mut()
            .find(|b| b.ledger.tool_calls + b.ledger.below.tool_calls >= b.limits.tool_calls())
        {
            let subject = branch.ledger.tool(tool);
            branch.halt(HaltReason::ToolBudget, subject);
            let subject = self.tool(tool);
            return Err(self.halt(HaltReason::ToolBudget, subject, self.tool_calls));
        }
        Ok(())
    }

    /// The guard: cancellation → permission → tool budget → the tool's own limit and price →
    /// repetition (exact, or by result with its poll limit) → cycle → reserve. Returns the new
    /// tool-call count, or the stop, or the run's one nudge in place of a repetition or cycle
    /// halt.
    pub(crate) fn admit_tool(
        &mut self,
        gate: Gate,
        limits: &Limits,
        tool: &Arc<str>,
        terms: ToolTerms,
        signature: Signature,
        ancestors: &mut [Branch<'_>],
    ) -> Result<u32, Refuse> {
        self.precheck_tool(gate, limits, tool, terms.granted, ancestors)?;
        let tool_count = self.per_tool.get(&**tool).copied().unwrap_or(0);
        if terms.limit.is_some_and(|limit| tool_count >= limit) {
            let subject = self.tool(tool);
            return Err(self.halt(HaltReason::ToolLimit, subject, self.tool_calls).into());
        }
        let price = match terms.price {
            // The scope has prices but none for this tool: under a cost budget, fail closed.
            ToolPrice::Unpriced if limits.cost().is_some() => {
                let subject = self.tool(tool);
                return Err(self.halt(HaltReason::CostBudget, subject, self.tool_calls).into());
            }
            ToolPrice::Priced(price) => Some(price),
            ToolPrice::Unpriced | ToolPrice::NoTable => None,
        };
        if let Some(price) = price {
            let refused = ancestors.iter().position(|b| b.ledger.account.tool_room(b.limits, price).is_err());
            if self.account.tool_room(limits, price).is_err() || refused.is_some() {
                if let Some(branch) = refused.map(|index| &mut ancestors[index]) {
                    let subject = branch.ledger.tool(tool);
                    branch.halt(HaltReason::CostBudget, subject);
                }
                let subject = self.tool(tool);
                return Err(self.halt(HaltReason::CostBudget, subject, self.tool_calls).into());
            }
        }
        self.judge_progress(limits, tool, terms, signature.as_str())?;
        if let Some(price) = price {
            self.account.charge_tool(price);
        }
        for branch in ancestors.iter_mut() {
            branch.ledger.below.tool_calls += 1;
            if let Some(price) = price {
                branch.ledger.account.charge_tool(price);
            }
        }
        if terms.limit.is_some() {
            *self.per_tool.entry(Box::from(&**tool)).or_insert(0) += 1;
        }
        self.tool_calls += 1;
        let local = self.names.local(tool);
        if terms.rules.active {
            let by_result = terms.polls.is_some();
            self.progress.admitted(terms.rules, signature.as_str(), &local, self.tool_calls, by_result);
        }
        let subject = Subject::Tool(local);
        if terms.polls.is_none() {
            *self.repetitions.entry(signature.into_string()).or_insert(0) += 1;
        }
        self.events.push(ControlEvent::new(EventKind::ToolCall, subject, self.tool_calls));
        Ok(self.tool_calls)
    }

    /// Step 5 of the order, the repetition check and the cycle check after it: a tool judged by
    /// result meets its poll limit, then the repetition limit on its charged attempts; any other
    /// tool the repetition limit on its admitted attempts; then, under a cycle rule, the cycle
    /// the candidate would complete. A repetition or a cycle is answered with the run's one
    /// nudge when the policy asks for it, else halts.
    fn judge_progress(
        &mut self,
        limits: &Limits,
        tool: &Arc<str>,
        terms: ToolTerms,
        signature: &str,
    ) -> Result<(), Refuse> {
        let verdict = if let Some(polls) = terms.polls {
            self.progress.judge_by_result(signature, polls, limits.repetitions())
        } else {
            let seen = self.repetitions.get(signature).copied().unwrap_or(0);
            if seen >= limits.repetitions() { Verdict::Repeat { count: seen } } else { Verdict::Admit }
        };
        let verdict = match verdict {
            Verdict::Admit => self.progress.cycle(terms.rules, signature),
            decided => decided,
        };
        // What a nudge would say; a poll limit is a limit, never nudged.
        let nudge = match &verdict {
            Verdict::Admit => return Ok(()),
            Verdict::PollLimit { .. } => None,
            Verdict::Repeat { count } => Some(Nudge::repeat(Arc::clone(tool), *count)),
            Verdict::Cycle { tools, repeats } => {
                Some(Nudge::cycle(Arc::clone(tool), tools.clone(), *repeats))
            }
        };
        let subject = self.tool(tool);
        if let Some(nudge) = nudge.filter(|_| terms.rules.nudge && self.progress.take_nudge()) {
            return Err(self.nudged(terms.rules, &subject, nudge));
        }
        match verdict {
            Verdict::Admit => Ok(()),
            Verdict::PollLimit { count } | Verdict::Repeat { count } => {
                Err(self.halt(HaltReason::RepeatedCall, subject, count).into())
            }
            Verdict::Cycle { tools, repeats } => {
                self.detail = Some(Detail::Cycle(tools, repeats));
                Err(self.halt(HaltReason::NoProgress, subject, self.tool_calls).into())
            }
        }
    }

    /// Records the run's one nudge (a `Nudged` event) in place of a halt: the call is refused
    /// without a halt, which extends the error streak like any refusal.
    fn nudged(&mut self, rules: Rules, subject: &Subject, nudge: Nudge) -> Refuse {
        self.events.push(ControlEvent::new(EventKind::Nudged, subject.clone(), 1));
        let streak = self.progress.failed();
        match self.streak_halt(rules, subject.clone(), streak) {
            Some(stop) => Refuse::Stop(stop),
            None => Refuse::Nudge(nudge),
        }
    }

    /// Halts `NoProgress` if `streak` failed calls in a row reach the rule's streak, unless an
    /// admitted call's result is not back yet: in a parallel batch that call comes earlier in
    /// the reply, and one after another its result would have been noted first (and may have
    /// ended the streak), so the streak is decided on the results as they come back instead.
    fn streak_halt(&mut self, rules: Rules, subject: Subject, streak: u32) -> Option<Stop> {
        let limit = rules.streak?;
        if streak < limit || self.progress.is_waiting() {
            return None;
        }
        self.detail = Some(Detail::Streak(streak));
        Some(self.halt(HaltReason::NoProgress, subject, streak))
    }

    /// Notes the result of tool call `count` of `tool` (its digest, and whether it failed) for
    /// the progress checks: a failure extends the error streak and may halt `NoProgress`.
    pub(crate) fn note_result(
        &mut self,
        gate: Gate,
        rules: Rules,
        tool: &Arc<str>,
        count: u32,
        (digest, failed): (Digest, bool),
    ) -> Result<(), Stop> {
        self.check(gate, Activity::Tool(tool))?;
        let streak = self.progress.result(count, digest, failed);
        let subject = self.tool(tool);
        self.streak_halt(rules, subject, streak).map_or(Ok(()), Err)
    }

    /// Notes a call that named no known tool (`tool` is `None`: charged to the model) or did not
    /// bind: it extends the error streak and may halt `NoProgress`.
    pub(crate) fn note_failure(
        &mut self,
        gate: Gate,
        rules: Rules,
        tool: Option<&Arc<str>>,
    ) -> Result<(), Stop> {
        let activity = tool.map_or(Activity::Model, Activity::Tool);
        self.check(gate, activity)?;
        let streak = self.progress.failed();
        let subject = tool.map_or(Subject::Model, |tool| self.tool(tool));
        self.streak_halt(rules, subject, streak).map_or(Ok(()), Err)
    }

    /// Refuses a model reply with too many tool calls: the cancellation check, then the
    /// `TooManyCalls` halt charged to the model at its current count.
    pub(crate) fn refuse_reply(&mut self, gate: Gate) -> Stop {
        if let Err(stop) = self.check(gate, Activity::Model) {
            return stop;
        }
        self.halt(HaltReason::TooManyCalls, Subject::Model, self.model_calls)
    }

    /// Records the deadline as the stop reason if nothing stopped the run first (the caller's
    /// cancellation does).
    pub(crate) fn expire(&mut self, gate: Gate, activity: Activity<'_>) -> Stop {
        if gate.caller_cancelled {
            return Stop::Cancelled;
        }
        self.halt_for(HaltReason::DeadlineExceeded, activity)
    }

    /// The stop in force when the scope's token fired: the caller first, then the recorded halt.
    pub(crate) fn stop_now(&self, gate: Gate) -> Stop {
        if gate.caller_cancelled {
            return Stop::Cancelled;
        }
        // The token fires only after the caller cancels or a halt is recorded.
        self.stop.map_or(Stop::Cancelled, Stop::Halted)
    }

    /// As [`stop_now`](Self::stop_now) in a scope that has ancestors: when the token fired
    /// because an ancestor halted, this scope halts for the same reason, charged to `activity`.
    pub(crate) fn stop_now_under(
        &mut self,
        gate: Gate,
        activity: Activity<'_>,
        ancestors: &[Branch<'_>],
    ) -> Stop {
        if gate.caller_cancelled || self.stop.is_some() {
            return self.stop_now(gate);
        }
        match ancestors_stop(ancestors) {
            Some(reason) => self.halt_for(reason, activity),
            None => Stop::Cancelled,
        }
    }

    /// Halts this scope for the reason an ancestor halted, if one did: a budget shared with a
    /// parent is spent for the whole tree, so the child stops as the parent did (its caller did
    /// not cancel it).
    fn inherit(&mut self, ancestors: &[Branch<'_>], subject: Subject, count: u32) -> Result<(), Stop> {
        match ancestors_stop(ancestors) {
            Some(reason) => Err(self.halt(reason, subject, count)),
            None => Ok(()),
        }
    }

    pub(crate) fn stop(&self) -> Option<HaltReason> {
        self.stop
    }

    pub(crate) fn model_calls(&self) -> u32 {
        self.model_calls
    }

    pub(crate) fn tool_calls(&self) -> u32 {
        self.tool_calls
    }

    /// The model and tool calls admitted in this scope and every scope below it.
    pub(crate) fn tree_calls(&self) -> (u32, u32) {
        (
            self.model_calls.saturating_add(self.below.model_calls),
            self.tool_calls.saturating_add(self.below.tool_calls),
        )
    }

    pub(crate) fn events(&self) -> &[ControlEvent] {
        &self.events
    }

    /// The counters a journal persists for the logical run.
    #[cfg(feature = "journal")]
    pub(crate) fn counters(&self) -> Counters {
        Counters {
            model_calls: self.model_calls,
            tool_calls: self.tool_calls,
            middleware: self.middleware,
            repetitions: self.repetitions.clone(),
            per_tool: self.per_tool.iter().map(|(tool, count)| (tool.to_string(), *count)).collect(),
            spend: self.account.parts(),
            below: self.below,
            progress: self.progress.clone(),
        }
    }

    /// Whether nothing was counted, observed or recorded yet.
    #[cfg(feature = "journal")]
    pub(crate) fn is_fresh(&self) -> bool {
        self.model_calls == 0 && self.tool_calls == 0 && self.middleware == 0 && self.events.is_empty()
    }

    /// Continues a logical run: its persisted counters and audit log become this ledger's. No
    /// stop is restored: a journaled run that halted is finished and never resumed, and a
    /// deadline belongs to one attempt.
    #[cfg(feature = "journal")]
    pub(crate) fn restore(&mut self, counters: Counters, events: Vec<ControlEvent>) {
        self.model_calls = counters.model_calls;
        self.tool_calls = counters.tool_calls;
        self.middleware = counters.middleware;
        self.repetitions = counters.repetitions;
        self.per_tool =
            counters.per_tool.into_iter().map(|(tool, count)| (tool.into_boxed_str(), count)).collect();
        let (settled, cost, reserved, over) = counters.spend;
        self.account = Account::from_parts(settled, cost, reserved, over);
        // A reservation still held was a call in flight when its attempt ended: its provider may
        // have billed it.
        self.account.charge_in_flight();
        self.below = counters.below;
        self.progress = counters.progress;
        self.events = events;
        self.stop = None;
    }

    /// Charges here what a descendant's logical run charged in attempts this ledger's journal
    /// does not hold: its `calls` and `spend`. A spend that takes this scope past a budget
    /// halts it, as a settlement would.
    #[cfg(feature = "journal")]
    pub(crate) fn absorb(&mut self, limits: &Limits, (calls, spend): (Below, &Account)) {
        self.below.model_calls = self.below.model_calls.saturating_add(calls.model_calls);
        self.below.tool_calls = self.below.tool_calls.saturating_add(calls.tool_calls);
        if let Err(refusal) = self.account.absorb(limits, spend) {
            self.halt(refusal_reason(refusal), Subject::Model, self.model_calls);
        }
    }

    /// Appends an event recorded beside the guard's own (the built-in middleware's; a journal's:
    /// a proposal, a decision, an effect's start or result, a resume, a reconciliation), unless
    /// the run is stopped (the caller first, then a halt).
    pub(crate) fn record(&mut self, gate: Gate, event: ControlEvent) -> Result<(), Stop> {
        if gate.caller_cancelled {
            return Err(Stop::Cancelled);
        }
        if let Some(reason) = self.stop {
            return Err(Stop::Halted(reason));
        }
        self.events.push(event);
        Ok(())
    }

    /// Appends a journal's event even after a stop: it records something that happened (an
    /// effect's result, committed).
    #[cfg(feature = "journal")]
    pub(crate) fn append(&mut self, event: ControlEvent) {
        self.events.push(event);
    }

    /// Records `event` as the halt for `reason` unless the caller cancelled or a stop is
    /// already recorded; returns the stop in force.
    pub(crate) fn halt_with(&mut self, gate: Gate, reason: HaltReason, event: ControlEvent) -> Stop {
        if gate.caller_cancelled {
            return Stop::Cancelled;
        }
        if let Some(first) = self.stop {
            return Stop::Halted(first);
        }
        self.stop = Some(reason);
        self.events.push(event);
        Stop::Halted(reason)
    }

    /// A copy of this ledger, for a test that tries two decisions from one state.
    #[cfg(test)]
    pub(crate) fn clone_for_test(&self) -> Self {
        self.clone()
    }

    /// Admitted attempts of `signature` so far.
    #[cfg(test)]
    pub(crate) fn repetitions_of(&self, signature: &str) -> u32 {
        self.repetitions.get(signature).copied().unwrap_or(0)
    }
}

/// The halt for a spend refusal.
/// What the run itself may spend of `limits` when a wrap-up keeps some aside, its tokens priced
/// at `price`'s dearest rate ([`Limits::before_wrap_up`]).
fn before_wrap_up<'l>(limits: &'l Limits, price: Option<&Price>) -> std::borrow::Cow<'l, Limits> {
    limits.before_wrap_up(|tokens| price.map_or(Micros::ZERO, |price| price.dearest(tokens)))
}

fn refusal_reason(refusal: Refusal) -> HaltReason {
    match refusal {
        Refusal::Tokens => HaltReason::TokenBudget,
        Refusal::Cost => HaltReason::CostBudget,
    }
}

/// Whether a look at the room for a call counts the holds of calls in flight, or sees the
/// budgets as they would be once those calls settled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Holds {
    Counted,
    Released,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool() -> Arc<str> {
        Arc::from("read_ticket")
    }

    /// The signature of a call of `name` whose arguments are the JSON string `argument`.
    fn signed_as(name: &str, argument: &str) -> Signature {
        crate::canonical::signature(name, argument)
            .unwrap_or_else(|error| panic!("a string is signed: {error}"))
    }

    fn signed(argument: &str) -> Signature {
        signed_as("read_ticket", argument)
    }

    fn kinds(ledger: &Ledger) -> Vec<String> {
        ledger.events().iter().map(ToString::to_string).collect()
    }

    fn terms(granted: bool) -> ToolTerms {
        ToolTerms { granted, ..ToolTerms::default() }
    }

    /// An admission refused by the halt for `reason`.
    fn halted(reason: HaltReason) -> Result<u32, Refuse> {
        Err(Refuse::Stop(Stop::Halted(reason)))
    }

    const OPEN: Gate = Gate { caller_cancelled: false, deadline_passed: false };

    #[test]
    fn cancellation_is_checked_before_permission() {
        let tool = tool();
        let mut ledger = Ledger::default();
        let caller = Gate { caller_cancelled: true, deadline_passed: true };
        assert_eq!(
            ledger.precheck_tool(caller, &Limits::default(), &tool, false, &mut []),
            Err(Stop::Cancelled)
        );
        assert!(ledger.events().is_empty());
        let late = Gate { caller_cancelled: false, deadline_passed: true };
        assert_eq!(
            ledger.precheck_tool(late, &Limits::default(), &tool, false, &mut []),
            Err(Stop::Halted(HaltReason::DeadlineExceeded))
        );
        assert_eq!(kinds(&ledger), ["DeadlineExceeded read_ticket 0"]);
    }

    #[test]
    fn permission_is_checked_before_the_budget() {
        let tool = tool();
        let mut ledger = Ledger::default();
        let limits = Limits::default().with_tool_calls(0);
        assert_eq!(
            ledger.admit_tool(OPEN, &limits, &tool, terms(false), signed("{}"), &mut []),
            halted(HaltReason::PermissionDenied)
        );
        assert_eq!(kinds(&ledger), ["PermissionDenied read_ticket 0"]);
    }

    #[test]
    fn the_budget_is_checked_before_repetition() {
        let tool = tool();
        let mut ledger = Ledger::default();
        let limits = Limits::default().with_tool_calls(1);
        assert_eq!(ledger.admit_tool(OPEN, &limits, &tool, terms(true), signed("{}"), &mut []), Ok(1));
        assert_eq!(
            ledger.admit_tool(OPEN, &limits, &tool, terms(true), signed("{}"), &mut []),
            halted(HaltReason::ToolBudget)
        );
        assert_eq!(kinds(&ledger), ["ToolCall read_ticket 1", "ToolBudget read_ticket 1"]);
    }

    #[test]
    fn repetition_counts_per_signature_and_reports_the_signature_count() {
        let tool = tool();
        let mut ledger = Ledger::default();
        let limits = Limits::default().with_repetitions(2);
        assert_eq!(ledger.admit_tool(OPEN, &limits, &tool, terms(true), signed("a"), &mut []), Ok(1));
        assert_eq!(ledger.admit_tool(OPEN, &limits, &tool, terms(true), signed("b"), &mut []), Ok(2));
        assert_eq!(ledger.admit_tool(OPEN, &limits, &tool, terms(true), signed("a"), &mut []), Ok(3));
        assert_eq!(
            ledger.admit_tool(OPEN, &limits, &tool, terms(true), signed("a"), &mut []),
            halted(HaltReason::RepeatedCall)
        );
        assert_eq!(ledger.repetitions_of(r#"read_ticket:"a""#), 2);
        assert_eq!(ledger.repetitions_of(r#"read_ticket:"b""#), 1);
        assert_eq!(kinds(&ledger).last().map(String::as_str), Some("RepeatedCall read_ticket 2"));
    }

    #[test]
    fn the_first_halt_wins_and_is_sticky() {
        let tool = tool();
        let mut ledger = Ledger::default();
        let limits = Limits::default().with_model_calls(1);
        assert_eq!(ledger.admit_model(OPEN, &limits, None, &mut []), Ok((1, None)));
        assert_eq!(
            ledger.admit_model(OPEN, &limits, None, &mut []),
            Err(Stop::Halted(HaltReason::ModelBudget))
        );
        assert_eq!(
            ledger.admit_tool(OPEN, &limits, &tool, terms(false), signed("{}"), &mut []),
            halted(HaltReason::ModelBudget)
        );
        assert_eq!(ledger.observe_call(OPEN, &tool), Err(Stop::Halted(HaltReason::ModelBudget)));
        assert_eq!(ledger.expire(OPEN, Activity::Model), Stop::Halted(HaltReason::ModelBudget));
        assert_eq!(ledger.stop(), Some(HaltReason::ModelBudget));
        assert_eq!(kinds(&ledger), ["ModelCall model 1", "ModelBudget model 1"]);
    }

    #[test]
    fn a_tentative_refusal_is_described_not_recorded_and_records_the_same_later() {
        let tool = tool();
        let mut ledger = Ledger::default();
        let limits = Limits::default().with_tool_calls(1);
        assert_eq!(ledger.admit_tool(OPEN, &limits, &tool, terms(true), signed("a"), &mut []), Ok(1));
        let (decided, described) = ledger
            .tentatively(|ledger| ledger.admit_tool(OPEN, &limits, &tool, terms(true), signed("b"), &mut []));
        assert_eq!(decided, halted(HaltReason::ToolBudget));
        assert_eq!(ledger.stop(), None, "nothing recorded");
        assert_eq!(kinds(&ledger), ["ToolCall read_ticket 1"]);
        let (reason, event) = described.expect("the halt it would have recorded");
        assert_eq!(ledger.halt_with(OPEN, reason, event), Stop::Halted(HaltReason::ToolBudget));
        let mut sequential = Ledger::default();
        sequential.admit_tool(OPEN, &limits, &tool, terms(true), signed("a"), &mut []).ok();
        sequential.admit_tool(OPEN, &limits, &tool, terms(true), signed("b"), &mut []).ok();
        assert_eq!(kinds(&ledger), kinds(&sequential), "the same log as without the delay");
        let (admitted, described) = Ledger::default()
            .tentatively(|ledger| ledger.admit_tool(OPEN, &limits, &tool, terms(true), signed("c"), &mut []));
        assert_eq!((admitted, described), (Ok(1), None), "an admission is an admission");
    }

    #[test]
    fn a_precheck_that_passes_records_nothing() {
        let tool = tool();
        let mut ledger = Ledger::default();
        let limits = Limits::default();
        assert_eq!(ledger.precheck_tool(OPEN, &limits, &tool, true, &mut []), Ok(()));
        assert_eq!(ledger.tool_calls(), 0);
        assert!(ledger.events().is_empty());
        assert_eq!(ledger.admit_tool(OPEN, &limits, &tool, terms(true), signed("{}"), &mut []), Ok(1));
    }

    #[test]
    fn a_refused_reply_halts_charged_to_the_model_unless_a_stop_came_first() {
        let mut ledger = Ledger::default();
        assert_eq!(ledger.admit_model(OPEN, &Limits::default(), None, &mut []), Ok((1, None)));
        let cancelled = Gate { caller_cancelled: true, deadline_passed: false };
        assert_eq!(ledger.refuse_reply(cancelled), Stop::Cancelled);
        assert_eq!(ledger.refuse_reply(OPEN), Stop::Halted(HaltReason::TooManyCalls));
        assert_eq!(ledger.refuse_reply(OPEN), Stop::Halted(HaltReason::TooManyCalls));
        assert_eq!(kinds(&ledger), ["ModelCall model 1", "TooManyCalls model 1"]);
    }

    #[test]
    fn a_tool_budget_of_zero_refuses_the_first_call() {
        let tool = tool();
        let mut ledger = Ledger::default();
        let limits = Limits::default().with_tool_calls(0);
        assert_eq!(
            ledger.admit_tool(OPEN, &limits, &tool, terms(true), signed("{}"), &mut []),
            halted(HaltReason::ToolBudget)
        );
        assert_eq!(ledger.tool_calls(), 0);
    }

    #[test]
    fn what_is_left_is_read_as_numbers_and_put_into_words_apart() {
        let tool = tool();
        let mut ledger = Ledger::default();
        let limits = Limits::default().with_total_tokens(1000).with_cost(Micros(400));
        assert_eq!(ledger.admit_model(OPEN, &limits, None, &mut []), Ok((1, None)));
        assert_eq!(ledger.admit_tool(OPEN, &limits, &tool, terms(true), signed("{}"), &mut []), Ok(1));
        let left = ledger.remaining(&limits, None);
        assert_eq!(
            left,
            Remaining {
                model_calls: 5,
                tool_calls: 3,
                input_tokens: None,
                output_tokens: None,
                total_tokens: Some(1000),
                cost: Some(Micros(400)),
            }
        );
        assert_eq!(
            left.to_string(),
            "Remaining budget: 5 model calls, 3 tool calls, 1000 total tokens, 400µ."
        );
        let every = Remaining { input_tokens: Some(7), output_tokens: Some(0), cost: None, ..left };
        assert_eq!(
            every.to_string(),
            "Remaining budget: 5 model calls, 3 tool calls, 7 input tokens, 0 output tokens, 1000 total tokens."
        );
        let plain = ledger.remaining(&Limits::default(), None);
        assert_eq!(plain.to_string(), "Remaining budget: 5 model calls, 3 tool calls.");
    }

    #[test]
    fn events_share_the_scopes_one_copy_of_each_name() {
        let shared = tool();
        let mut ledger = Ledger::default();
        let limits = Limits::default().with_repetitions(2);
        let count = ledger.observe_call(OPEN, &shared).unwrap();
        ledger.record_middleware(OPEN, &shared, count).unwrap();
        ledger.admit_tool(OPEN, &limits, &shared, terms(true), signed("{}"), &mut []).ok();
        let names: Vec<&Arc<str>> = ledger
            .events()
            .iter()
            .filter_map(|event| match event.subject() {
                Subject::Tool(name) => Some(name),
                Subject::Model | Subject::Run => None,
            })
            .collect();
        assert_eq!(names.len(), 2);
        assert!(Arc::ptr_eq(names[0], names[1]), "one copy for the scope");
        assert!(!Arc::ptr_eq(names[0], &shared), "never the tool set's own");
    }

    /// The terms of a granted tool under `rules`, judged by result with `polls` if given.
    fn judged(rules: Rules, polls: Option<u32>) -> ToolTerms {
        ToolTerms { polls, rules, ..terms(true) }
    }

    const CYCLES: Rules = Rules { active: true, cycles: Some((3, 3)), streak: None, nudge: false };

    /// Admits `arguments` of `name` and, if admitted, gives `result` back; returns the decision.
    fn poll(
        ledger: &mut Ledger,
        limits: &Limits,
        name: &Arc<str>,
        terms: ToolTerms,
        arguments: &str,
        result: &str,
    ) -> Result<u32, Refuse> {
        let signature = signed_as(name, arguments);
        let decided = ledger.admit_tool(OPEN, limits, name, terms, signature, &mut []);
        if let Ok(count) = decided {
            let noted = (super::super::progress::digest(result, false), false);
            assert_eq!(ledger.note_result(OPEN, terms.rules, name, count, noted), Ok(()));
        }
        decided
    }

    #[test]
    fn a_poll_judged_by_result_runs_while_its_result_changes_and_halts_once_it_does_not() {
        let job: Arc<str> = Arc::from("job_status");
        let mut ledger = Ledger::default();
        let limits = Limits::default().with_tool_calls(10);
        let by_result = judged(Rules { active: true, ..Rules::default() }, Some(10));
        for (at, result) in ["queued", "running", "running", "running"].into_iter().enumerate() {
            let expected = if at < 3 {
                Ok(u32::try_from(at).unwrap_or(0) + 1)
            } else {
                halted(HaltReason::RepeatedCall)
            };
            assert_eq!(poll(&mut ledger, &limits, &job, by_result, "{}", result), expected, "poll {at}");
        }
        assert_eq!(
            kinds(&ledger),
            [
                "ToolCall job_status 1",
                "ToolCall job_status 2",
                "ToolCall job_status 3",
                "RepeatedCall job_status 1"
            ]
        );
        assert_eq!(ledger.repetitions_of("job_status:{}"), 0, "exact counts are not kept for it");
    }

    #[test]
    fn exact_repetition_is_unchanged_for_a_tool_not_judged_by_result() {
        let tool = tool();
        let mut ledger = Ledger::default();
        let limits = Limits::default().with_tool_calls(10);
        let exact = judged(Rules { active: true, ..Rules::default() }, None);
        assert_eq!(poll(&mut ledger, &limits, &tool, exact, "42", "a"), Ok(1));
        assert_eq!(poll(&mut ledger, &limits, &tool, exact, "42", "b"), halted(HaltReason::RepeatedCall));
        assert_eq!(kinds(&ledger), ["ToolCall read_ticket 1", "RepeatedCall read_ticket 1"]);
    }

    #[test]
    fn the_poll_limit_bounds_a_poll_whose_result_always_changes() {
        let job: Arc<str> = Arc::from("job_status");
        let mut ledger = Ledger::default();
        let limits = Limits::default().with_tool_calls(10);
        let by_result = judged(Rules { active: true, ..Rules::default() }, Some(3));
        for at in 1..=3 {
            assert_eq!(poll(&mut ledger, &limits, &job, by_result, "{}", &format!("{at}%")), Ok(at));
        }
        assert_eq!(poll(&mut ledger, &limits, &job, by_result, "{}", "4%"), halted(HaltReason::RepeatedCall));
        assert_eq!(kinds(&ledger).last().map(String::as_str), Some("RepeatedCall job_status 3"));
    }

    #[test]
    fn a_cycle_with_no_new_result_halts_no_progress_with_its_tools_in_the_detail() {
        let (a, b): (Arc<str>, Arc<str>) = (Arc::from("search"), Arc::from("open"));
        let mut ledger = Ledger::default();
        let limits = Limits::default().with_tool_calls(20).with_repetitions(5);
        let terms = judged(CYCLES, None);
        for at in 0..5 {
            let name = if at % 2 == 0 { &a } else { &b };
            assert_eq!(poll(&mut ledger, &limits, name, terms, "{}", "same"), Ok(at + 1));
        }
        assert_eq!(poll(&mut ledger, &limits, &b, terms, "{}", "same"), halted(HaltReason::NoProgress));
        assert_eq!(kinds(&ledger).last().map(String::as_str), Some("NoProgress open 5"));
        assert_eq!(ledger.detail(), Some(Detail::Cycle(vec![Arc::clone(&a), Arc::clone(&b)], 3)));
    }

    #[test]
    fn the_cycle_check_comes_after_permission_and_the_budgets() {
        let (a, b): (Arc<str>, Arc<str>) = (Arc::from("search"), Arc::from("open"));
        let mut ledger = Ledger::default();
        let limits = Limits::default().with_tool_calls(5).with_repetitions(5);
        for at in 0..5 {
            let name = if at % 2 == 0 { &a } else { &b };
            assert_eq!(poll(&mut ledger, &limits, name, judged(CYCLES, None), "{}", "same"), Ok(at + 1));
        }
        let refused = ToolTerms { granted: false, ..judged(CYCLES, None) };
        assert_eq!(
            poll(&mut ledger.clone_for_test(), &limits, &b, refused, "{}", "same"),
            halted(HaltReason::PermissionDenied)
        );
        assert_eq!(
            poll(&mut ledger, &limits, &b, judged(CYCLES, None), "{}", "same"),
            halted(HaltReason::ToolBudget)
        );
        assert_eq!(ledger.detail(), None);
    }

    #[test]
    fn the_first_repeat_is_nudged_without_running_and_the_next_halts() {
        let tool = tool();
        let mut ledger = Ledger::default();
        let limits = Limits::default().with_tool_calls(10);
        let rules = Rules { active: true, nudge: true, ..Rules::default() };
        assert_eq!(poll(&mut ledger, &limits, &tool, judged(rules, None), "42", "a"), Ok(1));
        assert_eq!(
            poll(&mut ledger, &limits, &tool, judged(rules, None), "42", "a"),
            Err(Refuse::Nudge(Nudge::repeat(Arc::clone(&tool), 1)))
        );
        assert_eq!(ledger.tool_calls(), 1, "a nudge reserves nothing");
        assert_eq!(ledger.stop(), None);
        assert_eq!(
            poll(&mut ledger, &limits, &tool, judged(rules, None), "42", "a"),
            halted(HaltReason::RepeatedCall)
        );
        assert_eq!(
            kinds(&ledger),
            ["ToolCall read_ticket 1", "Nudged read_ticket 1", "RepeatedCall read_ticket 1"]
        );
    }

    #[test]
    fn an_error_streak_halts_at_its_length_and_a_result_resets_it() {
        let tool = tool();
        let mut ledger = Ledger::default();
        let rules = Rules { active: true, streak: Some(3), ..Rules::default() };
        let limits = Limits::default().with_tool_calls(10);
        assert_eq!(ledger.note_failure(OPEN, rules, Some(&tool)), Ok(()));
        assert_eq!(ledger.note_failure(OPEN, rules, None), Ok(()));
        let count = ledger.admit_tool(OPEN, &limits, &tool, judged(rules, None), signed("1"), &mut []);
        assert_eq!(count, Ok(1));
        let fine = (super::super::progress::digest("ok", false), false);
        assert_eq!(ledger.note_result(OPEN, rules, &tool, 1, fine), Ok(()), "a result ends the streak");
        assert_eq!(ledger.note_failure(OPEN, rules, None), Ok(()));
        assert_eq!(ledger.note_failure(OPEN, rules, Some(&tool)), Ok(()));
        assert_eq!(ledger.admit_tool(OPEN, &limits, &tool, judged(rules, None), signed("2"), &mut []), Ok(2));
        let failed = (super::super::progress::digest("boom", true), true);
        assert_eq!(
            ledger.note_result(OPEN, rules, &tool, 2, failed),
            Err(Stop::Halted(HaltReason::NoProgress))
        );
        assert_eq!(kinds(&ledger).last().map(String::as_str), Some("NoProgress read_ticket 3"));
        assert_eq!(ledger.detail(), Some(Detail::Streak(3)));
    }

    #[test]
    fn a_streak_is_not_decided_while_an_earlier_call_of_a_batch_has_not_answered() {
        let tool = tool();
        let mut ledger = Ledger::default();
        let rules = Rules { active: true, streak: Some(2), ..Rules::default() };
        let limits = Limits::default().with_tool_calls(10);
        assert_eq!(ledger.admit_tool(OPEN, &limits, &tool, judged(rules, None), signed("1"), &mut []), Ok(1));
        assert_eq!(ledger.note_failure(OPEN, rules, Some(&tool)), Ok(()));
        assert_eq!(ledger.note_failure(OPEN, rules, Some(&tool)), Ok(()), "call 1 has not answered");
        let fine = (super::super::progress::digest("ok", false), false);
        assert_eq!(ledger.note_result(OPEN, rules, &tool, 1, fine), Ok(()), "its answer ends the streak");
        assert_eq!(ledger.note_failure(OPEN, rules, None), Ok(()));
        assert_eq!(ledger.note_failure(OPEN, rules, None), Err(Stop::Halted(HaltReason::NoProgress)));
        assert_eq!(kinds(&ledger), ["ToolCall read_ticket 1", "NoProgress model 2"]);
    }

    #[test]
    fn a_poll_limit_is_never_nudged() {
        let job: Arc<str> = Arc::from("job_status");
        let mut ledger = Ledger::default();
        let limits = Limits::default().with_tool_calls(10);
        let by_result = judged(Rules { active: true, nudge: true, ..Rules::default() }, Some(2));
        assert_eq!(poll(&mut ledger, &limits, &job, by_result, "{}", "1%"), Ok(1));
        assert_eq!(poll(&mut ledger, &limits, &job, by_result, "{}", "2%"), Ok(2));
        assert_eq!(poll(&mut ledger, &limits, &job, by_result, "{}", "3%"), halted(HaltReason::RepeatedCall));
        assert_eq!(kinds(&ledger).last().map(String::as_str), Some("RepeatedCall job_status 2"));
    }

    #[cfg(feature = "journal")]
    #[test]
    fn the_progress_memory_is_part_of_the_counters_and_is_restored() {
        let job: Arc<str> = Arc::from("job_status");
        let limits = Limits::default().with_tool_calls(10);
        let by_result = judged(Rules { active: true, ..Rules::default() }, Some(10));
        let mut first = Ledger::default();
        assert_eq!(poll(&mut first, &limits, &job, by_result, "{}", "running"), Ok(1));
        assert_eq!(poll(&mut first, &limits, &job, by_result, "{}", "running"), Ok(2));
        let mut resumed = Ledger::default();
        resumed.restore(first.counters(), first.events().to_vec());
        assert_eq!(resumed.counters(), first.counters());
        assert_eq!(
            poll(&mut resumed, &limits, &job, by_result, "{}", "running"),
            halted(HaltReason::RepeatedCall),
            "the resumed attempt knows the result did not change"
        );
        assert_eq!(
            Ledger::default().counters().progress,
            Tracker::default(),
            "nothing tracked without a policy"
        );
    }
}
