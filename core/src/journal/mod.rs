//! Durable decisions: a journal that protects side effects across crashes and
//! restarts, where the guard protects one loop.
//!
//! A journaled run ([`Runner::run_journaled`](crate::Runner::run_journaled)) records each step
//! of the loop in a [`Journal`]:
//!
//! 1. every admitted tool call becomes an immutable [`Proposal`] (tool, capability, canonical
//!    arguments) under a deterministic [`OperationId`] (`<run>/op/<n>`, never the provider's
//!    call id);
//! 2. it is decided by the tool's [`Policy`](crate::tool::Policy): `allow`, `deny` (the run
//!    halts `Denied`), or `ask` (the run stops `AwaitingApproval`, naming the operation, until
//!    the host [`approve`]s or [`deny`]s it, bound to the proposal's [`Digest`]);
//! 3. it runs per its [`EffectKind`](crate::tool::EffectKind): a `read` directly (it adds no
//!    commit of its own); an `effect` or `idempotent` body between two commits, `started`
//!    before it, the result after;
//! 4. a resume replays recorded replies and results instead of asking or running again, keeps
//!    the logical run's counters, and stops `Ambiguous` on an `effect` that a crash left between
//!    its two commits until the host [`reconcile`]s it; an `idempotent` one is driven again with
//!    the same key;
//! 5. under a spend budget or a pool, each model call's reservation is committed before the
//!    request is sent (one commit per model call), so a call cut by a crash is charged its
//!    whole reservation on resume, and a replayed reply is never charged again;
//! 6. a sub-agent run by a tool's body ([`SubAgent::run_journaled`](crate::SubAgent::run_journaled))
//!    is its own logical run in the same journal, under an id derived from the operation
//!    ([`OperationId::child_run`]), so a resumed parent resumes it and its effects stay at most
//!    once too.
//!
//! # Guarantees
//!
//! Never exactly once by claim. An `effect` operation's body runs **at most once**, whatever
//! crashes and restarts happen; an `idempotent` one runs **at least once with one stable key**
//! ([`ToolContext::idempotency_key`](crate::ToolContext::idempotency_key)), and the external system must apply
//! a key once. `Ambiguous` asks the host to find out, in the effect's own system, whether the
//! effect happened, and to [`reconcile`] it: it ran (with a result for the model) or it did not
//! (the resume runs it).
//!
//! Backends: [`MemoryJournal`] here (tests, examples); one SQLite file in `loopbound-sqlite`;
//! PostgreSQL for many workers in `loopbound-postgres`. Every backend runs **one attempt per run
//! at a time**: an attempt holds its run under a lease that its commits renew; another attempt
//! (another process, another task, a double-clicked "resume") is refused with
//! [`JournalError::LeaseHeld`] and nothing starts; an attempt whose process died is taken over
//! once its lease expires.
//!
//! The host's side needs no worker identity: [`inspect`] a run (its state, epoch, lease,
//! definition, operations and audit log), [`list`] runs by state and by label a page at a time,
//! [`approve`] or [`deny`] a proposal, [`ask_again`] for one that expired, [`reconcile`] an ambiguous effect, [`cancel`] the attempt
//! running a run, [`close`] a run for good, and [`follow`] a run's recorded stream from any
//! position (a Server-Sent-Events `Last-Event-ID`), in any process.
//!
//! # A host's module and a backend's
//!
//! This module holds what a host calls or names: the runs' ids, the commands above, the
//! records and listings they return, the errors, and the [`Journal`] trait itself, which a host
//! names as a bound (`run_journaled`, `approve` and the rest are generic over it). What only a
//! backend implements or reads (the rows it stores, the batches it writes under a fence, the
//! lease and holder helpers, the watchers it may share) is in [`backend`]: a host never needs
//! it. A host that picks its backend at run time holds it as `Arc<dyn` [`DynJournal`]`>`, the
//! boxed form of `Journal` (see there for why the two styles).
//!
//! # Stored format
//!
//! What a journal stores is a promise to every later version: a journal written today is
//! opened, listed and resumed by every later release. Its values (conversation, replies,
//! counters, definitions) are written as JSON by private stored structs, mapped to and from the
//! public types by hand (`codec*.rs`), never through the public types' serde derives, so a
//! field added to a `#[non_exhaustive]` type changes nothing stored. A change to the stored
//! text is additive (a new optional field, absent when it holds its default) or comes with a
//! backend schema migration that rewrites the rows; the pinned texts of `codec_pins.rs` show
//! any change. `testkit/fixtures/journal-<date>/` holds journals (a SQLite file, a PostgreSQL
//! dump) that an earlier version wrote, never regenerated; the backends' upgrade tests open a
//! copy of each and resume its runs to their outcomes. A format change adds a new folder beside
//! them. The lines of a run's recorded stream are the JSON of its live
//! [`Update`](crate::watch::Update)s, a form written by hand and pinned (not the type's serde
//! derive; see [`watch`](crate::watch), "The JSON of an update"), stored as text and served back
//! as they were written; a line of an older format, if the form ever changes other than by
//! adding, is converted to the current one as it is read (`codec_stream.rs`).
//!
//! # Invariants
//!
//! - Nothing that could not be recorded runs: a failed commit ends the run (fail closed).
//! - Every store call of an attempt goes through one place (`bound.rs`), which bounds it by the
//!   run's deadline and its caller's cancellation: a store that stops answering cannot keep an
//!   attempt more than [`STORE_GRACE`](crate::STORE_GRACE) past either, and the outcome says
//!   whether the attempt's end was recorded ([`EndRecord`](crate::EndRecord)). A write given up
//!   unconfirmed is the attempt's last: nothing runs after it.
//! - Every write of an attempt is fenced by its epoch and its live lease: an attempt whose lease
//!   expired or was taken over gets [`JournalError::LeaseLost`] at its next write.
//! - `Ambiguous` is only ever reported by an attempt that holds the run: the attempt that
//!   started the effect has lost its lease (it died, or stopped), so it is not running it.
//! - The audit log (proposals, decisions and who made them, effects started and recorded,
//!   resumes, reconciliations) is in the outcome's events and in the journal, in order, with
//!   operation ids and never argument values.

