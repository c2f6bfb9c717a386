//! `spend-peers`: loopbound's token and cost budgets on the workload of
//! `shared/bench/spend-peers/` (pydantic-ai `UsageLimits`, pydantic-ai-harness `SpendLimits`), so
//! that the two tables read side by side.
//!
//! ```text
//! cargo run --release -p loopbound-benches --bin spend-peers [-- --reps 5]
//! ```
//!
//! # The workload, as the peers ran it
//!
//! Every model call reads 1,000 input tokens and writes 500 output tokens (1,500 tokens,
//! $0.0105 at $3 and $15 per million), whatever the conversation holds; the runs are runaway tool
//! loops (a tool call on every reply) unless the case says otherwise. A call is **billed** when it
//! is sent, whatever happens next (a conservative ledger: a call cancelled in flight is billed
//! too). Here the provider is honest about the one thing loopbound tells it: when the request
//! carries an output cap below 500, it writes that many tokens (as `max_tokens` makes a real
//! provider stop). The peers send no cap.
//!
//! The runs count their requests with an exact counter of this workload (1,000 tokens a request):
//! the role `tiktoken` or a provider's own tokenizer plays for a real model. With the default
//! byte counter the reservations are larger still, so a run stops earlier, never later.
//!
//! # What it prints
//!
//! For one run per case, and for K runs sharing one budget (through a tree: K child scopes of one
//! parent scope that holds the budget; or through a shared pool: K scopes of their own drawing
//! from one pool, in memory and in a SQLite file), each run a runaway loop on its own task,
//! provider latency uniform in 200-600 ms on tokio's paused clock, one seed per repetition): the calls
//! made, the calls a reserving gate admits (`floor(L / per call)`), tokens and cost billed, the
//! overshoot past the budget, the calls sent with the budget already billed or fully committed
//! (billed + in flight, this call included), the peak in flight, and how the run ended. Every
//! figure comes from this process's own ledger, the same definitions as the peers' columns.

#![forbid(unsafe_code)]
#![warn(clippy::pedantic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use clap::Parser;
use loopbound::pool::{DynPoolStore, MemoryPools, PoolBudget};
use loopbound::spend::{Micros, Price, Prices, TokenCounter};
use loopbound::transport::{ChatOptions, ChatRequest, ModelReply, Transport, TransportError, Usage};
use loopbound::{Limits, Message, Runner, Scope, Status, ToolBuilder, ToolContext, ToolSet};
use loopbound_sqlite::SqlitePools;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

const INPUT: u64 = 1_000;
const OUTPUT: u64 = 500;
const PER_CALL: u64 = INPUT + OUTPUT;
const MODEL: &str = "workload-model";
/// $3 and $15 per million tokens, in micro-dollars per million: 1,000 in + 500 out = $0.0105.
const PRICE: Price = Price::per_million(Micros(3_000_000), Micros(15_000_000));

#[derive(Parser, Debug)]
#[command(
    about = "loopbound's spend budgets on the spend-peers workload, one run and K runs sharing a budget"
)]
struct Cli {
    /// Repetitions of each shared-budget configuration (one seed each).
    #[arg(long, default_value_t = 5)]
    reps: u64,
}

/// The exact count of this workload's requests: 1,000 tokens each, whatever they hold.
struct WorkloadCounter;

impl TokenCounter for WorkloadCounter {
    fn count(&self, _text: &str) -> u64 {
        0
    }

    fn request_overhead(&self) -> u64 {
        INPUT
    }

    fn message_overhead(&self) -> u64 {
        0
    }
}

/// The ground truth: what was sent and billed, and what was in flight when.
#[derive(Default)]
struct Ledger {
    sent: AtomicU64,
    /// Tokens of the calls that have returned.
    billed_returned: AtomicU64,
    /// Tokens of every call sent (billed at sending).
    billed: AtomicU64,
    in_flight: AtomicU64,
    peak_in_flight: AtomicU64,
    sent_with_budget_billed: AtomicU64,
    sent_with_budget_committed: AtomicU64,
}

/// What a reply of the model is, by case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// A tool call on every reply.
    ToolLoop,
    /// A text answer at once.
    TextAnswer,
    /// One tool call, then a text answer.
    ToolThenAnswer,
}

/// The workload's model: a fixed report, a latency drawn from a seeded generator.
struct Workload {
    shape: Shape,
    ledger: Arc<Ledger>,
    budget_tokens: u64,
    latency: Option<(u64, u64)>,
    seed: AtomicU64,
}

