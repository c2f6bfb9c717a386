//! The guard's order of checks (SPEC §4, §6) as a state machine: arbitrary sequences of typed
//! invocations, JSON invocations, calls by name, bare reservations, model admissions, caller
//! cancellations and clock advances, driven through the public API against the reference
//! [`GuardModel`] under tokio's paused clock.
//!
//! After every step: the step's result equals the model's (the first failing check of
//! cancellation → permission → tool budget → repetition decides), bodies ran exactly for the
//! admitted invocations, and `events()`, `tool_calls()`, `model_calls()`, `stop_reason()` and
//! the scope's token equal the model's.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use loopbound::tool::BindErrorKind;
use loopbound::{GuardedTool, Limits, Scope, Stop, ToolBuilder, ToolError, ToolSet};
use loopbound_proptests::config::with_cases;
use loopbound_proptests::harness;
use loopbound_proptests::harness::guard_model::{Charge, GuardModel};
use loopbound_proptests::regressions;
use proptest::prelude::*;
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest, prop_state_machine};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

/// The tools' input.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
struct Arg {
    id: i64,
    tag: Option<String>,
}

/// What a body does once admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Body {
    Succeed,
    Fail,
    /// Never returns and ignores its token: only the deadline ends it.
    Hang,
    /// Cancels the caller's token, then succeeds.
    CancelCaller,
}

/// How JSON arguments are spelled, and whether they bind.
#[derive(Clone, Copy, Debug)]
enum Spelling {
    Compact,
    SpacedAndReordered,
    ExplicitNullTag,
    ExtraField,
    /// `-0` and `42e0` are the integers 0 and 42 (serde_json reads them as floats, which an
    /// `i64` refuses; loopbound reads numbers by value).
    NegativeZeroOrExponent,
    /// `42.0` and `420e-1` are the integer 42.
    FloatId,
    StringId,
    NotAnObject,
    Truncated,
    Blank,
}

