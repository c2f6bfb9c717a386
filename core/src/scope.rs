//! One request: its grants, limits, caller cancellation, deadline, counters, events, and the
//! host's own state for that request.
//!
//! Tools are defined once and shared ([`ToolSet`](crate::ToolSet)); a scope is opened per request
//! and dropped after it. Every path to a tool's body takes a scope, so the guard of that request
//! decides every call.
//!
//! # Invariants
//!
//! - A scope's capabilities and limits are fixed when it is built: nothing a model or a tool
//!   returns can grant a capability or raise a limit.
//! - The deadline runs from [`ScopeBuilder::build`].
//! - The state `S` belongs to this request only: tool bodies reach it through the
//!   [`ToolContext`](crate::ToolContext) they are handed, the completion condition through
//!   [`Runner::run`](crate::Runner::run); nothing global is involved.
//! - Cloning a scope yields a handle to the same request, never a copy of its counters.

use std::collections::BTreeSet;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
#[cfg(feature = "pools")]
use std::time::Duration;

use tokio::time::Instant;

use crate::event::{ControlEvent, HaltReason};
use crate::guard::{Activity, Ancestor, Guard, Stop, Terms};
#[cfg(feature = "journal")]
use crate::journal::Labels;
use crate::limits::{Limits, LimitsError};
#[cfg(all(feature = "pools", feature = "journal"))]
use crate::pool::PoolTerms;
#[cfg(feature = "pools")]
use crate::pool::{DynPoolStore, PoolDraw, PoolName, PoolSettings};
use crate::spend::{Prices, Spend};
use crate::sync::CancellationToken;
use crate::watch::Feed;

/// One bounded request, and the host's state `S` for it (`()` when there is none).
///
/// ```
/// use loopbound::{Limits, Scope};
///
/// let scope = Scope::builder()
///     .grant("ticket.read")
///     .limits(Limits::default().with_tool_calls(2))
///     .build()?;
/// assert!(scope.is_granted("ticket.read"));
/// assert!(!scope.is_granted("review.finish"));
/// assert_eq!(scope.admit_model(), Ok(1));
/// assert_eq!(scope.events()[0].to_string(), "ModelCall model 1");
/// # Ok::<(), loopbound::LimitsError>(())
/// ```
pub struct Scope<S = ()> {
    inner: Arc<Inner<S>>,
}

struct Inner<S> {
    guard: Guard,
    state: S,
    #[cfg(feature = "journal")]
    labels: Labels,
    #[cfg(feature = "journal")]
    records_stream: bool,
}

impl<S> Clone for Scope<S> {
    fn clone(&self) -> Self {
        Self { inner: Arc::clone(&self.inner) }
    }
}

/// Builds a [`Scope`]: grant capabilities, set limits, link the caller's cancellation, attach
/// the request's state.
#[must_use]
pub struct ScopeBuilder<S = ()> {
    capabilities: BTreeSet<Box<str>>,
    limits: Limits,
    caller: Option<CancellationToken>,
    terms: Terms,
    /// What the host asked of the scope's pools (their terms, a resume's pools, the names and
    /// stores it gave that are refused at the build), applied when it is built.
    #[cfg(feature = "pools")]
    pool_settings: PoolSettings,
    feed: Option<Feed>,
    state: S,
    #[cfg(feature = "journal")]
    labels: Labels,
    #[cfg(feature = "journal")]
    records_stream: bool,
}

impl Default for ScopeBuilder {
    fn default() -> Self {
        Self {
            capabilities: BTreeSet::new(),
            limits: Limits::default(),
            caller: None,
            terms: Terms::default(),
            #[cfg(feature = "pools")]
            pool_settings: PoolSettings::default(),
            feed: None,
            state: (),
            #[cfg(feature = "journal")]
            labels: Labels::new(),
            #[cfg(feature = "journal")]
            records_stream: false,
        }
    }
}

