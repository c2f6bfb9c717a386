//! `compare`: our side of the comparison with the Python agent frameworks, and the speed targets.
//!
//! - `compare run` times whole scripted `complete` requests the peers' way (200 warm-up runs,
//!   2000 timed runs, median and nearest-rank p99 in µs, peak RSS) and records the `repeat`
//!   scenario; it prints one JSON report in the peers' shape.
//! - `compare targets` measures every speed target in this one process and prints each figure
//!   beside its target, as a ratio.
//! - `compare table` reads the reports of a comparison folder and prints the Markdown tables.
//! - `compare spin` repeats one measured operation, for a profiler such as callgrind.
//!
//! Nothing here fails on a slow figure: a missed target is printed as missed.

#![forbid(unsafe_code)]
#![warn(clippy::pedantic)]

use std::fmt;
use std::hint::black_box;
use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand, ValueEnum};
use loopbound::EventKind;
use loopbound::canonical::{canonical_json, signature};
use loopbound_benches::fixtures::{Check, Fixture, admit};
use loopbound_benches::peers::{Complete, Repeat, Report, read_dir};
use loopbound_benches::runs::{self, RunFailure};
use loopbound_benches::targets::{self, Effort};
use loopbound_benches::timing::peak_rss_mib;
use loopbound_benches::{table, values};
use loopbound_demos::scenario::Scenario;
use loopbound_testkit::Composition;
use loopbound_testkit::review::TicketInput;

#[derive(Parser, Debug)]
#[command(about = "loopbound's side of the agent-framework comparison, and its speed targets")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Time whole `complete` requests the peers' way and record `repeat`; print a JSON report.
    Run {
        /// Timed runs.
        #[arg(long, default_value_t = 2000)]
        runs: usize,
        /// Warm-up runs before timing.
        #[arg(long, default_value_t = 200)]
        warmup: usize,
        /// The round number written in the report's file name.
        #[arg(long, default_value_t = 1)]
        round: u32,
        /// Also write the report to `DIR/loopbound.async.r<ROUND>.json`.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Measure every speed target in this process and print measured figures beside targets.
    Targets {
        /// Fewer samples: a quick look, not a measurement to report.
        #[arg(long)]
        quick: bool,
    },
    /// Print the comparison tables from the reports in DIR.
    Table {
        /// The folder of `<peer>.<tools>.r<round>.json` reports.
        dir: PathBuf,
        /// Tool mode of the peers' reports to compare (`async` or `sync`).
        #[arg(long, default_value = "async")]
        tools: String,
    },
    /// Repeat one measured operation, for a profiler such as callgrind.
    Spin {
        /// The operation.
        #[arg(value_enum)]
        op: Spin,
        /// How many times.
        #[arg(long, default_value_t = 100_000)]
        iterations: u32,
    },
}

/// Operations that `compare spin` repeats.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Spin {
    /// Admission of {"input":42} on a scope with room.
    Admit,
    /// Admission of {"input":42} on a scope with room under a token and a cost budget.
    AdmitBudgeted,
    /// Admission as the first call of a fresh default scope (scopes built before the loop).
    AdmitFirst,
    /// Admission of {"input":42} on a watched scope with room, its watcher a task of the same
    /// current-thread runtime that waits for each event: every admission queues its event and
    /// wakes the watcher.
    AdmitWatched,
    /// Refusal at the permission check.
    RefusePermission,
    /// Refusal at the budget check.
    RefuseBudget,
    /// Refusal at the repetition check.
    RefuseRepetition,
    /// Canonical JSON of each sample value.
    Canonical,
    /// `serde_json::to_string` of each sample value.
    SerdeJson,
    /// Signature of `TicketInput { input: 42 }`.
    Signature,
    /// A whole `complete` request.
    Complete,
}

