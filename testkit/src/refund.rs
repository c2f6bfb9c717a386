//! The refund task, the one copy that journaled tests, the crash matrix, the properties, the
//! benches and the console's durable scenarios use: look an order up, refund it, e-mail the
//! receipt.
//!
//! Three guarded tools, one of each effect kind:
//!
//! - `lookup_order` (`read`, capability `orders.read`): returns the order's text;
//! - `refund` (`effect`, capability `payments.refund`, policy chosen by the caller): applies one
//!   refund in the external system;
//! - `send_receipt` (`idempotent`, capability `mail.send`): e-mails a receipt, keyed by the
//!   operation id, which the external system applies once per key.
//!
//! The external system is an [`EffectSink`]: the bodies call it, and it counts outside the run
//! (in memory for unit tests, in a file with `fsync` across processes), so a test can count how
//! often each body ran whatever happened to the process that ran it.
//!
//! # Invariants
//!
//! - The scripted model reads the conversation, not a call counter: its next step is the number
//!   of assistant messages so far, so a resumed run that replays recorded replies asks it for
//!   exactly the next one, in any process.
//! - A body applies its effect through the sink before it returns: an effect can have happened
//!   while its result was never recorded, which is the window a journal must handle.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use loopbound::scripted::{Scripted, Step};
use loopbound::tool::{EffectKind, Policy};
use loopbound::transport::{ChatOptions, ChatRequest, Message, ModelReply, ToolCall, Usage};
use loopbound::{Call, GuardedTool, Limits, ToolSet};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The capability of `lookup_order`.
pub const READ_CAPABILITY: &str = "orders.read";
/// The capability of `refund`.
pub const REFUND_CAPABILITY: &str = "payments.refund";
/// The capability of `send_receipt`.
pub const MAIL_CAPABILITY: &str = "mail.send";
/// All three.
pub const CAPABILITIES: [&str; 3] = [READ_CAPABILITY, REFUND_CAPABILITY, MAIL_CAPABILITY];
/// The user's request.
pub const PROMPT: &str = "Order 42 arrived damaged: refund it and e-mail the receipt.";
/// The model's closing sentence.
pub const CLOSING: &str = "Refund issued.";

/// The external system the bodies act on.
pub trait EffectSink: Send + Sync {
    /// Applies one effect of `tool`, with the call's idempotency key when it has one.
    fn apply(&self, tool: &str, key: Option<&str>);
    /// Every effect applied so far, in order: `(tool, key)`.
    fn applied(&self) -> Vec<(String, Option<String>)>;

    /// How many times `tool`'s body applied its effect.
    fn count(&self, tool: &str) -> usize {
        self.applied().iter().filter(|(name, _)| name == tool).count()
    }
}

/// A sink in memory.
#[derive(Debug, Default)]
pub struct MemorySink(Mutex<Vec<(String, Option<String>)>>);

impl EffectSink for MemorySink {
    fn apply(&self, tool: &str, key: Option<&str>) {
        let mut applied = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        applied.push((tool.to_owned(), key.map(str::to_owned)));
    }

    fn applied(&self) -> Vec<(String, Option<String>)> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

/// A sink in a file: one line `tool key` per effect, appended and `fsync`ed before the body goes
/// on, so the count survives a SIGKILL of the process that ran the body.
#[derive(Debug, Clone)]
pub struct FileSink {
    path: PathBuf,
}

impl FileSink {
    /// A sink appending to `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// The file's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl EffectSink for FileSink {
    fn apply(&self, tool: &str, key: Option<&str>) {
        let line = format!("{tool} {}\n", key.unwrap_or("-"));
        let written = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .and_then(|mut file| file.write_all(line.as_bytes()).and_then(|()| file.sync_all()));
        if let Err(error) = written {
            panic!("the effect sink {} cannot be written: {error}", self.path.display());
        }
    }

    fn applied(&self) -> Vec<(String, Option<String>)> {
        let text = std::fs::read_to_string(&self.path).unwrap_or_default();
        text.lines()
            .filter_map(|line| line.split_once(' '))
            .map(|(tool, key)| (tool.to_owned(), (key != "-").then(|| key.to_owned())))
            .collect()
    }
}

/// An order id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub struct OrderInput {
    /// The order.
    pub order: i64,
}

/// A refund of part of an order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub struct RefundInput {
    /// The order.
    pub order: i64,
    /// The amount to refund, in cents.
    pub amount_cents: i64,
}

/// The refund task's tools, defined once.
#[derive(Clone, Debug)]
pub struct RefundTools {
    /// All three, in the order the model sees them.
    pub set: ToolSet,
    /// `lookup_order`, a read.
    pub lookup_order: GuardedTool<OrderInput>,
    /// `refund`, an effect.
    pub refund: GuardedTool<RefundInput>,
    /// `send_receipt`, idempotent.
    pub send_receipt: GuardedTool<OrderInput>,
}

