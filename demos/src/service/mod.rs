//! `service`: an HTTP service that runs bounded agent runs, the shape a product takes around
//! loopbound.
//!
//! Once, at start-up: the tools (a native ticket reader and an MCP `server-filesystem`'s
//! tools, [`tools`]), an OpenAI-compatible model endpoint, a journal (one SQLite file, or
//! PostgreSQL by environment), a registry that cancels runs by id. Per request: a scope with
//! the request's own grants and the service's limits, a journaled run in the background, its
//! live stream kept for any number of readers.
//!
//! | endpoint | what it does | answers |
//! |---|---|---|
//! | `GET /` (`/page.css`, `/page.js`) | the operator's [`page`] | 200, HTML |
//! | `POST /runs` `{"task":"answer"\|"save","prompt":…,"grants":[…],"tenant":…}` | starts a run, drawing from its tenant's pool ([`tenants`]) | 202 `{id, links}` |
//! | `GET /runs?state=…&tenant=…&after=…&limit=…` | a page of the journal's runs ([`listing`]) | 200 `{runs, next}` |
//! | `GET /tenants` | each tenant's pool today | 200 `{tenants}` |
//! | `GET /runs/{id}` (`?wait=true` waits for the attempt in flight) | the run's outcome or error, and the proposal it waits on | the [`status`] table |
//! | `GET /runs/{id}/events` | the run's live stream as Server-Sent Events, from the start or after `Last-Event-ID` | 200, `text/event-stream` |
//! | `POST /runs/{id}/cancel` | cancels the attempt in flight, as its caller | 202, or 409 if none is |
//! | `POST /runs/{id}/resume` | resumes a run its journal holds open (cut by a crash, cancelled) | 202, or 409 `not_open` |
//! | `POST /runs/{id}/approve`, `/deny` `{"digest":…}` | decides the pending proposal, then resumes the run | 202, or the [`status`] table's code |
//! | `POST /runs/{id}/close` `{"reason":…}` | ends the run for good ([`loopbound::journal::close`]) | 200, or 409 while an attempt holds it |
//!
//! The five commands on a run (cancel, resume, approve, deny, close) name no approver in their
//! body: the [`approver`] seam authenticates one (a trusted proxy's header, or a development
//! token) and refuses a page of another origin (403) and a request without one (401).
//!
//! Every run's response carries `links`: `self` and `events` always, `cancel` while an attempt
//! is in flight, `approve`, `deny` and `close` while a proposal waits for a decision, `resume`
//! and `close` while the journal holds the run open and no attempt holds it, `close` while it
//! is ambiguous.
//!
//! `docs/service.md` shows how to start it (offline: `bash demos/service/run-offline.sh`, which
//! starts aimock with `demos/service/fixtures.json`, then this service), every body, and a curl
//! session.
//!
//! Grants come in the request here, to show one scope per request; a real service derives them
//! from the caller's identity (capabilities are host fixtures, not authenticated roles).
//!
//! A run outlives the process that started it: a process that does not hold a run in memory
//! (it restarted, or another process started the run on the same journal) finds it in the
//! journal, shows it, decides it and resumes it, each attempt's scope rebuilt from the journal
//! ([`durable::scope`]). What it loses is the live stream of attempts that ran elsewhere.
//!
//! # Invariants
//!
//! - A request runs only the tools its own grants name, within the service's limits, whatever
//!   the model asks; a destructive MCP tool (`write_file`) never runs before a person approved
//!   that exact call (its digest), and never after a denial.
//! - The journal decides resumes: a run continues from its recorded replies and results, never
//!   asking the model again for what it already answered, with the logical run's budgets, under
//!   the grants and limits its journal stored at its start, in whichever process resumes it.
//! - An HTTP code is chosen from the run's typed status or error kind by one table
//!   ([`status`]), never from a message.
//! - A decision, a closing, a cancel or a resume is carried out only for an approver the
//!   [`approver`] seam authenticated, whose name is what the journal records.

pub mod api;
pub mod app;
pub mod approver;
pub mod durable;
pub mod listing;
pub mod page;
pub mod runs;
pub mod start;
pub mod status;
pub mod task;
pub mod tenants;
pub mod tools;
