//! Hard, software-enforced bounds around LLM agent loops.
//!
//! An agent that calls tools can loop: re-read the same ticket forever, try ids one after
//! another, claim "done" without doing the work, or hang on a slow provider. `loopbound` makes
//! the host, not the model, decide what may run and when the run ends:
//!
//! - a [`Scope`] per request holds the granted capabilities, the [`Limits`] (model calls, tool
//!   calls, repetitions per signature, deadline), the counters and the ordered events;
//! - [`GuardedTool`]s bind typed arguments, then pass one check-and-reserve critical section
//!   (cancellation → permission → tool budget → repetition) before their private body runs, on
//!   every path: the loop, a direct call, a concurrent call;
//! - signatures compare [canonical JSON](canonical_json) of the bound arguments, with numbers
//!   compared by exact value;
//! - a [`Budgeted`] transport counts every model call, streaming or not, before it is sent;
//! - the [`Runtime`] loop races every transport call and tool body against the scope, so a
//!   deadline, a halt or the caller's cancellation ends the run even when the future ignores
//!   its token;
//! - the run ends with an explicit [`Outcome`] (`Completed` only when the host's condition
//!   holds) or a [`RunError`] (the caller cancelled, or the provider answered unusably).
//!
//! # Example
//!
//! ```
//! use loopbound::scripted::{sequence, Step};
//! use loopbound::{Limits, Message, ModelReply, Runtime, Scope, Status};
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicBool, Ordering};
//!
//! #[derive(Deserialize, Serialize, JsonSchema)]
//! struct Ticket {
//!     input: i64,
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let scope = Scope::builder()
//!     .grant("ticket.read")
//!     .grant("review.finish")
//!     .limits(Limits::default())
//!     .build()?;
//!
//! let finished = Arc::new(AtomicBool::new(false));
//! scope.tool("read_ticket", "ticket.read").description("Read a ticket.").build(
//!     |t: Ticket, _cancel| async move { Ok::<_, String>(format!("Ticket {}: login fails.", t.input)) },
//! )?;
//! let done = Arc::clone(&finished);
//! scope.tool("finish_review", "review.finish").description("Finish the review.").build(
//!     move |_: Ticket, _cancel| {
//!         let done = Arc::clone(&done);
//!         async move {
//!             done.store(true, Ordering::SeqCst);
//!             Ok::<_, String>("Review completed.")
//!         }
//!     },
//! )?;
//!
//! let model = sequence(vec![
//!     Step::Reply(ModelReply::call("c1", "read_ticket", r#"{"input":42}"#)),
//!     Step::Reply(ModelReply::call("c2", "finish_review", r#"{"input":42}"#)),
//!     Step::Reply(ModelReply::text("Review finished.")),
//! ]);
//! let mut conversation = vec![Message::user("Review ticket 42.")];
//! let outcome = Runtime::harness(&scope, model)
//!     .run(&mut conversation, || finished.load(Ordering::SeqCst))
//!     .await?;
//!
//! assert_eq!(outcome.status(), Status::Completed);
//! assert_eq!(outcome.text(), Some("Review finished."));
//! let events: Vec<String> = outcome.events().iter().map(ToString::to_string).collect();
//! assert_eq!(events, [
//!     "ModelCall model 1", "Middleware read_ticket 1", "ToolCall read_ticket 1",
//!     "ModelCall model 2", "Middleware finish_review 2", "ToolCall finish_review 2",
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
//! scope: a new scope may repeat a call, so replay protection of real side effects after a
//! restart needs a durable operation id, which is outside this crate.
//!
//! A runtime with tokio's timer enabled is required (`#[tokio::main]` and `#[tokio::test]`
//! enable it).
//!
//! # Features
//!
//! - `exact-numbers` (default): enables serde_json's `arbitrary_precision`, so that a
//!   `serde_json::Value` keeps every number's exact text and [`canonical_json`] compares numbers
//!   of any size exactly. It changes serde_json for the whole build (for example, numbers inside
//!   `#[serde(untagged)]` enums or `#[serde(flatten)]` fields no longer deserialize into
//!   primitive types); disable it if that matters more than numbers beyond `f64`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![warn(clippy::pedantic)]
// Module names prefix most types; repeating them in item names reads well here.
#![allow(clippy::module_name_repetitions)]

mod budget;
mod canonical;
mod event;
mod ledger;
mod limits;
mod outcome;
mod registry;
mod runtime;
mod scope;
pub mod scripted;
mod stop;
mod sync;
mod tool;
mod transport;

pub use budget::{Budgeted, CallError};
pub use canonical::canonical_json;
pub use event::{ControlEvent, EventKind, HaltReason};
pub use limits::{Limits, LimitsError};
pub use outcome::{
    EXIT_CANCELLED, EXIT_COMPLETED, EXIT_PROVIDER_ERROR, EXIT_STOPPED, Outcome, RunError, Status,
};
pub use registry::RegistrationError;
pub use runtime::{ABSENT_CAPABILITIES, Composition, Runtime, SIMPLE_MAX_ITERATIONS};
pub use scope::{Scope, ScopeBuilder};
pub use stop::Stop;
pub use tool::{
    BindError, BindErrorKind, BodyError, GuardedTool, MAX_MESSAGE_LEN, Reservation, ToolBuilder, ToolError,
};
pub use transport::{
    ChatOptions, ChatRequest, ChunkStream, Message, ModelReply, ReplyAssembler, ReplyChunk, ToolCall,
    ToolCallDelta, ToolDefinition, Transport, TransportError, Usage,
};

/// Returns the signature of `input` for tool `name`: `name + ":" + canonical JSON of input`,
/// written directly from the typed value. This is the key the repetition limit counts.
///
/// ```
/// #[derive(serde::Serialize)]
/// struct Ticket { input: i64 }
/// assert_eq!(loopbound::signature("read_ticket", &Ticket { input: 42 })?, r#"read_ticket:{"input":42}"#);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
///
/// A message if `input` cannot be written as JSON (a custom `Serialize` failed, a map key is
/// not a string) or nests deeper than 256 levels.
pub fn signature<T: serde::Serialize + ?Sized>(name: &str, input: &T) -> Result<String, String> {
    canonical::signature(name, input).map_err(|error| error.to_string())
}

/// The README's examples, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;
