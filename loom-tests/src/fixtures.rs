//! A scope and a tool small enough for loom, built inside each model.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, Waker};

use loom::sync::atomic::AtomicBool;
use loopbound::progress::Progress;
use loopbound::tool::{Reservation, ToolBuilder};
use loopbound::watch::{self, Updates};
use loopbound::{CancellationToken, GuardedTool, Limits, Scope, ToolError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The tool input of every model.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema)]
pub struct Id {
    /// Which call this is.
    pub input: i64,
}

/// The request's state: whether a body of the tool started (its closure was called).
#[derive(Debug)]
pub struct Started(AtomicBool);

impl Started {
    /// Whether a body started.
    #[must_use]
    pub fn get(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// The tool `t`, needing capability `cap`, bound to the scope a thread calls it in.
#[derive(Clone, Debug)]
pub struct Caller {
    tool: GuardedTool<Id, Started>,
    scope: Scope<Started>,
}

impl Caller {
    /// Checks and reserves one call of `t` with `input` (the reservation is dropped unrun).
    ///
    /// # Errors
    ///
    /// The guard's refusal.
    pub fn reserve(&self, input: i64) -> Result<u32, ToolError> {
        self.reservation(input).map(|reservation| reservation.tool_count())
    }

    /// Checks and reserves one call of `t` with `input`, to be run later.
    ///
    /// # Errors
    ///
    /// The guard's refusal.
    pub fn reservation(&self, input: i64) -> Result<Reservation<'_, Id, Started>, ToolError> {
        self.tool.reserve(&self.scope, Id { input })
    }
}

/// A scope with `grant` (or nothing), `limits` and a (modelled) caller token, and one tool `t`
/// needing capability `cap`, whose body records in the scope's state that it started.
#[must_use]
pub fn scope_and_tool(grant: bool, limits: Limits) -> (Scope<Started>, Caller, CancellationToken) {
    build(grant, limits, None)
}

/// As [`scope_and_tool`], granted, under the progress policy `progress`.
#[must_use]
pub fn scope_and_tool_under(limits: Limits, progress: Progress) -> (Scope<Started>, Caller) {
    let scope = Scope::builder()
        .limits(limits)
        .grant("cap")
        .progress(progress)
        .state(Started(AtomicBool::new(false)))
        .build()
        .expect("valid limits");
    (scope.clone(), Caller { tool: tool(), scope })
}

/// As [`scope_and_tool`], granted, with the scope's run streamed to the returned [`Updates`].
#[must_use]
pub fn watched_scope_and_tool(limits: Limits) -> (Scope<Started>, Caller, Updates) {
    let (feed, updates) = watch::channel();
    let (scope, tool, _) = build(true, limits, Some(feed));
    (scope, tool, updates)
}

fn build(
    grant: bool,
    limits: Limits,
    feed: Option<watch::Feed>,
) -> (Scope<Started>, Caller, CancellationToken) {
    let caller = CancellationToken::new();
    let mut builder = Scope::builder().limits(limits).caller(caller.clone());
    if let Some(feed) = feed {
        builder = builder.watch(feed);
    }
    if grant {
        builder = builder.grant("cap");
    }
    let scope = builder.state(Started(AtomicBool::new(false))).build().expect("valid limits");
    (scope.clone(), Caller { tool: tool(), scope }, caller)
}

/// The tool `t`, needing capability `cap`, whose body records in the scope's state that it
/// started.
fn tool() -> GuardedTool<Id, Started> {
    ToolBuilder::new("t", "cap")
        .build(|_: Id, call: loopbound::ToolContext<Started>| {
            // The body starts when its closure is called.
            call.state().0.store(true, Ordering::SeqCst);
            async { Ok::<_, String>(String::new()) }
        })
        .expect("a valid name")
}

/// Whether `input` was admitted by the guard (the reservation is dropped unrun).
#[must_use]
pub fn admit(tool: &Caller, input: i64) -> bool {
    tool.reserve(input).is_ok()
}

/// The events as `Kind name count` lines.
#[must_use]
pub fn lines<S>(scope: &Scope<S>) -> Vec<String> {
    scope.events().iter().map(ToString::to_string).collect()
}

/// Polls `future` once, with a waker that does nothing (loom models no runtime): a guarded body
/// that is ready at once completes in that poll.
pub fn poll_once<F: Future>(future: F) -> Poll<F::Output> {
    let mut future = pin!(future);
    future.as_mut().poll(&mut Context::from_waker(Waker::noop()))
}
