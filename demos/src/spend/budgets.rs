//! `demo330 spend`: a reviewer that tries ticket ids one by one, stopped by its spend budgets
//! alone.
//!
//! The model asks for `read_ticket(n)` on its n-th call and never finishes; its provider is
//! honest ([`provider::honest`]): it reports its usage and writes within the output cap. The
//! call and tool budgets are set out of reach, so only the total-token and the cost budget can
//! stop the run: each call goes out capped at what they leave after its input (800 tokens, the
//! review's own cap, while there is room), the caps shrink as the spend grows, and the call that
//! would not fit is never sent.
//!
//! # Invariants
//!
//! - The provider's record and the outcome agree: the run's settled spend is exactly the usage
//!   the provider reported, since every report is within its reservation (none is over).
//! - The provider receives exactly the admitted model calls: the halt's count is the number of
//!   calls sent, and the refused one never reaches it.

use loopbound::spend::{Micros, Price};
use loopbound::transport::ModelReply;
use loopbound::{Limits, Scope};
use loopbound_fixtures::review::{self, BOTH_CAPABILITIES, Review};
use tokio_util::sync::CancellationToken;

use super::provider::{self, Bills};
use super::{Played, SpendArgs, Stated};
use crate::budget::{self, ModelPrice};
use crate::session::{DemoError, SetupError};
use crate::vocabulary::Agent;

/// The model's id, as the price table names it.
pub const MODEL: &str = "scripted-reviewer";
/// The total-token budget of the run.
pub const TOTAL_TOKENS: u64 = 3_500;
/// The cost budget of the run, in micro-dollars ($0.016).
pub const COST: Micros = Micros(16_000);
/// What the scenario demonstrates.
pub const DEMONSTRATES: &str = "a reviewer that tries ticket ids one by one: each call is capped at what the \
     token and cost budgets leave, and the one that would not fit is never sent";

/// The limits: calls and tools out of reach, a total-token and a cost budget.
#[must_use]
pub fn limits() -> Limits {
    Limits::default().with_model_calls(40).with_tool_calls(40).with_total_tokens(TOTAL_TOKENS).with_cost(COST)
}

/// The model's price: $3 per million input tokens, $15 per million output tokens.
#[must_use]
pub fn price() -> ModelPrice {
    ModelPrice { model: MODEL.to_owned(), price: Price::per_million(Micros(3_000_000), Micros(15_000_000)) }
}

/// The model's reply on its `call`-th call: `read_ticket(call)`.
#[must_use]
pub fn reply(call: u32) -> ModelReply {
    ModelReply::call(format!("call-{call}"), "read_ticket", format!(r#"{{"input":{call}}}"#))
}

/// Runs the scenario.
///
/// # Errors
///
/// [`DemoError::Setup`] if the scope was refused, [`DemoError::Run`] if the run ended without
/// an outcome (the caller cancelled).
pub async fn run(args: SpendArgs, caller: CancellationToken) -> Result<Played, DemoError> {
    let price = price();
    let scope = Scope::builder()
        .grants(BOTH_CAPABILITIES)
        .limits(limits())
        .prices(budget::table([&price]))
        .caller(caller)
        .state(Review::default())
        .build()
        .map_err(|error| DemoError::Setup(SetupError::Limits(error)))?;
    let bills = Bills::default();
    let model = provider::honest(MODEL, "reviewer", &bills, reply);
    let tools = review::tools();
    let stream = if args.stream { ", streaming" } else { "" };
    let stated = Stated {
        agent: Agent::new(args.composition(), scope.limits()),
        transport: format!("scripted, model {MODEL}, reporting usage{stream}"),
        capabilities: scope.capabilities().map(str::to_owned).collect(),
        limits: scope.limits().clone(),
        sub_agents: None,
        prices: vec![price],
        completion: review::COMPLETION_CONDITION,
        scenario: format!("spend: {DEMONSTRATES}"),
    };
    let mut conversation = review::conversation();
    let outcome = args
        .composition()
        .runner(&tools.set, &model)
        .options(review::options())
        .streaming(args.stream)
        .run(&scope, &mut conversation, |ended| Review::completed(ended.state()))
        .await
        .map_err(DemoError::Run)?;
    // The tool results are the ticket texts and not-found answers: the spend is the point here.
    Ok(Played { stated, outcome, bills: bills.all(), results: Vec::new() })
}