fn main() -> ExitCode {
    let outcome = match Cli::parse().command {
        Command::Run { runs, warmup, round, out } => run(runs, warmup, round, out.as_deref()),
        Command::Targets { quick } => {
            print_targets(if quick { Effort::QUICK } else { Effort::FULL });
            Ok(())
        }
        Command::Table { dir, tools } => print_table(&dir, &tools),
        Command::Spin { op, iterations } => spin(op, iterations),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("compare: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Errors of the subcommands.
#[derive(Debug)]
enum Failure {
    Run(RunFailure),
    Io(io::Error),
    NoReference(PathBuf),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Run(error) => error.fmt(f),
            Self::Io(error) => error.fmt(f),
            Self::NoReference(dir) => write!(f, "no loopbound report in {}", dir.display()),
        }
    }
}

impl From<RunFailure> for Failure {
    fn from(error: RunFailure) -> Self {
        Self::Run(error)
    }
}

impl From<io::Error> for Failure {
    fn from(error: io::Error) -> Self {
        Self::Io(error)
    }
}

fn run(runs: usize, warmup: usize, round: u32, out: Option<&Path>) -> Result<(), Failure> {
    let runtime = runs::runtime();
    let counts = (warmup, runs);
    let complete = (Scenario::Complete, Composition::Harness);
    let summary = runs::time_scenario(&runtime, complete, counts, false)?;
    let peak = peak_rss_mib();
    let prepared = runs::time_scenario(&runtime, complete, counts, true)?;

    let start = Instant::now();
    let outcome = runtime.block_on(runs::request(Scenario::Repeat, Composition::Harness))?;
    let wall_ms = start.elapsed().as_secs_f64() * 1000.0;
    runs::verify(Scenario::Repeat, &outcome)?;
    let events: Vec<String> = outcome.events().iter().map(ToString::to_string).collect();
    let repeat = Repeat {
        model_calls: u64::from(runs::count(&outcome, EventKind::ModelCall)),
        tool_calls: u64::from(runs::count(&outcome, EventKind::ToolCall)),
        outcome: format!(
            "returned Outcome {} (exit code {}, no text): the 2nd identical call was refused before its body; events: {}",
            outcome.status(),
            loopbound_demos::vocabulary::status_exit_code(outcome.status()),
            events.join(", ")
        ),
        wall_ms: Some(wall_ms),
    };
    let report = Report {
        peer: "loopbound".to_owned(),
        tools: "async".to_owned(),
        versions: [("loopbound".to_owned(), env!("CARGO_PKG_VERSION").to_owned())].into(),
        import_ms: None,
        complete: Complete {
            runs: summary.runs,
            median_us: summary.median_us,
            p99_us: summary.p99_us,
            mean_us: summary.mean_us,
            peak_rss_mib: peak,
        },
        repeat: [("limits".to_owned(), repeat)].into(),
        notes: format!(
            "harness composition; one timed run = a new scope (the tools are defined once per process) + \
             the run of 3 model calls and 2 tool calls, on a current-thread tokio runtime. With the scope \
             built before the timer starts: median {} µs, p99 {} µs. repeat runs under the default limits \
             (6 model calls, 4 tool calls, 1 repetition per signature).",
            table::micros(prepared.median_us),
            table::micros(prepared.p99_us)
        ),
    };
    let text = serde_json::to_string_pretty(&report).map_err(io::Error::other)?;
    println!("{text}");
    if let Some(dir) = out {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join(format!("loopbound.async.r{round}.json")), text + "\n")?;
    }
    Ok(())
}

fn print_targets(effort: Effort) {
    println!("load average at start: {}", load_average());
    let mut lines = targets::guard(effort);
    lines.extend(targets::canonical(effort));
    lines.extend(targets::reservation(effort));
    lines.extend(targets::complete(effort));
    lines.extend(targets::parallel(effort));
    println!("load average at end: {}\n", load_average());
    print!("{}", targets::render(&lines));
}

