//! The review task of ticket 42 and its twelve scripted scenarios, and the `demo330` console that
//! plays them through a bounded loop.
//!
//! - the review and refund tasks themselves (tools, texts, the host's completion condition) are
//!   the one copy in `loopbound_fixtures`, which the tests reuse: the consoles link no test
//!   support;
//! - [`scenario`]: the eight scenarios of the contract and one per progress check (capabilities,
//!   limits, progress policy, scripted model, expected status and counts), reusable by benches
//!   and other tests;
//! - [`service`]: `service`, an HTTP service over native and MCP tools, a live model, a journal,
//!   approvals, live streams and cancel by id;
//! - [`session`]: one scope per run, generic over the transport;
//! - [`report`] and [`text`]: what a run reports, as JSON and as a transcript;
//! - [`console`]: the command line of `demo330`;
//! - [`mcp`]: `mcp330`, a bounded loop over a real MCP server's tools;
//! - [`provider`]: the live providers of `--live` (`--provider openai` or `anthropic`),
//!   configured by the environment, one module for both consoles;
//! - [`live`]: `--watch`, a run's updates printed as they happen;
//! - [`visible`]: untrusted text (the model's, a provider's) made safe for a terminal;
//! - [`budget`]: the spend-budget flags of the review scenarios (tokens, cost, the model's price);
//! - [`spend`]: the `spend` and `subagent` scenarios: budgets reserved before every call, and a
//!   tree of agents bounded by its root's budgets;
//! - [`pool`]: the `pool` scenario: a tenant's shared pool on SQLite, reserved before every call
//!   of every request, the request that does not fit refused unsent;
//! - [`durable`]: the durable scenarios (`refund`, `crash`) and the host's commands on a journal
//!   (`approve`, `deny`, `reconcile`, `resume`);
//! - [`runs`]: the host's queries on a journal (`runs`, `inspect`);
//! - [`vocabulary`]: the console's own words (composition descriptions, absent capabilities) and
//!   exit codes.
//!
//! ```
//! use loopbound::Status;
//! use loopbound_fixtures::Composition;
//! use loopbound_demos::scenario::Scenario;
//! use loopbound_demos::session::run_scenario;
//! use tokio_util::sync::CancellationToken;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let report = run_scenario(Scenario::Repeat, Composition::Harness, false, CancellationToken::new()).await?;
//! assert_eq!(report.outcome.status(), Status::RepeatedCall);
//! assert_eq!(report.outcome.text(), None);
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![warn(clippy::pedantic)]
// Module names prefix most types; repeating them in item names reads well here.
#![allow(clippy::module_name_repetitions)]

pub mod budget;
pub mod console;
pub mod durable;
pub mod live;
pub mod mcp;
pub mod pool;
pub mod provider;
pub mod report;
pub mod runs;
pub mod scenario;
pub mod service;
pub mod session;
pub mod spend;
pub mod text;
pub mod visible;
pub mod vocabulary;
