//! `demo330 pool`: one tenant's shared pool on SQLite, and five requests drawing from it one
//! after another, each a run of its own as a service would make them. Every call is reserved in
//! the pool before it is sent (its output capped at what the pool leaves), settled from the
//! provider's report, and the last request, which would not fit, is refused before its call is
//! sent.
//!
//! # Invariants
//!
//! - Nothing here reads a clock or prints a path: the pool has a whole (unwindowed) budget and
//!   lives in a fresh file under the temporary directory, removed afterwards, unless `--pools`
//!   names one; the same command on a fresh file gives the same bytes.
//! - The pool's figures printed are read back from the store after each request.
//! - With `--json`, stdout receives exactly one JSON object.

use std::fmt::Write as _;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use clap::Args;
use loopbound::pool::{Amount, DynPoolStore, PoolBudget, PoolState};
use loopbound::scripted::{Scripted, Step};
use loopbound::transport::{ModelReply, Usage};
use loopbound::{Message, Runner, Scope, Status, ToolSet};
use loopbound_sqlite::SqlitePools;
use serde::Serialize;

use crate::text::labelled;
use crate::vocabulary::{EXIT_INTERNAL, chained, status_exit_code};

/// The pool's name.
pub const POOL: &str = "tenant:acme";
/// The pool's token budget.
pub const BUDGET: u64 = 1_200;
/// The largest output a call is granted.
pub const OUTPUT_CAP: u32 = 200;
/// The requests made.
pub const REQUESTS: usize = 5;
/// The input tokens the provider reports for every call.
const REPORTED_INPUT: u64 = 120;
/// The output tokens the provider produces when its cap allows.
const PRODUCED_OUTPUT: u64 = 150;

/// The flags of `pool`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Args)]
pub struct PoolArgs {
    /// Print one JSON object instead of the transcript.
    #[arg(long)]
    pub json: bool,
    /// The SQLite file holding the pool (default: a fresh file, removed afterwards). A file that
    /// already holds the pool keeps its figures: the requests draw from what is left.
    #[arg(long, value_name = "PATH")]
    pub pools: Option<PathBuf>,
}

/// One request and how it ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Request {
    /// Its status.
    pub status: Status,
    /// What the outcome says beyond the status (the pool that refused).
    pub detail: Option<String>,
    /// The output cap its call was sent with, if it was sent.
    pub output_cap: Option<u32>,
    /// What the provider reported, if the call was sent.
    pub reported: Option<Usage>,
    /// The pool's settled figures after it.
    pub settled: Amount,
    /// The pool's reserved figures after it.
    pub reserved: Amount,
}

/// The whole scenario.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Played {
    /// The pool as it stands at the end.
    pub pool: PoolState,
    /// The requests, in order.
    pub requests: Vec<Request>,
    /// Calls the provider received.
    pub provider_calls: u32,
}

/// Why the scenario could not be played.
#[derive(Debug)]
pub struct PoolDemoError(String);

impl std::fmt::Display for PoolDemoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PoolDemoError {}

fn failed(what: &str, error: &(dyn std::error::Error + 'static)) -> PoolDemoError {
    PoolDemoError(format!("{what}: {}", chained(error)))
}

/// Plays the requests against the pool in `store`.
///
/// # Errors
///
/// The store failed, or a run ended with an error rather than an outcome.
pub async fn run(store: Arc<dyn DynPoolStore>) -> Result<Played, PoolDemoError> {
    store
        .define(POOL, PoolBudget::default().with_tokens(BUDGET))
        .await
        .map_err(|error| failed("defining the pool", &error))?;
    let caps = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&caps);
    // The provider honours the cap it is sent, and reports what it used.
    let model = Scripted::new(move |_, request| {
        let cap = request.options.max_output_tokens.unwrap_or(0);
        seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(cap);
        let usage = Usage::new(REPORTED_INPUT, PRODUCED_OUTPUT.min(u64::from(cap)));
        Step::Reply(ModelReply::text("Reviewed.").with_usage(usage))
    });
    let runtime = Runner::new(&ToolSet::default(), &model).observe(loopbound::Middleware);
    let mut requests = Vec::with_capacity(REQUESTS);
    for n in 1..=REQUESTS {
        let sent_before = model.calls();
        let scope = Scope::builder()
            .pools(Arc::clone(&store), [POOL])
            .pool_output_cap(OUTPUT_CAP)
            .pool_holder("demo330")
            .build()
            .map_err(|error| failed("the scope", &error))?;
        let mut conversation = vec![Message::user(format!("Review ticket {n}: {}", "x".repeat(280)))];
        let outcome = runtime
            .run(&scope, &mut conversation, |_| true)
            .await
            .map_err(|error| failed("a request", &error))?;
        let sent = model.calls() > sent_before;
        let state = store.state(POOL).await.map_err(|error| failed("reading the pool", &error))?;
        let cap = caps.lock().unwrap_or_else(std::sync::PoisonError::into_inner).last().copied();
        requests.push(Request {
            status: outcome.status(),
            detail: outcome.detail().map(str::to_owned),
            output_cap: cap.filter(|_| sent),
            reported: outcome.usage().filter(|_| sent),
            settled: state.settled,
            reserved: state.reserved,
        });
    }
    let state = store.state(POOL).await.map_err(|error| failed("reading the pool", &error))?;
    Ok(Played { pool: state, requests, provider_calls: model.calls() })
}