/// Defines the three tools over `sink`, with `refund` under `refund_policy`.
#[must_use]
pub fn tools(sink: Arc<dyn EffectSink>, refund_policy: Policy) -> RefundTools {
    let mut set = ToolSet::builder();
    let lookup_order = set
        .tool("lookup_order", READ_CAPABILITY)
        .description("Look an order up by its id.")
        .effect(EffectKind::Read)
        .build(|input: OrderInput, _call: Call| async move {
            Ok::<_, String>(format!("Order {}: 15.00 EUR, paid, delivered damaged.", input.order))
        })
        .unwrap_or_else(|error| unreachable!("a fresh set takes lookup_order: {error}"));
    let refunds = Arc::clone(&sink);
    let refund = set
        .tool("refund", REFUND_CAPABILITY)
        .description("Refund part of an order, in cents.")
        .effect(EffectKind::Effect)
        .policy(refund_policy)
        .build(move |input: RefundInput, call: Call| {
            refunds.apply("refund", call.idempotency_key());
            async move {
                Ok::<_, String>(format!("Refunded {} cents on order {}.", input.amount_cents, input.order))
            }
        })
        .unwrap_or_else(|error| unreachable!("the set takes refund: {error}"));
    let receipts = sink;
    let send_receipt = set
        .tool("send_receipt", MAIL_CAPABILITY)
        .description("E-mail the receipt of an order's refund.")
        .effect(EffectKind::Idempotent)
        .build(move |input: OrderInput, call: Call| {
            receipts.apply("send_receipt", call.idempotency_key());
            async move { Ok::<_, String>(format!("Receipt for order {} sent.", input.order)) }
        })
        .unwrap_or_else(|error| unreachable!("the set takes send_receipt: {error}"));
    RefundTools { set: set.build(), lookup_order, refund, send_receipt }
}

/// The conversation the task starts from.
#[must_use]
pub fn conversation() -> Vec<Message> {
    vec![Message::user(PROMPT)]
}

/// The short script: look order 42 up, refund it, say so.
#[must_use]
pub fn short_script() -> Vec<ModelReply> {
    vec![
        ModelReply::call("call-a", "lookup_order", r#"{"order":42}"#),
        ModelReply::call("call-b", "refund", r#"{"order":42,"amount_cents":1500}"#),
        ModelReply::text(CLOSING),
    ]
}

/// The long script: a read, two effects in a row, an idempotent call, then the text.
#[must_use]
pub fn long_script() -> Vec<ModelReply> {
    vec![
        ModelReply::call("call-a", "lookup_order", r#"{"order":42}"#),
        ModelReply::call("call-b", "refund", r#"{"order":42,"amount_cents":1500}"#),
        ModelReply::call("call-c", "refund", r#"{"order":43,"amount_cents":700}"#),
        ModelReply::call("call-d", "send_receipt", r#"{"order":42}"#),
        ModelReply::text(CLOSING),
    ]
}

/// The long script with both refunds asked for in one reply: a batch for a runtime that runs
/// a reply's calls in parallel.
#[must_use]
pub fn batched_script() -> Vec<ModelReply> {
    vec![
        ModelReply::call("call-a", "lookup_order", r#"{"order":42}"#),
        ModelReply::calls(vec![
            ToolCall::new("call-b", "refund", r#"{"order":42,"amount_cents":1500}"#),
            ToolCall::new("call-c", "refund", r#"{"order":43,"amount_cents":700}"#),
        ]),
        ModelReply::call("call-d", "send_receipt", r#"{"order":42}"#),
        ModelReply::text(CLOSING),
    ]
}

/// What every reply of the metered script reports: 20 input tokens, 10 output tokens.
pub const METERED_USAGE: Usage = Usage::new(20, 10);
/// The output cap every request of the metered task is sent with, so each reservation's
/// output is at most this.
pub const METERED_CAP: u32 = 50;
/// The metered task's output-token budget: the long script fits it (each call reserves at
/// most [`METERED_CAP`] and settles 10, so the fifth call reserves 50 over 40 settled), and a
/// call lost with its whole reservation charged leaves the closing call too little room.
pub const METERED_OUTPUT_BUDGET: u64 = 100;

/// The long script, each reply reporting [`METERED_USAGE`].
#[must_use]
pub fn metered_script() -> Vec<ModelReply> {
    long_script().into_iter().map(|reply| reply.with_usage(METERED_USAGE)).collect()
}

/// The metered task's limits: an output-token budget of [`METERED_OUTPUT_BUDGET`].
#[must_use]
pub fn metered_limits() -> Limits {
    Limits::default().with_output_tokens(METERED_OUTPUT_BUDGET)
}

/// The metered task's options: every request capped at [`METERED_CAP`] output tokens.
#[must_use]
pub fn metered_options() -> ChatOptions {
    ChatOptions::default().with_max_output_tokens(METERED_CAP)
}

/// Which step of a script a request asks for: 1 + the assistant messages so far.
#[must_use]
pub fn step_of(request: &ChatRequest<'_>) -> usize {
    loopbound::scripted::turn(request)
}

/// A scripted model that answers from the conversation: step n of `script` when the request
/// holds n - 1 assistant messages; `observe` sees each step asked for.
pub fn model(
    script: Vec<ModelReply>,
    observe: impl Fn(usize) + Send + Sync,
) -> Scripted<impl Fn(u32, &ChatRequest<'_>) -> Step + Send + Sync> {
    Scripted::new(move |_, request| {
        let step = step_of(request);
        observe(step);
        script.get(step - 1).cloned().map_or(
            Step::Fail(loopbound::transport::TransportError::other(format!("the script has no step {step}"))),
            Step::Reply,
        )
    })
}
