//! A live stream of a run: every audit event as it is recorded, the model's text as it arrives,
//! each tool call as the loop takes it up and the answer it gives the model, a suspension, and
//! the outcome, in order.
//!
//! ```
//! use loopbound::scripted::{Step, sequence};
//! use loopbound::transport::ModelReply;
//! use loopbound::watch::{self, Update};
//! use loopbound::{Message, Runner, Scope, ToolSet};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let (feed, mut updates) = watch::channel();
//! let scope = Scope::builder().watch(feed).build()?;
//! let runtime = Runner::new(&ToolSet::default(), sequence(vec![Step::Reply(ModelReply::text("Hello."))]));
//! // A service spawns the run and hands `updates` to its response (each update serialises as
//! // one JSON object, a Server-Sent Event's data); here both run in one task.
//! let mut conversation = vec![Message::user("Hi.")];
//! let run = runtime.run(&scope, &mut conversation, |_| true);
//! let (outcome, seen) = tokio::join!(run, async {
//!     let mut seen = Vec::new();
//!     while let Some(update) = updates.next().await {
//!         seen.push(serde_json::to_string(&update).unwrap_or_default());
//!     }
//!     seen
//! });
//! assert_eq!(outcome?.text(), Some("Hello."));
//! assert_eq!(seen[0], r#"{"type":"event","kind":"ModelCall","name":"model","count":1}"#);
//! assert_eq!(seen[1], r#"{"type":"text","reply":1,"text":"Hello."}"#);
//! assert!(seen[2].starts_with(r#"{"type":"outcome","status":"Completed""#));
//! # Ok(())
//! # }
//! ```
//!
//! # Why a channel the scope holds
//!
//! The run pushes into a [`Feed`] that its [`Scope`](crate::Scope) holds
//! ([`ScopeBuilder::watch`](crate::ScopeBuilder::watch)); the host reads [`Updates`], a
//! [`Stream`](futures_core::Stream) (or [`Updates::next`] without any stream library) that ends
//! after the outcome. Not a stream that drives the run: a watcher that read slowly would then
//! slow the run, and one that stopped reading would stop it, so the watcher would decide when
//! the deadline hits. Here the run goes on at its own pace in its own task, and the watcher
//! reads when it likes. Not a callback either: a callback runs on the run's task, so a slow one
//! is the same problem. The feed sits in the scope because the scope is what every path of a
//! run shares: the guard queues each event inside the critical section that records it (so the
//! stream's events are in the log's order, whatever the threads) and wakes the watcher once that
//! section's lock is released, the model budget pushes the text as it arrives, and `run`,
//! `run_journaled`, with or without spans, and every transport are covered without an extra entry
//! point.
//!
//! # Bounded, whatever the watcher does
//!
//! Pushing never waits: a watcher that reads slowly or never changes nothing in the run, not its
//! timing, not its outcome. What waits for it is bounded by what the run does, which its limits
//! bound, never by how long the watcher takes:
//!
//! - **audit events are never dropped**: at most those of the log, `m × (2c + 2)` for `m` model
//!   calls and `c` calls per reply (204 with the default limits), plus a journaled run's own
//!   events (five per admitted call at most);
//! - **text merges**: an unread text piece takes in the next piece of the same reply, so at most
//!   one text update waits between two other updates, and all the text waiting is at most the
//!   text of the replies not yet read (at most `b` reply bytes each, a String's growth aside:
//!   up to twice that while it grows);
//! - **one start and one answer per tool call**, at most `2 × m × c` updates, each answer the
//!   text the conversation holds too (an error is cut at 240 bytes; a result is the host's own
//!   text);
//! - one suspension and one final update (a copy of the outcome).
//!
//! So a watcher that never reads costs at most the run's events, `2mc + m + 2` more updates of
//! a fixed size ([`std::mem::size_of::<Update>()`](Update) each, plus their strings), and one
//! more copy of the text and tool answers the run itself holds. Dropping [`Updates`] frees what
//! is queued and stops every later push. Text that a streaming transport delivered is pushed as
//! it arrives, before the reply is checked: a reply then refused (too many calls, too long) has
//! shown its text; the outcome says how the run ended.
//!
//! # Arguments
//!
//! Arguments never appear in audit events. A host that wants them in its own stream opts in with
//! [`Feed::with_arguments`]; each [`ToolStarted`] then carries the call's arguments as the model
//! sent them ([`ToolStarted::arguments`]), and its `Debug` still prints only their length.
//!
//! # The JSON of an update
//!
//! An update serialises as one JSON object, its first key `type`, then its payload's keys in
//! this order. This form is a contract of its own (a live Server-Sent-Events endpoint sends it,
//! a journaled run's recorded stream stores it and serves it back): it is written by hand and
//! pinned by tests, so the Rust types may grow without changing it, and it changes only by
//! adding (a key after the others, a new `type`). A reader skips the keys and types it does not
//! know.
//!
//! | `type` | keys after it | sent | last? |
//! |---|---|---|---|
//! | `event` | the [`ControlEvent`](crate::ControlEvent)'s: `kind`, `name`, `count`, then `operation`, `by`, `reason` when it has them | each audit event, as the scope records it | no |
//! | `text` | `reply`, `text` | the model's text, a piece as it arrives or a reply's whole text | no |
//! | `tool_started` | `reply`, `index`, `call_id`, `name`, then `arguments` only with [`Feed::with_arguments`] | the loop takes a tool call up | no |
//! | `tool_result` | `reply`, `index`, `call_id`, `text`, `is_error` | the answer a call gives the model | no |
//! | `suspended` | `status`, `operation` (or `null`), `pending` (or `null`) | a journaled run stops on an operation that waits for the host; the outcome follows | no |
//! | `outcome` | the [`Outcome`](crate::Outcome)'s keys, as it serialises alone | the run ended with an outcome | yes |
//! | `error` | the [`RunError`](crate::RunError)'s: `kind`, `message` | the run ended without one | yes |
//!
//! # Invariants
//!
//! - The [`Update::Event`]s of a stream are exactly the outcome's events, in order, the restored
//!   events of a resumed journaled run included (they come first).
//! - The last update is an [`Update::Outcome`] equal to the run's outcome, or an
//!   [`Update::Error`] equal to its error; the stream ends right after it.

mod feed;
mod update;
mod wire;

pub use feed::{Feed, Updates, channel};
pub use update::{Suspension, Text, ToolResult, ToolStarted, Update};
