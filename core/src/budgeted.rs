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
//! - A watched scope's feed gets each piece of a streamed reply's text as the assembler takes
//!   it in (the runtime hands on a whole reply's text itself).
//! - Every reply handed on is within the scope's [`ReplyBounds`](crate::transport::ReplyBounds): a streamed
//!   reply is assembled under them (reading stops at the chunk that crosses one), a whole reply
//!   is checked before it is handed on. A reply with too many tool calls halts the scope with
//!   `TooManyCalls` before any of its calls is seen; a reply too long is a provider error.
//! - Under a spend budget, the request is counted before the admission (incrementally: only
//!   the messages added since the last call; when calibrating, from the provider's count of the
//!   last request plus what was appended since, once one was reported), the admission holds its
//!   reservation, and the
//!   request goes out with its output cap set to the reservation's output. Every call that
//!   returns is settled, before anything else is checked: with the reply's usage, or charged
//!   its whole reservation when it has none or failed. A streamed reply whose output passes its
//!   reservation (by the provider's own running count, or by its bytes over the counter's
//!   longest token) is cut at that chunk and halts the run `TokenBudget`.
//! - A call can be admitted and sent in two steps (a journaled run records the reservation in
//!   between): a call admitted and never sent is withdrawn, its reservation settled at nothing
//!   and its pools' hold released; it stays counted as a model call.

use std::fmt;
use std::future::poll_fn;
use std::pin::pin;

use futures_core::Stream;

use crate::guard::{Activity, Guard, SpendAsk, Stop};
#[cfg(feature = "pools")]
use crate::pool::PoolError;
use crate::pooled::{self, DEFAULT_OUTPUT_CAP, Draw, Held};
use crate::scope::Scope;
use crate::spend::{ByteCounter, Micros, Price, RequestCount, Reserved, TokenCounter};
use crate::sync::Mutex;
use crate::transport::{
    ChatOptions, ChatRequest, Message, ModelReply, ReplyAssembler, ToolDefinition, Transport, TransportError,
    TransportErrorKind, Usage,
};

/// A transport whose calls count against one scope's model budget.
///
/// ```
/// use loopbound::Scope;
/// use loopbound::scripted::{Step, sequence};
/// use loopbound::transport::{ChatOptions, ModelReply};
/// use loopbound::{Budgeted, CallError, HaltReason, Limits, Stop};
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
    counter: &'a dyn TokenCounter,
    /// The price of the transport's model, from the scope's table.
    price: Option<Price>,
    /// The run's requests, counted as the conversation grows.
    count: Mutex<RequestCount>,
    /// Whether each request tells the model the remaining budgets.
    disclose: bool,
    /// Whether the provider's count of a request calibrates the next one's reservation.
    calibrate: bool,
}

/// A call on its way, whole or streamed, boxed: every layer above it holds a pointer, not one
/// more copy of the transport's future, and both kinds are concluded by the same code.
type Sent<'s> = std::pin::Pin<Box<dyn Future<Output = Result<Received, TransportError>> + Send + 's>>;

/// What a sent call brought back: a reply, or a stream cut where it passed its reservation.
enum Received {
    Reply(ModelReply),
    /// The stream was cut; its output counted this far.
    Cut {
        output: u64,
    },
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
    /// A shared pool's store failed: the call was not sent (fail closed).
    #[cfg(feature = "pools")]
    Pool(PoolError),
}

impl fmt::Display for CallError {
    /// Writes the inner error's words: a `CallError` is transparent, and its
    /// [`source`](std::error::Error::source) is the inner error's own source.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Stopped(stop) => stop.fmt(f),
            Self::Transport(error) => error.fmt(f),
            #[cfg(feature = "pools")]
            Self::Pool(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for CallError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Stopped(_) => None,
            Self::Transport(error) => error.source(),
            #[cfg(feature = "pools")]
            Self::Pool(error) => error.source(),
        }
    }
}

