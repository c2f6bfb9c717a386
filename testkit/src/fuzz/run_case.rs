//! Whole runs: an arbitrary script played by `loopbound::scripted::Scripted`, in either
//! composition and on either call path, under tokio's paused clock.
//!
//! # Invariants checked
//!
//! Whatever the script (tool calls with known and unknown names, valid, invalid and mistyped
//! argument JSON, texts, errors, hangs, a caller that cancels):
//!
//! - the run ends, and no later than its deadline;
//! - model calls ≤ their limit, and the transport saw exactly the admitted calls;
//! - tool calls ≤ their limit, one `ToolCall` event per admitted call, one body start per
//!   admitted call, and no signature admitted more often than the repetition limit;
//! - the log's counts run 1, 2, 3… per kind, with at most one halt event, last;
//! - `Completed` iff the host's condition holds and the run ended without a halt; a halt keeps
//!   no text and its status is the halt's reason;
//! - a hang ends with `DeadlineExceeded` exactly at the deadline, or with the caller's
//!   cancellation exactly when a scheduled cancellation fires; otherwise no time passes;
//! - the outcome, the counters and every event equal those of a reference simulation of the
//!   loop (SPEC §4-§9) over the [`GuardModel`].

use std::collections::BTreeMap;
use std::future::{Future, pending, ready};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::Composition;
use arbitrary::Arbitrary;
use loopbound::scripted::{Scripted, Step};
use loopbound::tool::ToolSetBuilder;
use loopbound::transport::{ModelReply, ToolCall, TransportError};
use loopbound::{
    HaltReason, Limits, Message, Outcome, RunError, Scope, Status, Stop, ToolBuilder, ToolContext, ToolSet,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::bind_case::{reference_binding, reference_signature};
use super::guard_model::{Charge, GuardModel, assert_log_shape};
use super::json_mirror::{JsonMirror, MAX_MIRROR_DEPTH};

/// One scripted run.
#[derive(Arbitrary, Clone, Debug)]
pub struct RunCase {
    /// The `simple` composition (else `harness`).
    pub simple: bool,
    /// Model calls take the streaming path.
    pub streaming: bool,
    /// Model-call limit minus one, modulo 48 (so `simple`'s cap of 40 can be reached).
    pub model_limit: u8,
    /// Tool-call limit, modulo 8.
    pub tool_limit: u8,
    /// Repetition limit minus one, modulo 3.
    pub repetitions: u8,
    /// Deadline in seconds minus one, modulo 600.
    pub deadline_secs: u16,
    /// Which tools' capabilities are granted (bit i for tool i).
    pub granted: u8,
    /// The replies, in order.
    pub steps: Vec<StepCase>,
    /// What the script does once its steps are spent.
    pub after: AfterScript,
    /// Where to splice the `complete` scenario's three replies into `steps` (modulo their
    /// count + 1), so that completed reviews are common among arbitrary scripts.
    pub review_at: Option<u8>,
}

/// What the script does after its last step.
#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfterScript {
    /// Fails with a provider error, as `loopbound::scripted::sequence` does.
    Fail,
    /// Starts over from the first step.
    Repeat,
    /// Never answers.
    Hang,
}

/// One scripted model call.
#[derive(Arbitrary, Clone, Debug)]
pub enum StepCase {
    /// A reply: optional text and tool calls.
    Reply {
        /// The text.
        text: Option<String>,
        /// The tool calls, in order.
        calls: Vec<CallCase>,
    },
    /// Never answers and ignores cancellation.
    Hang,
    /// The provider cannot be reached.
    Unavailable(String),
    /// The provider answers unusably.
    Fail(FailKind),
    /// The caller cancels during this call, which then answers with text.
    CancelCaller,
    /// The caller will cancel `after` seconds from now (modulo the deadline), while the run goes
    /// on with these tool calls; only a hang lets that time pass.
    CancelLater {
        /// Seconds until the caller cancels, modulo the deadline.
        after: u16,
        /// The tool calls of this reply.
        calls: Vec<CallCase>,
    },
}

