//! What a run reports: the header known before the run, the outcome after it, and the JSON form.
//!
//! # Invariants
//!
//! - The JSON form is exactly one object with the keys `agent`, `transport`, `capabilities`,
//!   `limits`, `progress` when the scope has an active progress policy, `price` when the model
//!   has one (`limits` names the spend budgets only when they are set), then the outcome's own form (`status`, `text`, `events`, `usage`, `detail`,
//!   `operation`, `partial_text`, `spend`, `pending`, as [`Outcome`] serialises for any host), and no
//!   wall-clock time: the same scenario always gives the same bytes.
//! - `text` is `null` unless the status keeps it (`Completed` or `Incomplete`).

use std::collections::BTreeMap;

use loopbound::progress::Progress;
use loopbound::{Limits, Outcome};
use loopbound_fixtures::Composition;

use crate::budget::ModelPrice;

use crate::vocabulary::{Agent, status_exit_code};
use serde::Serialize;

use crate::scenario::Scenario;

/// What the console states before the run starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The scenario being played.
    pub scenario: Scenario,
    /// The runtime composition.
    pub composition: Composition,
    /// The composition's description: cap, telemetry, absent capabilities.
    pub agent: Agent,
    /// The transport's name and path, e.g. `scripted` or `scripted, streaming`.
    pub transport: String,
    /// The capabilities the scope grants, in code-point order.
    pub capabilities: Vec<String>,
    /// The limits the scope enforces.
    pub limits: Limits,
    /// The scope's progress policy (exact repetition unless the scenario sets one).
    pub progress: Progress,
    /// The price of the run's model, when the scope has one.
    pub price: Option<ModelPrice>,
    /// The host's completion condition, in words.
    pub completion: &'static str,
    /// Whether the model is live (its replies are its own) rather than scripted.
    pub live: bool,
}

/// A finished run: its header and its outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// What was stated before the run.
    pub header: Header,
    /// How the run ended.
    pub outcome: Outcome,
}

impl Report {
    /// The process exit code: 0 for `Completed`, 2 otherwise.
    #[must_use]
    pub fn exit_code(&self) -> i32 {
        status_exit_code(self.outcome.status())
    }
}

/// The JSON object of a report.
#[derive(Serialize)]
struct JsonReport<'a> {
    agent: String,
    transport: &'a str,
    capabilities: &'a [String],
    limits: JsonLimits,
    #[serde(skip_serializing_if = "Option::is_none")]
    progress: Option<JsonProgress<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    price: Option<JsonPrice<'a>>,
    /// The outcome's own form: status, text, events, usage, detail, operation.
    #[serde(flatten)]
    outcome: &'a Outcome,
}

/// A model's price as JSON: micro-units per million tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct JsonPrice<'a> {
    model: &'a str,
    input_per_million: u64,
    output_per_million: u64,
}

impl<'a> From<&'a ModelPrice> for JsonPrice<'a> {
    fn from(price: &'a ModelPrice) -> Self {
        Self {
            model: &price.model,
            input_per_million: price.input_per_million().0,
            output_per_million: price.output_per_million().0,
        }
    }
}

/// An active progress policy as JSON: the tools judged by result with their poll limits, then
/// each run-level check only when it is on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct JsonProgress<'a> {
    by_result: BTreeMap<&'a str, u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cycles: Option<JsonCycles>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error_streak: Option<u32>,
    nudge: bool,
}

/// A cycle rule as JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
struct JsonCycles {
    longest: u32,
    repeats: u32,
}

impl<'a> JsonProgress<'a> {
    /// The JSON form of `policy`, or `None` when it is not active (the default, exact
    /// repetition), so that the runs without a policy print what they printed before.
    #[must_use]
    pub fn of(policy: &'a Progress) -> Option<Self> {
        policy.is_active().then(|| Self {
            by_result: policy.by_result_tools().collect(),
            cycles: policy.cycle_rule().map(|(longest, repeats)| JsonCycles { longest, repeats }),
            error_streak: policy.streak_rule(),
            nudge: policy.nudges(),
        })
    }
}

/// The limits as JSON, the deadline in whole milliseconds, the spend budgets (cost in
/// micro-units) only when set: the same object in every console.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct JsonLimits {
    model_calls: u32,
    tool_calls: u32,
    repetitions: u32,
    deadline_ms: u128,
    calls_per_reply: u32,
    reply_bytes: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    input_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    total_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cost: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    min_output_tokens: Option<u32>,
}

impl From<&Limits> for JsonLimits {
    fn from(limits: &Limits) -> Self {
        Self {
            model_calls: limits.model_calls(),
            tool_calls: limits.tool_calls(),
            repetitions: limits.repetitions(),
            deadline_ms: limits.deadline().as_millis(),
            calls_per_reply: limits.calls_per_reply(),
            reply_bytes: limits.reply_bytes(),
            input_tokens: limits.input_tokens(),
            output_tokens: limits.output_tokens(),
            total_tokens: limits.total_tokens(),
            cost: limits.cost().map(|cost| cost.0),
            min_output_tokens: limits.has_spend_budget().then(|| limits.min_output_tokens()),
        }
    }
}

/// The report as one line of JSON: the header's `{agent, transport, capabilities, limits,
/// progress, price}`, then the outcome's own serialised form, `{status, text, events:[{kind,name,count}],
/// usage, detail, operation, partial_text, spend, pending}`.
///
/// # Errors
///
/// A serialisation error, which the report's types (strings, numbers, lists, maps with string
/// keys) cannot produce.
pub fn render_json(report: &Report) -> Result<String, serde_json::Error> {
    let json = JsonReport {
        agent: report.header.agent.to_string(),
        transport: &report.header.transport,
        capabilities: &report.header.capabilities,
        limits: (&report.header.limits).into(),
        progress: JsonProgress::of(&report.header.progress),
        price: report.header.price.as_ref().map(JsonPrice::from),
        outcome: &report.outcome,
    };
    serde_json::to_string(&json)
}
