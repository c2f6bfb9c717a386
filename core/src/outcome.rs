//! The result of a run: a status, the text when it is kept, and the ordered events.
//!
//! # Invariants
//!
//! - Text is kept only for [`Status::Completed`] and [`Status::Incomplete`]; every halt,
//!   `DeadlineExceeded`, `ProviderUnavailable`, `AwaitingApproval` and `Ambiguous` drop it. An [`Outcome`] can only be built by
//!   the runtime, so this holds for every outcome a caller sees.
//! - `Completed` means the host's completion condition held when the run ended; a model's
//!   sentence is never proof.
//! - The caller's cancellation and provider errors are errors ([`RunError`]), not statuses.

use std::fmt;
use std::sync::Arc;

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

use crate::event::{ControlEvent, HaltReason};
#[cfg(feature = "journal")]
use crate::journal::JournalError;
use crate::limits::LimitsError;
#[cfg(feature = "pools")]
use crate::pool::PoolError;
use crate::spend::Spend;
use crate::transport::{TransportError, TransportErrorKind, Usage};

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    /// The run ended and the host's completion condition holds.
    Completed,
    /// The run ended with text, but the completion condition does not hold.
    Incomplete,
    /// A tool was invoked without its capability.
    PermissionDenied,
    /// One signature exceeded its repetition limit.
    RepeatedCall,
    /// The tool-call budget was spent: the model asked for a tool call after the budget's
    /// number of calls, all tools together, had been admitted (see
    /// [`HaltReason::ToolBudget`](crate::HaltReason::ToolBudget) for exactly what counts).
    ToolBudget,
    /// The model-call budget was spent.
    ModelBudget,
    /// The deadline passed first.
    DeadlineExceeded,
    /// The transport could not reach the provider.
    ProviderUnavailable,
    /// A model reply asked for more tool calls than the per-reply bound; none of them ran.
    TooManyCalls,
    /// A journaled run stopped on a proposal that waits for the host's decision; the
    /// outcome names the operation, and the run can be resumed once it is decided.
    AwaitingApproval,
    /// The host's policy or an approver refused a proposal: a halt.
    Denied,
    /// An effect's `started` record is committed and it has no result, and the attempt that
    /// started it no longer holds the run (it crashed, or stopped inside the body, or its store
    /// did not confirm the result's commit before the deadline or the caller's cancellation
    /// ([`EndRecord::Unconfirmed`]), and its lease is gone): the effect may or may not have
    /// happened. The outcome names the operation; the
    /// host finds out in the effect's own system, reconciles it, then resumes.
    ///
    /// The journal reports this only once that attempt's lease has expired or been released, so
    /// an attempt still running the body never leads to it. The host may conclude "it did not
    /// run" only when the effect's system shows no effect under the operation's id and will
    /// refuse one from that attempt from now on (it applies each operation id once, or refuses
    #[cfg_attr(
        feature = "journal",
        doc = " an epoch older than one it has seen: see \
        [`ToolContext::fencing_token`](crate::ToolContext::fencing_token));"
    )]
    #[cfg_attr(
        not(feature = "journal"),
        doc = " an epoch older than one it has seen: see `ToolContext::fencing_token`);"
    )]
    /// a process paused inside the body may otherwise still apply the effect later.
    Ambiguous,
    /// A model call's reservation or a settlement did not fit a token budget; the outcome's
    /// spend says by how much a settlement went past it.
    TokenBudget,
    /// A model call's or a priced tool's cost did not fit the cost budget.
    CostBudget,
    /// A tool reached its own per-run limit.
    ToolLimit,
    /// A progress check found a loop that makes no progress (a cycle with no new result, a
    /// streak of failed calls): a halt; the outcome's detail names the cycle's tools or the
    /// streak.
    NoProgress,
    #[cfg_attr(
        feature = "journal",
        doc = " A host closed the journaled run ([`journal::close`](crate::journal::close)): it ended"
    )]
    #[cfg_attr(
        not(feature = "journal"),
        doc = " A host closed the journaled run (`journal::close`): it ended"
    )]
    /// for good, where it stood, without finishing; no attempt takes it again, and a proposal
    /// it waited on never runs. The status of a run's stored state and of
    #[cfg_attr(feature = "journal", doc = " [`JournalError::Finished`], never of an attempt's outcome.")]
    #[cfg_attr(not(feature = "journal"), doc = " `JournalError::Finished`, never of an attempt's outcome.")]
    Closed,
}