/// A provider error other than unavailability.
#[derive(Arbitrary, Clone, Copy, Debug)]
pub enum FailKind {
    /// Credentials refused.
    Authentication,
    /// An unreadable body.
    Malformed,
    /// The provider's own cancellation.
    Cancelled,
    /// Anything else.
    Other,
}

/// One tool call of a reply.
#[derive(Arbitrary, Clone, Debug)]
pub struct CallCase {
    /// Which tool.
    pub tool: ToolPick,
    /// Its arguments.
    pub args: ArgsCase,
}

/// A tool name: one of the registered tools, or any name.
#[derive(Arbitrary, Clone, Debug)]
pub enum ToolPick {
    /// `read_ticket`.
    Read,
    /// `finish_review`.
    Finish,
    /// `slow_lookup`, whose body never returns.
    Slow,
    /// `flaky`, whose body always fails.
    Failing,
    /// `take_note`.
    Note,
    /// Any name.
    Unknown(String),
}

/// Argument text of a call.
#[derive(Arbitrary, Clone, Debug)]
pub enum ArgsCase {
    /// `{"input": n}` for a small `n`.
    Ticket(u8),
    /// `{"input": 42}`, the ticket in scope.
    Answer,
    /// `{"text": …, "tags": […]}`.
    Note {
        /// The note.
        text: String,
        /// Its tags.
        tags: Vec<String>,
    },
    /// A structured document.
    Mirror(JsonMirror),
    /// Any text.
    Raw(String),
}

/// Tool names and capabilities, in bit order of [`RunCase::granted`].
pub const TOOLS: [(&str, &str); 5] = [
    ("read_ticket", "ticket.read"),
    ("finish_review", "review.finish"),
    ("slow_lookup", "slow.run"),
    ("flaky", "flaky.run"),
    ("take_note", "note.write"),
];

/// The ticket tools' input.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
pub struct Ticket {
    /// The ticket id.
    pub input: i64,
}

/// `take_note`'s input.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
pub struct Note {
    /// The note.
    pub text: String,
    /// Its tags.
    pub tags: Vec<String>,
}

/// The `complete` scenario's script: read ticket 42, finish its review, say so.
pub fn complete_review() -> Vec<StepCase> {
    let call = |tool: ToolPick| CallCase { tool, args: ArgsCase::Answer };
    vec![
        StepCase::Reply { text: None, calls: vec![call(ToolPick::Read)] },
        StepCase::Reply { text: None, calls: vec![call(ToolPick::Finish)] },
        StepCase::Reply { text: Some("Review finished.".to_owned()), calls: vec![] },
    ]
}

impl RunCase {
    /// This case with the review spliced into its steps, as it is played.
    fn scripted(&self) -> Self {
        let mut case = self.clone();
        if let Some(at) = case.review_at.take() {
            let at = usize::from(at) % (case.steps.len() + 1);
            case.steps.splice(at..at, complete_review());
        }
        case
    }

    fn limits(&self) -> Limits {
        Limits::default()
            .with_model_calls(u32::from(self.model_limit % 48) + 1)
            .with_tool_calls(u32::from(self.tool_limit % 8))
            .with_repetitions(u32::from(self.repetitions % 3) + 1)
            .with_deadline(Duration::from_secs(u64::from(self.deadline_secs % 600) + 1))
    }

    fn composition(&self) -> Composition {
        if self.simple { Composition::Simple } else { Composition::Harness }
    }

    /// Seconds from now until a `CancelLater { after }` cancellation: always before the deadline.
    fn cancel_delay(&self, after: u16) -> u64 {
        u64::from(after) % self.limits().deadline().as_secs()
    }

    fn granted(&self, tool: usize) -> bool {
        self.granted & (1 << tool) != 0
    }

