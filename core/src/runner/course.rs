//! Where the loop's model replies and tool answers come from: asked for live, or, in a
//! journaled run, replayed from the journal and recorded there.
//!
//! # Invariants
//!
//! - The loop itself is one: both courses go through the same iteration cap, the same handling
//!   of replies, the same running of bodies (one after another or in a parallel batch), and the
//!   same conversation updates; only the source of a step, and what is recorded around a body,
//!   differ.
//! - A course admits a call and hands it back unstarted ([`Admission::Body`]); the loop starts
//!   it, after [`Course::before_bodies`], and hands its output back to [`Course::answer`]. So
//!   a course never runs a body itself, and the loop decides when bodies run.
//! - [`Live`] is the plain run: every reply is a counted model call, every answer goes through
//!   middleware, observers, guard and body, and nothing is recorded; it keeps the name and
//!   answer of every call whose body succeeded, for the run's completion condition.

use std::future::Future;
use std::sync::Arc;

use super::{End, Runner, error_message};
use crate::budgeted::Budgeted;
use crate::guard::Deferred;
use crate::scope::Scope;
use crate::tool::{AdmittedCall, BodyError, Refusal, ToolError};
use crate::transport::{Message, ModelReply, ToolCall, ToolDefinition, Transport};

/// What one tool call gives the loop: a message for the model, or the end of the run.
pub(crate) enum Turn {
    Answer(Message),
    End(End),
}

/// An admitted call whose body has not started, with what its course needs around the body.
pub(crate) struct Pending<'t, S, P> {
    /// The tool's name, borrowed from the runtime's set.
    pub(crate) name: &'t Arc<str>,
    pub(crate) admitted: Box<dyn AdmittedCall<S> + 't>,
    pub(crate) plan: P,
}

/// What admitting one call gives the loop.
pub(crate) enum Admission<'t, S, P> {
    /// An answer or the run's end, without a body.
    Done(Turn),
    /// Admitted: the loop starts its body.
    Body(Pending<'t, S, P>),
    /// Refused, in a parallel batch: the halt is decided, and recorded once the calls admitted
    /// before it have run.
    Refused(Deferred),
}

/// A source of the loop's steps.
pub(crate) trait Course<T, S> {
    /// What the course keeps about an admitted call until its body's output comes back.
    type Plan: Send;

    /// The next model reply, or how the run ends instead.
    fn reply(
        &mut self,
        runtime: &Runner<T, S>,
        model: &Budgeted<'_, T>,
        conversation: &[Message],
        tools: &[ToolDefinition],
    ) -> impl Future<Output = Result<ModelReply, End>> + Send;

    /// Call `index` of the current reply, up to its admission; `deferring` hands a refusal's
    /// halt back instead of recording it (a parallel batch).
    fn admit<'t>(
        &mut self,
        runtime: &'t Runner<T, S>,
        scope: &Scope<S>,
        index: usize,
        call: &ToolCall,
        deferring: bool,
    ) -> impl Future<Output = Admission<'t, S, Self::Plan>> + Send;

    /// What must hold before the bodies of `plans` start (a journal commits their `started`
    /// records, in one commit).
    fn before_bodies(
        &mut self,
        scope: &Scope<S>,
        plans: &[&Self::Plan],
    ) -> impl Future<Output = Result<(), End>> + Send;

    /// The operation id a body runs as, in a journaled run.
    fn operation(plan: &Self::Plan) -> Option<Arc<str>>;

    /// The answer a body's `output` gives the model, kept where the course keeps answers.
    fn answer(
        &mut self,
        scope: &Scope<S>,
        call: &ToolCall,
        name: &Arc<str>,
        plan: Self::Plan,
        output: Result<String, BodyError>,
    ) -> Message;

    /// Waits for `work` (running bodies) while the course keeps up what the run needs meanwhile
    /// (a journal's heartbeat renews the attempt's lease); returns how the run ends instead when
    /// that fails, with `work` dropped.
    fn running<F>(&mut self, work: F) -> impl Future<Output = Result<F::Output, End>> + Send
    where
        F: Future + Send,
        F::Output: Send;

    /// Makes the answers kept so far durable (a journal's commit), before any is handed on.
    fn settle(&mut self, scope: &Scope<S>) -> impl Future<Output = Result<(), End>> + Send;
}