impl Status {
    /// Every status of this version, in the order of the statuses table. A slice: a later
    /// version may add statuses.
    pub const ALL: &'static [Self] = &[
        Self::Completed,
        Self::Incomplete,
        Self::PermissionDenied,
        Self::RepeatedCall,
        Self::ToolBudget,
        Self::ModelBudget,
        Self::DeadlineExceeded,
        Self::ProviderUnavailable,
        Self::TooManyCalls,
        Self::AwaitingApproval,
        Self::Denied,
        Self::Ambiguous,
        Self::TokenBudget,
        Self::CostBudget,
        Self::ToolLimit,
        Self::Closed,
        Self::NoProgress,
    ];

    /// The status's name, e.g. `RepeatedCall`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "Completed",
            Self::Incomplete => "Incomplete",
            Self::PermissionDenied => "PermissionDenied",
            Self::RepeatedCall => "RepeatedCall",
            Self::ToolBudget => "ToolBudget",
            Self::ModelBudget => "ModelBudget",
            Self::DeadlineExceeded => "DeadlineExceeded",
            Self::ProviderUnavailable => "ProviderUnavailable",
            Self::TooManyCalls => "TooManyCalls",
            Self::AwaitingApproval => "AwaitingApproval",
            Self::Denied => "Denied",
            Self::Ambiguous => "Ambiguous",
            Self::TokenBudget => "TokenBudget",
            Self::CostBudget => "CostBudget",
            Self::ToolLimit => "ToolLimit",
            Self::Closed => "Closed",
            Self::NoProgress => "NoProgress",
        }
    }

    /// The status whose [`as_str`](Self::as_str) is `name`.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|status| status.as_str() == name)
    }

    /// Whether an outcome with this status keeps the model's text.
    #[must_use]
    pub const fn keeps_text(self) -> bool {
        matches!(self, Self::Completed | Self::Incomplete)
    }
}

