//! Target `progress`: an arbitrary progress policy and an arbitrary trace of calls, driven through
//! the public API (one call after another, by name), against a reference model of every progress
//! check (SPEC §25) written from the contract, apart from the guard's code.
//!
//! Two tools: `poll`, judged by result when the case says so, and `other`, always exact. Each
//! call names a tool, one of three arguments, one of three results, and whether the body fails
//! (its error text is then the result). After every call, the call's outcome (its text, a body
//! error, a nudge, or the stop) equals the model's; at the end, the tool-call count, the stop
//! reason and the number of `Nudged` events do too. Never a panic but a broken invariant's.

use loopbound::progress::Progress;
use loopbound::{EventKind, HaltReason, Limits, Scope, Stop, ToolBuilder, ToolError, ToolSet};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One generated case.
#[derive(Clone, Debug)]
pub struct ProgressCase {
    repetitions: u8,
    polls: Option<u8>,
    cycles: Option<(u8, u8)>,
    streak: Option<u8>,
    nudge: bool,
    calls: Vec<TraceCall>,
}

impl ProgressCase {
    /// The case `data` spells: six bytes of policy (an odd byte turns a check on), then one call
    /// per five bytes, so that every byte of a long input is a call (a derived `Vec` of random
    /// bytes is short). `None` for fewer than six bytes.
    #[must_use]
    pub fn read(data: &[u8]) -> Option<Self> {
        let (header, rest) = data.split_first_chunk::<6>()?;
        let on = |byte: u8| byte % 2 == 1;
        let [repetitions, polls, longest, repeats, streak, nudge] = *header;
        let calls = rest
            .chunks_exact(5)
            .map(|call| TraceCall {
                from: call[0],
                poll: on(call[1]),
                argument: call[2],
                result: call[3],
                fails: call[4],
            })
            .collect();
        Some(Self {
            repetitions,
            polls: on(polls).then_some(polls / 2),
            cycles: on(longest).then_some((longest / 2, repeats)),
            streak: on(streak).then_some(streak / 2),
            nudge: on(nudge),
            calls,
        })
    }
}

/// One call of the trace, as generated: a signature of its own, or (so that random bytes make
/// patterns) the signature of the call 2 to 4 places back; a result that is mostly the same
/// (`r0`), and a body that fails one time in four.
#[derive(Clone, Copy, Debug)]
pub struct TraceCall {
    from: u8,
    poll: bool,
    argument: u8,
    result: u8,
    fails: u8,
}

/// One call of the trace, resolved.
#[derive(Clone, Copy, Debug)]
struct Planned {
    poll: bool,
    argument: u8,
    result: u8,
    fails: bool,
}

impl Planned {
    /// The trace's calls, the back references resolved.
    fn trace(calls: &[TraceCall]) -> Vec<Self> {
        let mut planned: Vec<Self> = Vec::with_capacity(calls.len());
        for call in calls {
            let back = usize::from(call.from % 4);
            let (poll, argument) = match planned.len().checked_sub(back + 1) {
                Some(at) if back > 0 => (planned[at].poll, planned[at].argument),
                _ => (call.poll, call.argument % 3),
            };
            planned.push(Self { poll, argument, result: call.result % 5, fails: call.fails % 4 == 0 });
        }
        planned
    }

    fn tool(self) -> &'static str {
        if self.poll { "poll" } else { "other" }
    }

    fn text(self) -> String {
        let result = self.result.saturating_sub(2);
        if self.fails { format!("e{result}") } else { format!("r{result}") }
    }
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Arg {
    a: u8,
}

/// The case's policy values, in range.
#[derive(Clone, Copy, Debug)]
struct Rules {
    repetitions: u32,
    polls: Option<u32>,
    cycles: Option<(usize, usize)>,
    streak: Option<u32>,
    nudge: bool,
}

