//! One watcher of cancel requests per journal handle: the attempts a process drives through one
//! handle (and its clones) wait for cancel requests together, and one of them asks the store
//! for all of them at once, every [`CANCEL_POLL`](super::CANCEL_POLL). The checks they make
//! before each admission are shared too: the checks that arrive while one is in flight go to
//! the store together in the next one ([`check`](CancelWatch::check)).
//!
//! # Invariants
//!
//! - Store queries per second do not grow with the number of waiting runs: at most one round
//!   is in flight per handle, and rounds start at least [`CANCEL_POLL`](super::CANCEL_POLL)
//!   apart; a round asks about every run waiting then in one call
//!   ([`Journal::cancel_requests`](super::Journal::cancel_requests)).
//! - The round is run by one of the waiting attempts (the first in line for the watcher's
//!   turn), inside its own bounds: no task of its own, nothing left running once no attempt
//!   waits. When that attempt ends, the next in line takes the turn, keeping the rhythm.
//! - A request is seen within one period and one round of the store, whoever runs the round: a
//!   run that is waiting when a round starts is in it, and the round tells it before the next
//!   one starts.
//! - A run waits under one registration at a time; the registration ends with its wait.
//! - A check sees every request recorded before it was made: the store call that answers it
//!   starts after it was queued (a check queued while a call is in flight waits for the next
//!   one). At most one check call is in flight per handle, so check calls per second are
//!   bounded by the store's latency, not by the number of runs. A check whose caller gives up
//!   is answered no more; when the attempt that makes a call gives up, the checks it carried
//!   are queued again for the next one.
//! - A backend that is told of requests as they are made (PostgreSQL's `LISTEN`) tells the
//!   watcher ([`tell`](CancelWatch::tell)) and marks it pushed while it listens: rounds then
//!   ask the store only to catch up (once after the backend starts listening, once after a run
//!   begins waiting, so that a request made just before is not missed); when it stops
//!   listening (its connection lost), every round asks again.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use super::id::RunId;
use super::run::CANCEL_POLL;

/// The cancel-request watcher a journal handle's attempts share (see the module's invariants).
/// A backend that keeps one returns it from
/// [`Journal::cancel_watch`](super::Journal::cancel_watch); clones share one watcher.
#[derive(Clone, Default)]
pub struct CancelWatch {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    /// The runs waiting now, each with the slot its round tells.
    waiting: std::sync::Mutex<BTreeMap<RunId, Arc<Slot>>>,
    /// The turn to run a round, and when the last one started.
    turn: tokio::sync::Mutex<Option<Instant>>,
    /// Whether the backend is told of every request as it is made.
    pushed: AtomicBool,
    /// Whether the next round asks the store even while pushed.
    catch_up: AtomicBool,
    /// Whether a backend's listener was started for this watcher.
    listener: AtomicBool,
    /// The checks queued for the next check call, each with where to answer it.
    checks: std::sync::Mutex<Vec<(RunId, oneshot::Sender<bool>)>>,
    /// The turn to make a check call.
    check_turn: tokio::sync::Mutex<()>,
}

/// Where a round tells one run that someone asked to cancel it.
#[derive(Default)]
struct Slot {
    requested: AtomicBool,
    told: Notify,
}

impl fmt::Debug for CancelWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelWatch").field("waiting", &self.waiting().len()).finish()
    }
}

