//! The spend bound over random runs: random token and cost budgets, prices, tool results of
//! random sizes (so the conversation grows unevenly) and random usage reports, with the default
//! byte counter.
//!
//! - **An honest provider** (it reads no more tokens than the request has bytes, and writes
//!   within the output cap it was sent): the settled spend never exceeds any budget, no call is
//!   over its reservation, and the overshoot is zero.
//! - **Any provider** (reports drawn without regard to the request or its cap): the run stops at
//!   the first call whose settlement crosses a budget, so every earlier prefix of the reports is
//!   within every budget; the overshoot is at most that last call's report beyond what it was
//!   sent (its input bytes, its cap).
//!
//! In both, the settled spend is exactly the sum of the reports and their prices, each call's
//! cost rounded up, and every call went out with a cap of at least the minimum output.

use std::sync::{Arc, Mutex};

use loopbound::scripted::{Scripted, Step};
use loopbound::spend::{Micros, Price, Prices};
use loopbound::transport::{ChatRequest, Message, ModelReply, Usage};
use loopbound::{Limits, Runner, Scope, Status, ToolBuilder, ToolContext, ToolSet};
use loopbound_proptests::config::with_cases;
use loopbound_proptests::regressions;
use proptest::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

const MODEL: &str = "priced-model";
const MODEL_CALLS: u32 = 24;

#[derive(Deserialize, Serialize, JsonSchema)]
struct Lookup {
    id: usize,
}

/// One generated run.
#[derive(Clone, Debug)]
struct Case {
    input_budget: Option<u64>,
    output_budget: Option<u64>,
    total_budget: Option<u64>,
    /// The cost budget and the model's price per million input and output tokens.
    cost: Option<(u64, u64, u64)>,
    /// The byte size of each tool result, by call.
    results: Vec<usize>,
    /// The usage each call reports, by call: (input, output) as drawn. An honest provider
    /// clamps them to the request's bytes and the cap.
    reports: Vec<(u64, u64)>,
    /// A consistent provider's tokens per 100 bytes of each message (its tokenizer).
    per_100_bytes: u64,
}

/// How the provider reports a call's usage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reports {
    /// Within what it was sent (the request's bytes, the cap), drawn anew on each call: an
    /// upper bound holds, two calls' counts need not agree.
    Honest,
    /// A tokenizer's count: each message's bytes at the case's rate, rounded up, and the output
    /// drawn within the cap. The count of a request is the count of its first messages plus
    /// that of the rest, as a real provider's is.
    Consistent,
    /// What was drawn, whatever was sent.
    Careless,
}

fn case() -> impl Strategy<Value = Case> {
    let budget = |max: u64| prop::option::weighted(0.6, 1..=max);
    (
        budget(20_000),
        budget(4_000),
        budget(24_000),
        prop::option::weighted(0.5, (1u64..=200_000, 0u64..=5_000_000, 1u64..=20_000_000)),
        prop::collection::vec(0usize..3_000, MODEL_CALLS as usize),
        prop::collection::vec((0u64..6_000, 0u64..3_000), MODEL_CALLS as usize),
        1u64..=100,
    )
        .prop_map(
            |(input_budget, output_budget, total_budget, cost, results, reports, per_100_bytes)| Case {
                input_budget,
                output_budget,
                total_budget,
                cost,
                results,
                reports,
                per_100_bytes,
            },
        )
}

/// The bytes of every text the request carries: a lower bound of the default counter's
/// estimate of its input, so an honest provider's input report.
fn request_bytes(request: &ChatRequest<'_>) -> u64 {
    request.messages.iter().map(message_bytes).sum()
}

/// The bytes of one message's texts.
fn message_bytes(message: &Message) -> u64 {
    let bytes = match message {
        Message::System { content, .. } | Message::User { content, .. } | Message::Tool { content, .. } => {
            content.len()
        }
        Message::Assistant { content, tool_calls, .. } => {
            content.as_ref().map_or(0, String::len)
                + tool_calls.iter().map(|call| call.name.len() + call.arguments.len()).sum::<usize>()
        }
    };
    bytes as u64
}

/// A consistent provider's count of a request: each message's bytes at `per_100_bytes`,
/// rounded up (at most its bytes).
fn consistent_input(request: &ChatRequest<'_>, per_100_bytes: u64) -> u64 {
    request.messages.iter().map(|message| (message_bytes(message) * per_100_bytes).div_ceil(100)).sum()
}

