//! `load`: N concurrent runs of the review task in this one process, through loopbound's real
//! OpenAI transport (harness composition, a multi-thread tokio runtime of 2 workers), against
//! the testkit's load model server in a child process on loopback.
//!
//! ```text
//! cargo run --release -p loopbound-benches --bin load -- --runs 1000 [--latency-ms 200] [--stream] [--watch]
//!     [--journal sqlite|postgres] [--http2 CONNECTIONS] [--pooled] [--release-over-ms MS] [--server http://127.0.0.1:PORT/v1]
//!     [--out report.json]
//! ```
//!
//! 1. A few warm-up runs (`--warmup`, 20) run at once and are left out; then the server is
//!    reset with a hold: every run's first model call waits there.
//! 2. The N runs start at once; when the server holds all N first calls, the resident set is
//!    sampled (memory per waiting run = its growth / N) and the hold is released: all at once,
//!    or with `--release-over-ms W` evenly over W, so that the calls arrive spread.
//! 3. When every run has ended: throughput, the added latency per model call (measured by the
//!    server: end of a reply to the first byte of the run's next request), run start to first
//!    request (this process's start times against the server's arrival times, one clock), peak
//!    RSS, CPU time per run, and with `--journal` each effect's two commits and the store calls
//!    per second (every acquisition, commit, renewal, read and cancel query that reached the
//!    journal's store, over the measured run). `--journal postgres` starts a throwaway
//!    PostgreSQL cluster of its own (its defaults: `fsync` and `synchronous_commit` on).
//!
//! Every run must end Completed with exactly 3 model calls and 2 tool calls, and the server
//! must have seen exactly that; otherwise the figures print with `FAILED` lines and the command
//! exits with 1. No figure is judged here.

#![forbid(unsafe_code)]
#![warn(clippy::pedantic)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use loopbound_benches::load::control::Control;
use loopbound_benches::load::drive::{MODEL, ReviewLoad, RunEnd};
use loopbound_benches::load::process::{cpu_time, tree_cpu_time};
use loopbound_benches::load::report::Report;
use loopbound_benches::load::statements;
use loopbound_benches::timing::{peak_rss_mib, rss_kib};
use loopbound_openai::{Config, HttpVersion};
use loopbound_testkit::load::clock::monotonic_ns;
use loopbound_testkit::load::stats::RunFigures;
use loopbound_testkit::load::{self as server, Mode, ServerConfig, Snapshot, Summary};

