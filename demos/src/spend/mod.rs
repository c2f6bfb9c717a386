//! The spend scenarios of `demo330`, each a command of its own:
//!
//! - `spend` ([`budgets`]): a reviewer that tries ticket ids one by one, under a total-token and
//!   a cost budget, its provider reporting usage; each call goes out with its output cap set to
//!   what the budgets leave, and the call that would not fit is never sent;
//! - `subagent` ([`tree`]): a planner whose tool runs a reviewer sub-agent in a child scope; the
//!   first reviewer stops at its own token budget, which reaches the planner as an error result,
//!   the second one finishes, and the whole tree's spend is the planner's, within its budgets.
//!
//! Both print what every review scenario prints (header, events, status, kept text, spend), and
//! between the events and the status what the scripted provider was sent and reported, call by
//! call ([`provider`]).
//!
//! # Invariants
//!
//! - The header states the limits and prices the scopes were built with, read back from them.
//! - Nothing here reads a clock: the same command gives the same bytes.
//! - With `--json`, stdout receives exactly one JSON object: the review report's keys, plus
//!   `prices`, `spend`, `provider` (and, for `subagent`, `sub_agent_limits` and `results`).

pub mod budgets;
pub mod provider;
pub mod tree;

use std::io::Write;

use clap::Args;
use loopbound::transport::Usage;
use loopbound::{Limits, Message, Outcome};
use loopbound_fixtures::Composition;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::budget::ModelPrice;
use crate::report::{JsonLimits, JsonPrice};
use crate::session::DemoError;
use crate::text::{labelled, labelled_items, render_ending, render_events};
use crate::visible::visible;
use crate::vocabulary::{Agent, EXIT_INTERNAL, chained, error_exit_code, status_exit_code};
use provider::Bill;

/// The flags of `spend` and `subagent`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Args)]
pub struct SpendArgs {
    /// Print one JSON object instead of the transcript.
    #[arg(long)]
    pub json: bool,
    /// Drive the models through their streaming path.
    #[arg(long)]
    pub stream: bool,
    /// Use the simple composition (the plain loop) instead of the harness.
    #[arg(long)]
    pub simple: bool,
}

impl SpendArgs {
    /// The composition the flags select.
    #[must_use]
    pub fn composition(&self) -> Composition {
        if self.simple { Composition::Simple } else { Composition::Harness }
    }
}

/// What a spend scenario states before it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stated {
    /// The (top) agent's composition.
    pub agent: Agent,
    /// The transport, e.g. `scripted, reporting usage`.
    pub transport: String,
    /// The capabilities of the (top) scope.
    pub capabilities: Vec<String>,
    /// The limits of the (top) scope.
    pub limits: Limits,
    /// The limits of each sub-agent's own scope, if there are sub-agents.
    pub sub_agents: Option<Limits>,
    /// Every model's price.
    pub prices: Vec<ModelPrice>,
    /// The host's completion condition.
    pub completion: &'static str,
    /// The scenario's name and what it demonstrates.
    pub scenario: String,
}

/// One tool result the (top) agent's model received.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Handed {
    /// The result's text.
    pub content: String,
    /// Whether it is an error result.
    pub error: bool,
}

/// A finished spend scenario.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Played {
    /// What was stated before the run.
    pub stated: Stated,
    /// How the (top) run ended.
    pub outcome: Outcome,
    /// What the provider was sent and reported, call by call, over every agent.
    pub bills: Vec<Bill>,
    /// The tool results the (top) model received, in order.
    pub results: Vec<Handed>,
}

impl Played {
    /// The process exit code: 0 for `Completed`, 2 otherwise.
    #[must_use]
    pub fn exit_code(&self) -> i32 {
        status_exit_code(self.outcome.status())
    }
}

/// The tool results in `conversation`, in order.
#[must_use]
pub fn results(conversation: &[Message]) -> Vec<Handed> {
    conversation
        .iter()
        .filter_map(|message| match message {
            Message::Tool { content, is_error, .. } => {
                Some(Handed { content: content.clone(), error: *is_error })
            }
            _ => None,
        })
        .collect()
}

/// Plays `spend` (`tree` false) or `subagent` (`tree` true) and prints it; returns the exit
/// code.
pub async fn play(
    tree: bool,
    args: SpendArgs,
    caller: CancellationToken,
    out: &mut impl Write,
    err: &mut impl Write,
) -> i32 {
    let played = if tree { tree::run(args, caller).await } else { budgets::run(args, caller).await };
    let played = match played {
        Ok(played) => played,
        Err(DemoError::Run(error)) => {
            let code = error_exit_code(&error);
            emit(err, &format!("demo330: {}; no outcome (exit {code})\n", visible(&error.to_string())));
            return code;
        }
        Err(error) => {
            emit(err, &format!("demo330: {}\n", chained(&error)));
            return EXIT_INTERNAL;
        }
    };
    if args.json {
        match render_json(&played) {
            Ok(json) => emit(out, &format!("{json}\n")),
            Err(error) => {
                emit(err, &format!("demo330: could not write the report as JSON: {error}\n"));
                return EXIT_INTERNAL;
            }
        }
    } else {
        emit(out, &render_text(&played));
    }
    played.exit_code()
}

