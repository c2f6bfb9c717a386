//! A benchmark of loop traces (SPEC §25): scripted loops that progress or go round, each run
//! under each policy, with the verdict a user wants, and what each policy did about it.
//!
//! - [`catalog`]: the traces;
//! - [`world`]: the tools they call.
//!
//! Every run shares one budget (40 model calls, 30 tool calls), so that what stops a stuck loop
//! early is the policy, and what stops it late is the budget.
//!
//! # Invariants
//!
//! - Runs are scripted and deterministic: the table is the same on every machine.
//! - A halt of a progressing trace is a false halt; a stuck trace that ends in a halt is a
//!   correct halt, counted "early" when a repetition or progress check stopped it, not a budget.
//! - Input tokens are estimated as the JSON bytes of the request's messages divided by 4 (the
//!   scripted model reports no usage), summed over the run's model calls.

pub mod catalog;
pub mod world;

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use loopbound::progress::Progress;
use loopbound::scripted::{Scripted, Step};
use loopbound::transport::{ChatRequest, Message, ModelReply};
use loopbound::{Limits, Runner, Scope, Status};

pub use catalog::{TRACES, Trace, Turn, Verdict};

/// Model calls every run may make.
pub const MODEL_CALLS: u32 = 40;
/// Tool calls every run may make.
pub const TOOL_CALLS: u32 = 30;

/// A policy under test: a name, the repetition limit, and the progress policy.
#[derive(Clone, Debug)]
pub struct Policy {
    /// The name in the tables.
    pub name: &'static str,
    /// `Limits::repetitions`.
    pub repetitions: u32,
    /// The scope's progress policy.
    pub progress: Progress,
}

/// The tools a host would let repeat by result in this world: polls, sleeps, re-reads, retries.
const POLLED: [&str; 4] = ["job_status", "sleep", "read_file", "fetch"];

/// The recommended policy with `POLLED` judged by result (20 polls each).
fn recommended() -> Progress {
    POLLED.iter().fold(Progress::recommended(), |progress, tool| progress.by_result(*tool, 20))
}

/// The policies compared: the seed's exact rule, a documented threshold rule (three identical
/// calls), the recommended policy, with a repetition limit of 1 and of 2, and with the nudge.
#[must_use]
pub fn policies() -> Vec<Policy> {
    vec![
        Policy { name: "seed (exact, 1 repetition)", repetitions: 1, progress: Progress::exact() },
        Policy { name: "threshold (exact, 3 repetitions)", repetitions: 3, progress: Progress::exact() },
        Policy { name: "recommended", repetitions: 1, progress: recommended() },
        Policy { name: "recommended, 2 repetitions", repetitions: 2, progress: recommended() },
        Policy { name: "recommended + nudge", repetitions: 1, progress: recommended().nudge(true) },
    ]
}

/// How one trace ended under one policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ending {
    /// The run's status.
    pub status: Status,
    /// Model calls admitted.
    pub model_calls: u32,
    /// Tool calls admitted.
    pub tool_calls: u32,
    /// Estimated input tokens of the requests sent.
    pub tokens: u64,
}

impl Ending {
    /// Whether the run was halted (it did not end with an answer).
    #[must_use]
    pub fn halted(&self) -> bool {
        !matches!(self.status, Status::Completed | Status::Incomplete)
    }

    /// Whether a budget, not a repetition or progress check, stopped it.
    #[must_use]
    pub fn by_budget(&self) -> bool {
        matches!(self.status, Status::ModelBudget | Status::ToolBudget)
    }
}

/// The estimated tokens of `request`: its messages' JSON bytes divided by 4.
fn tokens(request: &ChatRequest<'_>) -> u64 {
    let bytes = serde_json::to_string(request.messages).map_or(0, |json| json.len());
    (bytes / 4) as u64
}

