//! The tool-calling loop: one runtime, defined once, runs any number of requests.
//!
//! One loop over one scope: call the transport with the conversation and the tool definitions; if the reply asks for tools, run them (one after
//! another in order, or, opted in, as a parallel batch: [`Runner::parallel`]), append the
//! assistant message and one result per call, and loop; otherwise the reply's text ends the
//! run.
//!
//! # Invariants
//!
//! - Every model call goes through [`Budgeted`]; every tool call goes through the cancellation
//!   checks, then the host's observers (among them, if attached, the built-in
//!   [`Middleware`](crate::Middleware), which records a `Middleware` event), then the tool's
//!   guard. The runtime holds no bypass.
//! - An unknown tool, a binding failure and a body error become error results for the model and
//!   the loop goes on; an unknown tool moves no counter. Under a progress policy with an error
//!   streak, the loop notes each of the three with the guard ([`failed`], and the body's result
//!   after it runs): the streak is the one count they move, and it may halt the run.
//! - A halt, the deadline and the caller's cancellation end the loop at once. The caller is
//!   consulted last, so its cancellation wins every race.
//! - A runtime holds no per-request state: [`Runner::run`] takes the request's scope, so one
//!   runtime serves concurrent requests.
//! - A watched scope's feed gets the loop's steps as they happen: each reply's text, each call
//!   taken up and its answer, and the run's end (see [`watch`](crate::watch)).

mod calls;
mod course;
mod observer;
mod options;
mod preview;
mod subagent;
mod telemetry;

use std::fmt;
use std::sync::Arc;

use tracing::Instrument;

#[cfg(feature = "journal")]
pub(crate) use course::{Admission, Pending, Turn, answer_of, failed};
pub(crate) use course::{Course, Live};
pub use observer::{Middleware, Observation, Observer};
pub use options::{Concurrency, ConcurrencyError, Offer};
pub use preview::Preview;
pub use subagent::{SubAgent, SubAgentError};
pub(crate) use telemetry::record_end;

use std::borrow::Cow;

use crate::budgeted::{Budgeted, CallError, Prepared};
use crate::ended::Ended;
use crate::guard::Stop;
use crate::outcome::{Outcome, RunError, Status};
use crate::scope::Scope;
use crate::spend::{ByteCounter, TokenCounter};
use crate::tool::{ToolError, ToolSet};
use crate::transport::{
    ChatOptions, Message, ModelReply, ToolCall, ToolDefinition, Transport, TransportError, Usage,
};

/// The tool-calling loop over a set of tools and a transport, shared by every request.
///
/// ```
/// use loopbound::scripted::Scripted;
/// use loopbound::{Message, Runner, Scope, Status, ToolBuilder, ToolSet};
/// use schemars::JsonSchema;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Deserialize, Serialize, JsonSchema)]
/// struct Ticket {
///     input: i64,
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let read_ticket = ToolBuilder::new("read_ticket", "ticket.read").build(|t: Ticket, _call| async move {
///     Ok::<_, String>(format!("ticket {}", t.input))
/// })?;
/// // A model that asks for the same ticket forever.
/// let model = Scripted::new(|_, _| Scripted::call("read_ticket", r#"{"input":42}"#));
/// let runtime = Runner::new(&ToolSet::builder().add(&read_ticket).build()?, model);
///
/// let scope = Scope::builder().grant("ticket.read").build()?;
/// let outcome = runtime.run(&scope, &mut vec![Message::user("Review 42.")], |_| false).await?;
/// assert_eq!(outcome.status(), Status::RepeatedCall);
/// assert_eq!(outcome.text(), None);
/// assert_eq!(scope.tool_calls(), 1);
/// # Ok(())
/// # }
/// ```
#[allow(clippy::struct_excessive_bools, reason = "four independent switches of the one loop")]
pub struct Runner<T, S = ()> {
    tools: ToolSet<S>,
    transport: T,
    spans: bool,
    options: ChatOptions,
    streaming: bool,
    max_iterations: Option<u32>,
    disclose: bool,
    calibrate: bool,
    counter: Arc<dyn TokenCounter>,
    observers: Vec<Arc<dyn Observer<S>>>,
    /// The built-in [`Middleware`] was the first observer added: its event is recorded with the
    /// observation's count, under one lock, and it is not among `observers`.
    middleware_first: bool,
    offer: Offer,
    concurrency: Option<Concurrency>,
}

impl<T: fmt::Debug, S> fmt::Debug for Runner<T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runner")
            .field("spans", &self.spans)
            .field("transport", &self.transport)
            .field("streaming", &self.streaming)
            .field("offer", &self.offer)
            .field("concurrency", &self.concurrency)
            .field("observers", &(self.observers.len() + usize::from(self.middleware_first)))
            .finish_non_exhaustive()
    }
}

