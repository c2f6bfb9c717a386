//! `demo330 subagent`: a planner whose tool runs a reviewer sub-agent, as a tree of scopes.
//!
//! The planner asks `delegate(42)` twice, then answers. Each delegation runs a reviewer
//! ([`SubAgent`]) in a child of the planner's scope, with its own limits and the review's tools:
//! the first reviewer tries ticket ids one by one and halts at its own token budget, which
//! reaches the planner as an error result (the planner goes on); the second reads ticket 42 and
//! finishes it, and its answer is the planner's second tool result. Every model call of a
//! reviewer is admitted and reserved in the planner's scope too, so the tree's spend is the
//! planner's, within the planner's budgets.
//!
//! # Invariants
//!
//! - The planner's spend equals the usage the provider reported over every call of the tree
//!   (the planner's and both reviewers'), and stays within the planner's budgets.
//! - A reviewer's own halt ends that reviewer only: the planner's run goes on, and its host
//!   condition (a reviewer completed the review) decides `Completed`.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use loopbound::spend::{Micros, Price};
use loopbound::transport::ModelReply;
use loopbound::{Limits, Message, Scope, SubAgent, ToolBuilder, ToolContext, ToolSet};
use loopbound_fixtures::Composition;
use loopbound_fixtures::review::{self, BOTH_CAPABILITIES, CLOSING, Review, TICKET_ID, TicketInput};
use tokio_util::sync::CancellationToken;

use super::provider::{self, Bills};
use super::{Played, SpendArgs, Stated, results};
use crate::budget::{self, ModelPrice};
use crate::session::{DemoError, SetupError};
use crate::vocabulary::Agent;

/// The planner's model id.
pub const PLANNER: &str = "scripted-planner";
/// The reviewers' model id.
pub const REVIEWER: &str = "scripted-reviewer";
/// The capability of the planner's tool.
pub const DELEGATE_CAPABILITY: &str = "agents.delegate";
/// The planner's total-token budget: the whole tree's.
pub const TREE_TOKENS: u64 = 12_000;
/// The planner's cost budget, in micro-dollars ($0.05): the whole tree's.
pub const TREE_COST: Micros = Micros(50_000);
/// Each reviewer's own total-token budget.
pub const REVIEWER_TOKENS: u64 = 3_000;
/// The planner's instructions.
pub const INSTRUCTIONS: &str = "You plan reviews. Have each ticket reviewed by calling delegate with \
     its id; if a reviewer stops, you may ask once more. Then answer exactly: Review finished.";
/// The planner's request.
pub const PROMPT: &str = "Have ticket 42 reviewed.";
/// The host's completion condition, in words.
pub const COMPLETION: &str =
    "a reviewer's finish_review succeeded (checked by the host; no model's words are proof)";
/// What the scenario demonstrates.
pub const DEMONSTRATES: &str = "a planner's tool runs a reviewer sub-agent: the first stops at its own token \
     budget, an error result for the planner; the second finishes; the tree spends within the planner's budgets";

/// The agents' names in the provider's record.
const REVIEWERS: [&str; 4] = ["reviewer 1", "reviewer 2", "reviewer 3", "reviewer 4"];

/// The planner's state: delegations asked for, and whether one completed the review.
#[derive(Debug, Default)]
pub struct Delegations {
    asked: AtomicU32,
    completed: AtomicBool,
}

impl Delegations {
    /// The host's completion condition: a reviewer completed the review.
    #[must_use]
    pub fn completed(&self) -> bool {
        self.completed.load(Ordering::SeqCst)
    }
}

/// The planner's limits, which are the whole tree's (a reviewer's every admission is the
/// planner's too): 30 model calls and 30 tool calls, a second delegation of the same ticket,
/// the tree's token and cost budgets.
#[must_use]
pub fn planner_limits() -> Limits {
    Limits::default()
        .with_model_calls(30)
        .with_tool_calls(30)
        .with_repetitions(2)
        .with_total_tokens(TREE_TOKENS)
        .with_cost(TREE_COST)
}

/// Each reviewer's own limits: calls out of reach, a token budget of its own.
#[must_use]
pub fn reviewer_limits() -> Limits {
    Limits::default().with_model_calls(20).with_tool_calls(20).with_total_tokens(REVIEWER_TOKENS)
}

/// Both models' prices: the planner at $3 and $15 per million tokens, the reviewers at $0.15
/// and $0.60.
#[must_use]
pub fn prices() -> [ModelPrice; 2] {
    [
        ModelPrice {
            model: PLANNER.to_owned(),
            price: Price::per_million(Micros(3_000_000), Micros(15_000_000)),
        },
        ModelPrice {
            model: REVIEWER.to_owned(),
            price: Price::per_million(Micros(150_000), Micros(600_000)),
        },
    ]
}

