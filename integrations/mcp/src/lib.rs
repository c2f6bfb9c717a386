//! Model Context Protocol servers' tools under loopbound's guard.
//!
//! Most tools an agent calls come from MCP servers, not from closures in the host. This crate
//! connects to a server (a child process over stdio, or streamable HTTP), lists its tools once,
//! and defines each one as a [`GuardedTool`](loopbound::GuardedTool) for the host's
//! [`ToolSet`](loopbound::ToolSet), so that every call an agent makes to it is bounded
//! like any other loopbound tool:
//!
//! - a **capability** the host grants per request (default `mcp.<server>.<tool>`, see
//!   [`Mapping`]); a tool the model can see but the scope does not grant halts the run with
//!   `PermissionDenied` before anything is sent;
//! - the tool's **JSON schema** is passed to the model, and the bound arguments are checked
//!   against it **before the guard** ([`schema`]): invalid arguments are a binding error for
//!   the model, nothing counted, nothing sent;
//! - the **tool budget** and the **repetition limit** count MCP calls like any other; the
//!   signature is the canonical JSON of the arguments actually sent, so two spellings of the
//!   same arguments are one signature;
//! - the **deadline**, a **halt** or the **caller's cancellation** drops the call in flight,
//!   and the server is sent `notifications/cancelled` for it ([`Connection`]);
//! - a server that **dies, hangs or answers garbage** ends the call with a typed
//!   [`CallError`], never a panic; the run goes on as for a body error, and a dead server is
//!   reported once;
//! - the tool's **annotations** (`readOnlyHint`, `destructiveHint`, `idempotentHint`) map to an
//!   effect kind and a standing decision ([`annotations`]): a destructive tool is `Ask`, and a
//!   journaled run ([`Runner::run_journaled`][run_journaled]) stops
//!   `AwaitingApproval` before sending it, as for any loopbound tool; outside a journal such a
//!   call fails closed (the run halts `Denied`, nothing is sent). Annotations are hints from the server, not guarantees.
//! - both protocol **revisions** ([`revision`]): 2026-07-28 (stateless: `server/discover`,
//!   multi-round-trip requests, tasks) and 2025-06-18 (`initialize`); by default the newest the
//!   server speaks, so a host moves to a new server without changing its code, and a
//!   [`Protocol`] pins one. A server's questions in the middle of a call are answered by the
//!   host's [`Answerer`] ([`Decline`] by default, which never waits and gives nothing away);
//!   every round ([`rounds`]) and every task ([`task`]) is bounded by the call's deadline,
//!   cancellation and timeout, the rounds by [`MAX_ROUNDS`], and a task the call stops waiting
//!   for is sent `tasks/cancel`.
//!
//! ```no_run
//! use loopbound::scripted::{sequence, Step};
//! use loopbound::transport::ModelReply;
//! use loopbound::{Message, Runner, Scope, Status, ToolSet};
//! use loopbound_mcp::{Connection, Mapping, StdioServer, Timeouts};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Once: connect, list and define the tools, add them to the host's set.
//! let server = StdioServer::new("everything", "node").arg("server-everything/dist/index.js").arg("stdio");
//! let connection = Connection::stdio(&server, Timeouts::default()).await?;
//! let registered = connection.register(&Mapping::new());
//! assert!(registered.skipped().is_empty());
//! let tools = registered.add_to(ToolSet::builder()).build()?;
//!
//! // Per request: a scope that grants one of the server's tools.
//! let scope = Scope::builder().grant("mcp.everything.get-sum").build()?;
//! let model = sequence(vec![
//!     Step::Reply(ModelReply::call("c1", "get-sum", r#"{"a": 2, "b": 40}"#)),
//!     Step::Reply(ModelReply::text("42.")),
//! ]);
//! let outcome = Runner::new(&tools, model)
//!     .run(&scope, &mut vec![Message::user("Add 2 and 40.")], |_| true)
//!     .await?;
//! assert_eq!(outcome.status(), Status::Completed);
//! # Ok(())
//! # }
//! ```
//!
//! The MCP SDK is [`rmcp`], re-exported so that a host can bring its own transport (TLS,
//! in-process) to [`Connection::with_transport`] at the same version.
//!
//! [run_journaled]: https://docs.rs/loopbound/latest/loopbound/struct.Runner.html#method.run_journaled

#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![warn(clippy::pedantic)]
// Module names prefix most types; repeating them in item names reads well here.
#![allow(clippy::module_name_repetitions)]

pub mod annotations;
pub mod answer;
mod arguments;
mod connection;
mod error;
mod mapping;
mod output;
mod register;
mod request;
pub mod revision;
pub mod rounds;
pub mod schema;
pub mod server;
pub mod task;

pub use annotations::Hints;
pub use answer::{Answer, Answerer, Answering, Decline, InputKind, Question};
pub use arguments::Arguments;
pub use connection::{Connection, MAX_LIST_PAGES, MAX_TOOLS, RemoteTool};
pub use error::{CallError, ConnectError, SkipReason};
pub use mapping::{DEFAULT_MAX_OUTPUT, Mapping};
pub use register::{MAX_DESCRIPTION, McpTool, Registered, Skipped};
pub use revision::{Protocol, Revision};
pub use rmcp;
pub use rounds::{MAX_QUESTIONS, MAX_ROUNDS};
pub use schema::Unsupported;
pub use server::{HttpServer, StdioServer, Timeouts};

/// The examples of `docs/mcp.md`, compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/mcp.md")]
struct McpPageDoctests;