/// A model call admitted and not sent yet, with its telemetry span.
pub(crate) struct ModelCall {
    prepared: Prepared,
    span: tracing::Span,
}

impl ModelCall {
    /// Whether the call holds a reservation (a spend budget or a pool is set).
    #[cfg(feature = "journal")]
    pub(crate) fn is_reserved(&self) -> bool {
        self.prepared.is_reserved()
    }

    /// Gives back what the call holds: it is never sent.
    #[cfg(feature = "journal")]
    pub(crate) async fn withdraw<T: Transport>(self, model: &Budgeted<'_, T>) {
        model.withdraw(self.prepared).await;
    }
}

/// Why the loop ended, before the outcome is decided.
pub(crate) enum End {
    Reply(Option<String>),
    CapReached,
    Stopped(Stop),
    Transport(TransportError),
    /// A journaled run stopped on an operation: `Ambiguous`.
    #[cfg(feature = "journal")]
    Suspended(Status, Arc<str>),
    /// A journaled run stopped on this proposal, which waits for the host's decision.
    #[cfg(feature = "journal")]
    Awaiting(Box<crate::journal::Proposal>),
    /// A journaled run's journal failed: nothing more ran.
    #[cfg(feature = "journal")]
    Journal(crate::journal::JournalError),
    /// A limit stopped the run and the wrap-up call answered with this text.
    WrappedUp(crate::event::HaltReason, Option<String>),
    /// A shared pool's store failed: the call was not sent.
    #[cfg(feature = "pools")]
    Pool(crate::pool::PoolError),
}

impl From<CallError> for End {
    fn from(error: CallError) -> Self {
        match error {
            CallError::Stopped(stop) => Self::Stopped(stop),
            CallError::Transport(error) => Self::Transport(error),
            #[cfg(feature = "pools")]
            CallError::Pool(error) => Self::Pool(error),
        }
    }
}

