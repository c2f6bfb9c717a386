//! Hard, software-enforced bounds around LLM agent loops.
//!
//! An agent that calls tools can loop: re-read the same ticket forever, try ids one after
//! another, claim "done" without doing the work, or hang on a slow provider. `loopbound` makes
//! the host, not the model, decide what may run and when the run ends.
//!
//! Data flows through the crate in this order:
//!
//! 1. **Tools**, once: the host defines its [`GuardedTool`]s (name, capability, typed input,
//!    JSON schema computed once, private body) into a [`ToolSet`], shared by every request.
//! 2. **Scope**, per request: a [`Scope`] holds the granted capabilities, the [`Limits`] (every
//!    budget of the run: model calls, tool calls, calls per tool, repetitions per signature,
//!    deadline, tokens, cost), the caller's cancellation, the counters, the ordered events, and
//!    the host's own state for that request.
//! 3. **Guard**: every tool call binds its typed arguments, then passes one check-and-reserve
//!    critical section of the scope (cancellation → permission → tool budget → repetition),
//!    on every path: the loop, a direct call, a reservation run later. Signatures compare
//!    [canonical JSON](canonical) of the bound arguments, with numbers compared by exact value.
//! 4. **Runner**: the [`Runner`] loop counts every model call before it is sent and races
//!    every transport call and tool body against the scope, so a deadline, a halt or the
//!    caller's cancellation ends the run even when the future ignores its token.
//! 5. **Outcome**: the run ends with an explicit [`Outcome`] (`Completed` only when the host's
//!    condition holds) or a [`RunError`] (the caller cancelled, or the provider answered
//!    unusably); both serialise for a host's response.
//!
//! While it runs, a host can [`watch`] it (a live stream of its events, text, tool calls and
//! outcome, bounded whatever the watcher does) and cancel it by id from any task
//! ([`RunRegistry`]).
//!
//! # Example
//!
//! ```
//! use loopbound::scripted::Scripted;
//! use loopbound::{Limits, Message, Runner, Scope, Status, ToolBuilder, ToolContext, ToolSet};
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//! use std::sync::atomic::{AtomicBool, Ordering};
//!
//! #[derive(Deserialize, Serialize, JsonSchema)]
//! struct Ticket {
//!     input: i64,
//! }
//!
//! /// What one review has done: the state of one request.
//! #[derive(Default)]
//! struct Review {
//!     finished: AtomicBool,
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Once, at start-up: the tools.
//! let read_ticket = ToolBuilder::new("read_ticket", "ticket.read")
//!     .description("Read a ticket.")
//!     .build(|t: Ticket, _| async move { Ok::<_, String>(format!("Ticket {}: login fails.", t.input)) })?;
//! let finish_review = ToolBuilder::new("finish_review", "review.finish")
//!     .description("Finish the review.")
//!     .build(|_: Ticket, cx: ToolContext<Review>| async move {
//!         cx.state().finished.store(true, Ordering::SeqCst);
//!         Ok::<_, String>("Review completed.")
//!     })?;
//! let tools = ToolSet::builder().add(&read_ticket).add(&finish_review).build()?;
//!
//! // Per request: a scope with its grants, limits and state, and a run.
//! let scope = Scope::builder()
//!     .grant("ticket.read")
//!     .grant("review.finish")
//!     .limits(Limits::default())
//!     .state(Review::default())
//!     .build()?;
//! let model = Scripted::sequence([
//!     Scripted::call("read_ticket", r#"{"input":42}"#),
//!     Scripted::call("finish_review", r#"{"input":42}"#),
//!     Scripted::reply("Review finished."),
//! ]);
//! let mut conversation = vec![Message::user("Review ticket 42.")];
//! let outcome = Runner::new(&tools, model)
//!     .run(&scope, &mut conversation, |ended| ended.state().finished.load(Ordering::SeqCst))
//!     .await?;
//!
//! assert_eq!(outcome.status(), Status::Completed);
//! assert_eq!(outcome.text(), Some("Review finished."));
//! let events: Vec<String> = outcome.events().iter().map(ToString::to_string).collect();
//! assert_eq!(events, [
//!     "ModelCall model 1", "ToolCall read_ticket 1",
//!     "ModelCall model 2", "ToolCall finish_review 2",
//!     "ModelCall model 3",
//! ]);
//! # Ok(())
//! # }
//! ```
//!
//! # What is not bounded
//!
//! Stopping does not wait for cooperation: a transport call or a tool body that ignores its
//! cancellation is dropped at its next await point. Blocking code inside a body (a synchronous
//! loop, a blocking read) is not interrupted; keep bodies async. Counters live and die with the
//! scope: a new scope may repeat a call.
//!
//! A runtime with tokio's timer enabled is required (`#[tokio::main]` and `#[tokio::test]`
//! enable it).
//!
//! # Features
//!
//! No default feature changes serde_json for the rest of the build: arguments are bound by
//! loopbound's own JSON reader ([`loopbound_json`], which also holds the canonical writer
//! re-exported here as [`canonical`]), which reads numbers by value (`42`, `42.0` and `4.2e1` bind an
//! integer field to 42; a float field gets the correctly rounded nearest `f64` for every
//! spelling), so typed inputs are compared exactly without any serde_json feature. What each
//! mode guarantees for numbers is detailed in [`canonical`].
//!
//! - `exact-numbers` (off by default): a `serde_json::Value` input keeps every number's exact
//!   text, so numbers beyond `f64` are compared exactly too (by default such a `Value` holds
//!   them rounded to the nearest `f64`). It enables serde_json's `arbitrary_precision` (through
//!   `loopbound-json`'s feature of the same name), which
//!   changes serde_json for the whole build (numbers inside `#[serde(untagged)]` enums or
//!   `#[serde(flatten)]` fields deserialized by serde_json itself no longer fit primitive
//!   types), which is why it is opt-in.
#![cfg_attr(
    feature = "journal",
    doc = "- `journal` (on by default): [`journal`], durable runs across crashes and restarts \
    ([`Runner::run_journaled`], [`SubAgent::run_journaled`]), approvals, reconciliation, listings \
    and recorded streams, and what only they hand out ([`Outcome::pending`], \
    [`Ended::operations`], [`RunError::Journal`], [`ScopeBuilder::labels`], \
    [`ToolContext::fencing_token`]). Without it, a run is one process's: nothing else changes."
)]
#![cfg_attr(
    not(feature = "journal"),
    doc = "- `journal` (on by default, off in this build): `journal`, durable runs across crashes \
    and restarts (`Runner::run_journaled`, `SubAgent::run_journaled`), approvals, \
    reconciliation, listings and recorded streams, and what only they hand out \
    (`Outcome::pending`, `Ended::operations`, `RunError::Journal`, `ScopeBuilder::labels`, \
    `ToolContext::fencing_token`). Without it, a run is one process's: nothing else changes."
)]
#![cfg_attr(
    feature = "pools",
    doc = "- `pools` (on by default): budgets shared by many runs ([`pool`]): the pool stores' \
    traits and their boxed twin a run holds ([`pool::PoolStore`], [`pool::DynPoolStore`]), the \
    in-process store ([`pool::MemoryPools`]), a scope's draw from them \
    ([`ScopeBuilder::pools`], [`Scope::pools`], [`pool::PoolDraw`]) and what only pools hand \
    out ([`RunError::Pool`], the pool variants of [`LimitsError`]). Without it, no scope draws \
    from shared pools and no pool code is compiled."
)]
#![cfg_attr(
    not(feature = "pools"),
    doc = "- `pools` (on by default, off in this build): budgets shared by many runs (`pool`): the \
    pool stores' traits and their boxed twin a run holds (`pool::PoolStore`, \
    `pool::DynPoolStore`), the in-process store (`pool::MemoryPools`), a scope's draw from them \
    (`ScopeBuilder::pools`, `Scope::pools`, `pool::PoolDraw`) and what only pools hand out \
    (`RunError::Pool`, the pool variants of [`LimitsError`]). Without it, no scope draws from \
    shared pools and no pool code is compiled."
)]
//!
//! A crate that uses either names it in its own manifest, so that it keeps building for a host
//! that turns the defaults off.

