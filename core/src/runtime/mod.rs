//! The tool-calling loop: one runtime, defined once, runs any number of requests.
//!
//! Both compositions run the same loop over the same scope: call the transport with the
//! conversation and the tool definitions; if the reply asks for tools, run them one after
//! another in order, append the assistant message and one result per call, and loop; otherwise
//! the reply's text ends the run.
//!
//! # Invariants
//!
//! - Every model call goes through [`Budgeted`]; every tool call goes through the
//!   function-invocation middleware (which records a `Middleware` event), then the host's
//!   observers, then the tool's guard. The runtime holds no bypass.
//! - An unknown tool, a binding failure and a body error become error results for the model and
//!   the loop goes on; an unknown tool moves no counter.
//! - A halt, the deadline and the caller's cancellation end the loop at once. The caller is
//!   consulted last, so its cancellation wins every race.
//! - A runtime holds no per-request state: [`Runtime::run`] takes the request's scope, so one
//!   runtime serves concurrent requests.

mod composition;
mod course;
mod observer;

use std::fmt;
use std::sync::Arc;

use tracing::Instrument;

pub use composition::Composition;
pub(crate) use course::{Course, Live, Turn};
pub use observer::{Observation, Observer};

use crate::guard::Stop;
use crate::outcome::{Outcome, RunError, Status};
use crate::scope::Scope;
use crate::tool::{ToolError, ToolSet, finish};
use crate::transport::{
    Budgeted, CallError, ChatOptions, Message, ModelReply, ToolCall, ToolDefinition, Transport,
    TransportError, Usage,
};

/// The tool-calling loop over a set of tools and a transport, shared by every request.
///
/// ```
/// use loopbound::scripted::{Scripted, Step};
/// use loopbound::transport::ModelReply;
/// use loopbound::{Message, Runtime, Scope, Status, ToolSet};
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
/// let mut tools = ToolSet::builder();
/// tools.tool("read_ticket", "ticket.read").build(|t: Ticket, _call| async move {
///     Ok::<_, String>(format!("ticket {}", t.input))
/// })?;
/// // A model that asks for the same ticket forever.
/// let model = Scripted::new(|n, _| Step::Reply(ModelReply::call(format!("c{n}"), "read_ticket", r#"{"input":42}"#)));
/// let runtime = Runtime::harness(&tools.build(), model);
///
/// let scope = Scope::builder().grant("ticket.read").build()?;
/// let outcome = runtime.run(&scope, &mut vec![Message::user("Review 42.")], |_| false).await?;
/// assert_eq!(outcome.status(), Status::RepeatedCall);
/// assert_eq!(outcome.text(), None);
/// assert_eq!(scope.tool_calls(), 1);
/// # Ok(())
/// # }
/// ```
pub struct Runtime<T, S = ()> {
    tools: ToolSet<S>,
    transport: T,
    composition: Composition,
    options: ChatOptions,
    streaming: bool,
    max_iterations: Option<u32>,
    observers: Vec<Arc<dyn Observer<S>>>,
}

impl<T: fmt::Debug, S> fmt::Debug for Runtime<T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("composition", &self.composition)
            .field("transport", &self.transport)
            .field("streaming", &self.streaming)
            .field("observers", &self.observers.len())
            .finish_non_exhaustive()
    }
}

/// Why the loop ended, before the outcome is decided.
pub(crate) enum End {
    Reply(Option<String>),
    CapReached,
    Stopped(Stop),
    Transport(TransportError),
    /// A journaled run stopped on an operation: `Ambiguous`.
    Suspended(Status, Arc<str>),
    /// A journaled run stopped on this proposal, which waits for the host's decision.
    Awaiting(Box<crate::journal::Proposal>),
    /// A journaled run's journal failed: nothing more ran.
    Journal(crate::journal::JournalError),
}

impl From<CallError> for End {
    fn from(error: CallError) -> Self {
        match error {
            CallError::Stopped(stop) => Self::Stopped(stop),
            CallError::Transport(error) => Self::Transport(error),
        }
    }
}