impl<S> fmt::Debug for ScopeBuilder<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScopeBuilder")
            .field("capabilities", &self.capabilities)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl<S> ScopeBuilder<S> {
    /// Grants one capability, e.g. `ticket.read`.
    pub fn grant(mut self, capability: impl Into<String>) -> Self {
        self.capabilities.insert(capability.into().into_boxed_str());
        self
    }

    /// Grants every capability of `capabilities`.
    pub fn grants<I, C>(mut self, capabilities: I) -> Self
    where
        I: IntoIterator<Item = C>,
        C: Into<String>,
    {
        self.capabilities.extend(capabilities.into_iter().map(|c| c.into().into_boxed_str()));
        self
    }

    /// Sets the run's limits (default: [`Limits::default`]).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets the host's labels of the request (a tenant, a user). A journaled run stores them with
    /// its definition when it is created, and a host lists its runs by them.
    #[cfg(feature = "journal")]
    pub fn labels(mut self, labels: Labels) -> Self {
        self.labels = labels;
        self
    }

    /// Links the caller's cancellation: when `token` fires, the run ends with
    /// [`Stop::Cancelled`], whatever else is happening.
    ///
    /// Pass the request's own token: a service that stops every request at shutdown hands each
    /// one `shutdown.child_token()`, so that cancelling one request leaves the others running.
    /// Sharing one token between requests is also safe and cheap: the scope makes its own child
    /// of `token` when it is built, and its admissions read that child, never the shared token
    /// (reading a [`CancellationToken`] locks it).
    ///
    /// ```
    /// use loopbound::{CancellationToken, Scope};
    ///
    /// let shutdown = CancellationToken::new();
    /// let request = shutdown.child_token();
    /// let scope = Scope::builder().caller(request.clone()).build()?;
    /// request.cancel();
    /// assert_eq!(scope.check(), Err(loopbound::Stop::Cancelled));
    /// assert!(!shutdown.is_cancelled(), "the other requests go on");
    /// # Ok::<(), loopbound::LimitsError>(())
    /// ```
    pub fn caller(mut self, token: CancellationToken) -> Self {
        self.caller = Some(token);
        self
    }

    /// Prices the run's model calls and tools (needed by a cost budget): the host's table,
    /// built once and shared by every request.
    pub fn prices(mut self, prices: Arc<Prices>) -> Self {
        self.terms.prices = Some(prices);
        self
    }

    /// Sets the run's progress policy (see [`progress`](crate::progress)): repetition by result
    /// for the tools it names, cycles, error streaks, a nudge before the halt. The default,
    /// [`Progress::exact`](crate::progress::Progress::exact), is the seed's exact repetition; a
    /// child's builder ([`Scope::child`]) starts from its parent's policy, which this replaces.
    ///
    /// ```
    /// use loopbound::progress::Progress;
    /// use loopbound::Scope;
    ///
    /// // Spare polling of `job_status`, stop oscillation and failure streaks: one line.
    /// let scope = Scope::builder().progress(Progress::recommended().by_result("job_status", 20)).build()?;
    /// assert!(scope.progress().is_active());
    /// # Ok::<(), loopbound::LimitsError>(())
    /// ```
    pub fn progress(mut self, policy: crate::progress::Progress) -> Self {
        self.terms.progress = policy;
        self
    }

    /// Attaches the request's own state, which tool bodies read through
    /// [`ToolContext::state`](crate::ToolContext::state) and the completion condition receives.
    pub fn state<T>(self, state: T) -> ScopeBuilder<T> {
        ScopeBuilder {
            capabilities: self.capabilities,
            limits: self.limits,
            caller: self.caller,
            terms: self.terms,
            #[cfg(feature = "pools")]
            pool_settings: self.pool_settings,
            feed: self.feed,
            state,
            #[cfg(feature = "journal")]
            labels: self.labels,
            #[cfg(feature = "journal")]
            records_stream: self.records_stream,
        }
    }

    /// Streams the request's run to a watcher: every event as it is recorded, the model's text
    /// as it arrives, each tool call and its answer, and the outcome (see [`watch`](crate::watch)).
    /// The stream ends after the run's outcome, or when the scope is dropped.
    pub fn watch(mut self, feed: Feed) -> Self {
        self.feed = Some(feed);
        self
    }

    /// Records a journaled run's stream in its journal: what a watcher gets, as numbered lines
    /// that [`journal::follow`](crate::journal::follow) reads from any position, in any process,
    /// after any restart (a Server-Sent-Events `Last-Event-ID`). Kept in the run's definition:
    /// every attempt of the run records, and a resume's scope does not change it
    /// ([`journal::scope_of`](crate::journal::scope_of) carries it). Off by default: the lines
    /// ride on the attempt's commits, but they are rows to write (a run without a watcher need
    /// not pay for them). A run that is not journaled records nothing.
    #[cfg(feature = "journal")]
    pub fn record_stream(mut self) -> Self {
        self.records_stream = true;
        self
    }

    /// Validates the limits and starts the scope's clock: the deadline runs from now.
    ///
    /// # Errors
    ///
    /// Any [`LimitsError`]; nothing has run and nothing has been counted.
    pub fn build(self) -> Result<Scope<S>, LimitsError> {
        self.limits.validate()?;
        self.terms.progress.validate().map_err(LimitsError::Progress)?;
        if self.limits.cost().is_some() && self.terms.prices.is_none() {
            return Err(LimitsError::Unpriced);
        }
        #[cfg(feature = "pools")]
        let terms = self.pool_settings.settle(self.terms)?;
        #[cfg(not(feature = "pools"))]
        let terms = self.terms;
        let mut deadline =
            Instant::now().checked_add(self.limits.deadline()).ok_or(LimitsError::DeadlineOutOfRange)?;
        let caller = match &terms.parent {
            Some(parent) => {
                let parent = parent.guard();
                if self.caller.is_some() {
                    return Err(LimitsError::ChildCaller);
                }
                if self.capabilities.iter().any(|capability| !parent.is_granted(capability)) {
                    return Err(LimitsError::GrantsBeyondParent);
                }
                deadline = deadline.min(parent.deadline());
                // The parent's own token: its caller's cancellation, its halts and its deadline
                // stop the child at once.
                parent.token().child_token()
            }
            None => self.caller.unwrap_or_default(),
        };
        let guard = Guard::new(self.limits, self.capabilities, caller, deadline, terms, self.feed);
        Ok(Scope {
            inner: Arc::new(Inner {
                guard,
                state: self.state,
                #[cfg(feature = "journal")]
                labels: self.labels,
                #[cfg(feature = "journal")]
                records_stream: self.records_stream,
            }),
        })
    }
}