pub mod backend;
mod bound;
mod boxed;
mod cancel_watch;
mod codec;
mod codec_messages;
#[cfg(test)]
mod codec_pins;
mod codec_progress;
mod codec_stream;
#[cfg(test)]
mod codec_stream_pins;
mod codec_terms;
mod definition;
mod driver;
mod error;
mod heartbeat;
mod holder;
mod host;
mod id;
mod label;
mod memory;
mod query;
mod record;
mod row;
mod run;
mod run_record;
mod store;
mod stream;
mod tail;
mod widening;

pub use boxed::DynJournal;
pub use definition::RunDefinition;
pub use error::{JournalError, StorageError};
pub use host::{
    ProposalKey, approve, ask_again, cancel, close, deny, inspect, list, reconcile, scope_of, widen,
};
pub use id::{Digest, FencingToken, MAX_RUN_ID_LEN, OperationId, RunId};
pub use label::{Labels, MAX_LABEL_KEY_LEN, MAX_LABEL_VALUE_LEN, MAX_LABELS};
pub use memory::MemoryJournal;
pub use query::{RunPage, RunQuery, RunSummary, StateFilter};
pub use record::{
    CallResult, Decider, Decision, MAX_ACTOR_LEN, MAX_REASON_LEN, Operation, OperationStatus, Proposal,
    Reconciliation, Resolution, RunState, Verdict, valid_actor, valid_reason,
};
pub use row::Lease;
pub use run::CANCEL_POLL;
pub use run_record::RunRecord;
pub use store::{DEFAULT_LEASE, Journal, MAX_LEASE};
pub use stream::{FOLLOW_PAGE, FOLLOW_POLL, Follow, StreamLine, follow};
pub use widening::Widening;
