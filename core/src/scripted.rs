//! A deterministic transport for tests, demos and benchmarks.
//!
//! A [`Scripted`] transport asks a script what to do on each call, given its number (1-based)
//! and the request, and does it: reply, hang forever, or fail. Its replies are real tool-call
//! messages that the runtime really executes. On the streaming path the same reply is cut into
//! small chunks (text in pieces, each call's arguments in fragments) and goes through the same
//! assembly as a live stream.
//!
//! A script is written with [`Scripted`]'s own functions, without naming [`Step`] or
//! [`ModelReply`]: [`Scripted::call`], [`Scripted::batch`], [`Scripted::reply`],
//! [`Scripted::fail`], [`Scripted::unavailable`] and [`Scripted::hang`] make the steps, and
//! [`Scripted::sequence`] plays them in order.
//!
//! ```
//! use loopbound::scripted::Scripted;
//!
//! // One step per turn of the conversation.
//! let model = Scripted::sequence([
//!     Scripted::call("read_ticket", r#"{"input":42}"#).usage(120, 8),
//!     Scripted::reply("Review finished."),
//! ]);
//! // Or a step computed from the call number: a model that never stops asking.
//! let forever = Scripted::new(|n, _| Scripted::call("read_ticket", format!(r#"{{"input":{n}}}"#)));
//! # let _ = (model, forever);
//! ```
//!
//! # Invariants
//!
//! - [`Scripted::sequence`] keys its steps on the conversation, not on the call number: the
//!   request's [`turn`] (one more than its assistant messages) picks the step. So a journaled run
//!   resumed in another process, which replays its recorded replies without asking the transport,
//!   asks a fresh scripted transport for exactly the next step.
//! - A tool call played without an id gets one from the turn: `c{turn}` for a reply's only call,
//!   `c{turn}_{i}` (from 1) for each of several. The same conversation gets the same ids.

use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};

use futures_core::Stream;

use crate::transport::{
    ChatRequest, ChunkStream, ModelReply, ReplyChunk, ToolCall, ToolCallDelta, Transport, TransportError,
    Usage,
};

/// What a scripted call does. Made by [`Scripted::call`], [`Scripted::reply`] and the other
/// step functions of [`Scripted`], or written out by a host that builds its own replies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Answer with this reply.
    Reply(ModelReply),
    /// Never answer, and never look at the cancellation token: only the runtime's own race
    /// against the scope can end the wait.
    Hang,
    /// Fail with this error.
    Fail(TransportError),
}

impl Step {
    /// This step with the provider's report of `input` tokens read and `output` tokens produced
    /// (for spend and pool examples); a step that is not a reply is returned unchanged.
    #[must_use]
    pub fn usage(self, input: u64, output: u64) -> Self {
        match self {
            Self::Reply(reply) => Self::Reply(reply.with_usage(Usage::new(input, output))),
            other => other,
        }
    }
}

/// A transport driven by a script `Fn(call number, request) -> Step`.
pub struct Scripted<F> {
    script: F,
    calls: AtomicU32,
    fragment: usize,
    model: Option<String>,
}

impl<F> fmt::Debug for Scripted<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scripted").field("calls", &self.calls()).finish_non_exhaustive()
    }
}