impl Workload {
    fn new(
        shape: Shape,
        ledger: Arc<Ledger>,
        budget_tokens: u64,
        latency: Option<(u64, u64)>,
        seed: u64,
    ) -> Self {
        Self { shape, ledger, budget_tokens, latency, seed: AtomicU64::new(seed) }
    }

    /// A latency uniform in the configured range (splitmix64 over a shared counter).
    fn latency(&self) -> Duration {
        let Some((low, high)) = self.latency else { return Duration::ZERO };
        let mut z = self.seed.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        Duration::from_millis(low + z % (high - low + 1))
    }

    fn record_send(&self, tokens: u64) {
        let ledger = &self.ledger;
        ledger.sent.fetch_add(1, Ordering::SeqCst);
        let committed = ledger.billed.fetch_add(tokens, Ordering::SeqCst) + tokens;
        if ledger.billed_returned.load(Ordering::SeqCst) >= self.budget_tokens {
            ledger.sent_with_budget_billed.fetch_add(1, Ordering::SeqCst);
        }
        if committed > self.budget_tokens {
            ledger.sent_with_budget_committed.fetch_add(1, Ordering::SeqCst);
        }
        let flying = ledger.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        ledger.peak_in_flight.fetch_max(flying, Ordering::SeqCst);
    }
}

impl Transport for Workload {
    fn model(&self) -> Option<&str> {
        Some(MODEL)
    }

