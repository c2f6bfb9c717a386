//! The model budget: a transport wrapper that counts every call before it is sent.
//!
//! # Invariants
//!
//! - Every call, streaming or not, first passes [`Scope::admit_model`]: cancellation check, then
//!   the model budget, under the scope's lock. A refused call is never sent.
//! - The call (for a stream: opening it and reading every chunk) is raced against the scope, so
//!   a transport that ignores cancellation is dropped when the deadline passes, the scope halts
//!   or the caller cancels.
//! - After the call returns, the scope is checked again, so a reply that arrives after a stop is
//!   not handed on.

use std::fmt;
use std::future::poll_fn;
use std::pin::pin;

use futures_core::Stream;

use crate::ledger::Activity;
use crate::scope::Scope;
use crate::stop::Stop;
use crate::transport::{
    ChatOptions, ChatRequest, Message, ModelReply, ReplyAssembler, ToolDefinition, Transport, TransportError,
};

/// A transport whose calls count against the scope's model budget.
#[derive(Debug)]
pub struct Budgeted<T> {
    inner: T,
    scope: Scope,
}

/// Why a budgeted call produced no reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallError {
    /// The scope refused the call or stopped during it.
    Stopped(Stop),
    /// The transport failed.
    Transport(TransportError),
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Stopped(stop) => stop.fmt(f),
            Self::Transport(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for CallError {}

impl<T: Transport> Budgeted<T> {
    /// Wraps `inner` so that its calls count against `scope`'s model budget.
    pub fn new(scope: &Scope, inner: T) -> Self {
        Self { inner, scope: scope.clone() }
    }

    /// The wrapped transport.
    pub fn inner(&self) -> &T {
        &self.inner
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
        self.call(ChatRequest::new(messages, tools, options, self.scope.token()), |request| {
            self.inner.complete(request)
        })
        .await
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
        self.call(ChatRequest::new(messages, tools, options, self.scope.token()), |request| async move {
            let mut chunks = pin!(self.inner.stream(request).await?);
            let mut assembler = ReplyAssembler::default();
            while let Some(chunk) = poll_fn(|cx| chunks.as_mut().poll_next(cx)).await {
                assembler.push(chunk?);
            }
            Ok(assembler.finish())
        })
        .await
    }

    /// The budget around one call: admit it, send it raced against the scope, check the scope
    /// again.
    async fn call<'r, F>(
        &self,
        request: ChatRequest<'r>,
        send: impl FnOnce(ChatRequest<'r>) -> F,
    ) -> Result<ModelReply, CallError>
    where
        F: Future<Output = Result<ModelReply, TransportError>>,
    {
        self.scope.admit_model().map_err(CallError::Stopped)?;
        let reply = self.bounded(send(request)).await?;
        self.recheck()?;
        reply.map_err(CallError::Transport)
    }

    async fn bounded<F: Future>(&self, future: F) -> Result<F::Output, CallError> {
        let shared = &self.scope.shared;
        shared.bounded(Activity::Model(shared.model_name()), future).await.map_err(CallError::Stopped)
    }

    fn recheck(&self) -> Result<(), CallError> {
        let shared = &self.scope.shared;
        shared.check(Activity::Model(shared.model_name())).map_err(CallError::Stopped)
    }
}
