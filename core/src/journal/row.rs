//! The rows a journal backend stores: plain integers and texts, one struct per table, so that
//! every backend (SQLite, PostgreSQL) stores the same thing and the core alone decodes it; the
//! run's state ([`RunState`]) and its lease ([`Lease`]) are typed, since a backend acts on them.
//!
//! # Invariants
//!
//! - A backend never interprets a text column: encoding and decoding are the core's
//!   ([`codec`](super::codec)), so a stored value that does not decode is a typed
//!   [`Corrupt`](super::JournalError::Corrupt) error, the same on every backend. The state is
//!   stored as its parts ([`RunState::name`], [`RunState::operation`], [`RunState::status`]) and
//!   read back with [`RunState::from_parts`]: no backend parses a text for it.
//! - A [`Batch`] is written in one transaction, in order, or not at all.
//! - Keys: one run row per run; a reply per `(run, ordinal)`; a call per `(run, reply, index)`;
//!   a proposal, a decision, a result per `(run, ordinal)`; a start per `(run, ordinal, start)`;
//!   a reconciliation per `(run, ordinal, start)`; events in append order. Writing a key twice is
//!   a [`Conflict`](super::JournalError::Conflict), and the whole batch is rolled back.

use std::time::{Duration, SystemTime};

use super::record::RunState;

/// The run's own row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunRow {
    /// The newest attempt's epoch: every write of an attempt is conditioned on it.
    pub epoch: u64,
    /// How many attempts took the run (1 for the first).
    pub attempts: u32,
    /// The initial conversation, as JSON.
    pub conversation: String,
    /// The persisted counters of the logical run, as JSON.
    pub ledger: String,
    /// Where the run stands.
    pub state: RunState,
    /// The run's definition (its grants and limits) as JSON, written when the run is created and
    /// never changed by a backend; empty for a run created before definitions were stored.
    pub definition: String,
    /// The host's labels, by key, written when the run is created.
    pub labels: Vec<LabelRow>,
}

impl Default for RunRow {
    fn default() -> Self {
        Self {
            epoch: 0,
            attempts: 0,
            conversation: String::new(),
            ledger: String::new(),
            state: RunState::Open,
            definition: String::new(),
            labels: Vec::new(),
        }
    }
}

/// One of the host's labels on a run, e.g. `tenant` = `acme`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct LabelRow {
    /// The label's key.
    pub key: String,
    /// Its value.
    pub value: String,
}

/// Who holds a run's lease, and until when, as of the read that returned it.
///
/// An attempt holds the run from its acquisition until its last commit releases the lease, or
/// until the lease expires: each commit and each renewal of the attempt extends it by the
/// journal's lease duration ([`Journal::lease`](super::Journal::lease)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The holder, as its journal value names itself (e.g. `host-a:4242`).
    pub holder: String,
    /// When the lease expires, by the storage's clock.
    pub until: SystemTime,
    /// How long it had left when it was read, by the storage's clock: zero once it expired.
    pub remaining: Duration,
}

impl Lease {
    /// Whether the lease was still live when it was read: its holder may be running the run.
    #[must_use]
    pub fn is_live(&self) -> bool {
        !self.remaining.is_zero()
    }

    /// Whether the lease was live when it was read and its holder may still be running the run:
    /// a holder that this machine knows is gone ([`is_dead_holder`](super::backend::is_dead_holder))
    /// holds nothing, since the next attempt takes its run over at once.
    #[must_use]
    pub fn is_held(&self) -> bool {
        self.is_live() && !super::holder::is_dead_holder(&self.holder)
    }
}

/// One recorded model reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplyRow {
    /// 1 for the logical run's first model reply.
    pub ordinal: u32,
    /// The reply (text, tool calls, usage) as JSON.
    pub reply: String,
}

/// The result handed to the model for one call of a reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallRow {
    /// The reply's ordinal.
    pub reply: u32,
    /// The call's position in the reply (0 for the first).
    pub index: u32,
    /// The operation's ordinal when the call was admitted.
    pub operation: Option<u32>,
    /// Whether the text is an error result.
    pub is_error: bool,
    /// The text.
    pub text: String,
}

/// A proposal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProposalRow {
    /// The operation's ordinal.
    pub ordinal: u32,
    /// The reply that asked for the call.
    pub reply: u32,
    /// The call's position in that reply.
    pub index: u32,
    /// The tool's name.
    pub tool: String,
    /// The capability the tool needs.
    pub capability: String,
    /// `read`, `effect` or `idempotent`.
    pub effect: String,
    /// The canonical JSON of the bound arguments.
    pub arguments: String,
    /// When the proposal expires, in milliseconds since the Unix epoch by the proposing host's
    /// clock, if its tool's policy sets an expiry ([`Policy::AskWithin`](crate::tool::Policy)).
    pub expires: Option<u64>,
}

/// A decision on a proposal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecisionRow {
    /// The operation's ordinal.
    pub ordinal: u32,
    /// `allow` or `deny`.
    pub verdict: String,
    /// `policy`, or `approver:<name>`.
    pub by: String,
}

/// One start of an effect's body, committed before the body runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartedRow {
    /// The operation's ordinal.
    pub ordinal: u32,
    /// 1 for the first start of this operation's body.
    pub start: u32,
}

