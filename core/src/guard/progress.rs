//! What the guard remembers of a run's progress, and the progress checks it decides from it:
//! repetition by result, cycles, error streaks (SPEC §25). Pure state, no clock, no lock of its
//! own: the ledger owns one [`Tracker`] and calls it inside its critical section.
//!
//! # Invariants
//!
//! - A tracker holds, per signature, the digests of its last two results, never their text; a
//!   digest is computed before the ledger's lock is taken ([`digest`]).
//! - A tracker is touched only by a scope whose policy is active ([`Rules::active`]): for any
//!   other scope it stays empty, and an empty tracker is not journaled.
//! - A signature of a tool judged by result is *charged* when it is admitted for the first time
//!   or when its previous result did not differ from the one before it (or is not back yet); a
//!   charged count never exceeds the repetition limit, and its attempts never exceed the tool's
//!   poll limit, because the ledger checks both before it admits.
//! - The recent history keeps at most `longest × repeats` admissions (the cycle rule's window);
//!   a call's result marks its own admission (by its tool-call count) as fresh or not.
//! - A cycle is found only among admitted calls plus the candidate, with a block of at least two
//!   different signatures (one signature repeated is the repetition check's), and only when no
//!   admission after the block's first occurrence brought a new result. A result not back yet
//!   counts as no new result.
//! - The streak counts failed, refused-without-halt (a nudge) and unbindable calls in a row; any
//!   result that is not an error ends it. It halts only when no admitted call's result is still
//!   to come (see `Ledger::streak_halt`): in a parallel batch, results are noted as they come
//!   back, so a streak may be counted shorter than one after another would, never longer. An
//!   admitted call that is never run (a reservation dropped) stays waiting.
//! - At most one nudge per run.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use sha2::{Digest as _, Sha256};

/// A result's digest: SHA-256 of its text and whether it is an error, cut to 128 bits.
pub(crate) type Digest = [u8; 16];

/// The digest of a tool result.
pub(crate) fn digest(text: &str, is_error: bool) -> Digest {
    let mut hasher = Sha256::new();
    hasher.update([u8::from(is_error)]);
    hasher.update(text.as_bytes());
    let full = hasher.finalize();
    let mut cut = [0; 16];
    cut.copy_from_slice(&full[..16]);
    cut
}

/// The run-level part of a progress policy, as the ledger reads it (copied, no allocation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Rules {
    /// Whether any progress check is on.
    pub(crate) active: bool,
    /// Longest period and repeats of a cycle that halts.
    pub(crate) cycles: Option<(u32, u32)>,
    /// Failed calls in a row that halt.
    pub(crate) streak: Option<u32>,
    /// Whether the first repetition or cycle is answered with a nudge.
    pub(crate) nudge: bool,
}

impl Rules {
    /// The rules of `policy`.
    pub(crate) fn of(policy: &crate::progress::Progress) -> Self {
        Self {
            active: policy.is_active(),
            cycles: policy.cycle_rule(),
            streak: policy.streak_rule(),
            nudge: policy.nudges(),
        }
    }

    /// How many admissions the cycle check reads back.
    fn window(self) -> usize {
        self.cycles.map_or(0, |(longest, repeats)| (longest * repeats) as usize)
    }
}

/// What the progress checks decide about a candidate call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Admit,
    /// A repeat with no new result, at the repetition limit: `count` charged attempts.
    Repeat {
        count: u32,
    },
    /// A signature judged by result at its poll limit: `count` admitted attempts.
    PollLimit {
        count: u32,
    },
    /// A cycle of `tools` (the block, in call order) about to come round `repeats` times.
    Cycle {
        tools: Vec<Arc<str>>,
        repeats: u32,
    },
}

/// One signature's memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Seen {
    pub(crate) tool: Arc<str>,
    pub(crate) last: Option<Digest>,
    pub(crate) before: Option<Digest>,
    pub(crate) attempts: u32,
    pub(crate) charged: u32,
    /// Admissions whose result is not back yet.
    pub(crate) waiting: u32,
}

impl Seen {
    /// Whether the signature's previous result differs from the one before it: the last repeat
    /// moved on (a first result always does).
    fn progressed(&self) -> bool {
        self.waiting == 0 && self.last.is_some() && self.last != self.before
    }
}

/// One admission in the recent history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The signature's index in [`Tracker::seen`].
    pub(crate) id: u32,
    /// The tool-call count it was admitted as.
    pub(crate) count: u32,
    /// Whether its result was new for its signature; `None` until it is back.
    pub(crate) fresh: Option<bool>,
}

/// A run's progress memory (see the module's invariants).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tracker {
    pub(crate) ids: BTreeMap<String, u32>,
    pub(crate) seen: Vec<Seen>,
    pub(crate) recent: VecDeque<Entry>,
    /// Admissions whose result is not back yet: tool-call count → signature index.
    pub(crate) waiting: BTreeMap<u32, u32>,
    pub(crate) streak: u32,
    pub(crate) nudged: bool,
}