impl<T: Transport, S: Send + Sync + 'static> Runner<T, S> {
    /// The loop over `tools`, talking to `transport`: its own iteration cap is the model-call
    /// limit + 1 (so the scope's `ModelBudget` halt always comes first), tracing spans are on,
    /// tool calls run one after another, every tool is offered.
    ///
    /// The runner keeps its own handle to the set (a [`ToolSet`] clones cheaply and shares its
    /// definitions), so it borrows nothing: it can outlive `tools` and move into a spawned task.
    pub fn new(tools: &ToolSet<S>, transport: T) -> Self {
        Self {
            tools: tools.clone(),
            transport,
            spans: true,
            options: ChatOptions::default(),
            streaming: false,
            max_iterations: None,
            disclose: false,
            calibrate: true,
            counter: Arc::new(ByteCounter),
            observers: Vec::new(),
            middleware_first: false,
            offer: Offer::All,
            concurrency: None,
        }
    }

    /// Which tools the model is offered in each request: every tool of the set (the default,
    /// [`Offer::All`]: a tool the model may see is not one it may run, and the guard refuses it),
    /// or only those the request's scope grants ([`Offer::Granted`]).
    #[must_use]
    pub fn offer(mut self, offer: Offer) -> Self {
        self.offer = offer;
        self
    }

    /// Runs the tool calls of one reply as a parallel batch of at most `cap` bodies at a time
    /// (the default is one after another).
    ///
    /// The calls are observed and admitted in the reply's order, each through the whole guard,
    /// before any body starts; the admitted bodies then run concurrently and their results
    /// enter the conversation in the reply's order, one per call. If the guard refuses a call
    /// (permission, budget, repetition), the calls admitted before it run, as they would have
    /// one after another, and the refusal then halts the run. A halt, the deadline or the
    /// caller's cancellation while the bodies run starts no further body, drops the running
    /// ones, and hands no later answer to the model; each call without an answer gets an error
    /// result saying so, so the conversation never holds an orphaned call. Under a journal,
    /// the `started` records of the bodies about to start are committed together, before them.
    ///
    /// The events are those of the sequential loop for the same reply, in the same order, as
    /// long as the bodies stop nothing themselves (a body that cancels, halts or makes calls of
    /// its own in the scope is seen at a different point).
    ///
    /// ```
    /// use loopbound::scripted::Scripted;
    /// use loopbound::{Concurrency, Limits, Message, Runner, Scope, Status, ToolBuilder, ToolSet};
    /// use schemars::JsonSchema;
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Deserialize, Serialize, JsonSchema)]
    /// struct Order {
    ///     id: u32,
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let lookup = ToolBuilder::new("lookup", "orders.read").build(|order: Order, _call| async move {
    ///     Ok::<_, String>(format!("order {}", order.id))
    /// })?;
    /// let calls = (1..=8).map(|id| ("lookup", format!(r#"{{"id":{id}}}"#)));
    /// let model = Scripted::sequence([Scripted::batch(calls)]);
    /// let runtime = Runner::new(&ToolSet::builder().add(&lookup).build()?, model).parallel(Concurrency::new(4)?);
    /// let scope = Scope::builder().grant("orders.read").limits(Limits::default().with_tool_calls(4)).build()?;
    /// let mut conversation = vec![Message::user("Look up orders 1 to 8.")];
    /// let outcome = runtime.run(&scope, &mut conversation, |_| true).await?;
    /// assert_eq!(outcome.status(), Status::ToolBudget);
    /// assert_eq!(scope.tool_calls(), 4, "four bodies ran, never eight");
    /// assert_eq!(conversation.len(), 1 + 1 + 8, "every call got a result message");
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn parallel(mut self, cap: Concurrency) -> Self {
        self.concurrency = Some(cap);
        self
    }

    /// Per-call options passed to the transport.
    #[must_use]
    pub fn options(mut self, options: ChatOptions) -> Self {
        self.options = options;
        self
    }

    /// Whether model calls use the transport's streaming path (default: no).
    #[must_use]
    pub fn streaming(mut self, streaming: bool) -> Self {
        self.streaming = streaming;
        self
    }

    /// Sets the loop's own iteration cap, in place of the default (the model-call limit + 1, so
    /// that the scope's `ModelBudget` halt always comes first). A run that reaches it ends
    /// without the model's text, judged by the host's completion condition.
    #[must_use]
    pub fn max_iterations(mut self, iterations: u32) -> Self {
        self.max_iterations = Some(iterations);
        self
    }

    /// Whether the loop emits its tracing spans (on by default: the run, each model call, each
    /// tool call, named after OpenTelemetry's generative-AI conventions; never an argument).
    /// Off, every span is disabled and costs nothing; the events and the outcome are the same.
    #[must_use]
    pub fn spans(mut self, spans: bool) -> Self {
        self.spans = spans;
        self
    }

    /// Tells the model the run's remaining budgets in every request (off by default), as a last
    /// instruction of the form `Remaining budget: 3 model calls, 2 tool calls, 1200 total
    /// tokens, 400µ.` (the token and cost budgets that are set), counted in the reservation.
    #[must_use]
    pub fn disclose_budgets(mut self, disclose: bool) -> Self {
        self.disclose = disclose;
        self
    }

    /// Reserves each model call after the first from the provider's own count of the last
    /// request plus the counter's count of what was appended since (on by default; `false`
    /// counts every request with the counter alone). The reservation stays an upper bound of
    /// the provider's count while the conversation keeps its earlier messages; a conversation
    /// whose earlier messages changed is counted whole by the counter again. With
    /// [`ByteCounter`], which counts about twice what a real tokenizer does, a run spends
    /// nearly all of a budget instead of stopping when the counter's estimate of the next call
    /// no longer fits (`docs/spend.md`). It trusts the provider to count consistently (its
    /// count of a request at most its count of the request's first messages plus what was
    /// appended): a report that comes back above its calibrated reservation ends the
    /// calibration for the run, so at most one call is reserved short.
    #[must_use]
    pub fn calibrate_reservations(mut self, calibrate: bool) -> Self {
        self.calibrate = calibrate;
        self
    }

    /// Counts requests for spend reservations with `counter` (default [`ByteCounter`], an upper
    /// bound that needs no model file).
    #[must_use]
    pub fn token_counter(mut self, counter: impl TokenCounter + 'static) -> Self {
        self.counter = Arc::new(counter);
        self
    }

    /// Adds an observer of tool calls, called before the guard, after the observers added
    /// before it (see [`Observer`]). [`Middleware`] is the built-in one: it records a
    /// `Middleware` event for each call it sees.
    #[must_use]
    pub fn observe(mut self, observer: impl Observer<S> + 'static) -> Self {
        // The built-in middleware, first, needs no observer's call of its own: its event is
        // recorded under the lock that counts the observation. After a host's observer it stays
        // an observer, so that the host's sees the scope without it, as it would.
        let first = !self.middleware_first && self.observers.is_empty();
        if first && (&observer as &dyn std::any::Any).is::<Middleware>() {
            self.middleware_first = true;
        } else {
            self.observers.push(Arc::new(observer));
        }
        self
    }

    /// The tools the model is offered.
    #[must_use]
    pub fn tools(&self) -> &ToolSet<S> {
        &self.tools
    }

    /// The transport.
    #[must_use]
    pub fn transport(&self) -> &T {
        &self.transport
    }

    /// Runs the loop for one request: `scope` bounds it, `conversation` receives every assistant
    /// message and tool result, and the host's completion condition `is_complete` decides, from
    /// the run as it ends ([`Ended`]: the request's state and the calls that succeeded), whether
    /// an ended run is `Completed`.
    ///
    /// # Errors
    ///
    /// [`RunError::Cancelled`] if the caller cancelled (whatever else happened);
    /// [`RunError::Provider`] if the provider answered unusably; [`RunError::Unpriced`] before
    /// anything runs, under a cost budget, if the scope's prices miss the model or a tool;
    /// [`RunError::Unsupported`] before anything runs if the transport cannot send an option of
    /// [`options`](Self::options); [`RunError::InvalidLimits`] before anything runs if a
    /// per-tool limit names a tool the set does not have ([`LimitsError::UnknownTool`](crate::LimitsError::UnknownTool)).
    pub async fn run(
        &self,
        scope: &Scope<S>,
        conversation: &mut Vec<Message>,
        is_complete: impl FnOnce(Ended<'_, S>) -> bool,
    ) -> Result<Outcome, RunError> {
        self.check_configuration(scope)?;
        let span = self.agent_span(None);
        let mut usage = None;
        let mut live = Live::default();
        let end = self.drive(scope, conversation, &mut usage, &mut live).instrument(span.clone()).await;
        let result = conclude(scope, end, usage, |state| is_complete(Ended::plain(state, live.succeeded())));
        finished(scope, &span, &result);
        result
    }

    /// Refuses to start a run whose options the transport cannot send, and, under a cost budget,
    /// one whose scope's prices miss the transport's model or a tool of the set (fail closed:
    /// never "the part that could be priced").
    pub(crate) fn check_configuration(&self, scope: &Scope<S>) -> Result<(), RunError> {
        self.transport.check_options(&self.options).map_err(RunError::Unsupported)?;
        // A per-tool limit on a tool the set does not have would limit nothing.
        let definitions = self.tools.definitions();
        if let Some((tool, _)) = scope
            .limits()
            .per_tool_calls()
            .find(|(tool, _)| !definitions.iter().any(|known| known.name == *tool))
        {
            return Err(RunError::InvalidLimits(crate::LimitsError::UnknownTool(tool.to_owned())));
        }
        if !scope.guard().cost_budgeted() {
            return Ok(());
        }
        let Some(prices) = scope.prices() else {
            return Err(RunError::Unpriced("this scope (it has no prices)".to_owned()));
        };
        match self.transport.model() {
            Some(model) if prices.model_price(model).is_some() => {}
            Some(model) => return Err(RunError::Unpriced(format!("the model {model}"))),
            None => return Err(RunError::Unpriced("the transport's model (it names none)".to_owned())),
        }
        match self.tools.definitions().iter().find(|tool| prices.tool_price(&tool.name).is_none()) {
            Some(tool) => Err(RunError::Unpriced(format!("the tool {}", tool.name))),
            None => Ok(()),
        }
    }

    pub(crate) async fn drive<C: Course<T, S>>(
        &self,
        scope: &Scope<S>,
        conversation: &mut Vec<Message>,
        usage: &mut Option<Usage>,
        course: &mut C,
    ) -> End {
        let model = Budgeted::with_counter(scope, &self.transport, &*self.counter)
            .disclosing(self.disclose)
            .calibrating(self.calibrate);
        let end = self.turns(scope, &model, conversation, usage, course).await;
        match end {
            End::Stopped(Stop::Halted(reason))
                if reason.is_limit() && scope.limits().wrap_up_tokens().is_some() =>
            {
                self.wrap_up(&model, conversation, usage, reason).await
            }
            end => end,
        }
    }

    /// The one call a wrap-up kept aside, after a limit stopped the run: its text, if it gave
    /// one, ends the conversation; its tool calls are dropped.
    async fn wrap_up(
        &self,
        model: &Budgeted<'_, T>,
        conversation: &mut Vec<Message>,
        usage: &mut Option<Usage>,
        reason: crate::event::HaltReason,
    ) -> End {
        match model.wrap_up(conversation, &self.options).await {
            Ok(reply) => {
                if let Some(reported) = reply.usage {
                    *usage.get_or_insert_with(Usage::default) += reported;
                }
                if let Some(text) = &reply.content {
                    conversation.push(Message::assistant_parts(Some(text.clone()), Vec::new()));
                }
                End::WrappedUp(reason, reply.content)
            }
            // Nothing came of it: the run ends on its limit, as without a wrap-up.
            Err(_) => End::Stopped(Stop::Halted(reason)),
        }
    }

    /// The loop's turns: a model call, then its tool calls, until the run ends.
    async fn turns<C: Course<T, S>>(
        &self,
        scope: &Scope<S>,
        model: &Budgeted<'_, T>,
        conversation: &mut Vec<Message>,
        usage: &mut Option<Usage>,
        course: &mut C,
    ) -> End {
        let tools = self.offered(scope);
        let feeds = scope.guard().feeds();
        let cap = self.max_iterations.unwrap_or_else(|| scope.limits().model_calls().saturating_add(1));
        for iteration in 1..=cap {
            feeds.begin_reply(iteration);
            let reply = match course.reply(self, model, conversation, &tools).await {
                Ok(reply) => reply,
                Err(end) => return end,
            };
            feeds.end_reply(reply.content.as_deref());
            if let Some(reported) = reply.usage {
                *usage.get_or_insert_with(Usage::default) += reported;
            }
            if reply.tool_calls.is_empty() {
                return End::Reply(reply.content);
            }
            // Boxed: a run waits on its model far longer than on its tools, and the run's own
            // future is then as large as a model call needs; a reply's tool calls get their
            // room when the reply asks for them.
            let (results, stopped) = Box::pin(self.answer(scope, course, iteration, &reply.tool_calls)).await;
            conversation.push(Message::assistant_parts(reply.content, reply.tool_calls));
            conversation.extend(results);
            if let Some(end) = stopped {
                return end;
            }
        }
        End::CapReached
    }

    /// The definitions the model is offered in `scope`'s requests.
    fn offered(&self, scope: &Scope<S>) -> Cow<'_, [ToolDefinition]> {
        match self.offer {
            Offer::Granted => Cow::Owned(
                self.tools
                    .definitions()
                    .iter()
                    .filter(|definition| {
                        self.tools
                            .get(&definition.name)
                            .is_some_and(|tool| scope.is_granted(tool.capability()))
                    })
                    .cloned()
                    .collect(),
            ),
            Offer::All => Cow::Borrowed(self.tools.definitions()),
        }
    }

    /// One model call: admitted, then sent.
    pub(crate) async fn call_model(
        &self,
        model: &Budgeted<'_, T>,
        conversation: &[Message],
        tools: &[ToolDefinition],
    ) -> Result<ModelReply, CallError> {
        let call = self.admit_model_call(model, conversation, tools).await?;
        self.send_model_call(model, call, conversation, tools).await
    }

    /// Admits one model call (counted, and reserved under a spend budget or a pool) without
    /// sending it.
    pub(crate) async fn admit_model_call(
        &self,
        model: &Budgeted<'_, T>,
        conversation: &[Message],
        tools: &[ToolDefinition],
    ) -> Result<ModelCall, CallError> {
        let span = self.chat_span();
        let prepared = model.prepare(conversation, tools, &self.options).instrument(span.clone()).await?;
        Ok(ModelCall { prepared, span })
    }

    /// Sends a model call admitted by [`admit_model_call`](Self::admit_model_call).
    ///
    /// An `async` block, not an `async fn`: the call is kept once, in place, for as long as it
    /// waits (an `async fn` would keep its argument and the local it moves it into).
    #[allow(clippy::manual_async_fn, reason = "an `async fn` would keep its by-value argument twice")]
    pub(crate) fn send_model_call<'s>(
        &'s self,
        model: &'s Budgeted<'_, T>,
        call: ModelCall,
        conversation: &'s [Message],
        tools: &'s [ToolDefinition],
    ) -> impl Future<Output = Result<ModelReply, CallError>> + Send + 's {
        async move {
            let sent = model.send(&call.prepared, conversation, tools, self.streaming);
            let reply = sent.instrument(call.span.clone()).await;
            match &reply {
                Ok(reply) => {
                    if let Some(usage) = reply.usage {
                        telemetry::record_usage(&call.span, usage);
                    }
                }
                Err(CallError::Transport(error)) => {
                    call.span.record("error.type", transport_error_type(error));
                }
                Err(_) => {}
            }
            reply
        }
    }

    /// The cancellation checks, then the host's observers, for one call to `tool`.
    pub(crate) fn observe_call(
        &self,
        scope: &Scope<S>,
        tool: &Arc<str>,
        call: &ToolCall,
    ) -> Result<(), Stop> {
        let count = scope.guard().observe_call(tool, self.middleware_first)?;
        if !self.observers.is_empty() {
            let observation = Observation { tool, call_id: &call.id, count, scope };
            for observer in &self.observers {
                observer.observe(&observation);
            }
        }
        Ok(())
    }
}

