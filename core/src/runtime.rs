//! The tool-calling loop and its two compositions.
//!
//! Both compositions run the same loop over the same scope: call the transport with the
//! conversation and the tool definitions; if the reply asks for tools, run them one after
//! another in order, append the assistant message and one result per call, and loop; otherwise
//! the reply's text ends the run.
//!
//! # Invariants
//!
//! - Every model call goes through [`Budgeted`]; every tool call goes through the
//!   function-invocation middleware (which records a `Middleware` event) and then the tool's
//!   guard. The runtime holds no bypass.
//! - An unknown tool, a binding failure and a body error become error results for the model and
//!   the loop goes on; an unknown tool moves no counter.
//! - A halt, the deadline and the caller's cancellation end the loop at once. The caller is
//!   consulted last, so its cancellation wins every race.
//! - The iteration cap of `harness` is the model-call limit + 1, so the scope's `ModelBudget`
//!   always fires before the cap.

use std::fmt;

use tracing::Instrument;

use crate::budget::{Budgeted, CallError};
use crate::limits::Limits;
use crate::outcome::{Outcome, RunError, Status};
use crate::scope::Scope;
use crate::stop::Stop;
use crate::tool::{MAX_MESSAGE_LEN, ToolError, run_body, truncate};
use crate::transport::{
    ChatOptions, Message, ModelReply, ToolCall, ToolDefinition, Transport, TransportError, Usage,
};

/// Iteration cap of the [`Composition::Simple`] loop, the common default of agent loops.
pub const SIMPLE_MAX_ITERATIONS: u32 = 40;

/// Optional capabilities that richer agent runtimes bring and that neither composition has.
pub const ABSENT_CAPABILITIES: &[&str] = &[
    "todo tracking",
    "agent modes",
    "file memory",
    "skill discovery",
    "web search",
    "permanent tool auto-approval",
    "shell",
    "shared file store",
    "background agents",
    "external loop evaluator",
    "context compaction",
];

/// How the loop is composed. Both run the same loop over the same guarded tools and scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Composition {
    /// Iteration cap = model-call limit + 1, tracing spans on, every optional capability absent.
    Harness,
    /// The plain loop with the common cap of 40 iterations and no spans.
    Simple,
}

impl Composition {
    /// `harness` or `simple`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Harness => "harness",
            Self::Simple => "simple",
        }
    }

    /// The loop's own iteration cap under `limits`.
    #[must_use]
    pub const fn max_iterations(self, limits: &Limits) -> u32 {
        match self {
            Self::Harness => limits.model_calls().saturating_add(1),
            Self::Simple => SIMPLE_MAX_ITERATIONS,
        }
    }

    /// Whether the loop emits tracing spans (run, model call, tool call; never arguments).
    #[must_use]
    pub const fn telemetry(self) -> bool {
        matches!(self, Self::Harness)
    }

    /// A one-paragraph description for headers: cap, telemetry and absent capabilities.
    #[must_use]
    pub fn describe(self, limits: &Limits) -> String {
        let telemetry = if self.telemetry() { "tracing spans on" } else { "no telemetry" };
        format!(
            "{} loop, iteration cap {}, {telemetry}; absent: {}",
            self.name(),
            self.max_iterations(limits),
            ABSENT_CAPABILITIES.join(", ")
        )
    }
}

impl fmt::Display for Composition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The tool-calling loop over one scope.
///
/// ```
/// use loopbound::scripted::{Scripted, Step};
/// use loopbound::{Message, ModelReply, Runtime, Scope, Status};
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
/// let scope = Scope::builder().grant("ticket.read").build()?;
/// scope.tool("read_ticket", "ticket.read").build(|t: Ticket, _| async move {
///     Ok::<_, String>(format!("ticket {}", t.input))
/// })?;
/// // A model that asks for the same ticket forever.
/// let model = Scripted::new(|n, _| Step::Reply(ModelReply::call(format!("c{n}"), "read_ticket", r#"{"input":42}"#)));
///
/// let outcome = Runtime::harness(&scope, model).run(&mut vec![Message::user("Review 42.")], || false).await?;
/// assert_eq!(outcome.status(), Status::RepeatedCall);
/// assert_eq!(outcome.text(), None);
/// assert_eq!(scope.tool_calls(), 1);
/// assert_eq!(outcome.exit_code(), 2);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Runtime<T> {
    scope: Scope,
    transport: Budgeted<T>,
    composition: Composition,
    options: ChatOptions,
    streaming: bool,
}

/// Why the loop ended, before the outcome is decided.
enum End {
    Reply(Option<String>),
    CapReached,
    Stopped(Stop),
    Transport(TransportError),
}

impl<T: Transport> Runtime<T> {
    /// The `harness` composition over `scope`, talking to `transport`.
    pub fn harness(scope: &Scope, transport: T) -> Self {
        Self::new(Composition::Harness, scope, transport)
    }

    /// The `simple` composition over `scope`, talking to `transport`.
    pub fn simple(scope: &Scope, transport: T) -> Self {
        Self::new(Composition::Simple, scope, transport)
    }