impl<'a, T: Transport> Budgeted<'a, T> {
    /// `transport`, with its calls counted against `scope`'s model budget, and, under a spend
    /// budget, reserved with the default [`ByteCounter`].
    pub fn new<S>(scope: &'a Scope<S>, transport: &'a T) -> Self {
        Self::with_counter(scope, transport, &ByteCounter)
    }

    /// As [`new`](Self::new), counting requests with `counter`.
    pub fn with_counter<S>(scope: &'a Scope<S>, transport: &'a T, counter: &'a dyn TokenCounter) -> Self {
        let guard = scope.guard();
        let price =
            guard.prices().zip(transport.model()).and_then(|(prices, model)| prices.model_price(model));
        let count = Mutex::new(RequestCount::new());
        Self { transport, guard, counter, price, count, disclose: false, calibrate: false }
    }

    /// This transport, counting each request after one the provider reported from that report
    /// plus what was appended since (see [`Runner::calibrate_reservations`](crate::Runner)).
    #[must_use]
    pub fn calibrating(mut self, calibrate: bool) -> Self {
        self.calibrate = calibrate;
        self
    }

    /// This transport, telling the model the run's remaining budgets in each request, as the
    /// options' [`notice`](ChatOptions::notice) (counted in the request's reservation).
    #[must_use]
    pub fn disclosing(mut self, disclose: bool) -> Self {
        self.disclose = disclose;
        self
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
        let prepared = self.prepare(messages, tools, options).await?;
        self.send(&prepared, messages, tools, false).await
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
        let prepared = self.prepare(messages, tools, options).await?;
        self.send(&prepared, messages, tools, true).await
    }

    /// The call that sends `request` as a stream and assembles the chunks, its output watched
    /// against `bound` (the reservation's output, when it bounds it).
    fn streamed<'s>(&'s self, bound: Option<u64>, request: ChatRequest<'s>) -> Sent<'s> {
        let widest = self.counter.max_token_bytes().max(1);
        Box::pin(async move {
            let mut chunks = pin!(self.transport.stream(request).await?);
            let mut assembler = ReplyAssembler::new(request.bounds);
            let mut bytes = 0_u64;
            let feeds = self.guard.feeds();
            while let Some(chunk) = poll_fn(|cx| chunks.as_mut().poll_next(cx)).await {
                let chunk = chunk?;
                // A watcher sees each piece of text once the assembler has taken it in.
                let piece = if feeds.any() { chunk.content.clone() } else { None };
                // A chunk past the bounds ends the read: the stream is dropped unread.
                bytes = bytes.saturating_add(chunk_output_bytes(&chunk));
                let reported = chunk.usage.map(|usage| usage.output_tokens);
                assembler.push(chunk)?;
                if let Some(piece) = piece {
                    feeds.text_piece(&piece);
                }
                if let Some(bound) = bound {
                    let counted = bytes.div_ceil(widest).max(reported.unwrap_or(0));
                    if counted > bound {
                        return Ok(Received::Cut { output: counted });
                    }
                }
            }
            Ok(Received::Reply(assembler.finish()))
        })
    }

    /// Admits one call (counted, and under a spend budget or a pool, reserved), without sending
    /// it: [`send`](Self::send) sends it, [`withdraw`](Self::withdraw) gives back what a call
    /// never sent holds. A journaled run makes the reservation durable in between.
    pub(crate) async fn prepare(
        &self,
        messages: &[Message],
        tools: &[ToolDefinition],
        options: &ChatOptions,
    ) -> Result<Prepared, CallError> {
        let (admitted, options) = self.admit(messages, tools, options).await?;
        let reserved_input = admitted
            .reserved
            .map(|reserved| reserved.input_tokens)
            .or_else(|| admitted.hold.as_ref().map(Held::input));
        let calibrated = self.calibrate && self.count.lock().is_calibrated(messages);
        Ok(Prepared { admitted, options, calibrated_input: reserved_input.filter(|_| calibrated) })
    }

