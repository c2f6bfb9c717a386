//! What a journal records about one admitted call: its proposal, the decision on it, its starts,
//! its result, and the host's reconciliations.
//!
//! # Invariants
//!
//! - A proposal is written once, before anything is decided or run, and never changes.
//! - An operation has at most one decision and at most one result; each start of its body has
//!   its own number (1 for the first), and a reconciliation settles one start.
//! - Nothing here is printed by `Display`: a proposal's arguments and a result's text are stored
//!   values, and stay in the journal.

use std::fmt;

use super::id::{Digest, OperationId};
use crate::tool::EffectKind;

/// An immutable proposal: which tool, under which capability, with which canonical arguments,
/// asked for by which call of which model reply.
#[derive(Clone, PartialEq, Eq)]
pub struct Proposal {
    pub(crate) operation: OperationId,
    pub(crate) reply: u32,
    pub(crate) index: u32,
    pub(crate) tool: String,
    pub(crate) capability: String,
    pub(crate) effect: EffectKind,
    pub(crate) arguments: String,
    pub(crate) expires: Option<std::time::SystemTime>,
}

impl Proposal {
    /// When the proposal expires, if its tool's policy sets an expiry
    /// ([`Policy::AskWithin`](crate::tool::Policy::AskWithin)): an approval is refused after
    /// it, and an approved effect that has not started by then never starts.
    #[must_use]
    pub fn expires_at(&self) -> Option<std::time::SystemTime> {
        self.expires
    }

    /// Whether the proposal has expired by this host's clock.
    #[must_use]
    pub fn is_expired(&self) -> bool {
        self.expires.is_some_and(|expires| std::time::SystemTime::now() >= expires)
    }

    /// The operation this proposal opens.
    #[must_use]
    pub fn operation(&self) -> &OperationId {
        &self.operation
    }

    /// The model reply (1 for the first of the logical run) that asked for the call.
    #[must_use]
    pub fn reply(&self) -> u32 {
        self.reply
    }

    /// The call's position in that reply (0 for the first).
    #[must_use]
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The tool's name.
    #[must_use]
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// The capability the tool needs.
    #[must_use]
    pub fn capability(&self) -> &str {
        &self.capability
    }

    /// What the tool declared it does to the world.
    #[must_use]
    pub fn effect(&self) -> EffectKind {
        self.effect
    }

    /// The canonical JSON of the bound arguments: a stored value, for the host's own display to
    /// an approver; never logged by this crate.
    #[must_use]
    pub fn arguments(&self) -> &str {
        &self.arguments
    }

    /// The signature: tool name, `:`, canonical arguments.
    #[must_use]
    pub fn signature(&self) -> String {
        format!("{}:{}", self.tool, self.arguments)
    }

    /// The digest an approval must present.
    #[must_use]
    pub fn digest(&self) -> Digest {
        Digest::of(&self.signature())
    }
}

impl fmt::Debug for Proposal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Proposal")
            .field("operation", &self.operation.to_string())
            .field("tool", &self.tool)
            .field("effect", &self.effect)
            .finish_non_exhaustive()
    }
}

/// Allow or deny.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// The call may run.
    Allow,
    /// The call is refused: the run halts with `Denied`.
    Deny,
}

impl Verdict {
    /// `allow` or `deny`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Deny => "deny",
        }
    }
}

/// Who decided: the tool's standing policy, or a named approver.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Decider {
    /// The tool's [`Policy`](crate::tool::Policy) (`allow` or `deny`).
    Policy,
    /// A person or process the host names.
    Approver(String),
}

/// Longest approver or reconciler name, in bytes.
pub const MAX_ACTOR_LEN: usize = 64;

impl Decider {
    /// The name's form in events: `policy`, or `approver <name>`.
    #[must_use]
    pub fn describe(&self) -> String {
        match self {
            Self::Policy => "policy".to_owned(),
            Self::Approver(name) => format!("approver {name}"),
        }
    }
}

/// Whether `name` may name an approver or a reconciler: 1 to [`MAX_ACTOR_LEN`] bytes, no control
/// character.
#[must_use]
pub fn valid_actor(name: &str) -> bool {
    (1..=MAX_ACTOR_LEN).contains(&name.len()) && !name.chars().any(char::is_control)
}

/// Longest reason a host gives for closing a run, in bytes.
pub const MAX_REASON_LEN: usize = 256;