impl Spelling {
    fn text(self, arg: &Arg) -> String {
        let tag = serde_json::to_string(&arg.tag).unwrap_or_default();
        let id = arg.id;
        match self {
            Self::Compact => serde_json::to_string(arg).unwrap_or_default(),
            Self::SpacedAndReordered => format!("\n{{ \"tag\" : {tag} ,\t\"id\" : {id} }} "),
            Self::ExplicitNullTag if arg.tag.is_none() => format!(r#"{{"id":{id},"tag":null}}"#),
            Self::ExplicitNullTag => format!(r#"{{"tag":{tag},"id":{id}}}"#),
            Self::ExtraField => format!(r#"{{"zz":[1,{{"id":2}}],"id":{id},"tag":{tag}}}"#),
            Self::NegativeZeroOrExponent if id == 0 => format!(r#"{{"id":-0,"tag":{tag}}}"#),
            Self::NegativeZeroOrExponent => format!(r#"{{"id":{id}e0,"tag":{tag}}}"#),
            Self::FloatId if id % 2 == 0 => format!(r#"{{"id":{id}.0,"tag":{tag}}}"#),
            Self::FloatId => format!(r#"{{"tag":{tag},"id":{id}0e-1}}"#),
            Self::StringId => format!(r#"{{"id":"{id}"}}"#),
            Self::NotAnObject => format!("[{id}]"),
            Self::Truncated => format!(r#"{{"id":{id}"#),
            Self::Blank => " \n".to_owned(),
        }
    }

    /// The binding error the contract requires, or `None` when the text binds to `arg`.
    fn bind_error(self) -> Option<BindErrorKind> {
        match self {
            Self::Compact
            | Self::SpacedAndReordered
            | Self::ExplicitNullTag
            | Self::ExtraField
            | Self::NegativeZeroOrExponent
            | Self::FloatId => None,
            Self::StringId | Self::Blank => Some(BindErrorKind::Mismatch),
            Self::NotAnObject => Some(BindErrorKind::NotAnObject),
            Self::Truncated => Some(BindErrorKind::InvalidJson),
        }
    }
}

#[derive(Clone, Debug)]
enum Transition {
    Invoke { tool: usize, arg: Arg, body: Body },
    InvokeJson { tool: usize, arg: Arg, spelling: Spelling, fail: bool },
    ByName { name: String, arg: Arg },
    Reserve { tool: usize, arg: Arg },
    AdmitModel,
    Cancel,
    Advance(u64),
}

/// What one step returned, in comparable form.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Observed {
    Done,
    Failed,
    Bind(BindErrorKind),
    NotFound,
    Stopped(Stop),
    Model(Result<u32, Stop>),
    Reserved(Result<u32, Stop>),
    Nothing,
}

const NAMES: [&str; 3] = ["alpha", "beta", "gamma"];

#[derive(Clone, Debug)]
struct Reference {
    granted: [bool; 3],
    deadline: u64,
    elapsed: u64,
    model: GuardModel,
    runs: [u32; 3],
    last: Observed,
}

impl Reference {
    fn key(tool: usize, arg: &Arg) -> String {
        format!("{}:{}:{:?}", NAMES[tool], arg.id, arg.tag)
    }

    /// An admitted-or-refused invocation whose body does `body`.
    fn invoke(&mut self, tool: usize, arg: &Arg, body: Body) -> Observed {
        let name = NAMES[tool];
        if let Err(stop) = self.model.admit_tool(name, self.granted[tool], &Self::key(tool, arg)) {
            return Observed::Stopped(stop);
        }
        self.runs[tool] += 1;
        let result = match body {
            Body::Succeed => Observed::Done,
            Body::Fail => Observed::Failed,
            Body::Hang => {
                self.elapsed = self.elapsed.max(self.deadline);
                return Observed::Stopped(self.model.expire(Charge::Tool(name)));
            }
            Body::CancelCaller => {
                self.model.caller_cancelled = true;
                Observed::Done
            }
        };
        match self.model.check(Charge::Tool(name)) {
            Ok(()) => result,
            Err(stop) => Observed::Stopped(stop),
        }
    }
}

fn arg() -> impl Strategy<Value = Arg> {
    (0i64..3, prop::sample::select(vec![None, Some("a".to_owned()), Some("A".to_owned())]))
        .prop_map(|(id, tag)| Arg { id, tag })
}

fn spelling() -> impl Strategy<Value = Spelling> {
    prop::sample::select(vec![
        Spelling::Compact,
        Spelling::SpacedAndReordered,
        Spelling::ExplicitNullTag,
        Spelling::ExtraField,
        Spelling::NegativeZeroOrExponent,
        Spelling::FloatId,
        Spelling::StringId,
        Spelling::NotAnObject,
        Spelling::Truncated,
        Spelling::Blank,
    ])
}

fn body() -> impl Strategy<Value = Body> {
    prop_oneof![6 => Just(Body::Succeed), 3 => Just(Body::Fail), 1 => Just(Body::Hang), 1 => Just(Body::CancelCaller)]
}

struct GuardMachine;

impl ReferenceStateMachine for GuardMachine {
    type State = Reference;
    type Transition = Transition;

    fn init_state() -> BoxedStrategy<Reference> {
        (any::<[bool; 3]>(), 1u32..4, 0u32..5, 1u32..3, 1u64..100)
            .prop_map(|(granted, model_limit, tool_limit, repetitions, deadline)| Reference {
                granted,
                deadline,
                elapsed: 0,
                model: GuardModel::new(model_limit, tool_limit, repetitions),
                runs: [0; 3],
                last: Observed::Nothing,
            })
            .boxed()
    }

    fn transitions(_: &Reference) -> BoxedStrategy<Transition> {
        prop_oneof![
            8 => (0usize..3, arg(), body()).prop_map(|(tool, arg, body)| Transition::Invoke { tool, arg, body }),
            6 => (0usize..3, arg(), spelling(), any::<bool>())
                .prop_map(|(tool, arg, spelling, fail)| Transition::InvokeJson { tool, arg, spelling, fail }),
            2 => (prop::sample::select(vec!["alpha", "beta", "ALPHA", "delta", ""]), arg())
                .prop_map(|(name, arg)| Transition::ByName { name: name.to_owned(), arg }),
            3 => (0usize..3, arg()).prop_map(|(tool, arg)| Transition::Reserve { tool, arg }),
            3 => Just(Transition::AdmitModel),
            1 => Just(Transition::Cancel),
            2 => (0u64..60).prop_map(Transition::Advance),
        ]
        .boxed()
    }

    fn apply(mut state: Reference, transition: &Transition) -> Reference {
        state.last = match transition {
            Transition::Invoke { tool, arg, body } => state.invoke(*tool, arg, *body),
            Transition::InvokeJson { tool, arg, spelling, fail } => match spelling.bind_error() {
                Some(kind) => Observed::Bind(kind),
                None => state.invoke(*tool, arg, if *fail { Body::Fail } else { Body::Succeed }),
            },
            Transition::ByName { name, arg } => match NAMES.iter().position(|known| known == name) {
                Some(tool) => state.invoke(tool, arg, Body::Succeed),
                None => Observed::NotFound,
            },
            Transition::Reserve { tool, arg } => Observed::Reserved(state.model.admit_tool(
                NAMES[*tool],
                state.granted[*tool],
                &Reference::key(*tool, arg),
            )),
            Transition::AdmitModel => Observed::Model(state.model.admit_model()),
            Transition::Cancel => {
                state.model.caller_cancelled = true;
                Observed::Nothing
            }
            Transition::Advance(secs) => {
                state.elapsed += secs;
                state.model.deadline_passed = state.elapsed >= state.deadline;
                Observed::Nothing
            }
        };
        state
    }
}

struct Sut {
    runtime: tokio::runtime::Runtime,
    scope: Scope,
    set: ToolSet,
    caller: CancellationToken,
    tools: Vec<GuardedTool<Arg>>,
    plan: Arc<Mutex<Body>>,
    runs: Vec<Arc<AtomicU32>>,
    started: tokio::time::Instant,
}

fn observe(result: Result<String, ToolError>) -> Observed {
    match result {
        Ok(text) => {
            assert_eq!(text, "done");
            Observed::Done
        }
        Err(ToolError::Failed { .. }) => Observed::Failed,
        Err(ToolError::Bind(error)) => Observed::Bind(error.kind()),
        Err(ToolError::NotFound { .. }) => Observed::NotFound,
        Err(ToolError::Stopped(stop)) => Observed::Stopped(stop),
        Err(other) => panic!("an unexpected tool error: {other}"),
    }
}

impl Sut {
    fn new(state: &Reference) -> Self {
        let runtime = harness::paused_runtime();
        let caller = CancellationToken::new();
        let plan = Arc::new(Mutex::new(Body::Succeed));
        let limits = Limits::default()
            .with_model_calls(state.model.model_limit)
            .with_tool_calls(state.model.tool_limit)
            .with_repetitions(state.model.repetitions)
            .with_deadline(Duration::from_secs(state.deadline));
        let (scope, set, tools, runs, started) = runtime.block_on(async {
            let started = tokio::time::Instant::now();
            let granted =
                NAMES.iter().zip(state.granted).filter(|(_, on)| *on).map(|(name, _)| format!("{name}.use"));
            let scope = harness::scope_with(granted, limits, &caller);
            let mut tools = Vec::new();
            let mut runs = Vec::new();
            let mut set = ToolSet::builder();
            for name in NAMES {
                let counter = Arc::new(AtomicU32::new(0));
                let (count, plan, caller) = (Arc::clone(&counter), Arc::clone(&plan), caller.clone());
                let tool = ToolBuilder::new(name, format!("{name}.use"))
                    .build(move |_: Arg, _call| {
                        count.fetch_add(1, Ordering::SeqCst);
                        let plan = *plan.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                        let caller = caller.clone();
                        async move {
                            match plan {
                                Body::Succeed => Ok("done"),
                                Body::Fail => Err("the body refused"),
                                Body::Hang => std::future::pending().await,
                                Body::CancelCaller => {
                                    caller.cancel();
                                    Ok("done")
                                }
                            }
                        }
                    })
                    .unwrap_or_else(|error| panic!("registering {name}: {error}"));
                set = set.add(&tool);
                tools.push(tool);
                runs.push(counter);
            }
            let set = set.build().unwrap_or_else(|error| panic!("distinct names: {error}"));
            (scope, set, tools, runs, started)
        });
        Self { runtime, scope, set, caller, tools, plan, runs, started }
    }

    fn set_plan(&self, body: Body) {
        *self.plan.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = body;
    }

    fn step(&self, transition: Transition) -> Observed {
        self.runtime.block_on(async {
            match transition {
                Transition::Invoke { tool, arg, body } => {
                    self.set_plan(body);
                    observe(self.tools[tool].invoke(&self.scope, arg).await)
                }
                Transition::InvokeJson { tool, arg, spelling, fail } => {
                    self.set_plan(if fail { Body::Fail } else { Body::Succeed });
                    observe(self.tools[tool].invoke_json(&self.scope, &spelling.text(&arg)).await)
                }
                Transition::ByName { name, arg } => {
                    self.set_plan(Body::Succeed);
                    observe(self.set.invoke(&self.scope, &name, &Spelling::Compact.text(&arg)).await)
                }
                Transition::Reserve { tool, arg } => match self.tools[tool].reserve(&self.scope, arg) {
                    Ok(reservation) => Observed::Reserved(Ok(reservation.tool_count())),
                    Err(ToolError::Stopped(stop)) => Observed::Reserved(Err(stop)),
                    Err(other) => panic!("reserve failed otherwise: {other}"),
                },
                Transition::AdmitModel => Observed::Model(self.scope.admit_model()),
                Transition::Cancel => {
                    self.caller.cancel();
                    Observed::Nothing
                }
                Transition::Advance(secs) => {
                    tokio::time::advance(Duration::from_secs(secs)).await;
                    Observed::Nothing
                }
            }
        })
    }
}

impl StateMachineTest for GuardMachine {
    type SystemUnderTest = Sut;
    type Reference = Self;

    fn init_test(state: &Reference) -> Sut {
        Sut::new(state)
    }

    fn apply(sut: Sut, state: &Reference, transition: Transition) -> Sut {
        let described = format!("{transition:?}");
        let observed = sut.step(transition);
        assert_eq!(observed, state.last, "result of {described}");
        sut
    }

    fn check_invariants(sut: &Sut, state: &Reference) {
        state.model.assert_matches(&sut.scope, "a step");
        let runs: Vec<u32> = sut.runs.iter().map(|r| r.load(Ordering::SeqCst)).collect();
        assert_eq!(runs, state.runs, "bodies run exactly for admitted invocations");
        let stopped = state.model.caller_cancelled || state.model.stop.is_some();
        assert_eq!(sut.scope.token().is_cancelled(), stopped, "the scope's token fires on cancel or halt");
        let elapsed = sut.runtime.block_on(async { sut.started.elapsed() });
        assert_eq!(elapsed, Duration::from_secs(state.elapsed), "virtual time");
    }
}

prop_state_machine! {
    #![proptest_config(with_cases(256, regressions!("guard_order")))]

    #[test]
    fn the_guard_decides_by_the_first_failing_check_and_counts_only_admissions(sequential 1..24 => GuardMachine);
}