    /// The step of the `call`-th model call (1-based).
    fn step(&self, call: u32) -> Option<&StepCase> {
        let index = usize::try_from(call.saturating_sub(1)).unwrap_or(usize::MAX);
        match (self.steps.get(index), self.after) {
            (Some(step), _) => Some(step),
            (None, AfterScript::Repeat) if !self.steps.is_empty() => self.steps.get(index % self.steps.len()),
            (None, AfterScript::Hang) => Some(&StepCase::Hang),
            (None, _) => None,
        }
    }
}

impl CallCase {
    fn name(&self) -> String {
        match &self.tool {
            ToolPick::Read => TOOLS[0].0.to_owned(),
            ToolPick::Finish => TOOLS[1].0.to_owned(),
            ToolPick::Slow => TOOLS[2].0.to_owned(),
            ToolPick::Failing => TOOLS[3].0.to_owned(),
            ToolPick::Note => TOOLS[4].0.to_owned(),
            ToolPick::Unknown(name) => name.clone(),
        }
    }

    fn arguments(&self) -> String {
        match &self.args {
            ArgsCase::Ticket(id) => format!(r#"{{"input":{}}}"#, id % 50),
            ArgsCase::Answer => r#"{ "input" : 42 }"#.to_owned(),
            ArgsCase::Note { text, tags } => serde_json::json!({ "text": text, "tags": tags }).to_string(),
            ArgsCase::Mirror(value) => value.to_text(MAX_MIRROR_DEPTH),
            ArgsCase::Raw(text) => text.clone(),
        }
    }
}

fn fail_error(kind: FailKind) -> TransportError {
    match kind {
        FailKind::Authentication => TransportError::authentication("401"),
        FailKind::Malformed => TransportError::malformed("truncated body"),
        FailKind::Cancelled => TransportError::cancelled(),
        FailKind::Other => TransportError::other("bad request"),
    }
}

/// The script's step as the transport plays it.
fn play(case: &RunCase, call: u32, caller: &CancellationToken) -> Step {
    let reply = |text: &Option<String>, calls: &[CallCase]| {
        ModelReply::new(
            text.clone(),
            calls
                .iter()
                .enumerate()
                .map(|(index, c)| ToolCall::new(format!("c{call}_{index}"), c.name(), c.arguments()))
                .collect(),
        )
    };
    match case.step(call) {
        Some(StepCase::Reply { text, calls }) => Step::Reply(reply(text, calls)),
        Some(StepCase::Hang) => Step::Hang,
        Some(StepCase::Unavailable(message)) => Step::Fail(TransportError::unavailable(message.clone())),
        Some(StepCase::Fail(kind)) => Step::Fail(fail_error(*kind)),
        Some(StepCase::CancelCaller) => {
            caller.cancel();
            Step::Reply(ModelReply::text("cancelled meanwhile"))
        }
        Some(StepCase::CancelLater { after, calls }) => {
            let (caller, delay) = (caller.clone(), Duration::from_secs(case.cancel_delay(*after)));
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                caller.cancel();
            });
            Step::Reply(reply(&None, calls))
        }
        None => Step::Fail(TransportError::other(format!("the script has no step {call}"))),
    }
}

/// What the host's tools remember.
#[derive(Debug, Default)]
struct Host {
    read: AtomicBool,
    finished: AtomicBool,
    /// Body starts per signature.
    starts: Mutex<BTreeMap<String, u32>>,
}

impl Host {
    fn start(&self, signature: String) {
        let mut starts = self.starts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *starts.entry(signature).or_default() += 1;
    }
}