/// The shared pools a scope draws from (the `pools` feature).
#[cfg(feature = "pools")]
impl<S> ScopeBuilder<S> {
    /// Draws every model call of the run from the shared pools `names` of `store` as well (a
    /// tenant's, a user's; each kept once, in the order given): each call is reserved in all of
    /// them, all or nothing, before it is sent, and settled from the provider's usage (see
    /// [`pool`](crate::pool)). A child scope draws from its parent's pools, and from those it
    /// adds here, in the same store.
    ///
    /// `store` is the `Arc` of any store (`Arc<MemoryPools>`, `Arc<SqlitePools>`, …), coerced,
    /// or the `Arc<dyn` [`DynPoolStore`]`>` a host that picks its store at run time holds.
    ///
    /// Calls add up: each adds its pools to those named before (a second call does not replace
    /// the first). So a name refused by one call is never forgotten by a later one: the scope
    /// would otherwise draw from fewer pools than the host named.
    ///
    #[cfg_attr(feature = "pools", doc = "```")]
    #[cfg_attr(not(feature = "pools"), doc = "```ignore")]
    /// use std::sync::Arc;
    /// use loopbound::pool::MemoryPools;
    /// use loopbound::{LimitsError, Scope};
    ///
    /// let pools = Arc::new(MemoryPools::new());
    /// assert!(Scope::builder().pools(pools.clone(), ["tenant:acme", "user:7"]).build().is_ok());
    /// let refused = Scope::builder().pools(pools.clone(), ["tenant acme"]).build();
    /// assert_eq!(refused.err(), Some(LimitsError::InvalidPoolName));
    /// // A later valid call does not clear the refusal.
    /// let still = Scope::builder().pools(pools.clone(), ["tenant acme"]).pools(pools, ["user:7"]).build();
    /// assert_eq!(still.err(), Some(LimitsError::InvalidPoolName));
    /// ```
    ///
    /// # Errors
    ///
    /// None here: a name that is not one (see [`PoolStore`](crate::pool::PoolStore)), in this call or any other on the
    /// builder, makes [`build`](Self::build) fail with [`LimitsError::InvalidPoolName`]; pools
    /// of a child in another store than its parent's, with [`LimitsError::PoolStores`].
    pub fn pools<N: AsRef<str>>(
        mut self,
        store: Arc<dyn DynPoolStore>,
        names: impl IntoIterator<Item = N>,
    ) -> Self {
        if let Ok(names) = names.into_iter().map(PoolName::new).collect::<Result<Vec<_>, _>>() {
            self.draw(PoolDraw::new(store, names))
        } else {
            self.pool_settings.invalid_name = true;
            self
        }
    }