    /// Sends a prepared call, whole or as a stream, and settles it. A prepared call is sent
    /// once: it is dropped once this returns.
    pub(crate) async fn send(
        &self,
        prepared: &Prepared,
        messages: &[Message],
        tools: &[ToolDefinition],
        streaming: bool,
    ) -> Result<ModelReply, CallError> {
        let request = self.request(messages, tools, &prepared.options);
        let sent: Sent<'_> = if streaming {
            // The output is watched only when its reservation bounds it.
            let bound =
                prepared.admitted.reserved.map(|r| r.output_tokens).filter(|output| *output != u64::MAX);
            self.streamed(bound, request)
        } else {
            Box::pin(async move { self.transport.complete(request).await.map(Received::Reply) })
        };
        let reply = self.conclude(request.bounds, &prepared.admitted, sent).await?;
        // The provider's count of this request calibrates the next one's reservation, unless
        // it came back above what was reserved from its last count: then no report is used
        // again in this run.
        if let Some(usage) = reply.usage.filter(|_| self.calibrate) {
            let mut count = self.count.lock();
            if prepared.calibrated_input.is_some_and(|reserved| usage.input_tokens > reserved) {
                count.distrust();
            } else {
                count.calibrate(messages, usage.input_tokens);
            }
        }
        Ok(reply)
    }

    /// Gives back what a prepared call that is never sent holds: its reservation is settled at
    /// nothing, its pools' hold released. It stays counted as an admitted call.
    #[cfg(feature = "journal")]
    pub(crate) async fn withdraw(&self, prepared: Prepared) {
        let Admitted { reserved, hold } = prepared.admitted;
        if let (Some(draw), Some(hold)) = (self.guard.pools(), hold) {
            hold.release(draw, self.guard).await;
        }
        // Settled at nothing, no budget can be crossed.
        let _ = self.guard.settle(self.price.as_ref(), reserved, Some(Usage::default()));
    }

    /// Counts the request (under a spend budget or a pool), reserves it in the scope's pools,
    /// admits the call and holds its reservation; returns both with the options the request
    /// goes out with (its output capped at the smallest grant).
    async fn admit(
        &self,
        messages: &[Message],
        tools: &[ToolDefinition],
        options: &ChatOptions,
    ) -> Result<(Admitted, ChatOptions), CallError> {
        // Siblings waiting for room ask first.
        self.guard.yield_to_waiting().await;
        let (ask, mut options) = self.ask(messages, tools, options);
        let Some(draw) = self.guard.pools() else {
            let reserved = loop {
                match self.guard.admit_model_sharing(ask).map_err(CallError::Stopped)? {
                    Ok((_, reserved)) => break reserved,
                    Err(crowded) => crowded.settled().await.map_err(CallError::Stopped)?,
                }
            };
            cap_output(&mut options, reserved.map(|r| r.output_tokens));
            return Ok((Admitted { reserved, hold: None }, options));
        };
        // Boxed: a run without pools keeps its futures as small as before.
        Box::pin(self.admit_pooled(draw, ask, options)).await
    }

    /// [`admit`](Self::admit) for a scope that draws from pools: the run's own look, the pools'
    /// hold, the run's admission (or the hold's release), in that order.
    async fn admit_pooled(
        &self,
        draw: &Draw,
        ask: Option<SpendAsk>,
        mut options: ChatOptions,
    ) -> Result<(Admitted, ChatOptions), CallError> {
        let ask = ask.unwrap_or(SpendAsk { input: 0, cap: u64::MAX, price: self.price });
        let (mut hold, granted, reserved) = loop {
            // The run's own checks first: a call they refuse reaches no pool, and a call that
            // must wait for its tree's holds waits before it holds anything in a pool.
            let room = match self.guard.peek_model_sharing(Some(ask)) {
                Ok(room) => room,
                Err(crowded) => {
                    crowded.settled().await.map_err(CallError::Stopped)?;
                    continue;
                }
            };
            let hold = match room {
                Some(room) => Some(pooled::reserve(draw, self.guard, ask, room).await?),
                None => None,
            };
            let granted = hold.as_ref().map_or(ask.cap, Held::granted);
            let local = SpendAsk { cap: granted, ..ask };
            let crowded = match self.guard.admit_model_sharing(Some(local)) {
                Ok(Ok((_, reserved))) => break (hold, granted, reserved),
                Ok(Err(crowded)) => Ok(crowded),
                Err(stop) => Err(stop),
            };
            // Not admitted: the pools' hold goes back first. A call that must wait for its
            // tree's holds (a sibling took the room between the look and the admission) waits
            // holding nothing, then asks again.
            if let Some(hold) = hold {
                hold.release(draw, self.guard).await;
            }
            crowded.map_err(CallError::Stopped)?.settled().await.map_err(CallError::Stopped)?;
        };
        let output = reserved.map_or(granted, |r| r.output_tokens.min(granted));
        if hold.is_none() {
            // The run's room grew between the look and the admission (another call of the run
            // settled): the pools are asked now, before anything is sent.
            match pooled::reserve(draw, self.guard, ask, output).await {
                Ok(taken) => hold = Some(taken),
                Err(error) => {
                    // Never sent: the reservation is settled at nothing.
                    let _ = self.guard.settle(self.price.as_ref(), reserved, Some(Usage::default()));
                    return Err(error);
                }
            }
        }
        let output = hold.as_ref().map_or(output, |hold| output.min(hold.granted()));
        cap_output(&mut options, Some(output));
        let hold = hold.map(|hold| hold.sent(output));
        Ok((Admitted { reserved, hold }, options))
    }

    /// What a request asks of the spend budgets (under one), and its options with the
    /// disclosure notice when the model is told the remaining budgets.
    fn ask(
        &self,
        messages: &[Message],
        tools: &[ToolDefinition],
        options: &ChatOptions,
    ) -> (Option<SpendAsk>, ChatOptions) {
        let mut options = options.clone();
        if self.disclose {
            options.notice = Some(self.guard.remaining(self.price.as_ref()));
        }
        let counted = self.guard.spend_budgeted() || self.guard.pools().is_some();
        let ask = counted.then(|| {
            let notice = options.notice.as_deref().map_or(0, |notice| {
                self.counter.count(notice).saturating_add(self.counter.message_overhead())
            });
            SpendAsk {
                input: self.count.lock().input(self.counter, messages, tools).saturating_add(notice),
                cap: self.output_cap(&options),
                price: self.price,
            }
        });
        (ask, options)
    }

    /// The largest output a call asks for: the request's own cap; else, in a child scope,
    /// [`DEFAULT_OUTPUT_CAP`], so that one call of a tree never holds all that a shared budget
    /// has left while its siblings run (§27); else nothing but the budgets bounds it.
    fn output_cap(&self, options: &ChatOptions) -> u64 {
        match options.max_output_tokens {
            Some(cap) => u64::from(cap),
            None if self.guard.has_parent() => u64::from(DEFAULT_OUTPUT_CAP),
            None => u64::MAX,
        }
    }

    /// What the next call on `messages` would reserve now, changing nothing: its input, the
    /// output it would be granted (`None`: refused by the scope's budgets; `u64::MAX`: nothing
    /// bounds it), and the reservation's cost at the model's price.
    pub(crate) fn preview(
        &self,
        messages: &[Message],
        tools: &[ToolDefinition],
        options: &ChatOptions,
    ) -> (u64, Option<u64>, Option<Micros>) {
        let (ask, options) = self.ask(messages, tools, options);
        let ask = ask.unwrap_or_else(|| {
            let notice = options.notice.as_deref().map_or(0, |notice| {
                self.counter.count(notice).saturating_add(self.counter.message_overhead())
            });
            let input = RequestCount::new().input(self.counter, messages, tools).saturating_add(notice);
            SpendAsk { input, cap: self.output_cap(&options), price: self.price }
        });
        let counted = self.guard.spend_budgeted() || self.guard.pools().is_some();
        let granted = self.guard.peek_model(counted.then_some(ask)).map(|room| {
            let pooled = self.guard.pools().map_or(u64::MAX, |draw| u64::from(draw.max_output()));
            room.min(ask.cap).min(pooled)
        });
        let cost = match (self.price, granted) {
            (Some(price), Some(output)) if output != u64::MAX => {
                Some(price.cost(&Usage::new(ask.input, output)))
            }
            _ => None,
        };
        (ask.input, granted, cost)
    }

    /// The one call a wrap-up kept aside, after a limit stopped the run: sent with no tool
    /// offered, raced against the caller and the deadline only, settled like any call. The
    /// reply's tool calls, if any, are dropped.
    pub(crate) async fn wrap_up(
        &self,
        messages: &[Message],
        options: &ChatOptions,
    ) -> Result<ModelReply, CallError> {
        let (ask, mut options) = self.ask(messages, &[], options);
        let draw = self.guard.pools();
        let hold = match (draw, ask) {
            (Some(draw), Some(ask)) => Some(pooled::reserve(draw, self.guard, ask, ask.cap).await?),
            _ => None,
        };
        let local = ask.map(|ask| SpendAsk { cap: hold.as_ref().map_or(ask.cap, Held::granted), ..ask });
        let reserved = match self.guard.admit_wrap_up(local) {
            Ok(reserved) => reserved,
            Err(stop) => {
                if let (Some(draw), Some(hold)) = (draw, hold) {
                    hold.release(draw, self.guard).await;
                }
                return Err(CallError::Stopped(stop));
            }
        };
        let granted = hold.as_ref().map_or(u64::MAX, Held::granted);
        let output = reserved.map_or(granted, |r| r.output_tokens.min(granted));
        if output != u64::MAX {
            cap_output(&mut options, Some(output));
        }
        let hold = hold.map(|hold| hold.sent(output));
        let request = self.request(messages, &[], &options);
        let sent = Box::pin(self.transport.complete(request));
        let received = self.guard.bounded_past_halt(sent).await;
        let usage =
            received.as_ref().ok().and_then(|reply| reply.as_ref().ok()).and_then(|reply| reply.usage);
        if let (Some(draw), Some(hold)) = (draw, hold) {
            hold.settle(draw, self.guard, self.price.as_ref(), usage, None).await;
        }
        let received = received.map_err(CallError::Stopped)?;
        // A wrap-up that crosses a budget gets nothing more: the run is stopped already.
        let _ = self.guard.settle(self.price.as_ref(), reserved, usage);
        let mut reply = received.map_err(CallError::Transport)?;
        reply.tool_calls.clear();
        request.bounds.check(&reply).map_err(CallError::Transport)?;
        Ok(reply)
    }

    /// The scope's guard.
    #[cfg(feature = "journal")]
    pub(crate) fn guard(&self) -> &'a Guard {
        self.guard
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

    /// The rest of one call once admitted: send it raced against the scope (renewing its pools'
    /// hold meanwhile), settle it here and in the pools, check the scope again, then the reply's
    /// bounds.
    ///
    /// What the call holds is borrowed, not moved: each layer that took it by value would keep
    /// one more copy of it for as long as the call waits.
    async fn conclude(
        &self,
        bounds: crate::transport::ReplyBounds,
        admitted: &Admitted,
        sent: Sent<'_>,
    ) -> Result<ModelReply, CallError> {
        let guard = self.guard;
        let draw = guard.pools().filter(|_| admitted.hold.is_some());
        // A call drawn from pools renews its hold while in flight (boxed: a run without pools
        // keeps its futures as small as before). What comes back goes straight to its
        // settlement: a local bound to it here would take room beside the call while it waits.
        let bounded = match (draw, &admitted.hold) {
            (Some(draw), Some(hold)) => {
                guard.bounded(Activity::Model, Box::pin(hold.renewing(draw, sent))).await
            }
            _ => guard.bounded(Activity::Model, sent).await,
        };
        self.settle_call(bounds, admitted, draw, bounded).await
    }

    /// Settles a call that came back, or was stopped ([`conclude`](Self::conclude)'s rest): an
    /// `async` block, which keeps what came back once (an `async fn` would keep it twice).
    #[allow(clippy::manual_async_fn, reason = "an `async fn` would keep its by-value argument twice")]
    fn settle_call<'s>(
        &'s self,
        bounds: crate::transport::ReplyBounds,
        admitted: &'s Admitted,
        draw: Option<&'s Draw>,
        bounded: Result<Result<Received, TransportError>, Stop>,
    ) -> impl Future<Output = Result<ModelReply, CallError>> + Send + 's {
        async move {
            let guard = self.guard;
            let model = Activity::Model;
            // A stop during the call leaves its reservation held: the provider may bill it.
            let received = match bounded {
                Ok(received) => received,
                Err(stop) => {
                    if let (Some(draw), Some(hold)) = (draw, &admitted.hold) {
                        Box::pin(hold.settle(draw, guard, self.price.as_ref(), None, None)).await;
                    }
                    return Err(CallError::Stopped(stop));
                }
            };
            let price = self.price.as_ref();
            if let (Some(draw), Some(hold)) = (draw, &admitted.hold) {
                let (usage, cut) = match &received {
                    Ok(Received::Reply(reply)) => (reply.usage, None),
                    Ok(Received::Cut { output }) => (None, Some(*output)),
                    Err(_) => (None, None),
                };
                Box::pin(hold.settle(draw, guard, price, usage, cut)).await;
            }
            let reserved = admitted.reserved;
            let reply = match received {
                Ok(Received::Reply(reply)) => {
                    guard.settle(price, reserved, reply.usage).map_err(CallError::Stopped)?;
                    Ok(reply)
                }
                Ok(Received::Cut { output }) => {
                    let reserved = reserved.unwrap_or_default();
                    return Err(CallError::Stopped(guard.settle_cut(price, reserved, output)));
                }
                Err(error) => {
                    // A failed call may still have been billed: charged its whole reservation.
                    guard.settle(price, reserved, None).map_err(CallError::Stopped)?;
                    Err(error)
                }
            };
            guard.check(model).map_err(CallError::Stopped)?;
            match reply.and_then(|reply| bounds.check(&reply).map(|()| reply)) {
                Ok(reply) => Ok(reply),
                Err(error) if matches!(error.kind(), TransportErrorKind::TooManyCalls { .. }) => {
                    Err(CallError::Stopped(guard.refuse_reply()))
                }
                Err(error) => Err(CallError::Transport(error)),
            }
        }
    }
}