/// Registers tool `index` of [`TOOLS`]: its body records its start under the reference
/// signature of its input, then does `act`.
fn register<T, Fut>(set: &mut ToolSetBuilder<Host>, index: usize, act: fn(&Host, &T) -> Fut)
where
    T: serde::de::DeserializeOwned + Serialize + JsonSchema + Send + 'static,
    Fut: Future<Output = Result<String, String>> + Send + 'static,
{
    let (name, capability) = TOOLS[index];
    let built = ToolBuilder::new(name, capability).build(move |input: T, call: ToolContext<Host>| {
        call.state().start(reference_signature(name, &input));
        act(call.state(), &input)
    });
    match built {
        Ok(tool) => *set = std::mem::take(set).add(&tool),
        Err(error) => panic!("registering {name}: {error}"),
    }
}

/// The host's tools, defined once per check.
fn tools() -> ToolSet<Host> {
    let mut set = ToolSet::builder();
    register(&mut set, 0, |host, ticket: &Ticket| {
        let answer = if ticket.input == 42 {
            host.read.store(true, Ordering::SeqCst);
            "Ticket 42: the login page fails."
        } else {
            "NotFound: only ticket 42 is in scope."
        };
        ready(Ok(answer.to_owned()))
    });
    register(&mut set, 1, |host, ticket: &Ticket| {
        let done = ticket.input == 42 && host.read.load(Ordering::SeqCst);
        if done {
            host.finished.store(true, Ordering::SeqCst);
            ready(Ok("Review completed.".to_owned()))
        } else {
            ready(Err("read ticket 42 first".to_owned()))
        }
    });
    register(&mut set, 2, |_, _: &Ticket| pending());
    register(&mut set, 3, |_, _: &Ticket| ready(Err("the backend is down".to_owned())));
    register(&mut set, 4, |_, _: &Note| ready(Ok("noted".to_owned())));
    set.build().unwrap_or_else(|error| panic!("distinct names: {error}"))
}

/// What a run is expected to return.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expected {
    /// An outcome with this status and text.
    Outcome(Status, Option<String>),
    /// `RunError::Cancelled`.
    Cancelled,
    /// `RunError::Provider` with this error.
    Provider(TransportError),
}

/// How the simulated loop ended.
enum SimEnd {
    Reply(Option<String>),
    Cap,
    Stopped(Stop),
    Transport(TransportError),
}

/// The reference simulation of one run: the loop of SPEC §8 over the guard model.
struct Simulation<'a> {
    case: &'a RunCase,
    model: GuardModel,
    read: bool,
    finished: bool,
    /// When the earliest scheduled caller cancellation fires, from the run's start.
    cancel_at: Option<Duration>,
    /// Virtual time spent: only a hang lets time pass, up to a cancellation or the deadline.
    elapsed: Duration,
}

impl<'a> Simulation<'a> {
    fn new(case: &'a RunCase) -> Self {
        let limits = case.limits();
        let model = GuardModel::new(limits.model_calls(), limits.tool_calls(), limits.repetitions());
        Self { case, model, read: false, finished: false, cancel_at: None, elapsed: Duration::ZERO }
    }

    fn run(mut self) -> (Expected, GuardModel, Duration) {
        let end = self.drive();
        let expected = if self.model.caller_cancelled {
            Expected::Cancelled
        } else if let Some(reason) = self.model.stop {
            Expected::Outcome(reason.into(), None)
        } else {
            let ended = |text| {
                Expected::Outcome(if self.finished { Status::Completed } else { Status::Incomplete }, text)
            };
            match end {
                SimEnd::Reply(text) => ended(text),
                SimEnd::Cap => ended(None),
                SimEnd::Stopped(Stop::Halted(reason)) => Expected::Outcome(reason.into(), None),
                // `Stop::Cancelled`, and any stop a later version adds, ends as the caller's.
                SimEnd::Stopped(_) => Expected::Cancelled,
                SimEnd::Transport(error) if error.is_unavailable() => {
                    Expected::Outcome(Status::ProviderUnavailable, None)
                }
                SimEnd::Transport(error) => Expected::Provider(error),
            }
        };
        (expected, self.model, self.elapsed)
    }