    /// Grants each call drawn from pools at most `cap` output tokens (at least 1;
    /// [`DEFAULT_OUTPUT_CAP`](crate::pool::DEFAULT_OUTPUT_CAP) unless set), so that one call in
    /// flight never holds a whole pool; a call's own cap, or the run's budgets, when smaller,
    /// win.
    pub fn pool_output_cap(mut self, cap: u32) -> Self {
        self.pool_settings.output_cap = Some(cap);
        self
    }

    /// Each hold in the pools lives `lease` without renewal (at least a millisecond;
    /// [`DEFAULT_LEASE`](crate::pool::DEFAULT_LEASE) unless set): renewed while its call is in
    /// flight, charged whole this long after its holder died.
    pub fn pool_lease(mut self, lease: Duration) -> Self {
        self.pool_settings.lease = Some(lease);
        self
    }

    /// Names the holder of the scope's holds in the pool store (a worker's label, at most 128
    /// bytes kept; `pid-<id>` unless set).
    pub fn pool_holder(mut self, holder: &str) -> Self {
        self.pool_settings.holder = Some(Arc::from(holder));
        self
    }

    /// Adds `draw`'s pools to those the scope draws from (a child's to its parent's).
    fn draw(mut self, draw: PoolDraw) -> Self {
        self.terms.pools = Some(match self.terms.pools.take() {
            Some(inherited) if inherited.same_store(&draw) => inherited.with(&draw),
            Some(_) => {
                self.pool_settings.foreign = true;
                draw
            }
            None => draw,
        });
        self
    }

    /// Draws from the pools a resumed run's definition names, kept in `store` (the host's pool
    /// store handle, in this process), on the terms the run started with: what a scope from
    #[cfg_attr(
        feature = "journal",
        doc = " [`journal::scope_of`](crate::journal::scope_of) for a run that draws from pools needs"
    )]
    #[cfg_attr(not(feature = "journal"), doc = " `journal::scope_of` for a run that draws from pools needs")]
    /// before it builds. On a builder that names no such pools, it does nothing.
    pub fn pool_store(self, store: Arc<dyn DynPoolStore>) -> Self {
        match self.pool_settings.resumed.clone() {
            Some(terms) => self.draw(terms.draw_from(store)),
            None => self,
        }
    }

    /// This builder, noting that the run it resumes draws from the pools of `terms`.
    #[cfg(feature = "journal")]
    pub(crate) fn resuming_pools(mut self, terms: PoolTerms) -> Self {
        self.pool_settings.resumed = Some(terms);
        self
    }
}

impl<S: Send + Sync> Ancestor for Inner<S> {
    fn guard(&self) -> &Guard {
        &self.guard
    }
}

impl<S: Send + Sync + 'static> Scope<S> {
    /// Starts building a child of this scope, for an agent run inside one of its tools' bodies
    /// (usually reached as [`ToolContext::child`](crate::ToolContext::child)).
    ///
    /// The child is bounded by its own limits and, at once, by this scope's: every model call,
    /// tool call, token and unit of money it is admitted is admitted here too, in the same
    /// critical section, so the tree never spends past any ancestor's budget, however many
    /// children run and however they interleave. This scope's totals for the tree read them
    /// ([`tree_model_calls`](Self::tree_model_calls), [`tree_tool_calls`](Self::tree_tool_calls),
    /// [`spend`](Self::spend)); its [`model_calls`](Self::model_calls) and
    /// [`tool_calls`](Self::tool_calls) count its own calls only. Its grants must be among this scope's
    /// ([`LimitsError::GrantsBeyondParent`] otherwise), its deadline is at most this scope's, and
    /// this scope's caller cancellation, halt or deadline stops it at once. A child's own halt
    /// ends the child only; an admission that exhausts a budget of this scope halts both.
    ///
    /// The child inherits this scope's price table, pools and progress policy: an agent run
    /// below a host that stops oscillation stops it too, unless the child's builder sets a
    /// policy of its own ([`ScopeBuilder::progress`] replaces the inherited one, looser or
    /// stricter). What the checks remember is the child's own: the parent's calls do not count
    /// toward the child's cycles or streaks, nor the child's toward the parent's.
    ///
    /// Under a spend budget of the tree, a child's model call asks for at most 4,096 output
    /// tokens (the pools' `DEFAULT_OUTPUT_CAP`) unless its request
    /// sets a cap, and a call that does not fit only because of its siblings' calls in flight
    /// waits for one of them to settle, within its deadline, instead of halting the tree: a
    /// budget is exhausted when what is settled leaves no room (`docs/spend.md`, "Fair shares").
    ///
    /// ```
    /// use loopbound::{Limits, Scope, Status};
    ///
    /// let parent = Scope::builder().grant("web.read").limits(Limits::default().with_model_calls(2)).build()?;
    /// let child = parent.child().grant("web.read").limits(Limits::default().with_model_calls(6)).build()?;
    /// assert_eq!(child.admit_model(), Ok(1));
    /// assert_eq!(parent.admit_model(), Ok(1));
    /// // The parent's two model calls are spent: the child's third call is refused, and the
    /// // parent, whose budget it would exceed, halts too.
    /// assert!(child.admit_model().is_err());
    /// assert_eq!(parent.stop_reason(), Some(loopbound::HaltReason::ModelBudget));
    /// # Ok::<(), loopbound::LimitsError>(())
    /// ```
    pub fn child(&self) -> ScopeBuilder {
        let mut builder = ScopeBuilder::default();
        builder.terms.parent = Some(Arc::clone(&self.inner) as Arc<dyn Ancestor>);
        builder.terms.prices.clone_from(&self.inner.guard.prices().cloned());
        builder.terms.pools = self.inner.guard.pools().cloned();
        builder.terms.progress = self.inner.guard.progress().clone();
        builder
    }
}