    async fn complete<'a>(&'a self, request: ChatRequest<'a>) -> Result<ModelReply, TransportError> {
        let output = request.options.max_output_tokens.map_or(OUTPUT, |cap| OUTPUT.min(u64::from(cap)));
        let tokens = INPUT + output;
        self.record_send(tokens);
        tokio::time::sleep(self.latency()).await;
        self.ledger.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.ledger.billed_returned.fetch_add(tokens, Ordering::SeqCst);
        let replies = request.messages.iter().filter(|m| matches!(m, Message::Assistant { .. })).count();
        let answer = match self.shape {
            Shape::ToolLoop => false,
            Shape::TextAnswer => true,
            Shape::ToolThenAnswer => replies >= 1,
        };
        let reply = if answer {
            ModelReply::text("The review is done.")
        } else {
            ModelReply::call(format!("c{replies}"), "lookup", format!(r#"{{"id":{replies}}}"#))
        };
        Ok(reply.with_usage(Usage::new(INPUT, output)))
    }
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Lookup {
    id: u64,
}

fn tools() -> ToolSet {
    let lookup =
        ToolBuilder::new("lookup", "orders.read")
            .build(|lookup: Lookup, _call: ToolContext| async move {
                Ok::<_, String>(format!("order {}", lookup.id))
            })
            .expect("the tool is valid");
    ToolSet::builder().add(&lookup).build().expect("a set of one tool")
}

/// Loose call limits, so that only the spend budgets stop a run.
fn roomy() -> Limits {
    Limits::default()
        .with_model_calls(1_000_000)
        .with_tool_calls(1_000_000)
        .with_deadline(Duration::from_hours(30 * 24))
}

/// The runtime of one run: its requests carry a cap of 500 output tokens when `capped`, as the
/// peers' clients may; otherwise none, and loopbound's defaults cap them.
fn runtime_for(tools: &ToolSet, model: Workload, capped: bool) -> Runner<Workload> {
    let options = if capped {
        ChatOptions::default().with_max_output_tokens(u32::try_from(OUTPUT).unwrap_or(u32::MAX))
    } else {
        ChatOptions::default()
    };
    Runner::new(tools, model).options(options).token_counter(WorkloadCounter)
}

/// A budget of one case.
#[derive(Clone, Copy, Debug)]
enum Budget {
    Total(u64),
    Input(u64),
    Output(u64),
    /// Micro-dollars.
    Cost(u64),
}

impl Budget {
    fn apply(self, limits: Limits) -> Limits {
        match self {
            Self::Total(tokens) => limits.with_total_tokens(tokens),
            Self::Input(tokens) => limits.with_input_tokens(tokens),
            Self::Output(tokens) => limits.with_output_tokens(tokens),
            Self::Cost(micros) => limits.with_cost(Micros(micros)),
        }
    }

    fn label(self) -> String {
        match self {
            Self::Total(tokens) => format!("total={tokens}"),
            Self::Input(tokens) => format!("input={tokens}"),
            Self::Output(tokens) => format!("output={tokens}"),
            Self::Cost(micros) => format!("cost=${}", dollars(micros)),
        }
    }

    /// What one call spends of this budget, and the budget, in its own unit.
    fn per_call_and_limit(self) -> (u64, u64) {
        match self {
            Self::Total(tokens) => (PER_CALL, tokens),
            Self::Input(tokens) => (INPUT, tokens),
            Self::Output(tokens) => (OUTPUT, tokens),
            Self::Cost(micros) => (PRICE.cost(&Usage::new(INPUT, OUTPUT)).0, micros),
        }
    }
}

fn dollars(micros: u64) -> String {
    let text = format!("{}.{:06}", micros / 1_000_000, micros % 1_000_000);
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

fn shape_label(shape: Shape) -> &'static str {
    match shape {
        Shape::ToolLoop => "tool-loop",
        Shape::TextAnswer => "text-answer",
        Shape::ToolThenAnswer => "tool-then-answer",
    }
}

fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime builds")
}

/// One run of `shape` under `budget`: one table row.
fn single(shape: Shape, budget: Budget) -> String {
    let ledger = Arc::new(Ledger::default());
    let tools = tools();
    let limits = budget.apply(roomy());
    let scope = Scope::builder()
        .grant("orders.read")
        .limits(limits)
        .prices(Prices::new().model(MODEL, PRICE).other_tools(Micros(0)).shared())
        .build()
        .expect("the case's limits are valid");
    let runtime = runtime_for(&tools, Workload::new(shape, Arc::clone(&ledger), u64::MAX, None, 1), true);
    let outcome = paused_runtime()
        .block_on(runtime.run(&scope, &mut vec![Message::user("Review the tickets.")], |_| false))
        .expect("the run is priced");
    let (per_call, limit) = budget.per_call_and_limit();
    let run_spend = outcome.spend();
    let spent = match budget {
        Budget::Total(_) => run_spend.settled.total_tokens(),
        Budget::Input(_) => run_spend.settled.input_tokens,
        Budget::Output(_) => run_spend.settled.output_tokens,
        Budget::Cost(_) => run_spend.cost.0,
    };
    let billed_tokens = ledger.billed.load(Ordering::SeqCst);
    assert_eq!(billed_tokens, run_spend.settled.total_tokens(), "the run's spend is the provider's bill");
    let overshoot = spent.saturating_sub(limit);
    let shown = |value: u64| {
        if matches!(budget, Budget::Cost(_)) { format!("${}", dollars(value)) } else { value.to_string() }
    };
    format!(
        "| loopbound | {}/{} | {} | {} | {} | {} | {} | {} | {} | {:?} |",
        shape_label(shape),
        budget.label(),
        shown(limit),
        shown(per_call),
        ledger.sent.load(Ordering::SeqCst),
        limit / per_call,
        shown(spent),
        if overshoot == 0 {
            format!("held ({})", shown(limit - spent))
        } else {
            format!("+{}", shown(overshoot))
        },
        if overshoot == 0 { "no" } else { "yes" },
        outcome.status(),
    )
}

/// What one shared-budget repetition gave.
struct Shared {
    sent: u64,
    billed: u64,
    sent_with_budget_billed: u64,
    sent_with_budget_committed: u64,
    peak_in_flight: u64,
    settled: u64,
    statuses: Vec<Status>,
}

/// Run `index` of a shared-budget case: a runaway loop in `scope`, its provider's latency drawn
/// from a seed of its own, billed to `ledger`.
fn runaway(
    tools: &ToolSet,
    ledger: &Arc<Ledger>,
    budget: u64,
    seed: u64,
    index: usize,
    scope: Scope,
    capped: bool,
) -> impl std::future::Future<Output = Result<Status, loopbound::RunError>> + Send + 'static {
    let model = Workload::new(
        Shape::ToolLoop,
        Arc::clone(ledger),
        budget,
        Some((200, 600)),
        seed.wrapping_mul(1_000_003).wrapping_add(index as u64),
    );
    let runtime = runtime_for(tools, model, capped);
    async move {
        runtime
            .run(&scope, &mut vec![Message::user("Review the tickets.")], |_| false)
            .await
            .map(|outcome| outcome.status())
    }
}

