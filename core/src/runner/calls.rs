//! The tool calls of one reply: one after another (the default), or as a parallel batch.
//!
//! # Invariants
//!
//! - One after another: each call is admitted, its body run and its answer handed on before the
//!   next call is taken up; a stop ends the reply there.
//! - A parallel batch: every call is taken up, observed and admitted in the reply's order
//!   before any body of the batch starts; then the admitted bodies run, at most `cap` at a
//!   time, started in the reply's order. A refusal by the guard (permission, budget,
//!   repetition) ends the admissions there: the calls admitted before it run, as they would have
//!   one after another, and then the refusal is recorded as the run's halt with the event it
//!   would have had. So for bodies that stop nothing themselves, the events are those of the
//!   sequential loop, in the same order.
//! - A stop while the batch runs (the deadline, a halt, the caller's cancellation) starts no
//!   further body; running ones are dropped; no answer that came back after it is handed on.
//! - Every call of a batch gets a message in the conversation, in the reply's order: its answer,
//!   or, for a call whose answer was not handed on, an error saying it did not run to the end.
//! - Before bodies start, the course gets them all at once ([`Course::before_bodies`]): a journal
//!   commits their `started` records in one commit, always before the bodies it covers.
//! - Answers that come back together are settled together ([`Course::settle`]) and then checked
//!   against the scope, before any of them is handed on.

use std::collections::VecDeque;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use tracing::{Instrument, Span};

use super::course::{Admission, Course, Pending, Turn};
use super::{End, Runner, error_message};
use crate::guard::{Activity, Stop};
use crate::scope::Scope;
use crate::tool::{BodyError, ToolError};
use crate::transport::{Message, ToolCall, Transport};

/// The message of a batch's call whose answer was not handed on.
pub(crate) const NOT_RUN: &str = "not run to the end: the run stopped before this call's answer";

/// What a body racing the scope ends with: its output, or the stop that interrupted it.
type Raced = Result<Result<String, BodyError>, Stop>;

/// A body racing the scope, and what comes back with its output.
struct Running<'a, P> {
    index: usize,
    /// The tool-call count the call was admitted as.
    count: u32,
    name: &'a Arc<str>,
    plan: P,
    span: Span,
    body: Pin<Box<dyn Future<Output = Raced> + Send + 'a>>,
}

/// An admitted call waiting for its body to start.
struct Queued<'t, S, P> {
    index: usize,
    pending: Pending<'t, S, P>,
    span: Span,
}