/// What a transport error says, with the causes its sources give, joined by `: ` (a cause
/// that repeats the one before is left out).
fn describe(error: &TransportError) -> String {
    let mut text = error.message().to_owned();
    let mut last = String::new();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let words = cause.to_string();
        if !words.is_empty() && words != last {
            text.push_str(": ");
            text.push_str(&words);
            last = words;
        }
        source = cause.source();
    }
    text
}

/// The `error.type` of a model call that failed: the transport error's kind.
fn transport_error_type(error: &TransportError) -> &'static str {
    match error.kind() {
        crate::transport::TransportErrorKind::Unavailable => "unavailable",
        crate::transport::TransportErrorKind::Authentication => "authentication",
        crate::transport::TransportErrorKind::Malformed => "malformed",
        crate::transport::TransportErrorKind::Cancelled => "cancelled",
        crate::transport::TransportErrorKind::TooManyCalls { .. } => "too_many_calls",
        crate::transport::TransportErrorKind::Unsupported => "unsupported",
        _ => "_OTHER",
    }
}

/// Ends a run: its span learns how, and a watcher gets its last update.
pub(crate) fn finished<S>(scope: &Scope<S>, span: &tracing::Span, result: &Result<Outcome, RunError>) {
    record_end(span, result);
    if let Some(feed) = scope.guard().feed() {
        feed.finish(result);
    }
}

