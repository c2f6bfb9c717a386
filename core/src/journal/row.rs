//! The rows a journal backend stores: plain integers and texts, one struct per table, so that
//! every backend (SQLite, PostgreSQL) stores the same thing and the core alone decodes it.
//!
//! # Invariants
//!
//! - A backend never interprets a text column: encoding and decoding are the core's
//!   ([`codec`](super::codec)), so a stored value that does not decode is a typed
//!   [`Corrupt`](super::JournalError::Corrupt) error, the same on every backend.
//! - A [`Batch`] is written in one transaction, in order, or not at all.
//! - Keys: one run row per run; a reply per `(run, ordinal)`; a call per `(run, reply, index)`;
//!   a proposal, a decision, a result per `(run, ordinal)`; a start per `(run, ordinal, start)`;
//!   a reconciliation per `(run, ordinal, start)`; events in append order. Writing a key twice is
//!   a [`Conflict`](super::JournalError::Conflict), and the whole batch is rolled back.

/// The run's own row.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct RunRow {
    /// The newest attempt's epoch: every write of an attempt is conditioned on it.
    pub epoch: u64,
    /// How many attempts took the run (1 for the first).
    pub attempts: u32,
    /// The initial conversation, as JSON.
    pub conversation: String,
    /// The persisted counters of the logical run, as JSON.
    pub ledger: String,
    /// Where the run stands: `open`, `awaiting_approval:<ordinal>`, `ambiguous:<ordinal>` or
    /// `finished:<status>`.
    pub state: String,
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
}

/// Everything a backend holds about one run, rows in key order and events in append order.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct StoredRun {
    /// The run's row.
    pub run: RunRow,
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
}

/// One write of a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
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
    /// Replace the run's persisted counters.
    Ledger(String),
    /// Replace the run's state.
    State(String),
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
    /// An attempt's epoch: the write happens only if no newer attempt took the run since, else
    /// [`LeaseLost`](super::JournalError::LeaseLost).
    Epoch(u64),
    /// A host's command (a decision, a reconciliation): not tied to an attempt; the keys'
    /// uniqueness refuses a second decision or reconciliation.
    Host,
}