#[derive(Parser, Debug)]
#[allow(clippy::struct_excessive_bools, reason = "each flag of the command line is one independent switch")]
#[command(about = "N concurrent review runs through the OpenAI transport against the load model server")]
struct Cli {
    /// Concurrent runs.
    #[arg(long, default_value_t = 1000)]
    runs: usize,
    /// Runs done at once before the measured load, left out of every figure.
    #[arg(long, default_value_t = 20)]
    warmup: usize,
    /// The server's latency per reply, in milliseconds.
    #[arg(long, default_value_t = 200)]
    latency_ms: u64,
    /// Stream every model call (server-sent events).
    #[arg(long)]
    stream: bool,
    /// Attach a watcher to every run: a task reading its live stream to the outcome, as a
    /// service's event endpoint would.
    #[arg(long)]
    watch: bool,
    /// Journal every run on one file of this backend.
    #[arg(long, value_enum)]
    journal: Option<Journal>,
    /// With `--journal`: every run records its stream in the journal (`record_stream`), as a
    /// service that replays runs to reconnecting browsers does.
    #[arg(long, requires = "journal")]
    record_stream: bool,
    /// Send the model calls over HTTP/2 spread over this many connections (default: HTTP/1.1,
    /// one connection per call in flight).
    #[arg(long, value_name = "CONNECTIONS")]
    http2: Option<std::num::NonZeroUsize>,
    /// Send the model calls through `reqwest`'s pooled client instead of the connections the
    /// transport drives itself (its default for `http://`): the row the direct connections are
    /// measured against.
    #[arg(long)]
    pooled: bool,
    /// Answer the held first calls evenly over this window, in milliseconds, instead of all at
    /// once: the runs' later calls then arrive spread, as a service's would. With a window of
    /// three latencies, about all N runs are in flight at once and the calls arrive at N ÷ the
    /// window per second.
    #[arg(long, default_value_t = 0, value_name = "MS")]
    release_over_ms: u64,
    /// Start the runs evenly over this window, in milliseconds, instead of all at once: the
    /// memory per waiting run is then what a waiting run keeps, without the transient peak of N
    /// requests built and sent in the same instant.
    #[arg(long, default_value_t = 0, value_name = "MS")]
    start_over_ms: u64,
    /// Use the load server at this base URL instead of starting one.
    #[arg(long, value_name = "URL")]
    server: Option<String>,
    /// Worker threads of this process's runtime.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Each run's deadline, in seconds.
    #[arg(long, default_value_t = 120)]
    deadline_secs: u64,
    /// How long to wait for every run's first call to reach the server, in seconds.
    #[arg(long, default_value_t = 120)]
    hold_timeout_secs: u64,
    /// Also write the report, as JSON, to this file.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Print the report as JSON instead of text.
    #[arg(long)]
    json: bool,
    /// With `--journal postgres`: load `pg_stat_statements` on the cluster, reset its counts
    /// after the warm-up, and print the statements that cost the server most over the measured
    /// run to stderr (calls, execution and planning time, rows, WAL bytes).
    #[arg(long)]
    pg_stats: bool,
    /// With `--journal postgres`: write the PostgreSQL server's log to this file at the end
    /// (with `LOOPBOUND_POSTGRES_SETTINGS` loading `auto_explain`, the slow statements' plans).
    #[arg(long, value_name = "FILE")]
    pg_log: Option<PathBuf>,
    /// Serve as the load server (the child this command starts).
    #[arg(long, hide = true)]
    serve: bool,
}

/// Journal backends.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Journal {
    /// One SQLite file, `synchronous = FULL`.
    Sqlite,
    /// One PostgreSQL database, on a throwaway cluster this command starts.
    Postgres,
}