impl Tracker {
    /// Whether nothing was tracked (a run without an active policy, or before its first call).
    #[cfg(feature = "journal")]
    pub(crate) fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    fn lookup(&self, signature: &str) -> Option<(u32, &Seen)> {
        let id = *self.ids.get(signature)?;
        self.seen.get(id as usize).map(|seen| (id, seen))
    }

    /// The repetition check of a tool judged by result: its poll limit `polls`, then the
    /// repetition `limit` on charged attempts, charged only when the result did not move on.
    pub(crate) fn judge_by_result(&self, signature: &str, polls: u32, limit: u32) -> Verdict {
        let Some((_, seen)) = self.lookup(signature) else { return Verdict::Admit };
        if seen.attempts >= polls {
            return Verdict::PollLimit { count: seen.attempts };
        }
        if !seen.progressed() && seen.charged >= limit {
            return Verdict::Repeat { count: seen.charged };
        }
        Verdict::Admit
    }

    /// The cycle check for a candidate `signature`: the shortest period from 2 to the rule's
    /// longest whose block, completed by the candidate, came round the rule's repeats with no
    /// new result after its first occurrence.
    pub(crate) fn cycle(&self, rules: Rules, signature: &str) -> Verdict {
        // The rule first: a scope without one looks nothing up.
        let Some((longest, repeats)) = rules.cycles else { return Verdict::Admit };
        let Some((candidate, _)) = self.lookup(signature) else { return Verdict::Admit };
        for period in 2..=longest as usize {
            let span = period * repeats as usize;
            let Some(start) = (self.recent.len() + 1).checked_sub(span) else { break };
            let id = |at: usize| self.recent.get(start + at).map_or(candidate, |entry| entry.id);
            let periodic = (0..span - period).all(|at| id(at) == id(at + period));
            let varied = (1..period).any(|at| id(at) != id(0));
            let stale = (period..span - 1)
                .all(|at| self.recent.get(start + at).is_some_and(|entry| entry.fresh != Some(true)));
            if periodic && varied && stale {
                let tools = (0..period).map(|at| self.tool_of(id(at))).collect();
                return Verdict::Cycle { tools, repeats };
            }
        }
        Verdict::Admit
    }

    fn tool_of(&self, id: u32) -> Arc<str> {
        self.seen.get(id as usize).map_or_else(|| Arc::from(""), |seen| Arc::clone(&seen.tool))
    }

    /// Records an admission of `signature` (of `tool`) as tool call `count`; `by_result` charges
    /// it only when its last repeat did not move on.
    pub(crate) fn admitted(
        &mut self,
        rules: Rules,
        signature: &str,
        tool: &Arc<str>,
        count: u32,
        by_result: bool,
    ) {
        let id = if let Some(id) = self.ids.get(signature) {
            *id
        } else {
            let id = u32::try_from(self.seen.len()).unwrap_or(u32::MAX);
            self.ids.insert(signature.to_owned(), id);
            let seen = Seen {
                tool: Arc::clone(tool),
                last: None,
                before: None,
                attempts: 0,
                charged: 0,
                waiting: 0,
            };
            self.seen.push(seen);
            id
        };
        if let Some(seen) = self.seen.get_mut(id as usize) {
            if !by_result || seen.attempts == 0 || !seen.progressed() {
                seen.charged += 1;
            }
            seen.attempts += 1;
            seen.waiting += 1;
        }
        self.waiting.insert(count, id);
        let window = rules.window();
        if window > 0 {
            self.recent.push_back(Entry { id, count, fresh: None });
            while self.recent.len() > window {
                self.recent.pop_front();
            }
        }
    }

    /// Records the result of tool call `count` by its digest; `failed` extends the error streak,
    /// anything else ends it. Returns the streak.
    pub(crate) fn result(&mut self, count: u32, digest: Digest, failed: bool) -> u32 {
        if let Some(id) = self.waiting.remove(&count)
            && let Some(seen) = self.seen.get_mut(id as usize)
        {
            let fresh = seen.last != Some(digest);
            seen.before = seen.last;
            seen.last = Some(digest);
            seen.waiting = seen.waiting.saturating_sub(1);
            if let Some(entry) = self.recent.iter_mut().find(|entry| entry.count == count) {
                entry.fresh = Some(fresh);
            }
        }
        if failed {
            return self.failed();
        }
        self.streak = 0;
        0
    }