#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![warn(clippy::pedantic)]
// Module names prefix most types; repeating them in item names reads well here.
#![allow(clippy::module_name_repetitions)]

#[doc(inline)]
pub use loopbound_json::canonical;
mod budgeted;
mod ended;
mod event;
mod guard;
#[cfg(feature = "journal")]
pub mod journal;
mod limits;
mod outcome;
#[cfg(feature = "pools")]
pub mod pool;
mod pooled;
pub mod progress;
mod registry;
mod run_id;
mod runner;
mod scope;
pub mod scripted;
pub mod spend;
mod sync;
pub mod tool;
pub mod transport;
pub mod watch;

pub use budgeted::{Budgeted, CallError};
pub use ended::Ended;
pub use event::{ControlEvent, EventKind, HaltReason, Subject};
pub use guard::{STORE_GRACE, Stop};
pub use limits::{Limits, LimitsError};
pub use outcome::{EndRecord, Outcome, RunError, RunErrorKind, Status};
pub use registry::{AlreadyRegistered, Registration, RunRegistry};
pub use run_id::{InvalidRunId, MAX_RUN_ID_LEN, RunId};
pub use runner::{
    Concurrency, ConcurrencyError, Middleware, Observation, Observer, Offer, Preview, Runner, SubAgent,
    SubAgentError,
};
pub use scope::{Scope, ScopeBuilder};
pub use tool::{
    GuardedTool, RegistrationError, ToolBuilder, ToolContext, ToolError, ToolSet, ToolSetBuilder,
};
pub use transport::Message;