impl From<HaltReason> for Status {
    fn from(reason: HaltReason) -> Self {
        match reason {
            HaltReason::PermissionDenied => Self::PermissionDenied,
            HaltReason::RepeatedCall => Self::RepeatedCall,
            HaltReason::ToolBudget => Self::ToolBudget,
            HaltReason::ModelBudget => Self::ModelBudget,
            HaltReason::DeadlineExceeded => Self::DeadlineExceeded,
            HaltReason::TooManyCalls => Self::TooManyCalls,
            HaltReason::Denied => Self::Denied,
            HaltReason::TokenBudget => Self::TokenBudget,
            HaltReason::CostBudget => Self::CostBudget,
            HaltReason::ToolLimit => Self::ToolLimit,
            HaltReason::NoProgress => Self::NoProgress,
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Status {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// What a run returns: `{status, text, events}`, plus usage and a provider message when known.
///
/// Serialises as the object a host shows or stores, every key always present:
/// `{"status":…,"text":…,"partial_text":…,"events":[…],"usage":…,"spend":{…},"detail":…,"operation":…,"pending":…}`,
/// with `null` for what the run does not have (`text` unless the status keeps it,
/// `partial_text` but after a wrap-up, `usage` when no provider reported it, `detail` but for
/// `ProviderUnavailable`, `operation` but for a stop on one, `pending` but for
/// `AwaitingApproval`: then `{"operation","tool","capability","arguments","digest"}`, the
/// canonical arguments as JSON text for the host's own display to an approver).
///
/// ```
/// use loopbound::scripted::{Step, sequence};
/// use loopbound::transport::ModelReply;
/// use loopbound::{Message, Runner, Scope, ToolSet};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runner::new(&ToolSet::default(), sequence(vec![Step::Reply(ModelReply::text("Hi."))]));
/// let outcome = runtime.run(&Scope::builder().build()?, &mut vec![Message::user("Hello.")], |_| true).await?;
/// let json = serde_json::to_value(&outcome)?;
/// assert_eq!(json["status"], "Completed");
/// assert_eq!(json["text"], "Hi.");
/// assert_eq!(json["events"][0]["kind"], "ModelCall");
/// assert_eq!((json["usage"].is_null(), json["operation"].is_null()), (true, true));
/// assert!(json["pending"].is_null());
/// assert_eq!(json["spend"]["settled"]["output_tokens"], 0);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    status: Status,
    text: Option<String>,
    events: Vec<ControlEvent>,
    usage: Option<Usage>,
    detail: Option<String>,
    operation: Option<Arc<str>>,
    spend: Spend,
    partial: Option<String>,
    pending: Option<Box<Pending>>,
    end: EndRecord,
}

/// What an outcome (or a watcher's suspension) may hand out as pending: a journal's proposal.
/// Without the `journal` feature nothing can wait for the host, and the type has no value.
#[cfg(feature = "journal")]
pub(crate) type Pending = crate::journal::Proposal;

/// Without the `journal` feature nothing waits for the host's decision: no value of this type
/// exists, so `pending` is always `None` (and serialises as `null`).
#[cfg(not(feature = "journal"))]
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Pending {}

/// Whether a journaled attempt's end is in its journal: what a host reads to know if the run's
/// state there is how this attempt ended, or what an earlier write left.
///
/// A store that stops answering cannot keep an attempt past its deadline, nor past its
/// caller's cancellation, by more than [`STORE_GRACE`](crate::STORE_GRACE): the store call in
/// flight is given up, and whether its write was committed is then unknown. Safety does not
/// depend on it: an `effect` whose `started` record may or may not have been committed is
/// [`Ambiguous`](Status::Ambiguous) for the next attempt, exactly as after a crash, and the
/// next attempt takes the run once this one's lease expires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum EndRecord {
    /// The run was not journaled ([`Runner::run`](crate::Runner::run)).
    #[default]
    NotJournaled,
    /// The attempt's last commit (how it ended) is durable, and it released the run's lease:
    /// another attempt may take the run at once.
    Recorded,
    /// A write of the attempt could not be confirmed before the deadline or the caller's
    /// cancellation ended it (the store did not answer in time): the journal holds the run as
    /// the attempt's last confirmed write left it, or as the unconfirmed one did if it landed
    /// after all. Nothing further ran once a write went unconfirmed. The run's lease is not
    /// released: the next attempt takes it once it expires.
    Unconfirmed,
}

impl Outcome {
    /// An ended run: `Completed` or `Incomplete` by the host's condition, text kept.
    pub(crate) fn ended(
        completed: bool,
        text: Option<String>,
        events: Vec<ControlEvent>,
        usage: Option<Usage>,
    ) -> Self {
        let status = if completed { Status::Completed } else { Status::Incomplete };
        Self {
            status,
            text,
            events,
            usage,
            detail: None,
            operation: None,
            spend: Spend::default(),
            partial: None,
            pending: None,
            end: EndRecord::NotJournaled,
        }
    }

    /// A stopped run: no text.
    pub(crate) fn stopped(
        status: Status,
        events: Vec<ControlEvent>,
        usage: Option<Usage>,
        detail: Option<String>,
    ) -> Self {
        debug_assert!(!status.keeps_text(), "a stop keeps no text");
        Self {
            status,
            text: None,
            events,
            usage,
            detail,
            operation: None,
            spend: Spend::default(),
            partial: None,
            pending: None,
            end: EndRecord::NotJournaled,
        }
    }

    /// This outcome, with a wrap-up's text.
    pub(crate) fn partial(mut self, text: Option<String>) -> Self {
        self.partial = text;
        self
    }

    /// This outcome, with what the run spent.
    pub(crate) fn spent(mut self, spend: Spend) -> Self {
        self.spend = spend;
        self
    }

    /// This outcome, naming the operation it stopped on (`AwaitingApproval`, `Denied`,
    /// `Ambiguous`).
    #[cfg(feature = "journal")]
    pub(crate) fn on(mut self, operation: Option<Arc<str>>) -> Self {
        self.operation = operation;
        self
    }

    /// This outcome of a journaled attempt, saying whether its end was recorded.
    #[cfg(feature = "journal")]
    pub(crate) fn recorded(mut self, end: EndRecord) -> Self {
        self.end = end;
        self
    }

    /// This outcome, handing out the proposal it stopped on.
    #[cfg(feature = "journal")]
    pub(crate) fn awaiting(mut self, proposal: Box<crate::journal::Proposal>) -> Self {
        self.pending = Some(proposal);
        self
    }

    /// How the run ended.
    #[must_use]
    pub fn status(&self) -> Status {
        self.status
    }

    /// The model's last text: present only for `Completed` and `Incomplete`. Under
    /// `Incomplete` it is not a completed task and must not be shown as one.
    #[must_use]
    pub fn text(&self) -> Option<&str> {
        self.text.as_deref()
    }

    /// The text of the wrap-up call a limit's stop was followed by ([`Limits::with_wrap_up`](crate::Limits::with_wrap_up)):
    /// a partial answer, written after the run was stopped, never a completed task. The status
    /// stays the limit's, and [`text`](Self::text) stays `None`.
    #[must_use]
    pub fn partial_text(&self) -> Option<&str> {
        self.partial.as_deref()
    }

    /// The ordered audit log.
    #[must_use]
    pub fn events(&self) -> &[ControlEvent] {
        &self.events
    }

    /// Token counts summed over the calls whose provider reported them.
    #[must_use]
    pub fn usage(&self) -> Option<Usage> {
        self.usage
    }

    /// What the run spent: settled tokens and money, reservations still in flight, calls that
    /// exceeded their reservation, and how far past its budgets it went (with every status).
    #[must_use]
    pub fn spend(&self) -> &Spend {
        &self.spend
    }

    /// For `ProviderUnavailable`, what the transport reported (e.g. a retry-after delay).
    #[must_use]
    pub fn detail(&self) -> Option<&str> {
        self.detail.as_deref()
    }

    /// For `AwaitingApproval`, `Denied` and `Ambiguous` in a journaled run, the operation id the
    /// host acts on (e.g. `refund-42/op/1`).
    #[must_use]
    pub fn operation(&self) -> Option<&str> {
        self.operation.as_deref()
    }

    /// For `AwaitingApproval`, the proposal that waits for the host's decision: its operation
    /// id, tool, capability, canonical arguments (a stored value, for the host's own display to
    /// an approver) and digest. Hand it to [`journal::approve`](crate::journal::approve) or
    /// [`journal::deny`](crate::journal::deny) as it is.
    #[cfg(feature = "journal")]
    #[must_use]
    pub fn pending(&self) -> Option<&crate::journal::Proposal> {
        self.pending.as_deref()
    }

    /// The proposal this outcome stopped on, as a watcher's suspension hands it on.
    pub(crate) fn pending_copy(&self) -> Option<Box<Pending>> {
        self.pending.clone()
    }

    /// For a journaled run, whether this attempt's end is recorded in its journal
    /// ([`EndRecord`]); [`EndRecord::NotJournaled`] otherwise. Serialised as `end_record`
    /// (`"recorded"` or `"unconfirmed"`) in a journaled run's outcome only.
    #[must_use]
    pub fn end_record(&self) -> EndRecord {
        self.end
    }
}

impl Serialize for Outcome {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let journaled = self.end != EndRecord::NotJournaled;
        let mut outcome = serializer.serialize_struct("Outcome", 9 + usize::from(journaled))?;
        outcome.serialize_field("status", &self.status)?;
        outcome.serialize_field("text", &self.text)?;
        outcome.serialize_field("partial_text", &self.partial)?;
        outcome.serialize_field("events", &self.events)?;
        outcome.serialize_field("usage", &self.usage)?;
        outcome.serialize_field("spend", &self.spend)?;
        outcome.serialize_field("detail", &self.detail)?;
        outcome.serialize_field("operation", &self.operation.as_deref())?;
        outcome.serialize_field("pending", &self.pending.as_deref().map(PendingForm))?;
        if journaled {
            outcome.serialize_field("end_record", &self.end)?;
        } else {
            outcome.skip_field("end_record")?;
        }
        outcome.end()
    }
}

/// A pending proposal as an outcome serialises it: `{"operation":…,"tool":…,"capability":…,
/// "arguments":…,"digest":…}`, the arguments as their canonical JSON text, for the host's own
/// display to an approver; a proposal that expires adds `"expires_at_ms"` (milliseconds since
/// the Unix epoch).
pub(crate) struct PendingForm<'p>(pub(crate) &'p Pending);

