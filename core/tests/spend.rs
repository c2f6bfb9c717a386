//! Spend budgets: every model call reserved before it is sent (its output capped at what the
//! budgets leave), settled from the provider's report, the call that does not fit never sent,
//! a report past its reservation charged and halting the run, a stream cut past its
//! reservation; priced tools, per-tool limits, and a cost budget that fails closed.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use loopbound::scripted::{Scripted, Step};
use loopbound::spend::{ByteCounter, Micros, Price, Prices};
use loopbound::transport::{ModelReply, Usage};
use loopbound::{
    HaltReason, Limits, LimitsError, Message, RunError, Runner, Scope, Status, ToolBuilder, ToolContext,
    ToolSet,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, Serialize, JsonSchema)]
struct Order {
    id: u32,
}

/// `lookup` (free) and `refund` (a paid API), counting the bodies that ran.
fn tools(bodies: &Arc<AtomicU32>) -> ToolSet {
    let ran = Arc::clone(bodies);
    let lookup = ToolBuilder::new("lookup", "orders.read")
        .build(move |order: Order, _call: ToolContext| {
            ran.fetch_add(1, Ordering::SeqCst);
            async move { Ok::<_, String>(format!("order {}", order.id)) }
        })
        .unwrap();
    let ran = Arc::clone(bodies);
    let refund = ToolBuilder::new("refund", "orders.refund")
        .build(move |order: Order, _call: ToolContext| {
            ran.fetch_add(1, Ordering::SeqCst);
            async move { Ok::<_, String>(format!("refunded {}", order.id)) }
        })
        .unwrap();
    ToolSet::builder().add(&lookup).add(&refund).build().unwrap()
}

fn scope(limits: Limits) -> Scope {
    Scope::builder().grants(["orders.read", "orders.refund"]).limits(limits).build().unwrap()
}

/// The output caps the model was sent, in order.
type Caps = Arc<Mutex<Vec<Option<u32>>>>;