impl Rules {
    fn of(case: &ProgressCase) -> Self {
        Self {
            repetitions: u32::from(case.repetitions % 3) + 1,
            polls: case.polls.map(|polls| u32::from(polls % 8) + 1),
            cycles: case
                .cycles
                .map(|(longest, repeats)| (usize::from(longest % 3) + 2, usize::from(repeats % 2) + 2)),
            streak: case.streak.map(|streak| u32::from(streak % 4) + 1),
            nudge: case.nudge,
        }
    }

    fn policy(self) -> Progress {
        let mut policy = Progress::exact().nudge(self.nudge);
        if let Some(polls) = self.polls {
            policy = policy.by_result("poll", polls);
        }
        if let Some((longest, repeats)) = self.cycles {
            policy = policy.cycles(u32::try_from(longest).unwrap_or(2), u32::try_from(repeats).unwrap_or(2));
        }
        if let Some(streak) = self.streak {
            policy = policy.error_streak(streak);
        }
        policy
    }
}

/// What one call gave its caller.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Seen {
    Text(String),
    Failed,
    Nudged,
    Stopped(HaltReason),
}

/// One signature's memory in the model.
#[derive(Clone, Debug, Default)]
struct Memory {
    attempts: u32,
    charged: u32,
    results: Vec<String>,
}

/// The reference model: the contract's rules, one call after another.
#[derive(Debug)]
struct Model {
    rules: Rules,
    memory: std::collections::BTreeMap<(bool, u8), Memory>,
    /// Every admitted call: its signature, and whether its result was new for it.
    history: Vec<((bool, u8), bool)>,
    streak: u32,
    nudged: bool,
    tool_calls: u32,
    stop: Option<HaltReason>,
    nudges: usize,
}

impl Model {
    fn new(rules: Rules) -> Self {
        Self {
            rules,
            memory: std::collections::BTreeMap::new(),
            history: Vec::new(),
            streak: 0,
            nudged: false,
            tool_calls: 0,
            stop: None,
            nudges: 0,
        }
    }

    fn halt(&mut self, reason: HaltReason) -> Seen {
        self.stop = Some(reason);
        Seen::Stopped(reason)
    }

    /// Whether the candidate closes a block of 2..=longest signatures `repeats` times in a row,
    /// with no new result after the block's first occurrence.
    fn closes_a_cycle(&self, candidate: (bool, u8)) -> bool {
        let Some((longest, repeats)) = self.rules.cycles else { return false };
        (2..=longest).any(|period| {
            let span = period * repeats;
            if self.history.len() + 1 < span {
                return false;
            }
            let window: Vec<(bool, u8)> = self.history[self.history.len() + 1 - span..]
                .iter()
                .map(|(signature, _)| *signature)
                .chain(std::iter::once(candidate))
                .collect();
            let fresh: Vec<bool> =
                self.history[self.history.len() + 1 - span..].iter().map(|(_, fresh)| *fresh).collect();
            (0..span - period).all(|at| window[at] == window[at + period])
                && window[..period].iter().any(|signature| *signature != window[0])
                && fresh[period..].iter().all(|fresh| !fresh)
        })
    }