#[cfg(not(feature = "journal"))]
impl Serialize for PendingForm<'_> {
    fn serialize<S: Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        match *self.0 {}
    }
}

#[cfg(feature = "journal")]
impl Serialize for PendingForm<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let proposal = self.0;
        let expires = proposal.expires_at().map(|at| {
            let since = at.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        });
        let mut pending = serializer.serialize_struct("Pending", 5 + usize::from(expires.is_some()))?;
        pending.serialize_field("operation", &proposal.operation().to_string())?;
        pending.serialize_field("tool", proposal.tool())?;
        pending.serialize_field("capability", proposal.capability())?;
        pending.serialize_field("arguments", proposal.arguments())?;
        pending.serialize_field("digest", proposal.digest().as_str())?;
        if let Some(expires) = expires {
            pending.serialize_field("expires_at_ms", &expires)?;
        }
        pending.end()
    }
}

/// A run that produced no outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunError {
    /// The caller cancelled. This wins every race with a halt or the deadline. In a journaled
    /// run, the attempt's end is recorded (see [`CancelledUnrecorded`](Self::CancelledUnrecorded)).
    Cancelled,
    /// The caller cancelled a journaled run, and the attempt's end could not be recorded: its
    /// store did not confirm a write within [`STORE_GRACE`](crate::STORE_GRACE) of the
    /// cancellation (the journal holds the run as its last confirmed write left it, its lease
    /// not released; see [`EndRecord::Unconfirmed`]). Of kind `Cancelled`.
    CancelledUnrecorded,
    /// The provider answered, but not usably (authentication refused, malformed or truncated
    /// reply, its own cancellation).
    Provider(TransportError),
    /// A journaled run's journal refused or failed: it fails closed, so nothing that
    /// could not be recorded ran.
    #[cfg(feature = "journal")]
    Journal(JournalError),
    /// The run has a cost budget but no price for what it may spend on (the model, or a tool
    /// of its set): nothing ran.
    Unpriced(String),
    /// A shared pool's store failed or does not know a pool the scope draws from: the call it
    /// would have reserved was not sent (fail closed).
    #[cfg(feature = "pools")]
    Pool(PoolError),
    /// The scope's limits do not fit the run: a per-tool limit names a tool its tool set does
    /// not have ([`LimitsError::UnknownTool`]). Nothing ran.
    InvalidLimits(LimitsError),
    /// The transport cannot send a request option the run set (a seed to an API that has none,
    /// a temperature above the provider's range): the run's configuration, refused before
    /// anything ran. The error is of kind
    /// [`TransportErrorKind::Unsupported`] and names the option and the transport.
    Unsupported(TransportError),
}