/// The error result the model gets for a call that failed without ending the run.
pub(crate) fn error_message(call: &ToolCall, error: &ToolError) -> Message {
    let message = error.model_message().unwrap_or_else(|| error.to_string());
    Message::tool_error(call.id.clone(), message)
}

/// Decides the outcome: the caller's cancellation first, then a recorded halt, then how the
/// loop ended.
pub(crate) fn conclude<S>(
    scope: &Scope<S>,
    end: End,
    usage: Option<Usage>,
    is_complete: impl FnOnce(&S) -> bool,
) -> Result<Outcome, RunError> {
    if scope.guard().cancelled_by_caller() {
        return Err(RunError::Cancelled);
    }
    let spend = scope.spend();
    concluded(scope, end, usage, is_complete).map(|outcome| outcome.spent(spend))
}

/// The outcome of a run that was not cancelled.
fn concluded<S>(
    scope: &Scope<S>,
    end: End,
    usage: Option<Usage>,
    is_complete: impl FnOnce(&S) -> bool,
) -> Result<Outcome, RunError> {
    let events = scope.events();
    // A wrap-up follows a recorded halt: its outcome is that halt's, with the wrap-up's text.
    // A halt says more than its reason when a shared pool refused the call.
    let detail = scope.guard().halt_detail();
    if let Some(reason) = scope.stop_reason()
        && !matches!(end, End::WrappedUp(..))
    {
        return Ok(Outcome::stopped(reason.into(), events, usage, detail));
    }
    match end {
        End::Reply(text) => Ok(Outcome::ended(is_complete(scope.state()), text, events, usage)),
        End::CapReached => Ok(Outcome::ended(is_complete(scope.state()), None, events, usage)),
        End::Stopped(Stop::Halted(reason)) => Ok(Outcome::stopped(reason.into(), events, usage, detail)),
        End::Stopped(Stop::Cancelled) => Err(RunError::Cancelled),
        End::Transport(error) if error.is_unavailable() => {
            Ok(Outcome::stopped(Status::ProviderUnavailable, events, usage, Some(describe(&error))))
        }
        End::Transport(error) if error.kind() == crate::transport::TransportErrorKind::Unsupported => {
            Err(RunError::Unsupported(error))
        }
        End::Transport(error) => Err(RunError::Provider(error)),
        #[cfg(feature = "journal")]
        End::Suspended(status, operation) => {
            Ok(Outcome::stopped(status, events, usage, None).on(Some(operation)))
        }
        #[cfg(feature = "journal")]
        End::Awaiting(proposal) => {
            let operation = proposal.operation().shared();
            Ok(Outcome::stopped(Status::AwaitingApproval, events, usage, None)
                .on(Some(operation))
                .awaiting(proposal))
        }
        #[cfg(feature = "journal")]
        End::Journal(error) => Err(RunError::Journal(error)),
        #[cfg(feature = "pools")]
        End::Pool(error) => Err(RunError::Pool(error)),
        End::WrappedUp(reason, text) => {
            Ok(Outcome::stopped(reason.into(), events, usage, detail).partial(text))
        }
    }
}
