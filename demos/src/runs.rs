//! The host's queries on a journal: `runs` lists runs by state and by label, a page at a time;
//! `inspect` prints everything the journal holds about one run.
//!
//! # Invariants
//!
//! - Both only read: nothing is written to the journal, and no worker identity is needed.
//! - Stored texts (arguments, labels, holders, results) are printed through
//!   [`visible`](crate::visible::visible): nothing the journal holds can drive the terminal.
//! - A page of `runs` that may have a next one says how to ask for it.

use std::fmt::Write as _;
use std::path::Path;

use loopbound::Status;
use loopbound::journal::{
    self, Lease, Operation, OperationStatus, RunId, RunQuery, RunRecord, RunState, RunSummary, StateFilter,
};

use crate::durable::{emit, line, open, refuse};
use crate::visible::visible;
use crate::vocabulary::EXIT_USAGE;

/// Which runs `demo330 runs` lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum StateArg {
    /// An attempt holds the run's live lease.
    Running,
    /// Nothing waits on the host; a resume continues it.
    Open,
    /// A proposal waits for a decision.
    Awaiting,
    /// An effect's outcome is unknown; reconcile it.
    Ambiguous,
    /// Ended for good (optionally with `--status`).
    Finished,
}

/// What `runs` was asked for.
#[derive(Clone, Debug, PartialEq, Eq, clap::Args)]
pub struct RunsArgs {
    /// The SQLite journal file.
    #[arg(long, value_name = "PATH")]
    pub journal: std::path::PathBuf,
    /// Only runs in this state.
    #[arg(long, value_enum)]
    pub state: Option<StateArg>,
    /// With `--state finished`: only runs that ended with this status, e.g. Completed.
    #[arg(long, requires = "state")]
    pub status: Option<String>,
    /// Only runs with this label, as `key=value`.
    #[arg(long, value_name = "KEY=VALUE")]
    pub label: Option<String>,
    /// The page starts after this run (a previous page's last).
    #[arg(long, value_name = "RUN")]
    pub after: Option<String>,
    /// Runs per page (1 to 1000).
    #[arg(long, default_value_t = 20)]
    pub limit: u32,
}

fn usage(err: &mut impl std::io::Write, message: &str) -> i32 {
    emit(err, &format!("demo330: {message}\n"));
    EXIT_USAGE
}

/// The query `args` describe, or a usage error.
fn query(args: &RunsArgs) -> Result<RunQuery, String> {
    let mut query = RunQuery::new().limit(args.limit);
    let status = match &args.status {
        Some(name) => Some(
            Status::from_name(name)
                .ok_or_else(|| format!("--status: no status named '{}'", visible(name)))?,
        ),
        None => None,
    };
    if status.is_some() && args.state != Some(StateArg::Finished) {
        return Err("--status goes with --state finished".to_owned());
    }
    if let Some(state) = args.state {
        query = query.state(match state {
            StateArg::Running => StateFilter::Running,
            StateArg::Open => StateFilter::Open,
            StateArg::Awaiting => StateFilter::AwaitingApproval,
            StateArg::Ambiguous => StateFilter::Ambiguous,
            StateArg::Finished => StateFilter::Finished(status),
        });
    }
    if let Some(label) = &args.label {
        let (key, value) = label.split_once('=').ok_or("--label: expected KEY=VALUE")?;
        query = query.label(key, value).map_err(|error| format!("--label: {error}"))?;
    }
    if let Some(after) = &args.after {
        query = query.after(RunId::new(after).map_err(|error| format!("--after: {error}"))?);
    }
    Ok(query)
}

/// A lease in a few words.
fn lease_text(lease: Option<&Lease>) -> String {
    match lease {
        None => "released".to_owned(),
        Some(lease) if lease.is_live() => format!(
            "held by {} ({} ms left: an attempt may be running it)",
            visible(&lease.holder),
            lease.remaining.as_millis()
        ),
        Some(lease) => {
            format!("expired, last held by {} (its attempt stopped or died)", visible(&lease.holder))
        }
    }
}

fn summary_line(out: &mut String, summary: &RunSummary) {
    let state = if summary.is_running() {
        format!("running ({})", summary.state())
    } else {
        summary.state().to_string()
    };
    let labels = if summary.labels().is_empty() {
        "-".to_owned()
    } else {
        visible(&summary.labels().to_string()).into_owned()
    };
    let lease = match summary.lease() {
        None => "released".to_owned(),
        Some(lease) => {
            format!("{} {}", if lease.is_live() { "live" } else { "expired" }, visible(&lease.holder))
        }
    };
    let _ = writeln!(
        out,
        "{:<24} {:<26} {:>8}  {:<20} {labels}",
        summary.run().as_str(),
        state,
        summary.attempts(),
        lease
    );
}