impl<F> Scripted<F>
where
    F: Fn(u32, &ChatRequest<'_>) -> Step + Send + Sync,
{
    /// A transport that asks `script` what to do on each call.
    pub fn new(script: F) -> Self {
        Self { script, calls: AtomicU32::new(0), fragment: 4, model: None }
    }

    /// Names the model this transport stands for (as a price table names it).
    #[must_use]
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Sets the size, in characters, of the text and argument fragments on the streaming path
    /// (default 4; at least 1).
    #[must_use]
    pub fn fragment_size(mut self, chars: usize) -> Self {
        self.fragment = chars.max(1);
        self
    }

    fn next_step(&self, request: &ChatRequest<'_>) -> Step {
        let call = self.calls.fetch_add(1, Ordering::Relaxed).saturating_add(1);
        match (self.script)(call, request) {
            Step::Reply(reply) => Step::Reply(with_ids(reply, turn(request))),
            step => step,
        }
    }
}

/// The step functions, so that a script names nothing but [`Scripted`].
impl Scripted<fn(u32, &ChatRequest<'_>) -> Step> {
    /// A reply that calls the tool `name` with JSON `arguments`; its call id comes from the turn
    /// (`c1` on the first turn).
    #[must_use]
    pub fn call(name: impl Into<String>, arguments: impl Into<String>) -> Step {
        Step::Reply(ModelReply::call(String::new(), name, arguments))
    }

    /// A reply that calls several tools at once, in this order (`(name, arguments)` each); the
    /// call ids come from the turn (`c1_1`, `c1_2`, … on the first turn).
    #[must_use]
    pub fn batch<N, A>(calls: impl IntoIterator<Item = (N, A)>) -> Step
    where
        N: Into<String>,
        A: Into<String>,
    {
        let calls = calls.into_iter().map(|(name, arguments)| ToolCall::new(String::new(), name, arguments));
        Step::Reply(ModelReply::calls(calls.collect()))
    }

    /// A reply that answers with `text` and calls no tool.
    #[must_use]
    pub fn reply(text: impl Into<String>) -> Step {
        Step::Reply(ModelReply::text(text))
    }

    /// A call that fails with `error`.
    #[must_use]
    pub fn fail(error: TransportError) -> Step {
        Step::Fail(error)
    }

    /// A call that fails because the provider cannot be reached (the run ends
    /// `ProviderUnavailable`).
    #[must_use]
    pub fn unavailable(message: impl Into<String>) -> Step {
        Step::Fail(TransportError::unavailable(message))
    }

    /// A call that never answers and never looks at its cancellation: only the scope (its
    /// deadline, a halt) or the caller ends the wait.
    #[must_use]
    pub fn hang() -> Step {
        Step::Hang
    }

    /// A transport that answers turn n of the conversation ([`turn`]) with step n of `steps`, and
    /// fails when the script has no such step. A step that does not move the conversation on (a
    /// failure, a hang) is played again by the next call of the same turn.
    ///
    /// ```
    /// use tokio_util::sync::CancellationToken;
    /// use loopbound::scripted::Scripted;
    /// use loopbound::transport::{ChatOptions, ChatRequest, Message, ModelReply, Transport};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let model = Scripted::sequence([Scripted::call("lookup", "{}"), Scripted::reply("done")]);
    /// // A conversation that already holds the first reply (a resumed run) gets the second step.
    /// let first = ModelReply::call("c1", "lookup", "{}");
    /// let messages = vec![Message::user("go"), Message::assistant(&first), Message::tool_result("c1", "found")];
    /// let (options, cancel) = (ChatOptions::default(), CancellationToken::new());
    /// let reply = model.complete(ChatRequest::new(&messages, &[], &options, &cancel)).await.unwrap();
    /// assert_eq!(reply.content.as_deref(), Some("done"));
    /// # }
    /// ```
    #[must_use]
    pub fn sequence(
        steps: impl IntoIterator<Item = Step>,
    ) -> Scripted<impl Fn(u32, &ChatRequest<'_>) -> Step + Send + Sync> {
        let steps: Vec<Step> = steps.into_iter().collect();
        Scripted::new(move |_, request| {
            let turn = turn(request);
            steps.get(turn - 1).cloned().unwrap_or_else(|| {
                Step::Fail(TransportError::other(format!("the script has no step {turn}")))
            })
        })
    }
}

/// `reply` with an id from `turn` for each tool call that has none.
fn with_ids(mut reply: ModelReply, turn: usize) -> ModelReply {
    let several = reply.tool_calls.len() > 1;
    for (index, call) in reply.tool_calls.iter_mut().enumerate() {
        if call.id.is_empty() {
            call.id = if several { format!("c{turn}_{}", index + 1) } else { format!("c{turn}") };
        }
    }
    reply
}

impl<F> Scripted<F> {
    /// Calls received so far, streaming or not.
    pub fn calls(&self) -> u32 {
        self.calls.load(Ordering::Relaxed)
    }
}

/// Which turn of the conversation `request` asks for: one more than the assistant messages it
/// holds (1 for the first reply of a run).
#[must_use]
pub fn turn(request: &ChatRequest<'_>) -> usize {
    1 + request
        .messages
        .iter()
        .filter(|message| matches!(message, crate::transport::Message::Assistant { .. }))
        .count()
}

/// [`Scripted::sequence`] over a vector of steps.
#[must_use]
pub fn sequence(steps: Vec<Step>) -> Scripted<impl Fn(u32, &ChatRequest<'_>) -> Step + Send + Sync> {
    Scripted::sequence(steps)
}

impl<F> Transport for Scripted<F>
where
    F: Fn(u32, &ChatRequest<'_>) -> Step + Send + Sync,
{
    fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    async fn complete<'a>(&'a self, request: ChatRequest<'a>) -> Result<ModelReply, TransportError> {
        match self.next_step(&request) {
            Step::Reply(reply) => Ok(reply),
            Step::Hang => std::future::pending().await,
            Step::Fail(error) => Err(error),
        }
    }

    async fn stream<'a>(
        &'a self,
        request: ChatRequest<'a>,
    ) -> Result<impl Stream<Item = Result<ReplyChunk, TransportError>> + Send + 'a, TransportError> {
        match self.next_step(&request) {
            Step::Reply(reply) => {
                Ok(ChunkStream::new(chunks(reply, self.fragment).into_iter().map(Ok).collect()))
            }
            Step::Hang => std::future::pending().await,
            Step::Fail(error) => Err(error),
        }
    }

    fn provider_name(&self) -> &'static str {
        "loopbound.scripted"
    }
}