/// The host's reconciliation of one start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReconciliationRow {
    /// The operation's ordinal.
    pub ordinal: u32,
    /// The start it settles.
    pub start: u32,
    /// `ran` or `not_run`.
    pub resolution: String,
    /// For `ran`, the result the host gives.
    pub result: Option<String>,
    /// Who reconciled.
    pub by: String,
}

/// One audit event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventRow {
    /// The kind's name, e.g. `EffectStarted`.
    pub kind: String,
    /// A tool's name, `model` or `run`.
    pub name: String,
    /// The event's count.
    pub count: u32,
    /// The operation it names, if any.
    pub operation: Option<String>,
    /// Who decided, if any.
    pub by: Option<String>,
    /// The host's reason (a `Closed` event's), if any.
    pub reason: Option<String>,
}

/// A proposal's new expiry ([`Entry::Expiry`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpiryRow {
    /// The operation's ordinal.
    pub ordinal: u32,
    /// When the proposal expires, in milliseconds since the Unix epoch.
    pub expires: u64,
}

/// One line of a run's recorded stream, as [`Journal::updates`](super::Journal::updates)
/// reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpdateRow {
    /// Its place in the run's stream: 1 for the first line, each next one more.
    pub seq: u64,
    /// The update's JSON.
    pub line: String,
}

/// Everything a backend holds about one run, rows in key order and events in append order.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct StoredRun {
    /// The run's row.
    pub run: RunRow,
    /// The run's lease, unless it was released (or never taken).
    pub lease: Option<Lease>,
    /// Recorded replies by ordinal.
    pub replies: Vec<ReplyRow>,
    /// Call results by `(reply, index)`.
    pub calls: Vec<CallRow>,
    /// Proposals by ordinal.
    pub proposals: Vec<ProposalRow>,
    /// Decisions by ordinal.
    pub decisions: Vec<DecisionRow>,
    /// Starts by `(ordinal, start)`.
    pub started: Vec<StartedRow>,
    /// Reconciliations by `(ordinal, start)`.
    pub reconciliations: Vec<ReconciliationRow>,
    /// Events in append order.
    pub events: Vec<EventRow>,
    /// The number of the run's last recorded stream line (0: none).
    pub stream: u64,
}

/// One write of a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// Write nothing, and refuse the whole batch with a
    /// [`Conflict`](super::JournalError::Conflict) unless the run's state is this one at this
    /// point of the batch (first in a batch: as committed before it, read under the fence's
    /// lock). A host's command that changes the state from the one it read so changes it from
    /// that one only, never from one that another command or an attempt set meanwhile.
    ExpectState(RunState),
    /// Insert a reply.
    Reply(ReplyRow),
    /// Insert a call result.
    Call(CallRow),
    /// Insert a proposal.
    Proposal(ProposalRow),
    /// Insert a decision.
    Decision(DecisionRow),
    /// Insert a start.
    Started(StartedRow),
    /// Insert a reconciliation.
    Reconciliation(ReconciliationRow),
    /// Append an event.
    Event(EventRow),
    /// Replace the expiry of a proposal that waits for a decision (a host asks again).
    Expiry(ExpiryRow),
    /// Insert a line of the run's recorded stream: one [`Update`](crate::watch::Update) as the
    /// JSON a live stream serialises it to, under its number (the run's last line's plus one).
    Update(UpdateRow),
    /// Replace the run's persisted counters.
    Ledger(String),
    /// Replace the run's state.
    State(RunState),
    /// Replace the run's definition (a host's widening).
    Definition(String),
    /// Clear the run's cancel request: the attempt that commits it honoured the request.
    CancelHonoured,
    /// End the attempt: under [`Fence::Epoch`], release the run's lease once the batch is
    /// written, so that another attempt may take the run at once (the attempt's later commits
    /// are [`LeaseLost`](super::JournalError::LeaseLost)). Under [`Fence::Host`] it does nothing.
    Release,
}

/// Writes that one durable commit makes, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Batch {
    /// The writes.
    pub entries: Vec<Entry>,
}

impl Batch {
    /// Whether the batch writes nothing.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(crate) fn push(&mut self, entry: Entry) {
        self.entries.push(entry);
    }
}

/// What a write is conditioned on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fence {
    /// An attempt's epoch: the write happens only if the run's epoch is still this one and its
    /// lease is live (not released, not expired), else
    /// [`LeaseLost`](super::JournalError::LeaseLost); it renews the lease.
    Epoch(u64),
    /// A host's command (a decision, a reconciliation): not tied to an attempt, and refused
    /// with [`LeaseHeld`](super::JournalError::LeaseHeld) while an attempt holds a live lease on
    /// the run (that attempt may be deciding or running what the host would settle); the keys'
    /// uniqueness refuses a second decision or reconciliation.
    Host,
}

/// One run as a listing returns it: its row's summary, without the conversation and counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedRow {
    /// The run's id, as stored.
    pub run: String,
    /// The newest attempt's epoch.
    pub epoch: u64,
    /// How many attempts took the run.
    pub attempts: u32,
    /// Where the run stands.
    pub state: RunState,
    /// The run's lease, unless released.
    pub lease: Option<Lease>,
    /// The host's labels, by key.
    pub labels: Vec<LabelRow>,
}