/// `demo330 runs`: one page of the runs in the journal at `args.journal`.
pub async fn runs(args: &RunsArgs, out: &mut impl std::io::Write, err: &mut impl std::io::Write) -> i32 {
    let query = match query(args) {
        Ok(query) => query,
        Err(message) => return usage(err, &message),
    };
    let Some(journal) = open(&args.journal, err) else { return crate::vocabulary::EXIT_JOURNAL };
    let page = match journal::list(&journal, &query).await {
        Ok(page) => page,
        Err(error) => return refuse(err, &error),
    };
    let mut text = String::new();
    let _ = writeln!(text, "{:<24} {:<26} {:>8}  {:<20} labels", "run", "state", "attempts", "lease");
    for summary in page.runs() {
        summary_line(&mut text, summary);
    }
    text.push('\n');
    line(&mut text, "listed", &format!("{} run(s)", page.runs().len()));
    if let Some(next) = page.next() {
        let mut again = format!("demo330 runs --journal {}", args.journal.display());
        if let Some(state) = args.state {
            let _ = write!(
                again,
                " --state {}",
                clap::ValueEnum::to_possible_value(&state)
                    .map(|v| v.get_name().to_owned())
                    .unwrap_or_default()
            );
        }
        if let Some(status) = &args.status {
            let _ = write!(again, " --status {}", visible(status));
        }
        if let Some(label) = &args.label {
            let _ = write!(again, " --label {}", visible(label));
        }
        line(&mut text, "next page", &format!("{again} --limit {} --after {next}", query.page_size()));
    }
    emit(out, &text);
    0
}

/// An operation's standing in a few words.
fn status_text(operation: &Operation) -> String {
    let decided =
        operation.decision().map(|d| format!(", {} by {}", d.verdict().as_str(), d.by().describe()));
    let decided = decided.unwrap_or_default();
    match operation.status() {
        OperationStatus::AwaitingDecision => "awaiting a decision".to_owned(),
        OperationStatus::Denied => format!("denied{decided}"),
        OperationStatus::Ready { start } => format!("ready for start {start}{decided}"),
        OperationStatus::Started { start } => format!("started ({start}), no result{decided}"),
        OperationStatus::Settled(result) if result.is_error() => format!("failed{decided}"),
        OperationStatus::Settled(_) => format!("done{decided}"),
        _ => "unknown".to_owned(),
    }
}

/// What the record says, as the console prints it.
fn render(path: &Path, record: &RunRecord) -> String {
    let mut out = String::new();
    line(&mut out, "run", record.run().as_str());
    let meaning = match record.state() {
        RunState::Open => "nothing waits on the host; a resume continues it",
        RunState::AwaitingApproval(_) => "a proposal waits for the host's decision",
        RunState::Ambiguous(_) => "an effect started and has no result: reconcile it",
        RunState::Finished(_) => "ended for good",
        _ => "",
    };
    line(&mut out, "state", &format!("{} ({meaning})", record.state()));
    line(&mut out, "attempts", &format!("{} (epoch {})", record.attempts(), record.epoch()));
    line(&mut out, "lease", &lease_text(record.lease()));
    match record.definition() {
        Some(definition) => {
            line(
                &mut out,
                "grants",
                &definition.grants().map(|g| visible(g).into_owned()).collect::<Vec<_>>().join(", "),
            );
            line(&mut out, "limits", &definition.limits().to_string());
        }
        None => line(&mut out, "definition", "not stored (a run journaled before definitions were)"),
    }
    let labels = record.labels();
    line(
        &mut out,
        "labels",
        &if labels.is_empty() { "-".to_owned() } else { visible(&labels.to_string()).into_owned() },
    );
    line(
        &mut out,
        "counters",
        &format!(
            "model calls {}, tool calls {}, replies recorded {}",
            record.model_calls(),
            record.tool_calls(),
            record.replies()
        ),
    );
    out.push_str("\noperations\n");
    for operation in record.operations() {
        let proposal = operation.proposal();
        let _ = writeln!(
            out,
            "  {:<22} {:<14} {:<11} {}",
            proposal.operation().to_string(),
            proposal.tool(),
            proposal.effect().as_str(),
            status_text(operation)
        );
    }
    if let Some(pending) = record.pending() {
        out.push('\n');
        line(
            &mut out,
            "pending",
            &format!(
                "{} {} ({}, needs {})",
                pending.tool(),
                visible(pending.arguments()),
                pending.effect(),
                pending.capability()
            ),
        );
        line(&mut out, "digest", pending.digest().as_str());
        line(
            &mut out,
            "next",
            &format!(
                "demo330 approve --journal {} {} --digest {} --approver alice",
                path.display(),
                pending.operation(),
                pending.digest()
            ),
        );
    }
    if let RunState::Ambiguous(ordinal) = record.state()
        && !record.is_running()
    {
        let operation = record.run().operation(ordinal);
        out.push('\n');
        line(&mut out, "next", "find out in the effect's own system whether it ran, then say so:");
        for said in ["--not-run", "--ran \"Refunded.\""] {
            line(
                &mut out,
                "",
                &format!("demo330 reconcile --journal {} {operation} {said} --by ops", path.display()),
            );
        }
    }
    out.push_str("\naudit log\n");
    for event in record.events() {
        let _ = writeln!(out, "  {event}");
    }
    out
}

/// `demo330 inspect`: everything the journal at `path` holds about `run`.
pub async fn inspect(
    path: &Path,
    run: &str,
    out: &mut impl std::io::Write,
    err: &mut impl std::io::Write,
) -> i32 {
    let run = match RunId::new(run) {
        Ok(run) => run,
        Err(error) => return refuse(err, &journal::JournalError::from(error)),
    };
    let Some(journal) = open(path, err) else { return crate::vocabulary::EXIT_JOURNAL };
    match journal::inspect(&journal, &run).await {
        Ok(record) => {
            emit(out, &render(path, &record));
            0
        }
        Err(error) => refuse(err, &error),
    }
}