    fn call(&mut self, call: Planned) -> Seen {
        if let Some(reason) = self.stop {
            return Seen::Stopped(reason);
        }
        let signature = (call.poll, call.argument);
        let judged = call.poll && self.rules.polls.is_some();
        let memory = self.memory.get(&signature).cloned().unwrap_or_default();
        let moved_on = match memory.results.as_slice() {
            [] => false,
            [_] => true,
            [.., before, last] => before != last,
        };
        // Repetition, then the cycle: a poll limit halts; a repeat or a cycle is nudged once.
        let (polled_out, repeated) = if judged {
            let polled_out = self.rules.polls.is_some_and(|polls| memory.attempts >= polls);
            (polled_out, memory.attempts > 0 && !moved_on && memory.charged >= self.rules.repetitions)
        } else {
            (false, memory.attempts >= self.rules.repetitions)
        };
        if polled_out {
            return self.halt(HaltReason::RepeatedCall);
        }
        let cycle = !repeated && self.closes_a_cycle(signature);
        if repeated || cycle {
            if self.rules.nudge && !self.nudged {
                self.nudged = true;
                self.nudges += 1;
                self.streak += 1;
                if self.rules.streak.is_some_and(|streak| self.streak >= streak) {
                    return self.halt(HaltReason::NoProgress);
                }
                return Seen::Nudged;
            }
            return self.halt(if repeated { HaltReason::RepeatedCall } else { HaltReason::NoProgress });
        }
        // Admitted: charged, run, and its result remembered.
        self.tool_calls += 1;
        let text = call.text();
        let entry = self.memory.entry(signature).or_default();
        if !judged || entry.attempts == 0 || !moved_on {
            entry.charged += 1;
        }
        entry.attempts += 1;
        let fresh = entry.results.last() != Some(&text);
        entry.results.push(text.clone());
        self.history.push((signature, fresh));
        if call.fails {
            self.streak += 1;
            if self.rules.streak.is_some_and(|streak| self.streak >= streak) {
                return self.halt(HaltReason::NoProgress);
            }
            return Seen::Failed;
        }
        self.streak = 0;
        Seen::Text(text)
    }
}

/// The state of a run: the body answers with the text planned for the call being made.
#[derive(Debug, Default)]
struct Answer(std::sync::Mutex<(String, bool)>);

fn tools() -> ToolSet<Answer> {
    let [poll, other] = ["poll", "other"].map(|name| {
        ToolBuilder::new(name, "cap")
            .build(|_: Arg, call: loopbound::ToolContext<Answer>| async move {
                let (text, fails) = call.state().0.lock().map_err(|_| "poisoned".to_owned())?.clone();
                if fails { Err(text) } else { Ok(text) }
            })
            .unwrap_or_else(|error| panic!("a valid tool: {error}"))
    });
    ToolSet::builder()
        .add(&poll)
        .add(&other)
        .build()
        .unwrap_or_else(|error| panic!("distinct names: {error}"))
}

/// Checks one case; panics on the first broken invariant.
pub fn check(case: &ProgressCase) {
    let rules = Rules::of(case);
    let scope = Scope::builder()
        .grant("cap")
        .limits(
            Limits::default().with_tool_calls(1000).with_model_calls(1).with_repetitions(rules.repetitions),
        )
        .progress(rules.policy())
        .state(Answer::default())
        .build()
        .unwrap_or_else(|error| panic!("a valid policy {rules:?}: {error}"));
    let tools = tools();
    let mut model = Model::new(rules);
    let runtime = super::paused_runtime();
    runtime.block_on(async {
        for (at, call) in Planned::trace(&case.calls).into_iter().take(48).enumerate() {
            if let Ok(mut planned) = scope.state().0.lock() {
                *planned = (call.text(), call.fails);
            }
            let arguments = format!(r#"{{"a":{}}}"#, call.argument);
            let seen = match tools.invoke(&scope, call.tool(), &arguments).await {
                Ok(text) => Seen::Text(text),
                Err(ToolError::Failed { .. }) => Seen::Failed,
                Err(ToolError::Nudged(_)) => Seen::Nudged,
                Err(ToolError::Stopped(Stop::Halted(reason))) => Seen::Stopped(reason),
                Err(other) => panic!("call {at}: an unexpected error {other:?}"),
            };
            let expected = model.call(call);
            assert_eq!(seen, expected, "call {at} ({call:?}) under {rules:?}");
        }
    });
    let nudges = scope.events().iter().filter(|event| event.kind() == EventKind::Nudged).count();
    assert_eq!(
        (scope.tool_calls(), scope.stop_reason(), nudges),
        (model.tool_calls, model.stop, model.nudges),
        "the run's counters under {rules:?}"
    );
}