impl Scope {
    /// Starts building a scope with no capability, the default limits and no state.
    pub fn builder() -> ScopeBuilder {
        ScopeBuilder::default()
    }
}

impl<S> Scope<S> {
    /// The host's state for this request.
    #[must_use]
    pub fn state(&self) -> &S {
        &self.inner.state
    }

    /// The scope's limits: every budget of the run, per-tool limits included
    /// ([`Limits::tool_calls_of`]).
    #[must_use]
    pub fn limits(&self) -> &Limits {
        self.inner.guard.limits()
    }

    /// The host's labels of the request.
    #[cfg(feature = "journal")]
    #[must_use]
    pub fn labels(&self) -> &Labels {
        &self.inner.labels
    }

    /// Whether a journaled run of this scope records its stream
    /// ([`ScopeBuilder::record_stream`]).
    #[cfg(feature = "journal")]
    #[must_use]
    pub fn records_stream(&self) -> bool {
        self.inner.records_stream
    }

    /// Whether `capability` was granted.
    #[must_use]
    pub fn is_granted(&self, capability: &str) -> bool {
        self.inner.guard.is_granted(capability)
    }

    /// The granted capabilities, in code-point order.
    pub fn capabilities(&self) -> impl Iterator<Item = &str> {
        self.inner.guard.capabilities()
    }

    /// When the run's deadline passes.
    #[must_use]
    pub fn deadline(&self) -> Instant {
        self.inner.guard.deadline()
    }

    /// A token that fires when the scope stops: the caller cancels, a halt is recorded, or a
    /// bounded wait sees the deadline pass. Tool bodies receive it through their
    /// [`ToolContext`](crate::ToolContext).
    #[must_use]
    pub fn token(&self) -> &CancellationToken {
        self.inner.guard.token()
    }

    /// The caller's token, as passed to [`ScopeBuilder::caller`].
    #[must_use]
    pub fn caller_token(&self) -> &CancellationToken {
        self.inner.guard.caller()
    }

    /// Cancels this request as its caller would, without touching the caller's token (which
    /// may be shared with other requests): the run ends with
    /// [`RunError::Cancelled`](crate::RunError::Cancelled) at its next check or wait, whatever
    /// else is happening. A [`RunRegistry`](crate::RunRegistry) does this by run id.
    pub fn cancel(&self) {
        self.inner.guard.cancel_as_caller();
    }

    /// Whether the caller cancelled this request, through its token or [`cancel`](Self::cancel).
    #[must_use]
    pub fn is_cancelled(&self) -> bool {
        self.inner.guard.caller_cancelled()
    }

    /// Counts one model call before it is sent, under the scope's lock: cancellation check, then
    /// the model budget. Returns the new count.
    ///
    /// This call knows nothing of the request, so it cannot reserve its spend: under a token or
    /// cost budget it refuses (halt `TokenBudget`, fail closed). Calls made through the runtime
    /// or [`Budgeted`](crate::Budgeted) are counted and reserved.
    ///
    /// # Errors
    ///
    /// The [`Stop`] that ends the run: the caller cancelled, the scope already halted, the
    /// deadline passed, or this call would exceed the budget (halt `ModelBudget`).
    pub fn admit_model(&self) -> Result<u32, Stop> {
        self.inner.guard.admit_model(None).map(|(count, _)| count)
    }