/// Runs `trace` under `policy`.
///
/// # Errors
///
/// A run error (none is expected: the model is scripted and never fails).
pub async fn run(trace: &Trace, policy: &Policy) -> Result<Ending, Box<dyn std::error::Error>> {
    let spent = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&spent);
    let turn = trace.turn;
    let model = Scripted::new(move |n, request| {
        counted.fetch_add(tokens(request), Ordering::Relaxed);
        Step::Reply(match turn(n as usize) {
            Turn::Call(tool, arguments) => ModelReply::call(format!("c{n}"), tool, arguments),
            Turn::Answer => ModelReply::text("Done."),
        })
    });
    let tools = world::tools();
    let runtime = Runner::new(&tools, model);
    let limits = Limits::default()
        .with_model_calls(MODEL_CALLS)
        .with_tool_calls(TOOL_CALLS)
        .with_repetitions(policy.repetitions);
    let scope = Scope::builder()
        .grant(world::CAPABILITY)
        .limits(limits)
        .progress(policy.progress.clone())
        .state(world::World::default())
        .build()?;
    let outcome = runtime.run(&scope, &mut vec![Message::user("Do the task.")], |_| true).await?;
    Ok(Ending {
        status: outcome.status(),
        model_calls: scope.model_calls(),
        tool_calls: scope.tool_calls(),
        tokens: spent.load(Ordering::Relaxed),
    })
}

/// What one policy did over every trace.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    /// Stuck traces that were halted.
    pub correct_halts: usize,
    /// Of those, halted by a repetition or progress check rather than a budget.
    pub early_halts: usize,
    /// Progressing traces that were halted.
    pub false_halts: usize,
    /// Stuck traces.
    pub stuck: usize,
    /// Progressing traces.
    pub progressing: usize,
    /// Mean model calls of the stuck traces' runs.
    pub mean_model_calls: f64,
    /// Mean estimated input tokens of the stuck traces' runs.
    pub mean_tokens: f64,
}

/// The summary of `endings` (one per trace of [`TRACES`], in order).
#[must_use]
pub fn summarise(endings: &[Ending]) -> Summary {
    let mut summary = Summary::default();
    let (mut calls, mut tokens) = (0u64, 0u64);
    for (trace, ending) in TRACES.iter().zip(endings) {
        match trace.verdict {
            Verdict::Progresses => {
                summary.progressing += 1;
                summary.false_halts += usize::from(ending.halted());
            }
            Verdict::Stuck => {
                summary.stuck += 1;
                summary.correct_halts += usize::from(ending.halted());
                summary.early_halts += usize::from(ending.halted() && !ending.by_budget());
                calls += u64::from(ending.model_calls);
                tokens += ending.tokens;
            }
        }
    }
    let stuck = summary.stuck.max(1) as f64;
    summary.mean_model_calls = calls as f64 / stuck;
    summary.mean_tokens = tokens as f64 / stuck;
    summary
}

/// Runs every trace under every policy; returns the endings, per policy, per trace.
///
/// # Errors
///
/// The first run error.
pub async fn run_all(policies: &[Policy]) -> Result<Vec<Vec<Ending>>, Box<dyn std::error::Error>> {
    let mut all = Vec::with_capacity(policies.len());
    for policy in policies {
        let mut endings = Vec::with_capacity(TRACES.len());
        for trace in TRACES {
            endings.push(run(trace, policy).await?);
        }
        all.push(endings);
    }
    Ok(all)
}

/// The Markdown tables: the summary per policy, then each trace's ending under each policy
/// (`status model-calls`).
#[must_use]
pub fn table(policies: &[Policy], endings: &[Vec<Ending>]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| policy | correct halts | of them early (not a budget) | false halts | model calls, stuck traces (mean) | est. input tokens, stuck traces (mean) |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|");
    for (policy, endings) in policies.iter().zip(endings) {
        let summary = summarise(endings);
        let _ = writeln!(
            out,
            "| {} | {}/{} | {} | {}/{} | {:.1} | {:.0} |",
            policy.name,
            summary.correct_halts,
            summary.stuck,
            summary.early_halts,
            summary.false_halts,
            summary.progressing,
            summary.mean_model_calls,
            summary.mean_tokens
        );
    }
    let _ = writeln!(out);
    let _ = write!(out, "| trace | wanted |");
    for policy in policies {
        let _ = write!(out, " {} |", policy.name);
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "|---|---|{}", "---|".repeat(policies.len()));
    for (at, trace) in TRACES.iter().enumerate() {
        let wanted = match trace.verdict {
            Verdict::Progresses => "complete",
            Verdict::Stuck => "halt",
        };
        let _ = write!(out, "| {} | {wanted} |", trace.name);
        for endings in endings {
            if let Some(ending) = endings.get(at) {
                let _ = write!(out, " {} {} |", ending.status, ending.model_calls);
            }
        }
        let _ = writeln!(out);
    }
    out
}