    /// A wait that never ends by itself: the scheduled cancellation or the deadline ends it.
    fn hang(&mut self, charge: Charge<'_>) -> Stop {
        match self.cancel_at {
            Some(at) => {
                self.elapsed = at;
                self.model.caller_cancelled = true;
                Stop::Cancelled
            }
            None => {
                self.elapsed = self.case.limits().deadline();
                self.model.expire(charge)
            }
        }
    }

    fn drive(&mut self) -> SimEnd {
        let cap = self.case.composition().max_iterations(&self.case.limits());
        for _ in 0..cap {
            let call = match self.model.admit_model() {
                Ok(call) => call,
                Err(stop) => return SimEnd::Stopped(stop),
            };
            let (text, calls) = match self.case.step(call) {
                Some(StepCase::Reply { text, calls }) => (text, calls),
                Some(StepCase::CancelLater { after, calls }) => {
                    let at = Duration::from_secs(self.case.cancel_delay(*after));
                    self.cancel_at = Some(self.cancel_at.map_or(at, |earlier| earlier.min(at)));
                    (&None, calls)
                }
                Some(StepCase::Hang) => return SimEnd::Stopped(self.hang(Charge::Model)),
                Some(StepCase::Unavailable(message)) => {
                    return SimEnd::Transport(TransportError::unavailable(message.clone()));
                }
                Some(StepCase::Fail(kind)) => return SimEnd::Transport(fail_error(*kind)),
                Some(StepCase::CancelCaller) => {
                    self.model.caller_cancelled = true;
                    return SimEnd::Stopped(Stop::Cancelled);
                }
                None => {
                    return SimEnd::Transport(TransportError::other(format!(
                        "the script has no step {call}"
                    )));
                }
            };
            if calls.is_empty() {
                return SimEnd::Reply(text.clone());
            }
            if calls.len() > self.case.limits().calls_per_reply() as usize {
                return SimEnd::Stopped(self.model.refuse_reply());
            }
            for call in calls {
                if let Err(stop) = self.tool_call(call) {
                    return SimEnd::Stopped(stop);
                }
            }
        }
        SimEnd::Cap
    }

    /// One tool call: lookup, middleware, binding, guard, body, re-check.
    fn tool_call(&mut self, call: &CallCase) -> Result<(), Stop> {
        let name = call.name();
        let Some(tool) = TOOLS.iter().position(|(known, _)| *known == name) else {
            return Ok(());
        };
        self.model.observe_middleware(&name)?;
        let arguments = call.arguments();
        let (signature, input) = if tool == 4 {
            match reference_binding::<Note>(&arguments) {
                Some(Ok(note)) => (reference_signature(&name, &note), None),
                _ => return Ok(()),
            }
        } else {
            match reference_binding::<Ticket>(&arguments) {
                Some(Ok(ticket)) => (reference_signature(&name, &ticket), Some(ticket.input)),
                _ => return Ok(()),
            }
        };
        self.model.admit_tool(&name, self.case.granted(tool), &signature)?;
        match (tool, input) {
            (0, Some(42)) => self.read = true,
            (1, Some(42)) if self.read => self.finished = true,
            (2, _) => return Err(self.hang(Charge::Tool(&name))),
            _ => {}
        }
        self.model.check(Charge::Tool(&name))
    }
}

/// The class of `case`'s expected end (composition, call path, result, whether a tool was
/// admitted), used to pick a small seed corpus that still reaches every kind of end.
pub fn outcome_class(case: &RunCase) -> String {
    let case = &case.scripted();
    let (expected, model, _) = Simulation::new(case).run();
    let result = match expected {
        Expected::Outcome(status, text) => format!("{status}{}", if text.is_some() { "-text" } else { "" }),
        Expected::Cancelled => "Cancelled".to_owned(),
        Expected::Provider(error) => {
            let debug = format!("{error:?}");
            format!("Provider{}", debug.split('(').next().unwrap_or_default())
        }
    };
    let path = if case.streaming { "stream" } else { "complete" };
    let tools = if model.tool_calls > 0 { "-tools" } else { "" };
    format!("{}-{path}-{result}{tools}", case.composition())
}