    /// What the run has spent so far: settled tokens and money, reservations in flight.
    #[must_use]
    pub fn spend(&self) -> Spend {
        self.inner.guard.spend()
    }

    /// The scope's price table, if it has one.
    #[must_use]
    pub fn prices(&self) -> Option<&Arc<Prices>> {
        self.inner.guard.prices()
    }

    /// The shared pools the scope draws from, if any.
    #[cfg(feature = "pools")]
    #[must_use]
    pub fn pools(&self) -> Option<&PoolDraw> {
        self.inner.guard.pools()
    }

    /// The scope's progress policy ([`ScopeBuilder::progress`]).
    #[must_use]
    pub fn progress(&self) -> &crate::progress::Progress {
        self.inner.guard.progress()
    }

    /// Checks, without counting anything, whether the run may go on.
    ///
    /// # Errors
    ///
    /// The [`Stop`] in force: caller cancellation first, then a recorded halt, then the deadline
    /// (recorded as a `DeadlineExceeded` halt charged to the model the first time it is seen).
    pub fn check(&self) -> Result<(), Stop> {
        self.inner.guard.check(Activity::Model)
    }

    /// Runs `future` until it completes or the scope stops, whichever comes first. A future that
    /// never looks at its cancellation is dropped at its next await point when the deadline
    /// passes, the scope halts or the caller cancels.
    ///
    /// # Errors
    ///
    /// The [`Stop`] that interrupted the future. A future that completes is not re-checked here.
    pub async fn bounded<F: Future>(&self, future: F) -> Result<F::Output, Stop> {
        self.inner.guard.bounded(Activity::Model, future).await
    }

    /// The ordered audit log so far.
    #[must_use]
    pub fn events(&self) -> Vec<ControlEvent> {
        self.inner.guard.events()
    }

    /// The first halt recorded, if any.
    #[must_use]
    pub fn stop_reason(&self) -> Option<HaltReason> {
        self.inner.guard.stop_reason()
    }

    /// Model calls admitted so far in this scope itself; its children's are counted by
    /// [`tree_model_calls`](Self::tree_model_calls).
    #[must_use]
    pub fn model_calls(&self) -> u32 {
        self.inner.guard.model_calls()
    }

    /// Tool calls admitted so far in this scope itself; its children's are counted by
    /// [`tree_tool_calls`](Self::tree_tool_calls).
    #[must_use]
    pub fn tool_calls(&self) -> u32 {
        self.inner.guard.tool_calls()
    }

    /// Model calls admitted so far in this scope and every scope opened below it: what its
    /// model budget is spent by. (Its [`spend`](Self::spend) is the tree's already: a child's
    /// reservations are held here too.)
    ///
    /// ```
    /// use loopbound::{Limits, Scope};
    ///
    /// let parent = Scope::builder().grant("web.read").limits(Limits::default().with_model_calls(5)).build()?;
    /// let child = parent.child().grant("web.read").build()?;
    /// assert_eq!((child.admit_model(), child.admit_model()), (Ok(1), Ok(2)));
    /// assert_eq!(parent.admit_model(), Ok(1));
    /// assert_eq!((parent.model_calls(), parent.tree_model_calls()), (1, 3));
    /// # Ok::<(), loopbound::LimitsError>(())
    /// ```
    #[must_use]
    pub fn tree_model_calls(&self) -> u32 {
        self.inner.guard.tree_calls().0
    }

    /// Tool calls admitted so far in this scope and every scope opened below it: what its tool
    /// budget is spent by.
    #[must_use]
    pub fn tree_tool_calls(&self) -> u32 {
        self.inner.guard.tree_calls().1
    }

    /// The request's guard, for the tools, the model budget and the runtime.
    pub(crate) fn guard(&self) -> &Guard {
        &self.inner.guard
    }
}

impl<S> fmt::Debug for Scope<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scope")
            .field("limits", &self.limits())
            .field("capabilities", &self.capabilities().collect::<Vec<_>>())
            .field("stop_reason", &self.stop_reason())
            .finish_non_exhaustive()
    }
}