impl Journal {
    fn name(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Postgres => "postgres",
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.serve {
        let mode = if cli.stream { Mode::Stream } else { Mode::Whole };
        let config = ServerConfig { latency: Duration::from_millis(cli.latency_ms), mode };
        let served = server::serve_forever(config, 2, |server| println!("{}", server.base_url()));
        if let Err(error) = served {
            eprintln!("load: the server failed: {error}");
        }
        return ExitCode::FAILURE;
    }
    match load(&cli) {
        Ok(report) => {
            if cli.json {
                println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
            } else {
                print!("{}", report.render());
            }
            if report.passed() {
                ExitCode::SUCCESS
            } else {
                eprintln!("load: FAILED: not every run did exactly the review; see the FAILED lines");
                ExitCode::FAILURE
            }
        }
        Err(error) => {
            eprintln!("load: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The load server this command started; killed when dropped.
struct ChildServer {
    child: Child,
    url: String,
}

impl ChildServer {
    fn start(cli: &Cli) -> Result<Self, String> {
        let exe = std::env::current_exe().map_err(|error| format!("cannot find this program: {error}"))?;
        let mut command = Command::new(exe);
        command.args(["--serve", "--latency-ms", &cli.latency_ms.to_string()]);
        if cli.stream {
            command.arg("--stream");
        }
        let mut child = command
            .stdout(Stdio::piped())
            .stdin(Stdio::null())
            .spawn()
            .map_err(|error| format!("cannot start the load server: {error}"))?;
        let mut line = String::new();
        let read = child.stdout.take().map(|stdout| BufReader::new(stdout).read_line(&mut line));
        let server = Self { child, url: line.trim().to_owned() };
        match read {
            Some(Ok(n)) if n > 0 && server.url.starts_with("http://") => Ok(server),
            _ => Err("the load server did not say where it listens".to_owned()),
        }
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn load(cli: &Cli) -> Result<Report, String> {
    if cli.runs == 0 {
        return Err("--runs must be at least 1".to_owned());
    }
    // Each waiting run holds one connection; the limit must not be what stops the load.
    let open_files =
        server::raise_open_files().map_err(|error| format!("cannot raise the open-files limit: {error}"))?;
    if open_files < u64::try_from(cli.runs).unwrap_or(u64::MAX) + 64 {
        eprintln!("load: warning: {open_files} open files allowed, fewer than the runs' connections");
    }
    let child = match &cli.server {
        Some(_) => None,
        None => Some(ChildServer::start(cli)?),
    };
    let base_url =
        cli.server.clone().or_else(|| child.as_ref().map(|child| child.url.clone())).unwrap_or_default();
    let scratch = cli.journal.map(|_| loopbound_testkit::scratch::dir("load"));
    let cluster = match cli.journal {
        Some(Journal::Postgres) => Some(
            loopbound_testkit::postgres::Cluster::start_with(
                loopbound_testkit::postgres::Durability::Durable,
                if cli.pg_stats { &statements::SETTINGS } else { &[] },
            )
            .ok_or("PostgreSQL is not installed")?,
        ),
        _ => None,
    };
    let database = cluster.as_ref().map(|cluster| cluster.create_database("load"));
    let stats = match (&cluster, &database) {
        (Some(cluster), Some(database)) if cli.pg_stats => {
            Some(statements::Statements::install(cluster, &database.name)?)
        }
        _ => None,
    };
    let place = match (cli.journal, &scratch, &database) {
        (Some(Journal::Sqlite), Some(dir), _) => Some(loopbound_testkit::backend::sqlite_place(
            &dir.join("journal.db"),
            loopbound_sqlite::Synchronous::Full,
        )),
        (Some(Journal::Postgres), _, Some(database)) => {
            Some(loopbound_testkit::backend::postgres_place(&database.url))
        }
        _ => None,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cli.workers.max(1))
        .enable_all()
        .build()
        .map_err(|error| format!("cannot build the runtime: {error}"))?;
    let journal = match &place {
        Some(place) => Some(runtime.block_on(loopbound_testkit::backend::open(
            place,
            "load",
            loopbound::journal::DEFAULT_LEASE,
        ))?),
        None => None,
    };
    let server_pid = cluster.as_ref().and_then(loopbound_testkit::postgres::Cluster::pid);
    let report = runtime.block_on(measure(cli, &base_url, journal, server_pid, stats.as_ref()));
    if let Some(stats) = &stats {
        eprint!("{}", stats.top()?);
    }
    if let (Some(path), Some(cluster)) = (&cli.pg_log, &cluster) {
        std::fs::write(path, cluster.log())
            .map_err(|error| format!("cannot write {}: {error}", path.display()))?;
    }
    drop(cluster);
    drop(child);
    if let Some(dir) = scratch {
        let _ = std::fs::remove_dir_all(dir);
    }
    let report = report?;
    if let Some(path) = &cli.out {
        let text = serde_json::to_string_pretty(&report).map_err(|error| error.to_string())?;
        std::fs::write(path, text + "\n")
            .map_err(|error| format!("cannot write {}: {error}", path.display()))?;
    }
    Ok(report)
}

/// The transport's configuration the options ask for: the HTTP version, direct or pooled.
fn transport_config(cli: &Cli, base_url: &str) -> Result<Config, String> {
    let http = cli.http2.map_or(HttpVersion::Http1, |connections| HttpVersion::Http2 { connections });
    Ok(Config::new(base_url, MODEL)
        .map_err(|error| error.to_string())?
        .with_http(http)
        .with_direct(!cli.pooled))
}

#[allow(clippy::cast_precision_loss, reason = "counts and times far below 2^52")]
async fn measure(
    cli: &Cli,
    base_url: &str,
    journal: Option<loopbound_testkit::backend::AnyJournal>,
    server_pid: Option<u32>,
    stats: Option<&statements::Statements<'_>>,
) -> Result<Report, String> {
    let runs = cli.runs;
    let control = Control::new(base_url);
    let load = ReviewLoad::new(
        transport_config(cli, base_url)?,
        cli.stream,
        journal,
        Duration::from_secs(cli.deadline_secs),
        cli.watch,
        cli.record_stream,
    )
    .map_err(|error| error.to_string())?;
    warm_up(&load, &control, cli.warmup).await?;
    stats.map(statements::Statements::reset).transpose()?;
    let warmup_effects = load.effect_times().map_or(0, |times| times.len());

    let rss_before = rss_kib().unwrap_or(0);
    let cpu_before = cpu_time();
    let server_cpu_before = server_pid.and_then(tree_cpu_time);
    let calls_before = load.store_calls();
    let began = Instant::now();
    let ended = Arc::new(AtomicUsize::new(0));
    let spacing = Duration::from_millis(cli.start_over_ms) / u32::try_from(runs.max(1)).unwrap_or(u32::MAX);
    let origin = tokio::time::Instant::now();
    let tasks: Vec<_> = (0..runs)
        .map(|n| {
            let (load, ended) = (Arc::clone(&load), Arc::clone(&ended));
            let turn = origin + spacing.saturating_mul(u32::try_from(n).unwrap_or(u32::MAX));
            tokio::spawn(async move {
                if !spacing.is_zero() {
                    tokio::time::sleep_until(turn).await;
                }
                let start = monotonic_ns();
                let end = load.run(&n.to_string()).await;
                ended.fetch_add(1, Ordering::Release);
                (start, end)
            })
        })
        .collect();

    // Every run waits on its first model call, held by the server: sample, then release.
    let mut failures: Vec<String> =
        wait_for_hold(&control, &ended, runs, cli.hold_timeout_secs).await?.into_iter().collect();
    let rss_waiting = rss_kib().unwrap_or(0);
    control.release(Duration::from_millis(cli.release_over_ms)).await.map_err(|error| error.to_string())?;

    let mut ends: Vec<(u64, RunEnd)> = Vec::with_capacity(runs);
    for (n, task) in tasks.into_iter().enumerate() {
        ends.push(task.await.map_err(|error| format!("run {n} panicked: {error}"))?);
    }
    let wall = began.elapsed();
    let cpu = cpu_time().saturating_sub(cpu_before);
    let server_cpu = server_pid
        .and_then(tree_cpu_time)
        .zip(server_cpu_before)
        .map(|(after, before)| after.saturating_sub(before).as_secs_f64());
    let store_calls = load.store_calls().zip(calls_before).map(|(after, before)| after - before);
    let stats = control.stats().await.map_err(|error| error.to_string())?;
    let seen = control.runs().await.map_err(|error| error.to_string())?.runs;

    let (completed, mut first_requests) = check(&ends, &seen, &stats, &mut failures);
    let measured_s = (wall.as_secs_f64() - stats.hold_extra_ms / 1000.0).max(f64::MIN_POSITIVE);
    let effects = load.effect_times().map(|times| {
        let mut ns: Vec<u64> = times
            .iter()
            .skip(warmup_effects)
            .map(|time| u64::try_from(time.as_nanos()).unwrap_or(u64::MAX))
            .collect();
        Summary::of_ns(&mut ns)
    });
    Ok(Report {
        peer: "loopbound".to_owned(),
        versions: [("loopbound".to_owned(), env!("CARGO_PKG_VERSION").to_owned())].into(),
        runs: runs as u64,
        latency_ms: cli.latency_ms as f64,
        stream: cli.stream,
        watched: cli.watch,
        journal: cli.journal.map(|journal| journal.name().to_owned()),
        recorded_stream: cli.record_stream,
        store_calls,
        store_server_cpu_s: server_cpu,
        store_calls_per_s: store_calls.map(|calls| calls as f64 / wall.as_secs_f64().max(f64::MIN_POSITIVE)),
        http2_connections: cli.http2.map(|n| n.get() as u64),
        http_client: cli.pooled.then(|| "pooled".to_owned()),
        completed,
        failures,
        wall_s: wall.as_secs_f64(),
        hold_extra_ms: stats.hold_extra_ms,
        release_over_ms: cli.release_over_ms as f64,
        start_over_ms: cli.start_over_ms as f64,
        throughput_runs_per_s: runs as f64 / measured_s,
        added_latency_us: stats.gaps,
        start_to_first_request_us: Summary::of_ns(&mut first_requests),
        rss_before_mib: rss_before as f64 / 1024.0,
        rss_waiting_mib: rss_waiting as f64 / 1024.0,
        memory_per_waiting_run_kib: rss_waiting.saturating_sub(rss_before) as f64 / runs as f64,
        peak_rss_mib: peak_rss_mib().unwrap_or(0.0),
        cpu_s: cpu.as_secs_f64(),
        cpu_per_run_us: cpu.as_secs_f64() * 1e6 / runs as f64,
        journal_effect_us: effects,
        connections: stats.connections,
        peak_open_connections: stats.peak_open_connections,
    })
}

/// Runs `runs` warm-up runs at once (left out of every figure), then resets the server with a
/// hold for the measured runs.
async fn warm_up(load: &Arc<ReviewLoad>, control: &Control, runs: usize) -> Result<(), String> {
    // A server left holding by a client that stopped would hold the warm-up too.
    control.reset(false).await.map_err(|error| error.to_string())?;
    let warmup: Vec<_> = (0..runs)
        .map(|n| {
            let load = Arc::clone(load);
            tokio::spawn(async move { load.run(&format!("w{n}")).await })
        })
        .collect();
    for (n, task) in warmup.into_iter().enumerate() {
        let end = task.await.map_err(|error| format!("warm-up run {n} panicked: {error}"))?;
        if !end.is_review() {
            return Err(format!("warm-up run {n}: {end}"));
        }
    }
    control.reset(true).await.map_err(|error| error.to_string())
}

/// Waits until the server holds every run's first call (or every other run has ended); returns
/// why not all of them got there, if they did not.
async fn wait_for_hold(
    control: &Control,
    ended: &AtomicUsize,
    runs: usize,
    timeout_secs: u64,
) -> Result<Option<String>, String> {
    let waited = Instant::now();
    loop {
        let held = control.stats().await.map_err(|error| error.to_string())?.held;
        let gone = ended.load(Ordering::Acquire);
        if usize::try_from(held).unwrap_or(usize::MAX).saturating_add(gone) >= runs {
            return Ok(
                (gone > 0).then(|| format!("{gone} runs ended before all first calls reached the server"))
            );
        }
        if waited.elapsed() > Duration::from_secs(timeout_secs) {
            return Ok(Some(format!(
                "after {timeout_secs} s only {held} of {runs} first calls had reached the server"
            )));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Checks every run against the review and the server's view of it; returns how many passed
/// and each followed run's time from its start to its first request's arrival, in ns.
fn check(
    ends: &[(u64, RunEnd)],
    seen: &HashMap<String, RunFigures>,
    figures: &Snapshot,
    failures: &mut Vec<String>,
) -> (u64, Vec<u64>) {
    let mut completed = 0_u64;
    let mut first_requests = Vec::with_capacity(ends.len());
    let mut odd = Vec::new();
    for (n, (start, end)) in ends.iter().enumerate() {
        let server = seen.get(&n.to_string());
        match server {
            Some(run) if end.is_review() && run.requests == 3 && run.replies == 3 => completed += 1,
            Some(run) => odd.push(format!(
                "run {n}: {end}; the server saw {} requests, {} replies",
                run.requests, run.replies
            )),
            None => odd.push(format!("run {n}: {end}; the server never saw it")),
        }
        if let Some(run) = server {
            first_requests.push(run.first_arrival_ns.saturating_sub(*start));
        }
    }
    if !odd.is_empty() {
        failures.push(format!(
            "{} of {} runs did not do exactly the review; the first ones follow",
            odd.len(),
            ends.len()
        ));
        failures.extend(odd.into_iter().take(10));
    }
    let expected_gaps = 2 * ends.len() as u64;
    if figures.gaps.count != expected_gaps
        || figures.unmatched > 0
        || figures.feedback_mismatches > 0
        || figures.bad_requests > 0
    {
        failures.push(format!(
            "the server measured {} gaps of {expected_gaps}, {} unmatched requests, {} results not fed back, {} bad requests",
            figures.gaps.count, figures.unmatched, figures.feedback_mismatches, figures.bad_requests
        ));
    }
    (completed, first_requests)
}