/// What kind of failure a [`RunError`] is, for a host that answers with a status code: it
/// classifies by this kind, never by the message.
///
/// | kind | what happened | an HTTP service might answer |
/// |---|---|---|
/// | `Cancelled` | the caller cancelled | 499 (client closed request), or nothing |
/// | `ProviderAuthentication` | the provider refused the credentials | 502, and page whoever holds the key |
/// | `Provider` | the provider answered unusably | 502 |
/// | `Busy` | another attempt holds the run or took it over | 409, retry later |
/// | `Finished` | the run already ended | 409 |
/// | `JournalUnavailable` | the journal's storage failed | 503 |
/// | `PoolUnavailable` | a shared pool's store failed: the call was not sent | 503 |
/// | `Internal` | the journal's rows or the host's setup do not fit (a corrupt row, a scope already used, a tool set that changed) | 500 |
/// | `Configuration` | the run's configuration was refused before anything ran (a cost budget without prices, a request option the transport cannot send) | 500 |
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RunErrorKind {
    /// The caller cancelled.
    Cancelled,
    /// The provider refused the credentials.
    ProviderAuthentication,
    /// The provider answered, but not usably: a malformed or truncated reply, its own
    /// cancellation, any other provider error.
    Provider,
    /// Another attempt holds this run's lease, or took the run over from this one.
    Busy,
    /// The run already ended; it is not resumed.
    Finished,
    /// The journal's storage failed: nothing that could not be recorded ran.
    JournalUnavailable,
    /// A shared pool's store failed: the call it would have reserved was not sent.
    PoolUnavailable,
    /// The journal's rows, the tools or the scope do not fit together.
    Internal,
    /// The run's configuration was refused before anything ran (a cost budget without prices,
    /// a request option the transport cannot send).
    Configuration,
}