/// K runaway runs as children of one parent holding a total budget of `budget` tokens.
fn shared(k: usize, budget: u64, seed: u64, capped: bool) -> Shared {
    let ledger = Arc::new(Ledger::default());
    let tools = tools();
    let parent = Scope::builder()
        .grant("orders.read")
        .limits(roomy().with_total_tokens(budget))
        .prices(Prices::new().model(MODEL, PRICE).other_tools(Micros(0)).shared())
        .build()
        .expect("the parent's limits are valid");
    let statuses = paused_runtime().block_on(async {
        let mut runs = Vec::with_capacity(k);
        for child in 0..k {
            let scope = parent
                .child()
                .grant("orders.read")
                .limits(roomy())
                .build()
                .expect("a child within its parent");
            runs.push(runaway(&tools, &ledger, budget, seed, child, scope, capped));
        }
        join_all(runs).await
    });
    Shared {
        sent: ledger.sent.load(Ordering::SeqCst),
        billed: ledger.billed.load(Ordering::SeqCst),
        sent_with_budget_billed: ledger.sent_with_budget_billed.load(Ordering::SeqCst),
        sent_with_budget_committed: ledger.sent_with_budget_committed.load(Ordering::SeqCst),
        peak_in_flight: ledger.peak_in_flight.load(Ordering::SeqCst),
        settled: {
            let spend = parent.spend();
            spend.settled.total_tokens() + spend.reserved.input_tokens + spend.reserved.output_tokens
        },
        statuses: statuses.into_iter().map(|status| status.expect("the runs are priced")).collect(),
    }
}

/// K runaway runs, each a scope of its own drawing from one shared pool of `budget` tokens in
/// `store` (a tenant's pool: no parent scope; the runs could be in any process).
fn pooled(k: usize, budget: u64, seed: u64, store: &Arc<dyn DynPoolStore>, capped: bool) -> Shared {
    let ledger = Arc::new(Ledger::default());
    let tools = tools();
    let pool = format!("tenant:peers-{k}-{budget}-{seed}-{capped}");
    let prices = Prices::new().model(MODEL, PRICE).other_tools(Micros(0)).shared();
    let (statuses, state) = paused_runtime().block_on(async {
        store.define(&pool, PoolBudget::default().with_tokens(budget)).await.expect("the pool is defined");
        let mut runs = Vec::with_capacity(k);
        for run in 0..k {
            let builder = Scope::builder()
                .grant("orders.read")
                .limits(roomy())
                .prices(Arc::clone(&prices))
                .pools(Arc::clone(store), [&pool]);
            let builder = if capped {
                builder.pool_output_cap(u32::try_from(OUTPUT).unwrap_or(u32::MAX))
            } else {
                builder
            };
            let scope = builder.build().expect("a scope drawing from the pool");
            runs.push(runaway(&tools, &ledger, budget, seed, run, scope, capped));
        }
        let statuses = join_all(runs).await;
        (statuses, store.state(&pool).await.expect("the pool's state"))
    });
    Shared {
        sent: ledger.sent.load(Ordering::SeqCst),
        billed: ledger.billed.load(Ordering::SeqCst),
        sent_with_budget_billed: ledger.sent_with_budget_billed.load(Ordering::SeqCst),
        sent_with_budget_committed: ledger.sent_with_budget_committed.load(Ordering::SeqCst),
        peak_in_flight: ledger.peak_in_flight.load(Ordering::SeqCst),
        settled: state.settled.tokens + state.reserved.tokens,
        statuses: statuses.into_iter().map(|status| status.expect("the runs are priced")).collect(),
    }
}

/// Runs every future as its own task and gathers their results in order.
async fn join_all<F>(futures: Vec<F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(handles.len());
    for handle in handles {
        out.push(handle.await.expect("a run does not panic"));
    }
    out
}

fn min_median_max(values: Vec<u64>) -> String {
    min_median_max_as(values, |value| value.to_string())
}

/// Thousandths as fractions (`0.990`), min / median / max.
fn min_median_max_thousandths(values: Vec<u64>) -> String {
    min_median_max_as(values, |value| format!("{}.{:03}", value / 1_000, value % 1_000))
}

/// The smallest, median and largest of `values`, each written by `write`; one value when they
/// agree.
fn min_median_max_as(mut values: Vec<u64>, write: impl Fn(u64) -> String) -> String {
    values.sort_unstable();
    let (first, last) = (values[0], values[values.len() - 1]);
    let median = values[values.len() / 2];
    if first == last {
        write(first)
    } else {
        format!("{} / {} / {}", write(first), write(median), write(last))
    }
}