/// The planner's reply on its `call`-th call: two delegations of ticket 42, then the closing.
#[must_use]
pub fn planner_reply(call: u32) -> ModelReply {
    match call {
        1 | 2 => ModelReply::call(format!("plan-{call}"), "delegate", format!(r#"{{"input":{TICKET_ID}}}"#)),
        _ => ModelReply::text(CLOSING),
    }
}

/// The `n`-th reply of the reviewer of delegation `asked`: the first tries ticket ids one by one;
/// the others read ticket 42, finish it, and close.
#[must_use]
pub fn reviewer_reply(asked: u32, n: u32) -> ModelReply {
    let call = |tool: &str, id: i64| {
        ModelReply::call(format!("review-{asked}-{n}"), tool, format!(r#"{{"input":{id}}}"#))
    };
    match (asked, n) {
        (1, n) => call("read_ticket", i64::from(n)),
        (_, 1) => call("read_ticket", TICKET_ID),
        (_, 2) => call("finish_review", TICKET_ID),
        _ => ModelReply::text(CLOSING),
    }
}

/// The planner's tool: `delegate(ticket)` runs a reviewer in a child scope.
fn planner_tools(composition: Composition, stream: bool, bills: &Bills) -> ToolSet<Delegations> {
    let reviews = review::tools().set;
    let bills = bills.clone();
    let delegate = ToolBuilder::new("delegate", DELEGATE_CAPABILITY)
        .description("Ask a reviewer to review one ticket by its id; returns its answer, or why it stopped.")
        .build(move |ticket: TicketInput, call: ToolContext<Delegations>| {
            let asked = call.state().asked.fetch_add(1, Ordering::SeqCst) + 1;
            let agent = REVIEWERS[usize::try_from(asked).map_or(3, |n| n.clamp(1, 4) - 1)];
            let model = provider::honest(REVIEWER, agent, &bills, move |n| reviewer_reply(asked, n));
            let runtime = composition.runner(&reviews, model).options(review::options()).streaming(stream);
            let reviewer = SubAgent::new(runtime);
            let start = vec![
                Message::system(review::INSTRUCTIONS),
                Message::user(format!("Review ticket {}.", ticket.input)),
            ];
            async move {
                let answer = reviewer
                    .run(
                        &call,
                        |child| {
                            child.grants(BOTH_CAPABILITIES).limits(reviewer_limits()).state(Review::default())
                        },
                        start,
                        |ended| ended.state().completed(),
                    )
                    .await;
                if answer.is_ok() {
                    call.state().completed.store(true, Ordering::SeqCst);
                }
                answer
            }
        });
    let set = delegate.and_then(|delegate| ToolSet::builder().add(&delegate).build());
    set.unwrap_or_else(|error| unreachable!("delegate is a valid name: {error}"))
}

/// Runs the scenario.
///
/// # Errors
///
/// [`DemoError::Setup`] if the planner's scope was refused, [`DemoError::Run`] if its run ended
/// without an outcome (the caller cancelled).
pub async fn run(args: SpendArgs, caller: CancellationToken) -> Result<Played, DemoError> {
    let prices = prices();
    let scope = Scope::builder()
        .grants([DELEGATE_CAPABILITY])
        .grants(BOTH_CAPABILITIES)
        .limits(planner_limits())
        .prices(budget::table(&prices))
        .caller(caller)
        .state(Delegations::default())
        .build()
        .map_err(|error| DemoError::Setup(SetupError::Limits(error)))?;
    let bills = Bills::default();
    let planner = provider::honest(PLANNER, "planner", &bills, planner_reply);
    let tools = planner_tools(args.composition(), args.stream, &bills);
    let stream = if args.stream { ", streaming" } else { "" };
    let stated = Stated {
        agent: Agent::new(args.composition(), scope.limits()),
        transport: format!("scripted, models {PLANNER} and {REVIEWER}, reporting usage{stream}"),
        capabilities: scope.capabilities().map(str::to_owned).collect(),
        limits: scope.limits().clone(),
        sub_agents: Some(reviewer_limits()),
        prices: prices.to_vec(),
        completion: COMPLETION,
        scenario: format!("subagent: {DEMONSTRATES}"),
    };
    let mut conversation = vec![Message::system(INSTRUCTIONS), Message::user(PROMPT)];
    let outcome = args
        .composition()
        .runner(&tools, &planner)
        .options(review::options())
        .streaming(args.stream)
        .run(&scope, &mut conversation, |ended| Delegations::completed(ended.state()))
        .await
        .map_err(DemoError::Run)?;
    Ok(Played { stated, outcome, bills: bills.all(), results: results(&conversation) })
}