    /// Whether an admitted call's result is not back yet.
    pub(crate) fn is_waiting(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// Extends the error streak by one call; returns it.
    pub(crate) fn failed(&mut self) -> u32 {
        self.streak = self.streak.saturating_add(1);
        self.streak
    }

    /// Takes the run's one nudge: `true` the first time.
    pub(crate) fn take_nudge(&mut self) -> bool {
        !std::mem::replace(&mut self.nudged, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CYCLES: Rules = Rules { active: true, cycles: Some((3, 3)), streak: None, nudge: false };

    fn tool(name: &str) -> Arc<str> {
        Arc::from(name)
    }

    /// Admits `signature` as call `count` and gives it `result` back.
    fn call(tracker: &mut Tracker, signature: &str, count: u32, result: &str) {
        let name = signature.split(':').next().unwrap_or_default();
        tracker.admitted(CYCLES, signature, &tool(name), count, true);
        tracker.result(count, digest(result, false), false);
    }

    #[test]
    fn a_digest_tells_results_and_errors_apart() {
        assert_eq!(digest("done", false), digest("done", false));
        assert_ne!(digest("done", false), digest("done", true));
        assert_ne!(digest("done", false), digest("done.", false));
    }

    #[test]
    fn a_poll_that_moves_on_is_never_charged_and_one_that_does_not_is() {
        let mut tracker = Tracker::default();
        call(&mut tracker, "poll:1", 1, "running 10%");
        assert_eq!(tracker.judge_by_result("poll:1", 10, 1), Verdict::Admit, "a first result moved on");
        call(&mut tracker, "poll:1", 2, "running 50%");
        assert_eq!(tracker.judge_by_result("poll:1", 10, 1), Verdict::Admit);
        call(&mut tracker, "poll:1", 3, "running 50%");
        assert_eq!(tracker.judge_by_result("poll:1", 10, 1), Verdict::Repeat { count: 1 });
        assert_eq!(tracker.seen[0].charged, 1);
        assert_eq!(tracker.seen[0].attempts, 3);
    }

    #[test]
    fn the_poll_limit_bounds_a_poll_that_always_moves_on() {
        let mut tracker = Tracker::default();
        for count in 1..=3 {
            call(&mut tracker, "poll:1", count, &format!("step {count}"));
        }
        assert_eq!(tracker.judge_by_result("poll:1", 3, 1), Verdict::PollLimit { count: 3 });
    }

    #[test]
    fn a_result_not_back_yet_is_no_progress() {
        let mut tracker = Tracker::default();
        tracker.admitted(CYCLES, "poll:1", &tool("poll"), 1, true);
        assert_eq!(tracker.judge_by_result("poll:1", 10, 1), Verdict::Repeat { count: 1 });
    }

    #[test]
    fn an_oscillation_with_no_new_result_is_a_cycle_named_by_its_tools() {
        let mut tracker = Tracker::default();
        for (count, signature) in ["a:1", "b:1", "a:1", "b:1", "a:1"].into_iter().enumerate() {
            assert_eq!(tracker.cycle(CYCLES, signature), Verdict::Admit, "call {count}");
            call(&mut tracker, signature, u32::try_from(count).unwrap_or(0) + 1, "same");
        }
        assert_eq!(
            tracker.cycle(CYCLES, "b:1"),
            Verdict::Cycle { tools: vec![tool("a"), tool("b")], repeats: 3 }
        );
        assert_eq!(tracker.cycle(CYCLES, "c:1"), Verdict::Admit, "a new signature is no cycle");
    }

    #[test]
    fn an_oscillation_that_brings_new_results_is_no_cycle() {
        let mut tracker = Tracker::default();
        for (count, signature) in ["a:1", "b:1", "a:1", "b:1", "a:1"].into_iter().enumerate() {
            call(&mut tracker, signature, u32::try_from(count).unwrap_or(0) + 1, &format!("r{count}"));
        }
        assert_eq!(tracker.cycle(CYCLES, "b:1"), Verdict::Admit);
    }

    #[test]
    fn a_cycle_of_period_three_is_found_at_its_third_round() {
        let mut tracker = Tracker::default();
        let calls = ["a:1", "b:1", "c:1", "a:1", "b:1", "c:1", "a:1", "b:1"];
        for (count, signature) in calls.into_iter().enumerate() {
            assert_eq!(tracker.cycle(CYCLES, signature), Verdict::Admit);
            call(&mut tracker, signature, u32::try_from(count).unwrap_or(0) + 1, "same");
        }
        assert_eq!(
            tracker.cycle(CYCLES, "c:1"),
            Verdict::Cycle { tools: vec![tool("a"), tool("b"), tool("c")], repeats: 3 }
        );
        assert_eq!(tracker.recent.len(), 8, "one short of the window of 9");
    }

    #[test]
    fn the_streak_counts_failures_in_a_row_and_a_result_ends_it() {
        let mut tracker = Tracker::default();
        assert_eq!(tracker.failed(), 1);
        tracker.admitted(CYCLES, "a:1", &tool("a"), 1, false);
        assert_eq!(tracker.result(1, digest("boom", true), true), 2);
        tracker.admitted(CYCLES, "a:2", &tool("a"), 2, false);
        assert_eq!(tracker.result(2, digest("fine", false), false), 0);
    }

    #[test]
    fn a_run_has_one_nudge() {
        let mut tracker = Tracker::default();
        assert!(tracker.take_nudge());
        assert!(!tracker.take_nudge());
    }
}