/// Whether `reason` may be a host's reason for closing a run
/// ([`close`](super::close)): 1 to [`MAX_REASON_LEN`] bytes, no control character (it is
/// printed on one line of the audit log).
#[must_use]
pub fn valid_reason(reason: &str) -> bool {
    (1..=MAX_REASON_LEN).contains(&reason.len()) && !reason.chars().any(char::is_control)
}

/// A decision on a proposal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub(crate) verdict: Verdict,
    pub(crate) by: Decider,
}

impl Decision {
    /// Allow or deny.
    #[must_use]
    pub fn verdict(&self) -> Verdict {
        self.verdict
    }

    /// Who decided.
    #[must_use]
    pub fn by(&self) -> &Decider {
        &self.by
    }
}

/// What a call produced, as the model was (or will be) told: a result or an error text.
#[derive(Clone, PartialEq, Eq)]
pub struct CallResult {
    pub(crate) text: String,
    pub(crate) is_error: bool,
}

impl CallResult {
    /// The text handed to the model: a stored value.
    #[must_use]
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether the call failed (an error result).
    #[must_use]
    pub fn is_error(&self) -> bool {
        self.is_error
    }
}

impl fmt::Debug for CallResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallResult").field("is_error", &self.is_error).finish_non_exhaustive()
    }
}

/// The host's answer for an ambiguous effect.
#[derive(Clone, PartialEq, Eq)]
pub enum Resolution {
    /// It ran, and this is its result (handed to the model on resume).
    Ran {
        /// The result text.
        result: String,
    },
    /// It did not run: the resume starts it again, as it was decided.
    NotRun,
}

impl fmt::Debug for Resolution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ran { .. } => f.write_str("Ran { .. }"),
            Self::NotRun => f.write_str("NotRun"),
        }
    }
}

/// A reconciliation of one start of an operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reconciliation {
    pub(crate) start: u32,
    pub(crate) resolution: Resolution,
    pub(crate) by: String,
}

impl Reconciliation {
    /// Which start of the body it settles (1 for the first).
    #[must_use]
    pub fn start(&self) -> u32 {
        self.start
    }

    /// What the host said.
    #[must_use]
    pub fn resolution(&self) -> &Resolution {
        &self.resolution
    }

    /// Who reconciled.
    #[must_use]
    pub fn by(&self) -> &str {
        &self.by
    }
}

/// Everything the journal holds about one operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operation {
    pub(crate) proposal: Proposal,
    pub(crate) decision: Option<Decision>,
    pub(crate) starts: u32,
    pub(crate) reconciliations: Vec<Reconciliation>,
    pub(crate) result: Option<CallResult>,
}

/// Where an operation stands.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OperationStatus {
    /// Proposed; no decision yet.
    AwaitingDecision,
    /// Refused.
    Denied,
    /// Allowed and not started since (or reconciled as not run): the next start has this number.
    Ready {
        /// The number the next start gets.
        start: u32,
    },
    /// Started, with no result and no reconciliation: in flight, or, after a crash, ambiguous.
    Started {
        /// The start's number.
        start: u32,
    },
    /// Its result is known: recorded by the run, or given by a reconciliation.
    Settled(CallResult),
}

impl Operation {
    /// The proposal.
    #[must_use]
    pub fn proposal(&self) -> &Proposal {
        &self.proposal
    }

    /// The decision, if any.
    #[must_use]
    pub fn decision(&self) -> Option<&Decision> {
        self.decision.as_ref()
    }

    /// How many times its body was started.
    #[must_use]
    pub fn starts(&self) -> u32 {
        self.starts
    }

    /// The host's reconciliations, in order.
    #[must_use]
    pub fn reconciliations(&self) -> &[Reconciliation] {
        &self.reconciliations
    }

    /// The recorded result, if any.
    #[must_use]
    pub fn result(&self) -> Option<&CallResult> {
        self.result.as_ref()
    }

    /// The text of its result when it succeeded: recorded by an attempt without an error, or
    /// given by a reconciliation of its last start as run.
    #[must_use]
    pub fn succeeded(&self) -> Option<&str> {
        if let Some(result) = &self.result {
            return (!result.is_error).then_some(result.text.as_str());
        }
        match self.reconciled(self.starts).map(|r| &r.resolution) {
            Some(Resolution::Ran { result }) if self.starts > 0 => Some(result),
            _ => None,
        }
    }

    /// The reconciliation of start `start`, if any.
    pub(crate) fn reconciled(&self, start: u32) -> Option<&Reconciliation> {
        self.reconciliations.iter().find(|r| r.start == start)
    }

