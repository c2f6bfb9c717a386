//! Races for one shared pool: a model that bills every call it answers (the ground truth), runs
//! that draw from a pool, and many of them at once, for the memory, SQLite and PostgreSQL
//! stores' tests and the benchmark; and [`check_race`], the race a pool store passes before it
//! is trusted with a shared pool. [`conformance`] is the whole suite a pool store passes, the race
//! among its checks.
//!
//! Every call asks the same: a prompt of [`PROMPT_BYTES`] bytes (so the default counter
//! estimates at least that many input tokens) and at most [`OUTPUT_CAP`] output tokens. The model
//! honours the output cap and reports [`REPORTED_INPUT`] input tokens, fewer than the estimate, as
//! an honest provider does: each call bills [`CALL_TOKENS`] tokens.
//!
//! # Invariants
//!
//! - A call counts as billed once the model has answered it, whatever the run does next: the
//!   [`Billing`] transport adds it to its tally before it returns the reply.
//! - A run is one request: one model call that answers at once (`Completed`), or a refusal by
//!   the pool before anything is sent (`TokenBudget`, the pool named in the outcome's detail).

pub mod conformance;

use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use loopbound::pool::{Amount, DynPoolStore, PoolBudget};
use loopbound::transport::{ChatRequest, ModelReply, Transport, TransportError, Usage};
use loopbound::{Message, RunError, Runner, Scope, ScopeBuilder, Status, ToolSet};

/// The prompt's length in bytes.
pub const PROMPT_BYTES: usize = 400;
/// The output cap every call asks for.
pub const OUTPUT_CAP: u32 = 200;
/// The input tokens the model reports for every call.
pub const REPORTED_INPUT: u64 = 100;
/// The tokens one call bills: the reported input and the whole output cap.
pub const CALL_TOKENS: u64 = REPORTED_INPUT + OUTPUT_CAP as u64;

/// A model that answers every call after a pause, honours its output cap, and keeps the tally
/// of what it billed.
#[derive(Debug)]
pub struct Billing {
    pause: (u64, u64),
    billed: AtomicU64,
    calls: AtomicU64,
    seed: AtomicU64,
    /// Whether each billed call is reported on standard output (`billed <tokens>`) as it is
    /// billed: a worker process that is killed has told its parent what it billed.
    report: bool,
}

impl Billing {
    /// A model that pauses between `min` and `max` milliseconds before each answer (a
    /// deterministic pseudo-random sequence from `seed`).
    #[must_use]
    pub fn new(min: u64, max: u64, seed: u64) -> Self {
        Self {
            pause: (min, max.max(min)),
            billed: AtomicU64::new(0),
            calls: AtomicU64::new(0),
            seed: AtomicU64::new(seed | 1),
            report: false,
        }
    }

    /// This model, reporting each billed call on standard output as it is billed.
    #[must_use]
    pub fn reporting(mut self) -> Self {
        self.report = true;
        self
    }

    /// Tokens billed so far.
    #[must_use]
    pub fn billed(&self) -> u64 {
        self.billed.load(Ordering::SeqCst)
    }

    /// Calls answered so far.
    #[must_use]
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }

    fn pause(&self) -> Duration {
        // xorshift64: enough spread for a test's pauses.
        let mut x = self.seed.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.seed.store(x, Ordering::Relaxed);
        let (min, max) = self.pause;
        Duration::from_millis(min + x % (max - min + 1))
    }
}

impl Transport for Billing {
    async fn complete<'a>(&'a self, request: ChatRequest<'a>) -> Result<ModelReply, TransportError> {
        tokio::time::sleep(self.pause()).await;
        let output = request.options.max_output_tokens.map_or(u64::from(OUTPUT_CAP), u64::from);
        let usage = Usage::new(REPORTED_INPUT, output.min(u64::from(OUTPUT_CAP)));
        self.billed.fetch_add(usage.input_tokens + usage.output_tokens, Ordering::SeqCst);
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.report {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "billed {}", usage.input_tokens + usage.output_tokens);
            let _ = out.flush();
        }
        Ok(ModelReply::text("Done.").with_usage(usage))
    }
}

/// The prompt of every run.
#[must_use]
pub fn prompt() -> String {
    "p".repeat(PROMPT_BYTES)
}

/// What every run of a race draws from: pools of one store, each call capped at
/// [`OUTPUT_CAP`], its holds leased for a while to a named holder.
#[derive(Clone, Debug)]
pub struct Draw {
    store: Arc<dyn DynPoolStore>,
    pools: Vec<String>,
    lease: Duration,
    holder: String,
}