fn print_table(dir: &Path, tools: &str) -> Result<(), Failure> {
    let rounds = read_dir(dir)?;
    let timing =
        table::timing(&rounds, "loopbound", tools).ok_or_else(|| Failure::NoReference(dir.into()))?;
    println!("### `complete`: one whole scripted run (3 model calls, 2 tool calls)\n");
    println!("{timing}");
    println!("### `repeat`: the model asks for `read_ticket(42)` on every call\n");
    println!("{}", table::repeat(&rounds, "loopbound", tools));
    Ok(())
}

fn spin(op: Spin, iterations: u32) -> Result<(), Failure> {
    let n = usize::try_from(iterations).unwrap_or(usize::MAX);
    let mut checksum = 0_usize;
    match op {
        Spin::Admit | Spin::AdmitBudgeted => {
            let fixture = match op {
                Spin::AdmitBudgeted => Fixture::roomy_with_budgets(iterations),
                _ => Fixture::roomy(iterations),
            };
            for _ in 0..n {
                checksum += usize::from(admit(black_box(fixture.read_ticket())).is_ok());
            }
        }
        Spin::AdmitWatched => checksum = admit_watched(n)?,
        Spin::AdmitFirst | Spin::RefusePermission | Spin::RefuseBudget | Spin::RefuseRepetition => {
            let fixtures: Vec<Fixture> = (0..n)
                .map(|_| match op {
                    Spin::RefusePermission => Check::Permission.arm(),
                    Spin::RefuseBudget => Check::Budget.arm(),
                    Spin::RefuseRepetition => Check::Repetition.arm(),
                    _ => Fixture::default_limits(),
                })
                .collect();
            for fixture in &fixtures {
                checksum += usize::from(admit(black_box(fixture.read_ticket())).is_ok());
            }
        }
        Spin::Canonical | Spin::SerdeJson => {
            for sample in values::samples() {
                for _ in 0..(n / sample.bytes.max(1)).max(1) {
                    checksum += match op {
                        Spin::Canonical => canonical_json(black_box(&sample.value)).len(),
                        _ => serde_json::to_string(black_box(&sample.value)).map_or(0, |text| text.len()),
                    };
                }
            }
        }
        Spin::Signature => {
            for _ in 0..n {
                let ticket = TicketInput { input: 42 };
                checksum +=
                    signature("read_ticket", black_box(&ticket)).map_or(0, |text| text.as_str().len());
            }
        }
        Spin::Complete => {
            let runtime = runs::runtime();
            runtime.block_on(async {
                for _ in 0..n {
                    let outcome = runs::request(Scenario::Complete, Composition::Harness).await?;
                    checksum += outcome.events().len();
                }
                Ok::<_, RunFailure>(())
            })?;
        }
    }
    println!("{op:?}: {iterations} iterations, checksum {checksum}");
    Ok(())
}

/// `n` admissions on a watched scope whose watcher, a task of the same runtime, reads each
/// event and waits for the next: the task yields before each admission so that the watcher has
/// read the last event and waits again. Returns the events the watcher saw, `n` when every
/// admission was streamed.
fn admit_watched(n: usize) -> Result<usize, Failure> {
    let (feed, mut updates) = loopbound::watch::channel();
    let fixture = Fixture::roomy_watched(u32::try_from(n).unwrap_or(u32::MAX), feed);
    let runtime = runs::runtime();
    let seen = runtime.block_on(async move {
        let watcher = tokio::spawn(async move {
            let mut seen = 0_usize;
            while updates.next().await.is_some() {
                seen += 1;
            }
            seen
        });
        for _ in 0..n {
            tokio::task::yield_now().await;
            black_box(admit(black_box(fixture.read_ticket())).ok());
        }
        // The scope's feed goes with it: the stream ends after what is queued.
        drop(fixture);
        watcher.await
    });
    seen.map_err(|error| Failure::Io(io::Error::other(error)))
}

/// The 1, 5 and 15 minute load averages, as `/proc/loadavg` gives them.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(
        |_| "unknown".to_owned(),
        |text| text.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    )
}