impl RunErrorKind {
    /// The kind's name in snake case, e.g. `provider_authentication`, as it serialises.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Cancelled => "cancelled",
            Self::ProviderAuthentication => "provider_authentication",
            Self::Provider => "provider",
            Self::Busy => "busy",
            Self::Finished => "finished",
            Self::JournalUnavailable => "journal_unavailable",
            Self::PoolUnavailable => "pool_unavailable",
            Self::Internal => "internal",
            Self::Configuration => "configuration",
        }
    }
}

impl fmt::Display for RunErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl RunError {
    /// What kind of failure this is.
    ///
    /// ```
    /// use loopbound::{RunError, RunErrorKind};
    ///
    /// assert_eq!(RunError::Cancelled.kind(), RunErrorKind::Cancelled);
    /// # #[cfg(feature = "journal")]
    /// assert_eq!(RunError::Journal(loopbound::journal::JournalError::LeaseLost).kind(), RunErrorKind::Busy);
    /// ```
    #[must_use]
    pub fn kind(&self) -> RunErrorKind {
        match self {
            Self::Cancelled | Self::CancelledUnrecorded => RunErrorKind::Cancelled,
            Self::Provider(error) if error.kind() == TransportErrorKind::Authentication => {
                RunErrorKind::ProviderAuthentication
            }
            Self::Provider(_) => RunErrorKind::Provider,
            #[cfg(feature = "journal")]
            Self::Journal(error) => match error {
                JournalError::LeaseLost | JournalError::LeaseHeld { .. } => RunErrorKind::Busy,
                JournalError::Finished(_) => RunErrorKind::Finished,
                JournalError::Storage(_) => RunErrorKind::JournalUnavailable,
                _ => RunErrorKind::Internal,
            },
            Self::Unpriced(_) | Self::Unsupported(_) | Self::InvalidLimits(_) => RunErrorKind::Configuration,
            #[cfg(feature = "pools")]
            Self::Pool(error) if error.is_storage() => RunErrorKind::PoolUnavailable,
            #[cfg(feature = "pools")]
            Self::Pool(PoolError::UnknownPool | PoolError::InvalidName | PoolError::InvalidBudget) => {
                RunErrorKind::Configuration
            }
            #[cfg(feature = "pools")]
            Self::Pool(_) => RunErrorKind::Internal,
        }
    }
}