fn main() {
    let cli = Cli::parse();
    println!("### One run (1,000 in + 500 out = 1,500 tokens, $0.0105 a call; a cap of 500 sent)");
    println!();
    println!(
        "| framework | case | limit | per call | calls made | calls a reserving gate admits | billed | overshoot | crossing call billed? | run ended with |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let cases = [
        (Shape::TextAnswer, Budget::Total(1_200)),
        (Shape::ToolThenAnswer, Budget::Total(2_000)),
        (Shape::ToolLoop, Budget::Total(3_700)),
        (Shape::ToolLoop, Budget::Total(10_000)),
        (Shape::ToolLoop, Budget::Total(100_000)),
        (Shape::ToolLoop, Budget::Output(1_700)),
        (Shape::ToolLoop, Budget::Input(3_700)),
        (Shape::ToolLoop, Budget::Cost(50_000)),
    ];
    for (shape, budget) in cases {
        println!("{}", single(shape, budget));
    }
    println!();
    println!(
        "### K runaway runs sharing one budget, through a tree (children of one parent scope) or a shared pool (K scopes of their own), 200-600 ms a call, {} repetitions (min / median / max)",
        cli.reps
    );
    println!();
    println!(
        "| framework | budget B | K | calls made (a reserving gate: floor(B / per call)) | overshoot beyond B | utilization (billed / B) | calls sent with B already billed | calls sent with B fully committed | peak in flight | runs ended with |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let dir = loopbound_testkit::scratch::dir("spend-peers-pools");
    let sqlite: Arc<dyn DynPoolStore> =
        Arc::new(SqlitePools::open(dir.join("pools.db")).expect("the pools' file opens"));
    let memory: Arc<dyn DynPoolStore> = Arc::new(MemoryPools::new());
    let configurations: [(&str, Option<&Arc<dyn DynPoolStore>>); 3] = [
        ("loopbound tree", None),
        ("loopbound pool, memory", Some(&memory)),
        ("loopbound pool, SQLite", Some(&sqlite)),
    ];
    for (budget, k) in [(1_000_000, 1), (1_000_000, 8), (1_000_000, 64), (100_000, 64)] {
        for (label, store) in configurations {
            let runs: Vec<Shared> = (0..cli.reps)
                .map(|seed| match store {
                    None => shared(k, budget, seed + 1, true),
                    Some(store) => pooled(k, budget, seed + 1, store, true),
                })
                .collect();
            row(label, budget, k, &runs);
        }
    }
    // The clients send no cap (LiteLLM's proxy then reserves 16,384 output tokens a call):
    // loopbound's defaults cap each call at 4,096, and a call refused only by holds in flight
    // waits for them.
    for (budget, k) in [(1_000_000, 64), (100_000, 8), (100_000, 64)] {
        for (label, store) in
            [("loopbound tree, no cap sent", None), ("loopbound pool, memory, no cap sent", Some(&memory))]
        {
            let runs: Vec<Shared> = (0..cli.reps)
                .map(|seed| match store {
                    None => shared(k, budget, seed + 1, false),
                    Some(store) => pooled(k, budget, seed + 1, store, false),
                })
                .collect();
            row(label, budget, k, &runs);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// One table row of a shared-budget configuration's repetitions.
fn row(label: &str, budget: u64, k: usize, runs: &[Shared]) {
    for run in runs {
        assert_eq!(
            run.billed, run.settled,
            "the spend (settled, and reserved for the calls cut in flight) is the provider's bill"
        );
    }
    let mut ends: Vec<String> =
        runs.iter().flat_map(|run| run.statuses.iter().map(|s| format!("{s:?}"))).collect();
    ends.sort_unstable();
    ends.dedup();
    println!(
        "| {label} | {budget} tokens | {k} | {} ({}) | {} | {} | {} | {} | {} | {} |",
        min_median_max(runs.iter().map(|run| run.sent).collect()),
        budget / PER_CALL,
        min_median_max(runs.iter().map(|run| run.billed.saturating_sub(budget)).collect()),
        min_median_max_thousandths(runs.iter().map(|run| run.billed * 1_000 / budget).collect()),
        min_median_max(runs.iter().map(|run| run.sent_with_budget_billed).collect()),
        min_median_max(runs.iter().map(|run| run.sent_with_budget_committed).collect()),
        min_median_max(runs.iter().map(|run| run.peak_in_flight).collect()),
        ends.join(", "),
    );
}