    /// Where it stands.
    #[must_use]
    pub fn status(&self) -> OperationStatus {
        if let Some(result) = &self.result {
            return OperationStatus::Settled(result.clone());
        }
        match self.decision.as_ref().map(|d| d.verdict) {
            None => return OperationStatus::AwaitingDecision,
            Some(Verdict::Deny) => return OperationStatus::Denied,
            Some(Verdict::Allow) => {}
        }
        if self.starts == 0 {
            return OperationStatus::Ready { start: 1 };
        }
        match self.reconciled(self.starts).map(|r| &r.resolution) {
            None => OperationStatus::Started { start: self.starts },
            Some(Resolution::NotRun) => OperationStatus::Ready { start: self.starts + 1 },
            Some(Resolution::Ran { result }) => {
                OperationStatus::Settled(CallResult { text: result.clone(), is_error: false })
            }
        }
    }
}

/// Where a logical run stands between attempts, as its journal stores it: a name, and the
/// operation or the status it names. Whether an attempt is running it now is the lease's
/// business ([`Lease`](super::Lease)), not the state's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RunState {
    /// Created, running, or stopped in a way a resume continues (the deadline of one attempt, an
    /// unreachable provider, the caller's cancellation, a crash outside an effect).
    Open,
    /// Stopped on the proposal with this ordinal, which waits for a decision.
    AwaitingApproval(u32),
    /// The effect with this ordinal was started and has no recorded result: while its attempt
    /// holds the run, the body may be running; once that attempt's lease is gone, the effect's
    /// outcome is unknown until the host reconciles it.
    Ambiguous(u32),
    /// Ended for good with this status.
    Finished(crate::outcome::Status),
}

impl RunState {
    /// The state's name as stored: `open`, `awaiting_approval`, `ambiguous` or `finished`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::AwaitingApproval(_) => "awaiting_approval",
            Self::Ambiguous(_) => "ambiguous",
            Self::Finished(_) => "finished",
        }
    }

    /// The operation's ordinal an `AwaitingApproval` or `Ambiguous` state names.
    #[must_use]
    pub const fn operation(self) -> Option<u32> {
        match self {
            Self::AwaitingApproval(ordinal) | Self::Ambiguous(ordinal) => Some(ordinal),
            Self::Open | Self::Finished(_) => None,
        }
    }

    /// The status a `Finished` state names.
    #[must_use]
    pub const fn status(self) -> Option<crate::outcome::Status> {
        match self {
            Self::Finished(status) => Some(status),
            _ => None,
        }
    }

    /// Whether the run ended for good: a finished run never gets a new attempt.
    #[must_use]
    pub const fn is_finished(self) -> bool {
        matches!(self, Self::Finished(_))
    }

    /// The state a backend stored as its three parts ([`name`](Self::name),
    /// [`operation`](Self::operation), [`status`](Self::status)'s name).
    ///
    /// ```
    /// use loopbound::Status;
    /// use loopbound::journal::RunState;
    ///
    /// let state = RunState::from_parts("finished", None, Some("Completed"))?;
    /// assert_eq!(state, RunState::Finished(Status::Completed));
    /// assert!(RunState::from_parts("ambiguous", None, None).is_err());
    /// # Ok::<(), loopbound::journal::JournalError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`JournalError::Corrupt`](super::JournalError::Corrupt) when the parts do not make a
    /// state: an unknown name, an operation of 0, or a part missing or extra for the name.
    pub fn from_parts(
        name: &str,
        operation: Option<u32>,
        status: Option<&str>,
    ) -> Result<Self, super::JournalError> {
        let bad = || super::JournalError::Corrupt("the run's state".to_owned());
        let operation = operation.filter(|ordinal| *ordinal > 0);
        match (name, operation, status) {
            ("open", None, None) => Ok(Self::Open),
            ("awaiting_approval", Some(ordinal), None) => Ok(Self::AwaitingApproval(ordinal)),
            ("ambiguous", Some(ordinal), None) => Ok(Self::Ambiguous(ordinal)),
            ("finished", None, Some(status)) => {
                crate::outcome::Status::from_name(status).map(Self::Finished).ok_or_else(bad)
            }
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for RunState {
    /// `open`, `awaiting_approval <ordinal>`, `ambiguous <ordinal>` or `finished <status>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Open => f.write_str("open"),
            Self::AwaitingApproval(ordinal) | Self::Ambiguous(ordinal) => {
                write!(f, "{} {ordinal}", self.name())
            }
            Self::Finished(status) => write!(f, "finished {status}"),
        }
    }
}
