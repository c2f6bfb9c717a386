//! Where the loop's model replies and tool answers come from: asked for live, or, in a
//! journaled run, replayed from the journal and recorded there.
//!
//! # Invariants
//!
//! - The loop itself is one: both courses go through the same iteration cap, the same handling
//!   of replies, and the same conversation updates; only the source of a step differs.
//! - [`Live`] is the plain run: every reply is a counted model call, every answer goes through
//!   middleware, observers, guard and body.

use std::future::Future;

use super::{End, Runtime};
use crate::scope::Scope;
use crate::transport::{Budgeted, Message, ModelReply, ToolCall, ToolDefinition, Transport};

/// What one tool call gives the loop: a message for the model, or the end of the run.
pub(crate) enum Turn {
    Answer(Message),
    End(End),
}

/// A source of the loop's steps.
pub(crate) trait Course<T, S> {
    /// The next model reply, or how the run ends instead.
    fn reply(
        &mut self,
        runtime: &Runtime<T, S>,
        model: &Budgeted<'_, T>,
        conversation: &[Message],
        tools: &[ToolDefinition],
    ) -> impl Future<Output = Result<ModelReply, End>> + Send;

    /// The answer to call `index` of the current reply.
    fn tool(
        &mut self,
        runtime: &Runtime<T, S>,
        scope: &Scope<S>,
        index: usize,
        call: &ToolCall,
    ) -> impl Future<Output = Turn> + Send;
}

/// The plain run: everything live, nothing recorded.
pub(crate) struct Live;

impl<T: Transport, S: Send + Sync + 'static> Course<T, S> for Live {
    fn reply(
        &mut self,
        runtime: &Runtime<T, S>,
        model: &Budgeted<'_, T>,
        conversation: &[Message],
        tools: &[ToolDefinition],
    ) -> impl Future<Output = Result<ModelReply, End>> + Send {
        let call = runtime.call_model(model, conversation, tools);
        async move { call.await.map_err(End::from) }
    }

    fn tool(
        &mut self,
        runtime: &Runtime<T, S>,
        scope: &Scope<S>,
        _index: usize,
        call: &ToolCall,
    ) -> impl Future<Output = Turn> + Send {
        runtime.answer(scope, call)
    }
}