/// Cuts `reply` into chunks: text fragments, then per call one chunk with id and name followed
/// by argument fragments; usage on the last chunk.
fn chunks(reply: ModelReply, fragment: usize) -> Vec<ReplyChunk> {
    let mut out = Vec::new();
    if let Some(content) = reply.content {
        if content.is_empty() {
            // An empty text is still a text: the streamed reply keeps `Some("")`.
            out.push(ReplyChunk { content: Some(content), ..ReplyChunk::default() });
        } else {
            out.extend(
                pieces(&content, fragment)
                    .map(|piece| ReplyChunk { content: Some(piece), ..ReplyChunk::default() }),
            );
        }
    }
    for (call, index) in reply.tool_calls.into_iter().zip(0u32..) {
        out.push(ReplyChunk {
            tool_calls: vec![ToolCallDelta {
                index,
                id: Some(call.id),
                name: Some(call.name),
                arguments: None,
            }],
            ..ReplyChunk::default()
        });
        out.extend(pieces(&call.arguments, fragment).map(|piece| ReplyChunk {
            tool_calls: vec![ToolCallDelta { index, arguments: Some(piece), ..ToolCallDelta::default() }],
            ..ReplyChunk::default()
        }));
    }
    out.push(ReplyChunk { usage: reply.usage, ..ReplyChunk::default() });
    out
}

/// `text` in pieces of `size` characters.
fn pieces(text: &str, size: usize) -> impl Iterator<Item = String> + '_ {
    let mut chars = text.chars().peekable();
    std::iter::from_fn(move || {
        chars.peek()?;
        Some(chars.by_ref().take(size).collect())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::ReplyAssembler;

    #[tokio::test]
    async fn steps_without_ids_get_them_from_the_turn() {
        use crate::transport::{ChatOptions, Message};
        let model = Scripted::sequence([
            Scripted::call("lookup", "{}").usage(3, 4),
            Scripted::batch([("a", "{}"), ("b", "{}")]),
            Step::Reply(ModelReply::call("mine", "lookup", "{}")),
        ]);
        let (options, cancel) = (ChatOptions::default(), crate::CancellationToken::new());
        let mut messages = vec![Message::user("go")];
        let mut ids = Vec::new();
        for _ in 0..3 {
            let reply = model.complete(ChatRequest::new(&messages, &[], &options, &cancel)).await.unwrap();
            ids.push(reply.tool_calls.iter().map(|call| call.id.clone()).collect::<Vec<_>>());
            if ids.len() == 1 {
                assert_eq!(reply.usage, Some(Usage::new(3, 4)));
            }
            messages.push(Message::assistant(&reply));
        }
        assert_eq!(ids, [vec!["c1"], vec!["c2_1", "c2_2"], vec!["mine"]]);
        assert_eq!(Scripted::hang().usage(1, 1), Step::Hang);
        assert_eq!(Scripted::unavailable("down"), Step::Fail(TransportError::unavailable("down")));
    }

    #[test]
    fn an_empty_text_survives_the_streaming_path() {
        let mut assembler = ReplyAssembler::default();
        for chunk in chunks(ModelReply::text(""), 4) {
            assembler.push(chunk).unwrap();
        }
        assert_eq!(assembler.finish().content.as_deref(), Some(""));
    }

    #[test]
    fn chunks_reassemble_to_the_reply() {
        let reply = ModelReply {
            content: Some("Réview finished.".into()),
            tool_calls: vec![
                ToolCall::new("c1", "read_ticket", r#"{"input":42}"#),
                ToolCall::new("c2", "x", ""),
            ],
            usage: Some(Usage::new(5, 7)),
        };
        let chunks = chunks(reply.clone(), 3);
        assert!(chunks.len() > 6);
        let mut assembler = ReplyAssembler::default();
        for chunk in chunks {
            assembler.push(chunk).unwrap();
        }
        assert_eq!(assembler.finish(), reply);
    }
}