impl CancelWatch {
    /// A watcher with no run waiting.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Waits until a round finds a cancel request for `run`; `ask` runs a round for the runs it
    /// is given and returns those with a request (`None` when the store could not tell).
    pub(crate) async fn until_requested<F, Fut>(&self, run: &RunId, ask: F)
    where
        F: Fn(Vec<RunId>) -> Fut,
        Fut: Future<Output = Option<Vec<RunId>>>,
    {
        let registration = self.register(run);
        let slot = &registration.slot;
        loop {
            let told = slot.told.notified();
            if slot.requested.load(Ordering::SeqCst) {
                return;
            }
            tokio::select! {
                biased;
                () = told => {}
                mut last = self.shared.turn.lock() => {
                    let due = last.map_or_else(|| Instant::now() + CANCEL_POLL, |last| last + CANCEL_POLL);
                    tokio::time::sleep_until(due).await;
                    *last = Some(Instant::now());
                    let asks = !self.shared.pushed.load(Ordering::SeqCst)
                        || self.shared.catch_up.swap(false, Ordering::SeqCst);
                    if asks && let Some(found) = ask(self.waiting()).await {
                        self.tell(&found);
                    }
                }
            }
        }
    }

    /// Whether someone asked to cancel `run`, as a store call made after this check was queued
    /// tells; the checks queued together share one call. `ask` makes the call for the runs it
    /// is given and returns those with a request (`None` when the store could not tell, which
    /// answers "no request").
    pub(crate) async fn check<F, Fut>(&self, run: &RunId, ask: F) -> bool
    where
        F: Fn(Vec<RunId>) -> Fut,
        Fut: Future<Output = Option<Vec<RunId>>>,
    {
        loop {
            let (answer, mut answered) = oneshot::channel();
            self.checks().push((run.clone(), answer));
            loop {
                tokio::select! {
                    biased;
                    told = &mut answered => match told {
                        Ok(requested) => return requested,
                        // The attempt making the call that carried this check gave up: queue it
                        // again.
                        Err(_) => break,
                    },
                    _turn = self.shared.check_turn.lock() => {
                        // Every check queued now goes in this call, this one included unless an
                        // earlier call answered it (then `answered` is ready).
                        let mut taken = std::mem::take(&mut *self.checks());
                        // A check whose caller gave up is asked about no more.
                        taken.retain(|(_, answer)| !answer.is_closed());
                        if taken.is_empty() {
                            continue;
                        }
                        let runs = taken.iter().map(|(run, _)| run.clone()).collect();
                        let found: std::collections::BTreeSet<RunId> =
                            ask(runs).await.unwrap_or_default().into_iter().collect();
                        for (run, answer) in taken {
                            let _ = answer.send(found.contains(&run));
                        }
                    }
                }
            }
        }
    }

    fn checks(&self) -> std::sync::MutexGuard<'_, Vec<(RunId, oneshot::Sender<bool>)>> {
        self.shared.checks.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The runs waiting now, in id order.
    fn waiting(&self) -> Vec<RunId> {
        self.shared
            .waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .keys()
            .cloned()
            .collect()
    }

    /// Tells each of `found` that waits here that someone asked to cancel it: for a backend
    /// that is told of requests as they are made (the others' rounds tell the runs themselves).
    pub fn tell(&self, found: &[RunId]) {
        let waiting = self.shared.waiting.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for run in found {
            if let Some(slot) = waiting.get(run) {
                slot.requested.store(true, Ordering::SeqCst);
                slot.told.notify_waiters();
            }
        }
    }

    /// Sets whether the backend is told of every request as it is made (it listens): while it
    /// is, rounds ask the store only to catch up; when it is not, every round asks. Starting to
    /// listen makes the next round catch up on what was requested before.
    pub fn set_pushed(&self, pushed: bool) {
        if pushed {
            self.shared.catch_up.store(true, Ordering::SeqCst);
        }
        self.shared.pushed.store(pushed, Ordering::SeqCst);
    }

    /// Whether the backend is told of every request as it is made now.
    #[must_use]
    pub fn is_pushed(&self) -> bool {
        self.shared.pushed.load(Ordering::SeqCst)
    }

    /// `true` for the first caller only: the one that starts the backend's listener.
    #[must_use]
    pub fn claim_listener(&self) -> bool {
        !self.shared.listener.swap(true, Ordering::SeqCst)
    }

    /// A handle to this watcher that does not keep it alive: a backend's listener ends once
    /// every journal handle that shares the watcher is gone.
    #[must_use]
    pub fn downgrade(&self) -> WeakCancelWatch {
        WeakCancelWatch(Arc::downgrade(&self.shared))
    }