/// The transcript.
#[must_use]
pub fn render_text(played: &Played) -> String {
    let mut out = String::new();
    labelled(&mut out, "store", "SQLite file (a fresh one unless --pools names one)");
    labelled(&mut out, "pool", &format!("{POOL}: {BUDGET} tokens (input and output), no window"));
    labelled(&mut out, "draw", &format!("each call holds its input and at most {OUTPUT_CAP} output tokens"));
    labelled(
        &mut out,
        "scenario",
        &format!(
            "pool: {REQUESTS} requests, each a run of its own, reserved in the pool before their call is sent; \
             the last does not fit and is refused unsent"
        ),
    );
    out.push('\n');
    labelled(&mut out, "requests", "in order; the pool's figures read back after each");
    out.push_str("   #  status        output cap  reported in  out  settled  reserved\n");
    for (request, n) in played.requests.iter().zip(1..) {
        let cap = request.output_cap.map_or_else(|| "unsent".to_owned(), |cap| cap.to_string());
        let (input, output) = request.reported.map_or_else(
            || ("-".to_owned(), "-".to_owned()),
            |u| (u.input_tokens.to_string(), u.output_tokens.to_string()),
        );
        let _ = writeln!(
            out,
            "{n:>4}  {:<12}  {cap:>10}  {input:>11}  {output:>3}  {:>7}  {:>8}",
            request.status.as_str(),
            request.settled.tokens,
            request.reserved.tokens,
        );
    }
    out.push('\n');
    if let Some(last) = played.requests.last() {
        let detail = last.detail.as_deref().unwrap_or("none");
        labelled(
            &mut out,
            "last",
            &format!("{} (exit {}): {detail}", last.status, status_exit_code(last.status)),
        );
    }
    labelled(
        &mut out,
        "provider",
        &format!("{} calls received of {REQUESTS} requests", played.provider_calls),
    );
    let pool = &played.pool;
    labelled(
        &mut out,
        "pool",
        &format!(
            "settled {} of {BUDGET} tokens in {} calls, {} reserved, {} holds open",
            pool.settled.tokens, pool.settled.calls, pool.reserved.tokens, pool.holds
        ),
    );
    out
}

/// Plays `pool` and prints it; returns the exit code (the last request's status').
pub async fn play(args: &PoolArgs, out: &mut impl Write, err: &mut impl Write) -> i32 {
    let fresh = args.pools.is_none();
    let path = args
        .pools
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join(format!("demo330-pool-{}.db", std::process::id())));
    if fresh {
        remove(&path);
    }
    let played = match SqlitePools::open(&path) {
        Ok(store) => run(Arc::new(store)).await,
        Err(error) => Err(failed("opening the pools' file", &error)),
    };
    if fresh {
        remove(&path);
    }
    let played = match played {
        Ok(played) => played,
        Err(error) => {
            emit(err, &format!("demo330: {error}\n"));
            return EXIT_INTERNAL;
        }
    };
    if args.json {
        match serde_json::to_string_pretty(&played) {
            Ok(json) => emit(out, &format!("{json}\n")),
            Err(error) => {
                emit(err, &format!("demo330: could not write the report as JSON: {error}\n"));
                return EXIT_INTERNAL;
            }
        }
    } else {
        emit(out, &render_text(&played));
    }
    played.requests.last().map_or(EXIT_INTERNAL, |last| status_exit_code(last.status))
}

/// Removes the pools' file and its WAL companions.
fn remove(path: &std::path::Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(name));
    }
}

fn emit(stream: &mut impl Write, text: &str) {
    let _ = stream.write_all(text.as_bytes()).and_then(|()| stream.flush());
}