impl<T: Transport, S: Send + Sync + 'static> Runtime<T, S> {
    /// The `harness` composition over `tools`, talking to `transport`.
    pub fn harness(tools: &ToolSet<S>, transport: T) -> Self {
        Self::new(Composition::Harness, tools, transport)
    }

    /// The `simple` composition over `tools`, talking to `transport`.
    pub fn simple(tools: &ToolSet<S>, transport: T) -> Self {
        Self::new(Composition::Simple, tools, transport)
    }

    /// A runtime of the given composition.
    pub fn new(composition: Composition, tools: &ToolSet<S>, transport: T) -> Self {
        Self {
            tools: tools.clone(),
            transport,
            composition,
            options: ChatOptions::default(),
            streaming: false,
            max_iterations: None,
            observers: Vec::new(),
        }
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

    /// Sets the loop's own iteration cap, in place of the composition's (`harness`: the
    /// model-call limit + 1, so that the scope's `ModelBudget` halt always comes first;
    /// `simple`: 40). A run that reaches it ends without the model's text, judged by the host's
    /// completion condition.
    #[must_use]
    pub fn max_iterations(mut self, iterations: u32) -> Self {
        self.max_iterations = Some(iterations);
        self
    }

    /// Adds an observer of tool calls, called after the built-in middleware and before the
    /// guard (see [`Observer`]).
    #[must_use]
    pub fn observe(mut self, observer: impl Observer<S> + 'static) -> Self {
        self.observers.push(Arc::new(observer));
        self
    }

    /// The composition.
    #[must_use]
    pub fn composition(&self) -> Composition {
        self.composition
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
    /// the request's state, whether an ended run is `Completed`.
    ///
    /// # Errors
    ///
    /// [`RunError::Cancelled`] if the caller cancelled (whatever else happened);
    /// [`RunError::Provider`] if the provider answered unusably.
    pub async fn run(
        &self,
        scope: &Scope<S>,
        conversation: &mut Vec<Message>,
        is_complete: impl FnOnce(&S) -> bool,
    ) -> Result<Outcome, RunError> {
        let mut usage = None;
        let end = self.traced(scope, conversation, &mut usage, &mut Live).await;
        conclude(scope, end, usage, is_complete)
    }

    /// The loop, inside the run's tracing span when the composition has telemetry.
    pub(crate) async fn traced<C: Course<T, S>>(
        &self,
        scope: &Scope<S>,
        conversation: &mut Vec<Message>,
        usage: &mut Option<Usage>,
        course: &mut C,
    ) -> End {
        if self.composition.telemetry() {
            let span = tracing::info_span!("loopbound.run", composition = self.composition.name());
            self.drive(scope, conversation, usage, course).instrument(span).await
        } else {
            self.drive(scope, conversation, usage, course).await
        }
    }

    async fn drive<C: Course<T, S>>(
        &self,
        scope: &Scope<S>,
        conversation: &mut Vec<Message>,
        usage: &mut Option<Usage>,
        course: &mut C,
    ) -> End {
        let model = Budgeted::new(scope, &self.transport);
        let tools = self.tools.definitions();
        let cap = self.max_iterations.unwrap_or_else(|| self.composition.max_iterations(&scope.limits()));
        for _ in 0..cap {
            let reply = match course.reply(self, &model, conversation, tools).await {
                Ok(reply) => reply,
                Err(end) => return end,
            };
            if let Some(reported) = reply.usage {
                *usage.get_or_insert_with(Usage::default) += reported;
            }
            if reply.tool_calls.is_empty() {
                return End::Reply(reply.content);
            }
            let mut results = Vec::with_capacity(reply.tool_calls.len());
            let mut stopped = None;
            for (index, call) in reply.tool_calls.iter().enumerate() {
                match course.tool(self, scope, index, call).await {
                    Turn::Answer(message) => results.push(message),
                    Turn::End(end) => {
                        stopped = Some(end);
                        break;
                    }
                }
            }
            conversation.push(Message::Assistant { content: reply.content, tool_calls: reply.tool_calls });
            conversation.extend(results);
            if let Some(end) = stopped {
                return end;
            }
        }
        End::CapReached
    }

    /// The answer the model gets for one tool call run live: its result, or its error; or the
    /// end of the run.
    pub(crate) async fn answer(&self, scope: &Scope<S>, call: &ToolCall) -> Turn {
        match self.call_tool(scope, call).await {
            Ok(text) => Turn::Answer(Message::tool_result(call.id.clone(), text)),
            Err(ToolError::Stopped(stop)) => Turn::End(End::Stopped(stop)),
            Err(error) => Turn::Answer(error_message(call, &error)),
        }
    }

    pub(crate) async fn call_model(
        &self,
        model: &Budgeted<'_, T>,
        conversation: &[Message],
        tools: &[ToolDefinition],
    ) -> Result<ModelReply, CallError> {
        let call = async {
            if self.streaming {
                model.stream(conversation, tools, &self.options).await
            } else {
                model.complete(conversation, tools, &self.options).await
            }
        };
        if self.composition.telemetry() {
            call.instrument(tracing::info_span!("loopbound.model_call", streaming = self.streaming)).await
        } else {
            call.await
        }
    }

    /// The built-in middleware, then the host's observers, for one call to `tool`.
    pub(crate) fn observe_call(
        &self,
        scope: &Scope<S>,
        tool: &Arc<str>,
        call: &ToolCall,
    ) -> Result<(), Stop> {
        let count = scope.guard().observe_middleware(tool)?;
        if !self.observers.is_empty() {
            let observation = Observation { tool, call_id: &call.id, count, scope };
            for observer in &self.observers {
                observer.observe(&observation);
            }
        }
        Ok(())
    }

    /// Middleware, the host's observers, then the guard, then the body.
    async fn call_tool(&self, scope: &Scope<S>, call: &ToolCall) -> Result<String, ToolError> {
        let Some(tool) = self.tools.get(&call.name) else {
            return Err(ToolError::not_found(&call.name));
        };
        self.observe_call(scope, tool.name(), call)?;
        let invocation = async {
            let body = tool.start_json(scope, &call.arguments)?;
            finish(scope.guard(), tool.name(), body).await
        };
        if self.composition.telemetry() {
            invocation.instrument(tracing::info_span!("loopbound.tool_call", tool = &*call.name)).await
        } else {
            invocation.await
        }
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
    if scope.caller_token().is_cancelled() {
        return Err(RunError::Cancelled);
    }
    let events = scope.events();
    if let Some(reason) = scope.stop_reason() {
        return Ok(Outcome::stopped(reason.into(), events, usage, None));
    }
    match end {
        End::Reply(text) => Ok(Outcome::ended(is_complete(scope.state()), text, events, usage)),
        End::CapReached => Ok(Outcome::ended(is_complete(scope.state()), None, events, usage)),
        End::Stopped(Stop::Halted(reason)) => Ok(Outcome::stopped(reason.into(), events, usage, None)),
        End::Stopped(Stop::Cancelled) => Err(RunError::Cancelled),
        End::Transport(error) if error.is_unavailable() => {
            Ok(Outcome::stopped(Status::ProviderUnavailable, events, usage, Some(describe(&error))))
        }
        End::Transport(error) => Err(RunError::Provider(error)),
        End::Suspended(status, operation) => {
            Ok(Outcome::stopped(status, events, usage, None).on(Some(operation)))
        }
        End::Awaiting(proposal) => {
            let operation = proposal.operation().shared();
            Ok(Outcome::stopped(Status::AwaitingApproval, events, usage, None)
                .on(Some(operation))
                .awaiting(proposal))
        }
        End::Journal(error) => Err(RunError::Journal(error)),
    }
}