impl Serialize for RunError {
    /// `{"kind":"provider","message":"malformed provider response: …"}`: the kind, and the
    /// error's words with its causes.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut message = self.to_string();
        let mut source = std::error::Error::source(self);
        while let Some(cause) = source {
            message.push_str(": ");
            message.push_str(&cause.to_string());
            source = cause.source();
        }
        let mut error = serializer.serialize_struct("RunError", 2)?;
        error.serialize_field("kind", self.kind().as_str())?;
        error.serialize_field("message", &message)?;
        error.end()
    }
}

impl fmt::Display for RunError {
    /// Writes the inner error's words: a `RunError` is transparent over the transport's and the
    /// journal's errors, and its [`source`](std::error::Error::source) is theirs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cancelled => f.write_str("the run was cancelled by its caller"),
            Self::CancelledUnrecorded => f.write_str(
                "the run was cancelled by its caller, and its journal did not confirm the attempt's end in time",
            ),
            Self::Provider(error) => error.fmt(f),
            #[cfg(feature = "journal")]
            Self::Journal(error) => error.fmt(f),
            Self::Unpriced(what) => write!(f, "a cost budget needs a price for {what}; nothing ran"),
            #[cfg(feature = "pools")]
            Self::Pool(error) => error.fmt(f),
            Self::Unsupported(error) => write!(f, "{error}; nothing ran"),
            Self::InvalidLimits(error) => write!(f, "{error}; nothing ran"),
        }
    }
}

impl std::error::Error for RunError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Cancelled | Self::CancelledUnrecorded | Self::Unpriced(_) => None,
            Self::InvalidLimits(error) => Some(error),
            Self::Provider(error) | Self::Unsupported(error) => error.source(),
            #[cfg(feature = "journal")]
            Self::Journal(error) => error.source(),
            #[cfg(feature = "pools")]
            Self::Pool(error) => error.source(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_error_serialises_as_its_kind_and_its_words() {
        let error = RunError::Provider(TransportError::authentication("401"));
        assert_eq!(
            serde_json::to_string(&error).unwrap_or_default(),
            r#"{"kind":"provider_authentication","message":"provider refused authentication: 401"}"#
        );
        assert_eq!(RunError::Provider(TransportError::malformed("x")).kind(), RunErrorKind::Provider);
    }

    #[cfg(feature = "journal")]
    #[test]
    fn a_journal_error_is_classified_by_what_the_host_can_do() {
        let held = RunError::Journal(JournalError::LeaseHeld {
            holder: "w1".to_owned(),
            remaining: std::time::Duration::from_secs(3),
        });
        assert_eq!(held.kind(), RunErrorKind::Busy);
        assert_eq!(
            RunError::Journal(JournalError::Finished(Status::Completed)).kind(),
            RunErrorKind::Finished
        );
        assert_eq!(
            RunError::Journal(JournalError::storage("disk full")).kind(),
            RunErrorKind::JournalUnavailable
        );
        assert_eq!(RunError::Journal(JournalError::ScopeInUse).kind(), RunErrorKind::Internal);
    }

    #[test]
    fn only_completed_and_incomplete_keep_text() {
        let keeping: Vec<_> = Status::ALL.iter().copied().filter(|s| s.keeps_text()).collect();
        assert_eq!(keeping, [Status::Completed, Status::Incomplete]);
    }
}