    /// Adds `run` to the waiting runs until the registration is dropped.
    fn register(&self, run: &RunId) -> Registration<'_> {
        if self.shared.pushed.load(Ordering::SeqCst) {
            // A request made just before the run began waiting may have been told to no one.
            self.shared.catch_up.store(true, Ordering::SeqCst);
        }
        let slot = Arc::new(Slot::default());
        self.shared
            .waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(run.clone(), Arc::clone(&slot));
        Registration { watch: self, run: run.clone(), slot }
    }
}

/// A [`CancelWatch`] that is not kept alive by this handle.
#[derive(Clone, Debug)]
pub struct WeakCancelWatch(Weak<Shared>);

impl WeakCancelWatch {
    /// The watcher, while a journal handle still shares it.
    #[must_use]
    pub fn upgrade(&self) -> Option<CancelWatch> {
        self.0.upgrade().map(|shared| CancelWatch { shared })
    }
}

/// A run's place among the waiting runs, for as long as it waits.
struct Registration<'w> {
    watch: &'w CancelWatch,
    run: RunId,
    slot: Arc<Slot>,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        let mut waiting = self.watch.shared.waiting.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if waiting.get(&self.run).is_some_and(|slot| Arc::ptr_eq(slot, &self.slot)) {
            waiting.remove(&self.run);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn many_waiting_runs_share_one_round_per_period_and_a_run_is_told_of_its_request() {
        let watch = CancelWatch::new();
        // The size of each round: how many runs it asked about.
        let rounds = Arc::new(std::sync::Mutex::new(Vec::new()));
        let started = Instant::now();
        let mut waits = Vec::new();
        for n in 0..100 {
            let (watch, rounds) = (watch.clone(), Arc::clone(&rounds));
            waits.push(tokio::spawn(async move {
                let run = RunId::new(format!("run-{n}")).unwrap();
                watch
                    .until_requested(&run, |runs| {
                        let mut rounds = rounds.lock().unwrap();
                        rounds.push(runs.len());
                        // A host asked to cancel run-7 before the third round.
                        let found =
                            if rounds.len() == 3 { vec![RunId::new("run-7").unwrap()] } else { Vec::new() };
                        async move { Some(found) }
                    })
                    .await;
                started.elapsed()
            }));
        }
        tokio::time::sleep(Duration::from_millis(2900)).await;
        assert_eq!(*rounds.lock().unwrap(), [100, 100, 100, 99, 99], "one round per 500 ms for all of them");
        let told = waits.remove(7);
        assert!(told.is_finished());
        assert_eq!(told.await.unwrap(), Duration::from_millis(1500), "told by the round that found it");
        assert_eq!(watch.waiting().len(), 99, "its registration ended with its wait");
        assert!(waits.iter().all(|wait| !wait.is_finished()));
        for wait in waits {
            wait.abort();
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_pushed_watcher_asks_only_to_catch_up_and_a_run_told_ends_at_once() {
        let watch = CancelWatch::new();
        watch.set_pushed(true);
        let rounds = Arc::new(std::sync::Mutex::new(0_u32));
        let started = Instant::now();
        let waits: Vec<_> = (0..3)
            .map(|n| {
                let (watch, rounds) = (watch.clone(), Arc::clone(&rounds));
                tokio::spawn(async move {
                    let run = RunId::new(format!("run-{n}")).unwrap();
                    watch
                        .until_requested(&run, |_| {
                            *rounds.lock().unwrap() += 1;
                            async { Some(Vec::new()) }
                        })
                        .await;
                    started.elapsed()
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(2900)).await;
        assert_eq!(*rounds.lock().unwrap(), 1, "five rounds, one of them asking: to catch up");
        tokio::time::sleep(Duration::from_millis(100)).await;
        watch.tell(&[RunId::new("run-1").unwrap()]);
        tokio::task::yield_now().await;
        let mut waits = waits;
        let told = waits.remove(1);
        assert_eq!(told.await.unwrap(), Duration::from_secs(3), "told at once, between two rounds");
        watch.set_pushed(false);
        tokio::time::sleep(Duration::from_millis(1100)).await;
        assert_eq!(*rounds.lock().unwrap(), 3, "without the push, every round asks (at 3.5 s and 4 s)");
        assert!(watch.claim_listener() && !watch.claim_listener(), "one listener per watcher");
        let weak = watch.downgrade();
        assert!(weak.upgrade().is_some());
        for wait in waits {
            wait.abort();
            let _ = wait.await;
        }
        drop(watch);
        assert!(weak.upgrade().is_none(), "the listener's handle keeps nothing alive");
    }

    #[tokio::test(start_paused = true)]
    async fn checks_that_arrive_together_share_a_call_that_starts_after_each_was_queued() {
        let watch = CancelWatch::new();
        // Each call: the runs it asked about; a host asked to cancel run-3 before the first.
        let calls = Arc::new(std::sync::Mutex::new(Vec::<Vec<String>>::new()));
        let ask = |calls: Arc<std::sync::Mutex<Vec<Vec<String>>>>| {
            move |runs: Vec<RunId>| {
                calls.lock().unwrap().push(runs.iter().map(ToString::to_string).collect());
                let found: Vec<RunId> = runs.into_iter().filter(|run| run.as_str() == "run-3").collect();
                async move {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    Some(found)
                }
            }
        };
        let check = |n: u32| {
            let (watch, calls) = (watch.clone(), Arc::clone(&calls));
            tokio::spawn(async move {
                let run = RunId::new(format!("run-{n}")).unwrap();
                watch.check(&run, ask(calls)).await
            })
        };
        let first = check(0);
        tokio::task::yield_now().await;
        // Queued while the first call is in flight: they wait for the next one, together.
        let later: Vec<_> = (1..5).map(check).collect();
        assert!(!first.await.unwrap());
        let answers: Vec<bool> = answers_of(later).await;
        assert_eq!(answers, [false, false, true, false]);
        assert_eq!(
            *calls.lock().unwrap(),
            [vec!["run-0".to_owned()], ["run-1", "run-2", "run-3", "run-4"].map(String::from).to_vec()],
            "two calls for five checks, the second made after the four were queued"
        );

        // The attempt making a call gives up (its future dropped): the other check it carried
        // is queued again, and answered by the next call.
        let stuck_calls = Arc::clone(&calls);
        let stuck = move |runs: Vec<RunId>| {
            stuck_calls.lock().unwrap().push(runs.iter().map(ToString::to_string).collect());
            async { std::future::pending::<Option<Vec<RunId>>>().await }
        };
        // Both are queued while the turn is taken, so that one call carries both.
        let turn = watch.shared.check_turn.lock().await;
        let leader = {
            let watch = watch.clone();
            tokio::spawn(async move { watch.check(&RunId::new("run-8").unwrap(), stuck).await })
        };
        let follower = check(3);
        // A check queued, then given up by its caller before the call: it is not asked about.
        let given_up = check(9);
        tokio::task::yield_now().await;
        given_up.abort();
        let _ = given_up.await;
        drop(turn);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!follower.is_finished(), "its check waits for the call in flight to end");
        leader.abort();
        assert!(follower.await.unwrap(), "answered by the next call");
        let calls = calls.lock().unwrap();
        assert_eq!(calls[2..], [vec!["run-8".to_owned(), "run-3".to_owned()], vec!["run-3".to_owned()]]);
        assert!(watch.checks().is_empty(), "nothing left queued");
    }

    /// Each task's result, in order.
    async fn answers_of(tasks: Vec<tokio::task::JoinHandle<bool>>) -> Vec<bool> {
        let mut answers = Vec::new();
        for task in tasks {
            answers.push(task.await.unwrap());
        }
        answers
    }
}