impl Draw {
    /// A scope builder drawing from these pools on these terms.
    pub fn builder(&self) -> ScopeBuilder {
        Scope::builder()
            .pools(Arc::clone(&self.store), &self.pools)
            .pool_output_cap(OUTPUT_CAP)
            .pool_lease(self.lease)
            .pool_holder(&self.holder)
    }
}

/// The draw of every run: `pools` in `store`, each call capped at [`OUTPUT_CAP`], each hold
/// leased for `lease` to `holder`.
#[must_use]
pub fn draw(store: Arc<dyn DynPoolStore>, pools: &[&str], lease: Duration, holder: &str) -> Draw {
    let pools = pools.iter().map(|&pool| pool.to_owned()).collect();
    Draw { store, pools, lease, holder: holder.to_owned() }
}

/// One run under `draw` against `model`.
///
/// # Errors
///
/// The run's error (a pool store that failed is [`RunError::Pool`]).
///
/// # Panics
///
/// When the draw's scope does not build (a pool name that is not one): a test's mistake.
pub async fn one_run(draw: &Draw, model: &Billing) -> Result<(Status, Option<String>), RunError> {
    let scope = draw.builder().build().expect("a scope drawing from pools");
    let runtime = Runner::new(&ToolSet::default(), model);
    let outcome = runtime.run(&scope, &mut vec![Message::user(prompt())], |_| true).await?;
    Ok((outcome.status(), outcome.detail().map(str::to_owned)))
}

/// What a race's runs ended with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Runs that completed (their call was made and settled).
    pub completed: u64,
    /// Runs refused by the pool before their call was sent.
    pub refused: u64,
}

/// `tasks` concurrent tasks, each running `runs` runs one after another under `draw`, against
/// one shared `model`; returns how they ended.
///
/// # Panics
///
/// If a run fails or ends otherwise than completed or refused by the pool: the race cannot
/// judge the pool then.
pub async fn race(draw: &Draw, model: &Arc<Billing>, tasks: u64, runs: u64) -> Tally {
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let (draw, model) = (draw.clone(), Arc::clone(model));
        handles.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            for _ in 0..runs {
                match one_run(&draw, &model).await.expect("the run ends with an outcome") {
                    (Status::Completed, None) => tally.completed += 1,
                    (Status::TokenBudget, Some(detail)) if detail.starts_with("pool ") => tally.refused += 1,
                    other => panic!("a run ended with {other:?}"),
                }
            }
            tally
        }));
    }
    let mut total = Tally::default();
    for handle in handles {
        let tally = handle.await.expect("no task panicked");
        total.completed += tally.completed;
        total.refused += tally.refused;
    }
    total
}

/// The race a pool store must pass: `tasks` concurrent tasks each run `runs` runs one after
/// another, drawing from one new pool named `pool` in `store` whose token budget covers 60 % of
/// what they would bill, against a model that pauses up to 3 ms before each answer.
///
/// The store passes when, once every run has ended, nothing is left reserved, the pool settled
/// exactly the tokens and calls the model billed (no call lost, none counted twice), every
/// answered call belongs to a completed run, the settled tokens stay within the budget, and at
/// least 95 % of the budget was used (holds are released, not leaked).
///
/// # Panics
///
/// With the rule the store broke, or when `pool` cannot be defined or read: this is a test's
/// assertion.
pub async fn check_race(store: Arc<dyn DynPoolStore>, pool: &str, tasks: u64, runs: u64) {
    let budget = tasks * runs * CALL_TOKENS * 6 / 10;
    store.define(pool, PoolBudget::default().with_tokens(budget)).await.expect("the pool is defined");
    let draw = draw(Arc::clone(&store), &[pool], Duration::from_secs(30), "race");
    let model = Arc::new(Billing::new(0, 3, 7));
    let tally = race(&draw, &model, tasks, runs).await;
    let state = store.state(pool).await.expect("the pool's state is read");
    assert_eq!(state.reserved, Amount::ZERO, "nothing left in flight");
    assert_eq!(state.settled.tokens, model.billed(), "the pool settled exactly what was billed");
    assert_eq!(state.settled.calls, model.calls(), "the pool settled every call that was billed");
    assert_eq!(tally.completed, model.calls(), "every billed call belongs to a completed run");
    assert_eq!(tally.completed + tally.refused, tasks * runs, "every run ended completed or refused");
    assert!(state.settled.tokens <= budget, "{} > {budget}", state.settled.tokens);
    assert!(state.settled.tokens * 100 >= budget * 95, "only {} of {budget} used", state.settled.tokens);
}
