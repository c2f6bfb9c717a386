//! The model budget: a transport, borrowed for one request, whose every call is counted before
//! it is sent.
//!
//! # Invariants
//!
//! - Every call, streaming or not, first passes the scope's model admission: cancellation check,
//!   then the model budget, under the scope's lock. A refused call is never sent.
//! - The call (for a stream: opening it and reading every chunk) is raced against the scope, so
//!   a transport that ignores cancellation is dropped when the deadline passes, the scope halts
//!   or the caller cancels.
//! - After the call returns, the scope is checked again, so a reply that arrives after a stop is
//!   not handed on.
//! - Every reply handed on is within the scope's [`ReplyBounds`](super::ReplyBounds): a streamed
//!   reply is assembled under them (reading stops at the chunk that crosses one), a whole reply
//!   is checked before it is handed on. A reply with too many tool calls halts the scope with
//!   `TooManyCalls` before any of its calls is seen; a reply too long is a provider error.

use std::fmt;
use std::future::poll_fn;
use std::pin::pin;

use futures_core::Stream;

use super::{
    ChatOptions, ChatRequest, Message, ModelReply, ReplyAssembler, ToolDefinition, Transport, TransportError,
    TransportErrorKind,
};
use crate::guard::{Activity, Guard, Stop};
use crate::scope::Scope;

/// A transport whose calls count against one scope's model budget.
///
/// ```
/// use loopbound::Scope;
/// use loopbound::scripted::{Step, sequence};
/// use loopbound::transport::{Budgeted, CallError, ChatOptions, ModelReply};
/// use loopbound::{HaltReason, Limits, Stop};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let scope = Scope::builder().limits(Limits::default().with_model_calls(1)).build()?;
/// let model = sequence(vec![Step::Reply(ModelReply::text("hello")), Step::Reply(ModelReply::text("again"))]);
/// let budgeted = Budgeted::new(&scope, &model);
/// let options = ChatOptions::default();
/// assert_eq!(budgeted.complete(&[], &[], &options).await?.content.as_deref(), Some("hello"));
/// let refused = budgeted.complete(&[], &[], &options).await;
/// assert_eq!(refused, Err(CallError::Stopped(Stop::Halted(HaltReason::ModelBudget))));
/// assert_eq!(model.calls(), 1, "the refused call was never sent");
/// # Ok(())
/// # }
/// ```
pub struct Budgeted<'a, T> {
    transport: &'a T,
    guard: &'a Guard,
}

impl<T> fmt::Debug for Budgeted<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Budgeted").finish_non_exhaustive()
    }
}

/// Why a budgeted call produced no reply.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallError {
    /// The scope refused the call or stopped during it.
    Stopped(Stop),
    /// The transport failed.
    Transport(TransportError),
}

impl fmt::Display for CallError {
    /// Writes the inner error's words: a `CallError` is transparent, and its
    /// [`source`](std::error::Error::source) is the inner error's own source.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Stopped(stop) => stop.fmt(f),
            Self::Transport(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for CallError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Stopped(_) => None,
            Self::Transport(error) => error.source(),
        }
    }
}

impl<'a, T: Transport> Budgeted<'a, T> {
    /// `transport`, with its calls counted against `scope`'s model budget.
    pub fn new<S>(scope: &'a Scope<S>, transport: &'a T) -> Self {
        Self { transport, guard: scope.guard() }
    }

    /// Counts one model call, then sends it and returns the whole reply.
    ///
    /// # Errors
    ///
    /// [`CallError::Stopped`] if the scope refused or stopped the call;
    /// [`CallError::Transport`] if the transport failed.
    pub async fn complete(
        &self,
        messages: &[Message],
        tools: &[ToolDefinition],
        options: &ChatOptions,
    ) -> Result<ModelReply, CallError> {
        self.call(self.request(messages, tools, options), |request| self.transport.complete(request)).await
    }

    /// Counts one model call, then sends it as a stream and assembles the chunks.
    ///
    /// # Errors
    ///
    /// As [`complete`](Self::complete); an error chunk ends the stream with that error.
    pub async fn stream(
        &self,
        messages: &[Message],
        tools: &[ToolDefinition],
        options: &ChatOptions,
    ) -> Result<ModelReply, CallError> {
        self.call(self.request(messages, tools, options), |request| async move {
            let mut chunks = pin!(self.transport.stream(request).await?);
            let mut assembler = ReplyAssembler::new(request.bounds);
            while let Some(chunk) = poll_fn(|cx| chunks.as_mut().poll_next(cx)).await {
                // A chunk past the bounds ends the read: the stream is dropped unread.
                assembler.push(chunk?)?;
            }
            Ok(assembler.finish())
        })
        .await
    }

    /// The request of one call: the scope's token and reply bounds.
    fn request<'r>(
        &self,
        messages: &'r [Message],
        tools: &'r [ToolDefinition],
        options: &'r ChatOptions,
    ) -> ChatRequest<'r>
    where
        'a: 'r,
    {
        ChatRequest::new(messages, tools, options, self.guard.token())
            .with_bounds(self.guard.limits().reply_bounds())
    }

    /// The budget around one call: admit it, send it raced against the scope, check the scope
    /// again, then the reply's bounds.
    async fn call<'r, F>(
        &self,
        request: ChatRequest<'r>,
        send: impl FnOnce(ChatRequest<'r>) -> F,
    ) -> Result<ModelReply, CallError>
    where
        F: Future<Output = Result<ModelReply, TransportError>>,
    {
        let bounds = request.bounds;
        self.guard.admit_model().map_err(CallError::Stopped)?;
        let model = Activity::Model;
        let reply = self.guard.bounded(model, send(request)).await.map_err(CallError::Stopped)?;
        self.guard.check(model).map_err(CallError::Stopped)?;
        match reply.and_then(|reply| bounds.check(&reply).map(|()| reply)) {
            Ok(reply) => Ok(reply),
            Err(error) if matches!(error.kind(), TransportErrorKind::TooManyCalls { .. }) => {
                Err(CallError::Stopped(self.guard.refuse_reply()))
            }
            Err(error) => Err(CallError::Transport(error)),
        }
    }
}