impl<T: Transport, S: Send + Sync + 'static> Runner<T, S> {
    /// The calls of reply `reply`, one after another or as a parallel batch, as the runtime
    /// runs them. Returns the answers handed on, and the end of the run if a call ended it.
    ///
    /// One await for the loop whichever way they run: the reply the loop keeps meanwhile is
    /// then kept in that step's room only, not beside the model call's too.
    pub(crate) async fn answer<C: Course<T, S>>(
        &self,
        scope: &Scope<S>,
        course: &mut C,
        reply: u32,
        calls: &[ToolCall],
    ) -> (Vec<Message>, Option<End>) {
        match self.concurrency {
            Some(cap) => self.batch(scope, course, reply, calls, cap.get()).await,
            None => self.one_after_another(scope, course, reply, calls).await,
        }
    }

    /// The calls of reply `reply`, one after another. Returns the answers handed on, and the
    /// end of the run if a call ended it.
    pub(crate) async fn one_after_another<C: Course<T, S>>(
        &self,
        scope: &Scope<S>,
        course: &mut C,
        reply: u32,
        calls: &[ToolCall],
    ) -> (Vec<Message>, Option<End>) {
        let mut answers = Vec::with_capacity(calls.len());
        for (index, call) in calls.iter().enumerate() {
            let span = self.tool_span(call);
            match self.one_call(scope, course, reply, index, call, &span).instrument(span.clone()).await {
                Turn::Answer(message) => answers.push(message),
                Turn::End(end) => return (answers, Some(end)),
            }
        }
        (answers, None)
    }

    async fn one_call<C: Course<T, S>>(
        &self,
        scope: &Scope<S>,
        course: &mut C,
        reply: u32,
        index: usize,
        call: &ToolCall,
        span: &Span,
    ) -> Turn {
        scope.guard().feeds().tool_started(reply, index, call);
        let turn = match course.admit(self, scope, index, call, false).await {
            Admission::Done(turn) => turn,
            Admission::Refused(deferred) => Turn::End(End::Stopped(scope.guard().record_deferred(deferred))),
            Admission::Body(pending) => self.run_one(scope, course, call, pending).await,
        };
        if let Turn::Answer(message) = &turn {
            told(scope, span, reply, index, message);
        }
        turn
    }

    /// One admitted call: before its body, its body under the scope, its answer, settled and
    /// checked.
    async fn run_one<C: Course<T, S>>(
        &self,
        scope: &Scope<S>,
        course: &mut C,
        call: &ToolCall,
        pending: Pending<'_, S, C::Plan>,
    ) -> Turn {
        let guard = scope.guard();
        if let Err(end) = course.before_bodies(scope, &[&pending.plan]).await {
            return Turn::End(end);
        }
        let Pending { name, admitted, plan } = pending;
        let count = admitted.count();
        let body = match admitted.start(scope, C::operation(&plan)) {
            Ok(body) => body,
            Err(ToolError::Stopped(stop)) => return Turn::End(End::Stopped(stop)),
            Err(error) => return Turn::Answer(error_message(call, &error)),
        };
        let output = match course.running(guard.bounded(Activity::Tool(name), body)).await {
            Ok(Ok(output)) => output,
            Ok(Err(stop)) => return Turn::End(End::Stopped(stop)),
            Err(end) => return Turn::End(end),
        };
        // A streak this result completes halts the run; the check after the settlement ends it.
        let _noted = guard.note_output(name, count, &output);
        let answer = course.answer(scope, call, name, plan, output);
        if let Err(end) = course.settle(scope).await {
            return Turn::End(end);
        }
        match guard.check(Activity::Tool(name)) {
            Ok(()) => Turn::Answer(answer),
            Err(stop) => Turn::End(End::Stopped(stop)),
        }
    }

    /// The calls of reply `reply` as a parallel batch of at most `cap` bodies at a time. Returns
    /// one message per call, in the reply's order, and the end of the run if the batch ended it.
    pub(crate) async fn batch<C: Course<T, S>>(
        &self,
        scope: &Scope<S>,
        course: &mut C,
        reply: u32,
        calls: &[ToolCall],
        cap: usize,
    ) -> (Vec<Message>, Option<End>) {
        let guard = scope.guard();
        let mut answers: Vec<Option<Message>> = vec![None; calls.len()];
        let mut queued = VecDeque::new();
        let mut refused = None;
        let mut ended = None;
        for (index, call) in calls.iter().enumerate() {
            guard.feeds().tool_started(reply, index, call);
            let span = self.tool_span(call);
            match course.admit(self, scope, index, call, true).instrument(span.clone()).await {
                Admission::Done(Turn::Answer(message)) => {
                    told(scope, &span, reply, index, &message);
                    answers[index] = Some(message);
                }
                Admission::Done(Turn::End(end)) => {
                    ended = Some(end);
                    break;
                }
                Admission::Refused(deferred) => {
                    refused = Some(deferred);
                    break;
                }
                Admission::Body(pending) => queued.push_back(Queued { index, pending, span }),
            }
        }
        // Bodies admitted before a refusal or a suspension (an approval awaited, an ambiguous
        // effect) run, as they would have one after another; any other end (a stop, a failed
        // journal) leaves them unstarted.
        #[cfg(feature = "journal")]
        let run_bodies = matches!(ended, None | Some(End::Suspended(..) | End::Awaiting(_)));
        #[cfg(not(feature = "journal"))]
        let run_bodies = ended.is_none();
        let stopped = if run_bodies {
            self.run_batch(scope, course, reply, calls, queued, cap, &mut answers).await
        } else {
            None
        };
        let end = stopped
            .or_else(|| refused.map(|deferred| End::Stopped(guard.record_deferred(deferred))))
            .or(ended);
        let messages = answers
            .into_iter()
            .zip(calls)
            .map(|(answer, call)| answer.unwrap_or_else(|| Message::tool_error(call.id.clone(), NOT_RUN)))
            .collect();
        (messages, end)
    }

    /// Runs the queued bodies, at most `cap` at a time, and keeps their answers in `answers`.
    /// Returns the end of the run if something stopped it.
    #[allow(clippy::too_many_arguments, reason = "one step of the batch, with what it acts on")]
    async fn run_batch<'t, C: Course<T, S>>(
        &'t self,
        scope: &'t Scope<S>,
        course: &mut C,
        reply: u32,
        calls: &[ToolCall],
        mut queued: VecDeque<Queued<'t, S, C::Plan>>,
        cap: usize,
        answers: &mut [Option<Message>],
    ) -> Option<End> {
        let guard = scope.guard();
        let mut running: Vec<Running<'t, C::Plan>> = Vec::new();
        loop {
            let free = cap.saturating_sub(running.len()).min(queued.len());
            if free > 0 {
                let wave: Vec<Queued<'t, S, C::Plan>> = queued.drain(..free).collect();
                let plans: Vec<&C::Plan> = wave.iter().map(|queued| &queued.pending.plan).collect();
                if let Err(end) = course.before_bodies(scope, &plans).await {
                    return Some(end);
                }
                for Queued { index, pending, span } in wave {
                    let Pending { name, admitted, plan } = pending;
                    let count = admitted.count();
                    let body = match span.in_scope(|| admitted.start(scope, C::operation(&plan))) {
                        Ok(body) => body,
                        Err(ToolError::Stopped(stop)) => return Some(End::Stopped(stop)),
                        Err(error) => {
                            let message = error_message(&calls[index], &error);
                            told(scope, &span, reply, index, &message);
                            answers[index] = Some(message);
                            continue;
                        }
                    };
                    let raced = async move { guard.bounded(Activity::Tool(name), body).await };
                    let body = Box::pin(raced.instrument(span.clone()));
                    running.push(Running { index, count, name, plan, span, body });
                }
            }
            if running.is_empty() {
                return None;
            }
            let mut stop = None;
            let mut round = Vec::new();
            let mut checked = None;
            let done = match course.running(finished(&mut running)).await {
                Ok(done) => done,
                Err(end) => return Some(end),
            };
            for (done, output) in done {
                checked.get_or_insert(done.name);
                match output {
                    Ok(output) => {
                        let _noted = guard.note_output(done.name, done.count, &output);
                        let message = course.answer(scope, &calls[done.index], done.name, done.plan, output);
                        round.push((done.index, done.span, message));
                    }
                    Err(interrupted) => stop = stop.or(Some(interrupted)),
                }
            }
            if let Err(end) = course.settle(scope).await {
                return Some(end);
            }
            if let Some(stop) = stop {
                return Some(End::Stopped(stop));
            }
            if let Some(name) = checked
                && let Err(stop) = guard.check(Activity::Tool(name))
            {
                return Some(End::Stopped(stop));
            }
            for (index, span, message) in round {
                told(scope, &span, reply, index, &message);
                answers[index] = Some(message);
            }
        }
    }
}

/// Waits until at least one running body is done; returns every body done by then, in the order
/// they were started, removed from `running`.
fn finished<'r, 'a, P>(
    running: &'r mut Vec<Running<'a, P>>,
) -> impl Future<Output = Vec<(Running<'a, P>, Raced)>> + 'r {
    poll_fn(move |cx| {
        let mut done = Vec::new();
        let mut at = 0;
        while at < running.len() {
            if let Poll::Ready(output) = running[at].body.as_mut().poll(cx) {
                done.push((running.remove(at), output));
            } else {
                at += 1;
            }
        }
        if done.is_empty() { Poll::Pending } else { Poll::Ready(done) }
    })
}

/// Tells the watcher, and the call's span, the answer call `index` of reply `reply` gives the
/// model.
fn told<S>(scope: &Scope<S>, span: &Span, reply: u32, index: usize, message: &Message) {
    if let Message::Tool { call_id, content, is_error, .. } = message {
        if *is_error {
            span.record("error.type", "tool_error");
        }
        scope.guard().feeds().tool_result(reply, index, call_id, content, *is_error);
    }
}