/// A call admitted and not sent yet: what it holds, and the options it goes out with.
pub(crate) struct Prepared {
    admitted: Admitted,
    options: ChatOptions,
    /// The input reserved for the call when it was counted from a provider's report: a report
    /// of the call above it shows the provider's counts are not consistent.
    calibrated_input: Option<u64>,
}

impl Prepared {
    /// Whether the call holds a reservation (a spend budget or a pool is set): what a crash
    /// during the call must not lose.
    #[cfg(feature = "journal")]
    pub(crate) fn is_reserved(&self) -> bool {
        self.admitted.reserved.is_some() || self.admitted.hold.is_some()
    }
}

/// What an admitted call holds: the run's reservation and its pools' hold.
struct Admitted {
    reserved: Option<Reserved>,
    hold: Option<Held>,
}

/// Sets the request's output cap to `output` when it is finite (and fits the option).
fn cap_output(options: &mut ChatOptions, output: Option<u64>) {
    if let Some(cap) = output.and_then(|output| u32::try_from(output).ok()) {
        options.max_output_tokens = Some(cap);
    }
}

/// The output bytes a chunk brings: its text and its calls' arguments.
fn chunk_output_bytes(chunk: &crate::transport::ReplyChunk) -> u64 {
    let text = chunk.content.as_ref().map_or(0, String::len);
    let arguments: usize =
        chunk.tool_calls.iter().map(|call| call.arguments.as_ref().map_or(0, String::len)).sum();
    (text + arguments) as u64
}