/// A model that looks up order `n` on its n-th call, reporting `usage` each time (its output
/// within the request's cap when `honest`), and records the output cap of every request.
fn looping(
    usage: Usage,
    honest: bool,
    caps: &Caps,
) -> Scripted<impl Fn(u32, &loopbound::transport::ChatRequest<'_>) -> Step + Send + Sync> {
    let caps = Arc::clone(caps);
    Scripted::new(move |n, request| {
        let cap = request.options.max_output_tokens;
        caps.lock().unwrap().push(cap);
        let output = match cap {
            Some(cap) if honest => usage.output_tokens.min(u64::from(cap)),
            _ => usage.output_tokens,
        };
        let usage = Usage::new(usage.input_tokens, output);
        Step::Reply(ModelReply::call(format!("c{n}"), "lookup", format!(r#"{{"id":{n}}}"#)).with_usage(usage))
    })
}

fn lines(outcome: &loopbound::Outcome) -> Vec<String> {
    outcome.events().iter().map(ToString::to_string).collect()
}

#[tokio::test]
async fn each_call_goes_out_capped_at_what_the_total_budget_leaves_and_the_one_that_does_not_fit_is_never_sent()
 {
    let bodies = Arc::new(AtomicU32::new(0));
    let caps = Caps::default();
    // An honest provider: it reads no more than it was sent, writes within its cap.
    let model = looping(Usage::new(10, 100), true, &caps);
    let limits = Limits::default().with_total_tokens(1_500).with_tool_calls(10).with_model_calls(10);
    let scope = scope(limits);
    // The counter's own arithmetic: calibrated (the default), the provider's report of 10
    // input tokens would count the requests, and the model budget would end the run first.
    let outcome = Runner::new(&tools(&bodies), &model)
        .calibrate_reservations(false)
        .run(&scope, &mut vec![Message::user("Go.")], |_| false)
        .await
        .unwrap();

    assert_eq!(outcome.status(), Status::TokenBudget);
    let spend = outcome.spend();
    // Every call reported 110 tokens, within its reservation; the one that would not have fit
    // was refused before it was sent, so the run stays within its budget.
    assert_eq!(spend.overshoot_tokens, 0);
    assert_eq!(spend.calls_over_reservation, 0);
    let calls = model.calls();
    let output: u64 =
        caps.lock().unwrap().iter().map(|cap| cap.map_or(100, |cap| u64::from(cap).min(100))).sum();
    assert_eq!(spend.settled, Usage::new(10 * u64::from(calls), output));
    assert!(spend.settled.total_tokens() <= 1_500);
    assert_eq!(
        lines(&outcome).last().map(String::as_str),
        Some(format!("TokenBudget model {calls}").as_str())
    );
    // The caps shrink with what is left: 1,500 minus what was settled minus each request's input.
    let caps = caps.lock().unwrap().clone();
    assert_eq!(caps.len(), calls as usize);
    assert!(caps.windows(2).all(|pair| pair[1] < pair[0]), "{caps:?}");
    assert_eq!(bodies.load(Ordering::SeqCst), calls, "one body per reply");
}

#[tokio::test]
async fn the_first_cap_is_the_budget_less_the_counted_request() {
    let caps = Caps::default();
    let model = looping(Usage::new(10, 10), true, &caps);
    let scope = scope(Limits::default().with_total_tokens(1_000).with_model_calls(1));
    let set = ToolSet::default();
    let _ = Runner::new(&set, &model).run(&scope, &mut vec![Message::user("Hi")], |_| false).await;
    // The request: its overhead, one message of 2 bytes and its overhead, no tools.
    let input = ByteCounter::REQUEST_OVERHEAD + 2 + ByteCounter::MESSAGE_OVERHEAD;
    assert_eq!(caps.lock().unwrap()[0], Some(u32::try_from(1_000 - input).unwrap()));
}

#[tokio::test]
async fn a_report_past_its_reservation_is_charged_counted_and_halts_the_run_with_the_overshoot() {
    // A provider that ignores the cap and bills 5,000 output tokens.
    let caps = Caps::default();
    let model = looping(Usage::new(50, 5_000), false, &caps);
    let scope = scope(Limits::default().with_output_tokens(1_000));
    let bodies = Arc::new(AtomicU32::new(0));
    let outcome = Runner::new(&tools(&bodies), &model)
        .run(&scope, &mut vec![Message::user("Go.")], |_| false)
        .await
        .unwrap();
    assert_eq!(outcome.status(), Status::TokenBudget);
    assert_eq!(caps.lock().unwrap().as_slice(), [Some(1_000)]);
    assert_eq!(model.calls(), 1, "the run halts at the first call that crosses");
    assert_eq!(bodies.load(Ordering::SeqCst), 0, "nothing of that reply ran");
    let spend = outcome.spend();
    assert_eq!(spend.settled, Usage::new(50, 5_000));
    assert_eq!((spend.calls_over_reservation, spend.overshoot_tokens), (1, 4_000));
}

#[tokio::test]
async fn a_reply_without_a_report_is_charged_its_whole_reservation() {
    let model = Scripted::new(|_, _| Step::Reply(ModelReply::text("done")));
    let scope = scope(Limits::default().with_output_tokens(500));
    let outcome = Runner::new(&ToolSet::default(), &model)
        .run(&scope, &mut vec![Message::user("Hi")], |_| true)
        .await
        .unwrap();
    assert_eq!(outcome.status(), Status::Completed);
    let input = ByteCounter::REQUEST_OVERHEAD + 2 + ByteCounter::MESSAGE_OVERHEAD;
    assert_eq!(outcome.spend().settled, Usage::new(input, 500));
}

#[tokio::test]
async fn a_stream_that_passes_its_reservation_is_cut_and_charged_at_least_its_reservation() {
    // 1 MB of text, never reported: far past 100 tokens of output however it is tokenized.
    let text = "x".repeat(1 << 20);
    let model = Scripted::new(move |_, _| Step::Reply(ModelReply::text(text.clone()))).fragment_size(4096);
    let scope = scope(Limits::default().with_output_tokens(100));
    let outcome = Runner::new(&ToolSet::default(), &model)
        .streaming(true)
        .run(&scope, &mut vec![Message::user("Hi")], |_| true)
        .await
        .unwrap();
    assert_eq!(outcome.status(), Status::TokenBudget);
    assert_eq!(outcome.text(), None);
    let spend = outcome.spend();
    // Cut at the chunk whose bytes, over the longest token, passed 100 tokens: 4096 × 4 bytes.
    assert_eq!(spend.settled.output_tokens, (4 * 4096_u64).div_ceil(ByteCounter::MAX_TOKEN_BYTES));
    assert!(spend.settled.output_tokens >= 100, "at least the reservation");
    assert_eq!(spend.calls_over_reservation, 1);
}

#[tokio::test]
async fn an_honest_stream_within_its_cap_is_never_cut() {
    // 400 tokens of English-like text (4 bytes a token) under a cap of 500.
    let text = "word ".repeat(320);
    let model = Scripted::new(move |_, _| {
        Step::Reply(ModelReply::text(text.clone()).with_usage(Usage::new(20, 400)))
    })
    .fragment_size(7);
    let scope = scope(Limits::default().with_output_tokens(500));
    let outcome = Runner::new(&ToolSet::default(), &model)
        .streaming(true)
        .run(&scope, &mut vec![Message::user("Hi")], |_| true)
        .await
        .unwrap();
    assert_eq!(outcome.status(), Status::Completed);
    assert_eq!(outcome.spend().settled, Usage::new(20, 400));
}

fn prices() -> Arc<Prices> {
    Prices::new()
        .model("m-1", Price::per_million(Micros(1_000_000), Micros(2_000_000)))
        .tool("refund", Micros(5_000))
        .other_tools(Micros::ZERO)
        .shared()
}

#[tokio::test]
async fn under_a_cost_budget_an_unpriced_model_or_tool_is_refused_before_anything_runs() {
    let scope = || {
        Scope::builder()
            .grants(["orders.read", "orders.refund"])
            .limits(Limits::default().with_cost(Micros(100_000)))
            .prices(Prices::new().model("m-1", Price::per_million(Micros(1), Micros(1))).shared())
            .build()
            .unwrap()
    };
    let bodies = Arc::new(AtomicU32::new(0));
    let unnamed = Scripted::new(|_, _| Step::Reply(ModelReply::text("x")));
    let refused = Runner::new(&tools(&bodies), &unnamed).run(&scope(), &mut Vec::new(), |_| true).await;
    assert_eq!(refused, Err(RunError::Unpriced("the transport's model (it names none)".to_owned())));
    let named = Scripted::new(|_, _| Step::Reply(ModelReply::text("x"))).with_model("m-1");
    let refused = Runner::new(&tools(&bodies), &named).run(&scope(), &mut Vec::new(), |_| true).await;
    assert_eq!(refused, Err(RunError::Unpriced("the tool lookup".to_owned())));
    assert_eq!(named.calls(), 0, "nothing was sent");
    // A cost budget without any prices is refused when the scope is built.
    let built = Scope::builder().limits(Limits::default().with_cost(Micros(1))).build();
    assert_eq!(built.err(), Some(LimitsError::Unpriced));
}

#[tokio::test]
async fn a_priced_tool_is_charged_and_refused_once_the_cost_budget_has_no_room_for_it() {
    let bodies = Arc::new(AtomicU32::new(0));
    // Each reply: 10 input + 10 output tokens = 30 µ; each refund 5,000 µ.
    let model = Scripted::new(|n, _| {
        Step::Reply(
            ModelReply::call(format!("c{n}"), "refund", format!(r#"{{"id":{n}}}"#))
                .with_usage(Usage::new(10, 10)),
        )
    })
    .with_model("m-1");
    let scope = Scope::builder()
        .grants(["orders.read", "orders.refund"])
        .limits(Limits::default().with_cost(Micros(12_000)).with_min_output_tokens(1))
        .prices(prices())
        .build()
        .unwrap();
    let outcome = Runner::new(&tools(&bodies), &model).run(&scope, &mut Vec::new(), |_| false).await.unwrap();
    assert_eq!(outcome.status(), Status::CostBudget);
    assert_eq!(bodies.load(Ordering::SeqCst), 2, "two refunds fit in 12,000 µ, a third does not");
    assert_eq!(lines(&outcome).last().map(String::as_str), Some("CostBudget refund 2"));
    let spend = outcome.spend();
    assert_eq!(spend.cost, Micros(2 * 5_000 + 3 * 30));
    assert!(spend.cost <= Micros(12_000));
}

#[tokio::test]
async fn a_tool_limited_to_one_call_runs_once_whatever_the_arguments() {
    let bodies = Arc::new(AtomicU32::new(0));
    let model = Scripted::new(|n, _| {
        Step::Reply(ModelReply::call(format!("c{n}"), "refund", format!(r#"{{"id":{n}}}"#)))
    });
    let scope = Scope::builder()
        .grants(["orders.read", "orders.refund"])
        .limits(Limits::default().with_tool_calls(10).with_model_calls(10).with_tool_calls_of("refund", 1))
        .build()
        .unwrap();
    let outcome = Runner::new(&tools(&bodies), &model).run(&scope, &mut Vec::new(), |_| false).await.unwrap();
    assert_eq!(outcome.status(), Status::ToolLimit);
    assert_eq!(bodies.load(Ordering::SeqCst), 1);
    assert_eq!(model.calls(), 2);
    assert_eq!(lines(&outcome)[2..], ["ModelCall model 2", "ToolLimit refund 1"]);
    assert_eq!(scope.stop_reason(), Some(HaltReason::ToolLimit));
}

#[tokio::test]
async fn a_per_tool_limit_on_a_tool_the_set_does_not_have_refuses_the_run_before_any_model_call() {
    let bodies = Arc::new(AtomicU32::new(0));
    let model = Scripted::new(|_, _| Step::Reply(ModelReply::text("never asked")));
    // "refnd": a misspelt "refund", which would limit nothing.
    let limits = Limits::default().with_tool_calls_of("refund", 1).with_tool_calls_of("refnd", 1);
    let scope = Scope::builder().grants(["orders.read", "orders.refund"]).limits(limits).build().unwrap();
    let refused = Runner::new(&tools(&bodies), &model).run(&scope, &mut Vec::new(), |_| true).await;
    let error = refused.unwrap_err();
    assert_eq!(error, RunError::InvalidLimits(LimitsError::UnknownTool("refnd".to_owned())));
    assert_eq!(error.kind(), loopbound::RunErrorKind::Configuration);
    assert_eq!(
        error.to_string(),
        "invalid limits: a per-tool limit names the tool refnd, which the run's tool set does not have; nothing ran"
    );
    assert_eq!((model.calls(), bodies.load(Ordering::SeqCst)), (0, 0));
    assert_eq!(scope.model_calls(), 0);
    assert!(scope.events().is_empty());
    // Spelt right, the same limit runs.
    let limits = Limits::default().with_tool_calls_of("refund", 1);
    let scope = Scope::builder().grants(["orders.read", "orders.refund"]).limits(limits).build().unwrap();
    let outcome = Runner::new(&tools(&bodies), &model).run(&scope, &mut Vec::new(), |_| true).await.unwrap();
    assert_eq!((outcome.status(), model.calls()), (Status::Completed, 1));
}

#[test]
fn per_tool_limits_and_budgets_are_validated() {
    let twice = Limits::default().with_tool_calls_of("refund", 1).with_tool_calls_of("refund", 2);
    let twice = Scope::builder().limits(twice).build().unwrap();
    assert_eq!(twice.limits().tool_calls_of("refund"), Some(2), "the last limit given holds");
    let invalid = Scope::builder().limits(Limits::default().with_tool_calls_of("no spaces", 1)).build();
    assert_eq!(invalid.err(), Some(LimitsError::InvalidToolLimit));
    let zero = Scope::builder().limits(Limits::default().with_input_tokens(0)).build();
    assert_eq!(zero.err(), Some(LimitsError::ZeroBudget));
}

#[tokio::test]
async fn without_a_budget_the_spend_is_still_reported() {
    let model = Scripted::new(|_, _| Step::Reply(ModelReply::text("done").with_usage(Usage::new(7, 3))))
        .with_model("m-1");
    let scope = Scope::builder().prices(prices()).build().unwrap();
    let outcome =
        Runner::new(&ToolSet::default(), &model).run(&scope, &mut Vec::new(), |_| true).await.unwrap();
    let spend = outcome.spend();
    assert_eq!((spend.settled, spend.cost, spend.calls_over_reservation), (Usage::new(7, 3), Micros(13), 0));
}

/// A model that loops on `lookup` within its cap, and answers a request without tools (the
/// wrap-up) with `wrap_up`.
fn wrapping(
    wrap_up: ModelReply,
) -> Scripted<impl Fn(u32, &loopbound::transport::ChatRequest<'_>) -> Step + Send + Sync> {
    Scripted::new(move |n, request| {
        if request.tools.is_empty() {
            return Step::Reply(wrap_up.clone());
        }
        let output = request.options.max_output_tokens.map_or(100, |cap| u64::from(cap).min(100));
        Step::Reply(
            ModelReply::call(format!("c{n}"), "lookup", format!(r#"{{"id":{n}}}"#))
                .with_usage(Usage::new(10, output)),
        )
    })
}

#[tokio::test]
async fn a_wrap_up_kept_aside_answers_once_after_the_budget_stops_the_run_and_is_only_partial() {
    let bodies = Arc::new(AtomicU32::new(0));
    let model =
        wrapping(ModelReply::text("Orders 1 to 3 looked up; not finished.").with_usage(Usage::new(30, 20)));
    let limits =
        Limits::default().with_total_tokens(2_000).with_wrap_up(800).with_tool_calls(20).with_model_calls(20);
    let scope = scope(limits);
    let outcome = Runner::new(&tools(&bodies), &model)
        .run(&scope, &mut vec![Message::user("Go.")], |_| true)
        .await
        .unwrap();
    assert_eq!(outcome.status(), Status::TokenBudget, "the limit's status, never Completed");
    assert_eq!(outcome.text(), None);
    assert_eq!(outcome.partial_text(), Some("Orders 1 to 3 looked up; not finished."));
    let events = lines(&outcome);
    let calls = model.calls();
    assert_eq!(
        events[events.len() - 2..],
        [format!("TokenBudget model {}", calls - 1), format!("WrapUp model {calls}")]
    );
    // The run spent within its budget less what was kept aside; the wrap-up within the rest.
    assert!(outcome.spend().settled.total_tokens() <= 2_000, "{:?}", outcome.spend());
    assert_eq!(outcome.spend().overshoot_tokens, 0);
}

#[tokio::test]
async fn a_wrap_up_that_asks_for_tools_gets_nothing_more() {
    let bodies = Arc::new(AtomicU32::new(0));
    let model = wrapping(ModelReply::call("w", "lookup", r#"{"id":99}"#));
    let limits = Limits::default().with_model_calls(3).with_wrap_up(500).with_tool_calls(10);
    let scope = scope(limits);
    let outcome = Runner::new(&tools(&bodies), &model).run(&scope, &mut Vec::new(), |_| true).await.unwrap();
    assert_eq!(outcome.status(), Status::ModelBudget);
    assert_eq!((outcome.text(), outcome.partial_text()), (None, None));
    assert_eq!(bodies.load(Ordering::SeqCst), 2, "two calls of the run's own; the wrap-up's call never ran");
    assert_eq!(model.calls(), 3);
    assert_eq!(lines(&outcome).last().map(String::as_str), Some("WrapUp model 3"));
}

#[tokio::test]
async fn the_model_is_told_the_remaining_budgets_when_the_host_discloses_them() {
    let notices = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&notices);
    let model = Scripted::new(move |n, request| {
        seen.lock().unwrap().push(request.options.notice.clone());
        if n == 1 {
            Step::Reply(ModelReply::call("c1", "lookup", r#"{"id":1}"#).with_usage(Usage::new(10, 40)))
        } else {
            Step::Reply(ModelReply::text("done").with_usage(Usage::new(10, 5)))
        }
    });
    let bodies = Arc::new(AtomicU32::new(0));
    let scope = scope(Limits::default().with_total_tokens(1_000));
    let outcome = Runner::new(&tools(&bodies), &model)
        .disclose_budgets(true)
        .run(&scope, &mut vec![Message::user("Go.")], |_| true)
        .await
        .unwrap();
    assert_eq!(outcome.status(), Status::Completed);
    let notices = notices.lock().unwrap().clone();
    assert_eq!(
        notices,
        [
            Some("Remaining budget: 6 model calls, 4 tool calls, 1000 total tokens.".to_owned()),
            Some("Remaining budget: 5 model calls, 3 tool calls, 950 total tokens.".to_owned()),
        ]
    );
}

/// An honest provider's count of a request: each message's bytes over four (rounded up) plus
/// four for its framing, ten for the request's; never more than the byte counter's, and the
/// same for the same first messages whatever follows them.
fn honest_input(messages: &[Message]) -> u64 {
    let text = |message: &Message| match message {
        Message::System { content, .. } | Message::User { content, .. } => content.len(),
        Message::Assistant { content, tool_calls, .. } => {
            content.as_deref().map_or(0, str::len)
                + tool_calls
                    .iter()
                    .map(|call| call.id.len() + call.name.len() + call.arguments.len())
                    .sum::<usize>()
        }
        Message::Tool { call_id, content, .. } => call_id.len() + content.len(),
    };
    10 + messages.iter().map(|message| (text(message) as u64).div_ceil(4) + 4).sum::<u64>()
}

/// A runaway loop (a new lookup each call) on an honest provider that bills `honest_input` and
/// 40 output tokens, under a total budget of `budget`: how many calls it made and what it spent.
async fn runaway(budget: u64, calibrate: bool) -> (u32, Usage, Status) {
    let bodies = Arc::new(AtomicU32::new(0));
    let model = Scripted::new(|n, request| {
        let usage = Usage::new(honest_input(request.messages), 40);
        Step::Reply(ModelReply::call(format!("c{n}"), "lookup", format!(r#"{{"id":{n}}}"#)).with_usage(usage))
    });
    let limits = Limits::default().with_total_tokens(budget).with_tool_calls(1_000).with_model_calls(1_000);
    let conversation = vec![Message::system("Look orders up until told otherwise."), Message::user("Go.")];
    let outcome = Runner::new(&tools(&bodies), &model)
        .options(loopbound::transport::ChatOptions::default().with_max_output_tokens(40))
        .calibrate_reservations(calibrate)
        .run(&scope(limits), &mut conversation.clone(), |_| false)
        .await
        .unwrap();
    assert_eq!(outcome.spend().overshoot_tokens, 0, "never past the budget");
    assert!(outcome.spend().settled.total_tokens() <= budget);
    (model.calls(), outcome.spend().settled, outcome.status())
}

#[tokio::test]
async fn calibrated_reservations_spend_nearly_all_of_a_budget_that_the_byte_counter_leaves_unspent() {
    let (calls, settled, status) = runaway(20_000, false).await;
    assert_eq!(status, Status::TokenBudget);
    let (calibrated_calls, calibrated, calibrated_status) = runaway(20_000, true).await;
    assert_eq!(calibrated_status, Status::TokenBudget);
    // The byte counter stops when its estimate of the next call (about four times the
    // provider's count here) no longer fits: 0.89 of the budget spent. Calibrated, the run stops
    // when the provider's own count of the next call no longer fits: 0.97.
    assert_eq!((calls, settled.total_tokens()), (44, 17_777), "{settled:?}");
    assert_eq!((calibrated_calls, calibrated.total_tokens()), (46, 19_319), "{calibrated:?}");
}

#[tokio::test]
async fn a_preview_says_what_the_first_call_reserves_and_sends_nothing() {
    let bodies = Arc::new(AtomicU32::new(0));
    let caps = Caps::default();
    let model = looping(Usage::new(10, 100), true, &caps);
    let scope = scope(Limits::default().with_total_tokens(1_500).with_tool_calls(10).with_model_calls(10));
    // Counted by the counter alone, so that the run ends on its token budget (see above).
    let runtime = Runner::new(&tools(&bodies), &model).calibrate_reservations(false);
    let conversation = vec![Message::user("Go.")];
    let preview = runtime.preview(&scope, &conversation);
    assert_eq!(model.calls(), 0, "nothing sent");
    assert!(preview.fits());
    let output = preview.output_tokens().expect("bounded by the budget");
    assert_eq!(preview.input_tokens() + output, 1_500, "the input counted, the rest as output");
    assert_eq!(preview.cost(), None, "no price");
    let outcome = runtime.run(&scope, &mut conversation.clone(), |_| false).await.unwrap();
    assert_eq!(outcome.status(), Status::TokenBudget);
    assert_eq!(caps.lock().unwrap().first().copied(), Some(Some(u32::try_from(output).unwrap())));
    assert!(!runtime.preview(&scope, &conversation).fits(), "a halted scope admits nothing");
}