    /// A runtime of the given composition.
    pub fn new(composition: Composition, scope: &Scope, transport: T) -> Self {
        Self {
            scope: scope.clone(),
            transport: Budgeted::new(scope, transport),
            composition,
            options: ChatOptions::default(),
            streaming: false,
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

    /// The composition.
    #[must_use]
    pub fn composition(&self) -> Composition {
        self.composition
    }

    /// The loop's iteration cap.
    #[must_use]
    pub fn max_iterations(&self) -> u32 {
        self.composition.max_iterations(&self.scope.limits())
    }

    /// The scope this runtime is bound to.
    #[must_use]
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// The transport, without its budget.
    #[must_use]
    pub fn transport(&self) -> &T {
        self.transport.inner()
    }

    /// Runs the loop on `conversation`, which receives every assistant message and tool result,
    /// and decides the outcome with the host's completion condition `is_complete`.
    ///
    /// # Errors
    ///
    /// [`RunError::Cancelled`] if the caller cancelled (whatever else happened);
    /// [`RunError::Provider`] if the provider answered unusably.
    pub async fn run(
        &self,
        conversation: &mut Vec<Message>,
        is_complete: impl Fn() -> bool,
    ) -> Result<Outcome, RunError> {
        let mut usage = None;
        let end = if self.composition.telemetry() {
            let span = tracing::info_span!("loopbound.run", composition = self.composition.name());
            self.drive(conversation, &mut usage).instrument(span).await
        } else {
            self.drive(conversation, &mut usage).await
        };
        self.conclude(end, usage, is_complete)
    }

    async fn drive(&self, conversation: &mut Vec<Message>, usage: &mut Option<Usage>) -> End {
        let tools = self.scope.tool_definitions();
        for _ in 0..self.max_iterations() {
            let reply = match self.call_model(conversation, &tools).await {
                Ok(reply) => reply,
                Err(CallError::Stopped(stop)) => return End::Stopped(stop),
                Err(CallError::Transport(error)) => return End::Transport(error),
            };
            if let Some(reported) = reply.usage {
                *usage.get_or_insert_with(Usage::default) += reported;
            }
            if reply.tool_calls.is_empty() {
                return End::Reply(reply.content);
            }
            let mut results = Vec::with_capacity(reply.tool_calls.len());
            let mut stopped = None;
            for call in &reply.tool_calls {
                match self.call_tool(call).await {
                    Ok(text) => results.push(Message::tool_result(call.id.clone(), text)),
                    Err(ToolError::Stopped(stop)) => {
                        stopped = Some(stop);
                        break;
                    }
                    Err(error) => {
                        let message = error.model_message().unwrap_or_else(|| error.to_string());
                        results.push(Message::tool_error(call.id.clone(), message));
                    }
                }
            }
            conversation.push(Message::Assistant { content: reply.content, tool_calls: reply.tool_calls });
            conversation.extend(results);
            if let Some(stop) = stopped {
                return End::Stopped(stop);
            }
        }
        End::CapReached
    }

    async fn call_model(
        &self,
        conversation: &[Message],
        tools: &[ToolDefinition],
    ) -> Result<ModelReply, CallError> {
        let call = async {
            if self.streaming {
                self.transport.stream(conversation, tools, &self.options).await
            } else {
                self.transport.complete(conversation, tools, &self.options).await
            }
        };
        if self.composition.telemetry() {
            call.instrument(tracing::info_span!("loopbound.model_call", streaming = self.streaming)).await
        } else {
            call.await
        }
    }

    /// Middleware, then the guard, then the body.
    async fn call_tool(&self, call: &ToolCall) -> Result<String, ToolError> {
        let Some(tool) = self.scope.find_tool(&call.name) else {
            return Err(ToolError::NotFound { name: truncate(&call.name, MAX_MESSAGE_LEN).to_owned() });
        };
        let shared = &self.scope.shared;
        shared.observe_middleware(tool.name()).map_err(ToolError::Stopped)?;
        let invocation = async {
            let body = tool.start_json(&call.arguments)?;
            run_body(shared, tool.name(), body).await
        };
        if self.composition.telemetry() {
            invocation.instrument(tracing::info_span!("loopbound.tool_call", tool = &*call.name)).await
        } else {
            invocation.await
        }
    }

    fn conclude(
        &self,
        end: End,
        usage: Option<Usage>,
        is_complete: impl Fn() -> bool,
    ) -> Result<Outcome, RunError> {
        if self.scope.caller_token().is_cancelled() {
            return Err(RunError::Cancelled);
        }
        let events = self.scope.events();
        if let Some(reason) = self.scope.stop_reason() {
            return Ok(Outcome::stopped(reason.into(), events, usage, None));
        }
        match end {
            End::Reply(text) => Ok(Outcome::ended(is_complete(), text, events, usage)),
            End::CapReached => Ok(Outcome::ended(is_complete(), None, events, usage)),
            End::Stopped(Stop::Halted(reason)) => Ok(Outcome::stopped(reason.into(), events, usage, None)),
            End::Stopped(Stop::Cancelled) => Err(RunError::Cancelled),
            End::Transport(TransportError::Unavailable(message)) => {
                Ok(Outcome::stopped(Status::ProviderUnavailable, events, usage, Some(message)))
            }
            End::Transport(error) => Err(RunError::Provider(error)),
        }
    }
}