/// Checks one case; panics on the first broken invariant.
pub fn check(case: &RunCase) {
    let runtime = super::paused_runtime();
    runtime.block_on(check_run(&case.scripted()));
}

/// Checks that running each reply's calls as a parallel batch of at most `cap` bodies (2 to 4)
/// admits exactly what one after another admits: the same result, events, counters and body
/// starts, and the same conversation once the batch's "not run" answers are left out. Cases
/// whose bodies hang are left out (a hang stops the sequential loop before the later calls'
/// admissions, which a batch has already made).
pub fn check_parallel(case: &RunCase, cap: u8) {
    let case = case.scripted();
    let hangs = case.steps.iter().any(|step| match step {
        StepCase::Reply { calls, .. } | StepCase::CancelLater { calls, .. } => {
            calls.iter().any(|call| matches!(call.tool, ToolPick::Slow))
        }
        _ => false,
    });
    if hangs {
        return;
    }
    let cap = usize::from(cap % 3) + 2;
    let runtime = super::paused_runtime();
    runtime.block_on(async {
        let sequential = played(&case, None).await;
        let parallel = played(&case, Some(cap)).await;
        assert_eq!(parallel.result, sequential.result, "the result, cap {cap}");
        assert_eq!(parallel.events, sequential.events, "the events, cap {cap}");
        assert_eq!(parallel.counts, sequential.counts, "the counters, cap {cap}");
        assert_eq!(parallel.starts, sequential.starts, "the bodies started, cap {cap}");
        let answered: Vec<&Message> = parallel
            .conversation
            .iter()
            .filter(|message| !matches!(message, Message::Tool { content, is_error: true, .. } if content.starts_with("not run")))
            .collect();
        assert_eq!(answered, sequential.conversation.iter().collect::<Vec<_>>(), "the conversation, cap {cap}");
    });
}

/// What one play of a case left behind.
struct Played {
    result: Result<(Status, Option<String>), String>,
    events: Vec<String>,
    counts: (u32, u32),
    starts: BTreeMap<String, u32>,
    conversation: Vec<Message>,
}

async fn played(case: &RunCase, parallel: Option<usize>) -> Played {
    let caller = CancellationToken::new();
    let granted = TOOLS.iter().enumerate().filter(|(bit, _)| case.granted(*bit)).map(|(_, (_, c))| *c);
    let scope = Scope::builder()
        .grants(granted)
        .limits(case.limits())
        .caller(caller.clone())
        .state(Host::default())
        .build()
        .unwrap_or_else(|error| panic!("valid limits were refused: {error}"));
    let transport = Scripted::new(move |call, _| play(case, call, &caller)).fragment_size(3);
    let mut runtime = case.composition().runner(&tools(), &transport).streaming(case.streaming);
    if let Some(cap) = parallel {
        runtime =
            runtime.parallel(loopbound::Concurrency::new(cap).unwrap_or_else(|error| panic!("{error}")));
    }
    let mut conversation = vec![Message::user("Review ticket 42.")];
    let result =
        runtime.run(&scope, &mut conversation, |ended| ended.state().finished.load(Ordering::SeqCst)).await;
    let starts = scope.state().starts.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    Played {
        result: result.map(|o| (o.status(), o.text().map(str::to_owned))).map_err(|error| error.to_string()),
        events: scope.events().iter().map(ToString::to_string).collect(),
        counts: (scope.model_calls(), scope.tool_calls()),
        starts,
        conversation,
    }
}