/// The transcript: header, events, the provider's record, the results handed to the model,
/// the status, the kept text and the spend.
#[must_use]
pub fn render_text(played: &Played) -> String {
    let stated = &played.stated;
    let mut out = String::new();
    labelled(&mut out, "agent", &stated.agent.loop_line());
    labelled(&mut out, "", &stated.agent.absent_line());
    labelled(&mut out, "transport", &stated.transport);
    labelled(&mut out, "capabilities", &stated.capabilities.join(", "));
    labelled_items(&mut out, "limits", &stated.limits.to_string());
    if let Some(limits) = &stated.sub_agents {
        labelled_items(&mut out, "sub-agents", &format!("each its own {limits}"));
    }
    for (price, n) in stated.prices.iter().zip(0..) {
        labelled(&mut out, if n == 0 { "prices" } else { "" }, &price.to_string());
    }
    labelled(&mut out, "completion", stated.completion);
    labelled(&mut out, "scenario", &stated.scenario);
    out.push('\n');
    out.push_str(&render_events(&played.outcome));
    out.push('\n');
    render_bills(&mut out, &played.bills);
    if !played.results.is_empty() {
        out.push('\n');
        labelled(&mut out, "results", "the tool results the model received, in order");
        for (result, n) in played.results.iter().zip(1..) {
            let kind = if result.error { "error" } else { "ok" };
            let _ = std::fmt::Write::write_fmt(
                &mut out,
                format_args!("{n:>4}  {kind:<6}{}\n", visible(&result.content)),
            );
        }
    }
    out.push('\n');
    out.push_str(&render_ending(&played.outcome));
    if stated.sub_agents.is_some() {
        let own = played.bills.iter().filter(|bill| bill.agent == "planner").count();
        labelled(
            &mut out,
            "tree",
            &format!(
                "{} model calls in all, {own} by the planner and {} by its sub-agents: each was reserved and \
                 settled in the planner's scope too, so the spend above is the whole tree's, within the \
                 planner's budgets ({} of {} tokens, {} of {})",
                played.bills.len(),
                played.bills.len() - own,
                played.outcome.spend().settled.total_tokens(),
                stated.limits.total_tokens().map_or_else(|| "unlimited".to_owned(), |n| n.to_string()),
                played.outcome.spend().cost,
                stated.limits.cost().map_or_else(|| "unlimited".to_owned(), |cost| cost.to_string()),
            ),
        );
    }
    out
}

/// The provider's record as a table, with its totals.
fn render_bills(out: &mut String, bills: &[Bill]) {
    labelled(out, "provider", "what the scripted provider was sent and reported, call by call");
    out.push_str("   #  agent          output cap   input  output\n");
    for (bill, n) in bills.iter().zip(1..) {
        let cap = bill.output_cap.map_or_else(|| "none".to_owned(), |cap| cap.to_string());
        let _ = std::fmt::Write::write_fmt(
            out,
            format_args!(
                "{n:>4}  {:<14} {cap:>10} {:>7} {:>7}\n",
                bill.agent, bill.usage.input_tokens, bill.usage.output_tokens
            ),
        );
    }
    let total = bills.iter().fold(Usage::default(), |mut sum, bill| {
        sum += bill.usage;
        sum
    });
    let _ = std::fmt::Write::write_fmt(
        out,
        format_args!(
            "      {:<14} {:>10} {:>7} {:>7}\n",
            "reported", "", total.input_tokens, total.output_tokens
        ),
    );
}

/// The JSON object of a spend scenario.
#[derive(Serialize)]
struct JsonPlayed<'a> {
    agent: String,
    transport: &'a str,
    capabilities: &'a [String],
    limits: JsonLimits,
    #[serde(skip_serializing_if = "Option::is_none")]
    sub_agent_limits: Option<JsonLimits>,
    prices: Vec<JsonPrice<'a>>,
    status: loopbound::Status,
    text: Option<&'a str>,
    events: &'a [loopbound::ControlEvent],
    spend: &'a loopbound::spend::Spend,
    provider: &'a [Bill],
    #[serde(skip_serializing_if = "<[Handed]>::is_empty")]
    results: &'a [Handed],
}

/// The played scenario as one line of JSON.
///
/// # Errors
///
/// A serialisation error, which these types (strings, numbers, lists) cannot produce.
pub fn render_json(played: &Played) -> Result<String, serde_json::Error> {
    let stated = &played.stated;
    let prices = stated.prices.iter().map(JsonPrice::from).collect();
    serde_json::to_string(&JsonPlayed {
        agent: stated.agent.to_string(),
        transport: &stated.transport,
        capabilities: &stated.capabilities,
        limits: (&stated.limits).into(),
        sub_agent_limits: stated.sub_agents.as_ref().map(JsonLimits::from),
        prices,
        status: played.outcome.status(),
        text: played.outcome.text(),
        events: played.outcome.events(),
        spend: played.outcome.spend(),
        provider: &played.bills,
        results: &played.results,
    })
}

/// Writes `text` and flushes; a closed stream is ignored (the exit code carries the outcome).
fn emit(stream: &mut impl Write, text: &str) {
    let _ = stream.write_all(text.as_bytes()).and_then(|()| stream.flush());
}