/// The cancellation token a scope links to its caller ([`ScopeBuilder::caller`]): tokio-util's
/// `CancellationToken`, re-exported so that a host names the same crate and version as the scope.
/// (Under `--cfg loopbound_loom` only, a loom-modelled token of the same shape takes its place, so
/// that the loom models drive the caller's cancellation as modelled state.)
pub use sync::CancellationToken;

/// The README's examples, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;

/// The examples of the pages under `docs/`, compiled and run as doc tests (`docs/mcp.md`'s, which
/// need the MCP adapter, in `loopbound-mcp`).
#[cfg(doctest)]
mod docs_doctests {
    #[doc = include_str!("../../docs/limits.md")]
    struct Limits;
    #[doc = include_str!("../../docs/progress.md")]
    struct Progress;
    #[doc = include_str!("../../docs/spend.md")]
    struct Spend;
    #[cfg(feature = "pools")]
    #[doc = include_str!("../../docs/pools.md")]
    struct Pools;
    #[doc = include_str!("../../docs/outcomes.md")]
    struct Outcomes;
    #[cfg(feature = "journal")]
    #[doc = include_str!("../../docs/watch.md")]
    struct Watch;
    #[cfg(feature = "journal")]
    #[doc = include_str!("../../docs/cancel.md")]
    struct Cancel;
    #[cfg(feature = "journal")]
    #[doc = include_str!("../../docs/durable.md")]
    struct Durable;
    #[doc = include_str!("../../docs/live.md")]
    struct Live;
    #[doc = include_str!("../../docs/testing.md")]
    struct Testing;
    #[doc = include_str!("../../docs/service.md")]
    struct Service;
    #[doc = include_str!("../../docs/demo330.md")]
    struct Demo330;
    #[doc = include_str!("../../docs/verify.md")]
    struct Verify;
    #[doc = include_str!("../../docs/performance.md")]
    struct Performance;
}