/// The plain run: everything live, nothing recorded.
#[derive(Default)]
pub(crate) struct Live {
    /// Every call whose body returned an answer: the tool's name and the answer's text.
    succeeded: Vec<(Arc<str>, String)>,
}

impl Live {
    /// Every call whose body returned an answer, in the order the answers were handed on.
    pub(crate) fn succeeded(&self) -> &[(Arc<str>, String)] {
        &self.succeeded
    }
}

impl<T: Transport, S: Send + Sync + 'static> Course<T, S> for Live {
    type Plan = ();

    // An `async fn`, so the call's future is made where it is awaited: one made before an
    // `async` block and awaited inside it would be stored twice (captured, then awaited).
    async fn reply(
        &mut self,
        runtime: &Runner<T, S>,
        model: &Budgeted<'_, T>,
        conversation: &[Message],
        tools: &[ToolDefinition],
    ) -> Result<ModelReply, End> {
        runtime.call_model(model, conversation, tools).await.map_err(End::from)
    }

    async fn admit<'t>(
        &mut self,
        runtime: &'t Runner<T, S>,
        scope: &Scope<S>,
        _index: usize,
        call: &ToolCall,
        deferring: bool,
    ) -> Admission<'t, S, ()> {
        let Some(tool) = runtime.tools().get(&call.name) else {
            let answer = error_message(call, &ToolError::not_found(&call.name));
            return Admission::Done(failed(scope, None, answer));
        };
        if let Err(stop) = runtime.observe_call(scope, tool.name(), call) {
            return Admission::Done(Turn::End(End::Stopped(stop)));
        }
        match tool.admit_json(scope, &call.arguments, deferring) {
            Ok(admitted) => Admission::Body(Pending { name: tool.name(), admitted, plan: () }),
            Err(Refusal::Deferred(deferred)) => Admission::Refused(deferred),
            Err(Refusal::Tool(ToolError::Stopped(stop))) => Admission::Done(Turn::End(End::Stopped(stop))),
            Err(Refusal::Tool(error)) => {
                let answer = error_message(call, &error);
                match error {
                    ToolError::Bind(_) => Admission::Done(failed(scope, Some(tool.name()), answer)),
                    _ => Admission::Done(Turn::Answer(answer)),
                }
            }
        }
    }

    async fn before_bodies(&mut self, _scope: &Scope<S>, _plans: &[&()]) -> Result<(), End> {
        Ok(())
    }

    fn operation((): &()) -> Option<Arc<str>> {
        None
    }

    fn answer(
        &mut self,
        _scope: &Scope<S>,
        call: &ToolCall,
        name: &Arc<str>,
        (): (),
        output: Result<String, BodyError>,
    ) -> Message {
        if let Ok(text) = &output {
            self.succeeded.push((Arc::clone(name), text.clone()));
        }
        answer_of(call, name, output)
    }

    async fn running<F>(&mut self, work: F) -> Result<F::Output, End>
    where
        F: Future + Send,
        F::Output: Send,
    {
        Ok(work.await)
    }

    async fn settle(&mut self, _scope: &Scope<S>) -> Result<(), End> {
        Ok(())
    }
}

/// The turn of a call that named no known tool (`tool` is `None`) or did not bind: its `answer`,
/// unless the error streak it extends halts the run.
pub(crate) fn failed<S>(scope: &Scope<S>, tool: Option<&Arc<str>>, answer: Message) -> Turn {
    match scope.guard().note_failure(tool) {
        Ok(()) => Turn::Answer(answer),
        Err(stop) => Turn::End(End::Stopped(stop)),
    }
}

/// The message a body's `output` gives the model.
pub(crate) fn answer_of(call: &ToolCall, name: &Arc<str>, output: Result<String, BodyError>) -> Message {
    match output {
        Ok(text) => Message::tool_result(call.id.clone(), text),
        Err(source) => error_message(call, &ToolError::Failed { tool: Arc::clone(name), source }),
    }
}