/// What the model was sent and what it reported, call by call.
#[derive(Clone, Copy, Debug)]
struct Sent {
    bytes: u64,
    /// The output cap it was sent with (none when no budget needed one).
    cap: Option<u32>,
    reported: Usage,
}

struct Played {
    status: Status,
    spend: loopbound::spend::Spend,
    sent: Vec<Sent>,
    price: Option<Price>,
}

fn limits(case: &Case) -> Limits {
    let mut limits = Limits::default().with_model_calls(MODEL_CALLS).with_tool_calls(MODEL_CALLS);
    if let Some(tokens) = case.input_budget {
        limits = limits.with_input_tokens(tokens);
    }
    if let Some(tokens) = case.output_budget {
        limits = limits.with_output_tokens(tokens);
    }
    if let Some(tokens) = case.total_budget {
        limits = limits.with_total_tokens(tokens);
    }
    if let Some((cost, _, _)) = case.cost {
        limits = limits.with_cost(Micros(cost));
    }
    limits
}

/// Plays `case` with a provider reporting as `reports` says, its requests counted from the
/// provider's reports (`calibrate`, the default) or by the counter alone; `None` if its limits
/// are refused.
fn play(case: &Case, reports_as: Reports, calibrate: bool) -> Option<Played> {
    let results = case.results.clone();
    let lookup = ToolBuilder::new("lookup", "orders.read")
        .build(move |lookup: Lookup, _call: ToolContext| {
            let text = "r".repeat(results.get(lookup.id).copied().unwrap_or(0));
            async move { Ok::<_, String>(text) }
        })
        .expect("the tool is valid");
    let tools = ToolSet::builder().add(&lookup).build().expect("a set of one tool");

    let price = case.cost.map(|(_, input, output)| Price::per_million(Micros(input), Micros(output)));
    let mut builder = Scope::builder().grants(["orders.read"]).limits(limits(case));
    if let Some(price) = price {
        builder = builder.prices(Prices::new().model(MODEL, price).other_tools(Micros(0)).shared());
    }
    let scope = builder.build().ok()?;

    let sent = Arc::new(Mutex::new(Vec::new()));
    let reports = case.reports.clone();
    let per_100_bytes = case.per_100_bytes;
    let log = Arc::clone(&sent);
    let model = Scripted::new(move |n, request: &ChatRequest<'_>| {
        let index = usize::try_from(n).unwrap_or(usize::MAX).saturating_sub(1);
        let (input, output) = reports.get(index).copied().unwrap_or((0, 0));
        let bytes = request_bytes(request);
        let cap = request.options.max_output_tokens;
        let within_cap = cap.map_or(output, |cap| output.min(u64::from(cap)));
        let reported = match reports_as {
            Reports::Honest => Usage::new(input.min(bytes), within_cap),
            Reports::Consistent => Usage::new(consistent_input(request, per_100_bytes), within_cap),
            Reports::Careless => Usage::new(input, output),
        };
        log.lock().expect("one writer at a time").push(Sent { bytes, cap, reported });
        Step::Reply(
            ModelReply::call(format!("c{n}"), "lookup", format!(r#"{{"id":{index}}}"#)).with_usage(reported),
        )
    })
    .with_model(MODEL);

    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().ok()?;
    let outcome = runtime
        .block_on(Runner::new(&tools, &model).calibrate_reservations(calibrate).run(
            &scope,
            &mut vec![Message::user("look up every order")],
            |_| false,
        ))
        .expect("a priced model under valid limits runs");
    let sent = sent.lock().expect("the run has ended").clone();
    Some(Played { status: outcome.status(), spend: *outcome.spend(), sent, price })
}

/// What the reports of `sent` add up to, and their cost (each call rounded up).
fn sums(sent: &[Sent], price: Option<Price>) -> (u64, u64, u64) {
    let input = sent.iter().map(|s| s.reported.input_tokens).sum();
    let output = sent.iter().map(|s| s.reported.output_tokens).sum();
    let cost = price.map_or(0, |price| sent.iter().map(|s| price.cost(&s.reported).0).sum());
    (input, output, cost)
}

/// Whether spent figures are past any budget of `case`.
fn past(case: &Case, (input, output, cost): (u64, u64, u64)) -> bool {
    let over = |budget: Option<u64>, spent: u64| budget.is_some_and(|budget| spent > budget);
    over(case.input_budget, input)
        || over(case.output_budget, output)
        || over(case.total_budget, input + output)
        || over(case.cost.map(|(cost, _, _)| cost), cost)
}

/// Properties every run has, honest or not.
fn check_common(case: &Case, played: &Played) -> Result<(), TestCaseError> {
    let (input, output, cost) = sums(&played.sent, played.price);
    prop_assert_eq!(played.spend.settled.input_tokens, input, "settled input is the sum of the reports");
    prop_assert_eq!(played.spend.settled.output_tokens, output, "settled output is the sum of the reports");
    prop_assert_eq!(
        played.spend.cost,
        Micros(cost),
        "settled cost is the sum of each report's rounded-up cost"
    );
    prop_assert_eq!(played.spend.reserved.input_tokens, 0, "nothing is left reserved once the run ends");
    let min_output = limits(case).min_output_tokens();
    for sent in &played.sent {
        if let Some(cap) = sent.cap {
            prop_assert!(cap >= min_output, "a call below the minimum output is never sent: {sent:?}");
        }
    }
    // The run stops at the first settlement past a budget: every earlier prefix is within them.
    for end in 0..played.sent.len().saturating_sub(1) {
        prop_assert!(
            !past(case, sums(&played.sent[..=end], played.price)),
            "call {} was sent although the reports before it were already past a budget",
            end + 2
        );
    }
    Ok(())
}

/// What a run within every budget shows: the common properties, no report past a budget, no
/// call past its reservation, and no end but a limit's.
fn check_within_every_budget(case: &Case, played: &Played) -> Result<(), TestCaseError> {
    check_common(case, played)?;
    prop_assert!(!past(case, sums(&played.sent, played.price)), "honest reports stayed within every budget");
    prop_assert_eq!(played.spend.calls_over_reservation, 0);
    prop_assert_eq!(played.spend.overshoot_tokens, 0);
    prop_assert_eq!(played.spend.overshoot_cost, Micros(0));
    prop_assert!(played.status != Status::Completed, "the runaway loop never completes: {:?}", played.status);
    Ok(())
}

proptest! {
    #![proptest_config(with_cases(192, regressions!("spend_bound")))]

    #[test]
    fn an_honest_provider_never_takes_a_run_past_any_budget(case in case()) {
        // Counted by the counter alone: an upper bound of any report within the request's bytes.
        let Some(played) = play(&case, Reports::Honest, false) else { return Ok(()) };
        check_within_every_budget(&case, &played)?;
    }

    #[test]
    fn a_consistent_provider_never_takes_a_calibrated_run_past_any_budget(case in case()) {
        // Calibrated (the default): the last report plus the counter's count of what was
        // appended bounds a consistent provider's count of the next request.
        let Some(played) = play(&case, Reports::Consistent, true) else { return Ok(()) };
        check_within_every_budget(&case, &played)?;
    }

    #[test]
    fn a_calibrated_run_reserves_at_most_one_call_short_of_an_inconsistent_provider(case in case()) {
        // Honest reports drawn anew on each call need not agree with each other: the first that
        // comes back above its calibrated reservation ends the calibration for the run.
        let Some(played) = play(&case, Reports::Honest, true) else { return Ok(()) };
        check_common(&case, &played)?;
        prop_assert!(played.spend.calls_over_reservation <= 1, "{:?}", played.spend);
        if past(&case, sums(&played.sent, played.price)) {
            prop_assert!(
                matches!(played.status, Status::TokenBudget | Status::CostBudget),
                "a run past a budget halts on it, not {:?}", played.status
            );
        }
    }

    #[test]
    fn any_provider_overshoots_by_at_most_its_last_calls_report_beyond_what_it_was_sent(case in case()) {
        let Some(played) = play(&case, Reports::Careless, false) else { return Ok(()) };
        check_common(&case, &played)?;
        let Some(last) = played.sent.last() else { return Ok(()) };
        let excess_input = last.reported.input_tokens.saturating_sub(last.bytes);
        let excess_output = last.cap.map_or(0, |cap| last.reported.output_tokens.saturating_sub(u64::from(cap)));
        prop_assert!(
            played.spend.overshoot_tokens <= excess_input + excess_output,
            "overshoot {} past the last call's excess {} + {}",
            played.spend.overshoot_tokens, excess_input, excess_output
        );
        if past(&case, sums(&played.sent, played.price)) {
            prop_assert!(
                matches!(played.status, Status::TokenBudget | Status::CostBudget),
                "a run past a budget halts on it, not {:?}", played.status
            );
        }
    }
}