async fn check_run(case: &RunCase) {
    let limits = case.limits();
    let caller = CancellationToken::new();
    let granted = TOOLS.iter().enumerate().filter(|(bit, _)| case.granted(*bit)).map(|(_, (_, c))| *c);
    let started = Instant::now();
    let scope = Scope::builder()
        .grants(granted)
        .limits(limits.clone())
        .caller(caller.clone())
        .state(Host::default())
        .build()
        .unwrap_or_else(|error| panic!("valid limits were refused: {error}"));
    let script_caller = caller.clone();
    let transport = Scripted::new(move |call, _| play(case, call, &script_caller)).fragment_size(3);
    let runtime = case.composition().runner(&tools(), &transport).streaming(case.streaming);
    let mut conversation = vec![Message::user("Review ticket 42.")];
    let run = runtime.run(&scope, &mut conversation, |ended| ended.state().finished.load(Ordering::SeqCst));
    let result = tokio::time::timeout(limits.deadline() + Duration::from_secs(1), run)
        .await
        .unwrap_or_else(|_| panic!("the run did not end by its deadline"));
    let elapsed = started.elapsed();

    check_invariants(case, &scope, &result, elapsed, transport.calls());
    let (expected, model, spent) = Simulation::new(case).run();
    model.assert_matches(&scope, "the run");
    let actual = match &result {
        Ok(outcome) => Expected::Outcome(outcome.status(), outcome.text().map(str::to_owned)),
        Err(RunError::Cancelled) => Expected::Cancelled,
        Err(RunError::Provider(error)) => Expected::Provider(error.clone()),
        Err(other) => panic!("an unknown run error: {other}"),
    };
    assert_eq!(actual, expected, "the run's result differs from the simulation");
    assert_eq!(elapsed, spent, "virtual time spent");
}

/// The invariants that hold whatever the reference simulation says.
fn check_invariants(
    case: &RunCase,
    scope: &Scope<Host>,
    result: &Result<Outcome, RunError>,
    elapsed: Duration,
    transport_calls: u32,
) {
    let limits = case.limits();
    let host = scope.state();
    assert!(scope.model_calls() <= limits.model_calls(), "model calls over the limit");
    assert_eq!(transport_calls, scope.model_calls(), "the transport saw exactly the admitted calls");
    assert!(scope.tool_calls() <= limits.tool_calls(), "tool calls over the limit");
    let events = scope.events();
    assert_eq!(assert_log_shape(&events), scope.tool_calls(), "one ToolCall event per admitted call");
    let starts = host.starts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    assert_eq!(starts.values().sum::<u32>(), scope.tool_calls(), "one body start per admitted call");
    for (signature, count) in starts.iter() {
        assert!(*count <= limits.repetitions(), "{signature} admitted {count} times");
    }
    assert!(elapsed <= limits.deadline(), "the run outlived its deadline");
    let halted = scope.stop_reason();
    if let Some(reason) = halted {
        assert!(
            matches!(events.last().map(|e| e.kind()), Some(loopbound::EventKind::Halt(r)) if r == reason)
        );
    }
    let Ok(outcome) = result else { return };
    assert_eq!(outcome.events(), &events[..], "the outcome carries the scope's log");
    let condition = host.finished.load(Ordering::SeqCst);
    let provider_down = outcome.status() == Status::ProviderUnavailable;
    assert_eq!(
        outcome.status() == Status::Completed,
        condition && halted.is_none() && !provider_down,
        "Completed iff the host's condition holds and nothing stopped the run"
    );
    if let Some(reason) = halted {
        assert_eq!(outcome.status(), Status::from(reason), "a halt decides the status");
        assert_eq!(outcome.text(), None, "a halt keeps no text");
    }
    if !outcome.status().keeps_text() {
        assert_eq!(outcome.text(), None);
    }
    if outcome.status() == Status::DeadlineExceeded {
        assert_eq!(halted, Some(HaltReason::DeadlineExceeded));
        assert_eq!(elapsed, limits.deadline(), "a hang ends exactly at the deadline");
    }
}
