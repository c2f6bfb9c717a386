//! The durable scenarios (SPEC §15) and the host's commands, on one SQLite journal file:
//!
//! - `refund`: a refund that needs approval; the run stops `AwaitingApproval` naming the
//!   operation, and prints the commands that approve or deny it and resume the run;
//! - `crash`: the refund is allowed, and the process really dies right after the refund's
//!   `started` record is committed, before its body; the resume reports `Ambiguous` and prints
//!   the commands that reconcile it;
//! - `approve` / `deny` an operation (bound to its proposal's digest), `reconcile` an ambiguous
//!   one, `resume` a run.
//!
//! The payments system the refund acts on is a file beside the journal (`<journal>.refunds`, one
//! line per refund applied, fsynced), so what happened survives the process like the journal.
//!
//! Each `demo330` process holds the runs it drives under a lease of [`LEASE`] named `demo330`:
//! a resume right after a crash waits (and says so) until the dead process's lease expires.
//!
//! # Invariants
//!
//! - Run ids are fixed per scenario (`refund-42`, `crash-42`), so transcripts hold no random
//!   id and `resume` knows the scenario from the run.
//! - The host's completion condition reads the payments file, never the model's words.
//! - The proposal's arguments are shown to the approver (what an approval binds to) with control
//!   characters made visible; events and errors never carry them.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use loopbound::journal::backend::{Batch, Entry, Fence, ListedRow, RunRow, StoredRun};
use loopbound::journal::{self, Digest, Journal, JournalError, OperationId, RunId, RunQuery, RunRecord};
use loopbound::tool::Policy;
use loopbound::{Ended, Limits, Outcome, RunError, Runner, Scope, Status};
use loopbound_fixtures::Composition;
use loopbound_fixtures::refund::{self, EffectSink, FileSink};
use loopbound_sqlite::SqliteJournal;

use crate::text::render_outcome;
use crate::vocabulary::{Agent, EXIT_JOURNAL, chained, error_exit_code, status_exit_code};

/// A durable scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durable {
    /// The refund needs an approver.
    Refund,
    /// The process dies right after the refund's `started` commit.
    Crash,
}

impl Durable {
    /// Both, in the README's order.
    pub const ALL: [Self; 2] = [Self::Refund, Self::Crash];

    /// The scenario's command name.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Refund => "refund",
            Self::Crash => "crash",
        }
    }

    /// Its fixed run id.
    #[must_use]
    pub const fn run(self) -> &'static str {
        match self {
            Self::Refund => "refund-42",
            Self::Crash => "crash-42",
        }
    }

    /// The refund tool's policy.
    #[must_use]
    pub const fn policy(self) -> Policy {
        match self {
            Self::Refund => Policy::Ask,
            Self::Crash => Policy::Allow,
        }
    }

    /// What it demonstrates.
    #[must_use]
    pub const fn demonstrates(self) -> &'static str {
        match self {
            Self::Refund => "a refund that needs approval: the run stops until the host decides",
            Self::Crash => "the process dies right after the refund's started record is committed",
        }
    }

    /// The scenario of run `run`.
    #[must_use]
    pub fn of_run(run: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.run() == run)
    }
}

/// The payments file beside `journal`.
#[must_use]
pub fn refunds_path(journal: &Path) -> PathBuf {
    let mut name = journal.file_name().map(std::ffi::OsStr::to_os_string).unwrap_or_default();
    name.push(".refunds");
    journal.with_file_name(name)
}

pub(crate) fn emit(stream: &mut impl std::io::Write, text: &str) {
    let _ = stream.write_all(text.as_bytes()).and_then(|()| stream.flush());
}

/// How long a `demo330` process holds a run without writing: short, so that a resume after a
/// crash waits little.
pub const LEASE: std::time::Duration = std::time::Duration::from_secs(2);

/// The name the console's leases carry.
pub const HOLDER: &str = "demo330";

pub(crate) fn open(path: &Path, err: &mut impl std::io::Write) -> Option<SqliteJournal> {
    let opened = SqliteJournal::open(path)
        .and_then(|journal| journal.with_lease(LEASE))
        .and_then(|journal| journal.with_holder(HOLDER));
    match opened {
        Ok(journal) => Some(journal),
        Err(error) => {
            emit(err, &format!("demo330: {}: {}\n", path.display(), chained(&error)));
            None
        }
    }
}

/// Control characters in `text` written as `\u{..}`, so untrusted text cannot drive the terminal.
#[must_use]
pub fn visible(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    out
}

/// `label` then `value`, in the transcript's columns.
pub(crate) fn line(out: &mut String, label: &str, value: &str) {
    let _ = writeln!(out, "{label:<14}{value}");
}

/// Plays `scenario` on the journal at `path`, from its start or where the journal left it.
pub async fn play(
    scenario: Durable,
    path: &Path,
    out: &mut impl std::io::Write,
    err: &mut impl std::io::Write,
) -> i32 {
    let Some(journal) = open(path, err) else { return EXIT_JOURNAL };
    let sink = Arc::new(FileSink::new(refunds_path(path)));
    let tools = refund::tools(Arc::clone(&sink) as Arc<dyn EffectSink>, scenario.policy());
    let limits = Limits::default();
    let scope = match Scope::builder().grants(refund::CAPABILITIES).limits(limits.clone()).build() {
        Ok(scope) => scope,
        Err(error) => {
            emit(err, &format!("demo330: {}\n", chained(&error)));
            return crate::vocabulary::EXIT_INTERNAL;
        }
    };
    let run = RunId::new(scenario.run()).unwrap_or_else(|_| unreachable!("the scenarios' run ids are valid"));
    emit(out, &header(scenario, path, &scope));
    let runtime =
        Runner::new(&tools.set, refund::model(refund::short_script(), |_| {})).observe(loopbound::Middleware);
    let journal = Dying { inner: journal, dies: scenario == Durable::Crash };
    let mut conversation = refund::conversation();
    let run_id = run.clone();
    let completed = move |_: Ended<'_, ()>| {
        sink.applied().iter().any(|(tool, key)| {
            tool == "refund" && key.as_deref().is_some_and(|k| k.starts_with(&format!("{run_id}/")))
        })
    };
    let mut result = runtime.run_journaled(&journal, &run, &scope, &mut conversation, &completed).await;
    // An earlier attempt that died holds the run until its lease expires: wait for it once.
    if let Err(RunError::Journal(JournalError::LeaseHeld { holder, remaining })) = &result {
        emit(
            out,
            &format!(
                "\n{:<14}held by {} (an earlier attempt); waiting for its lease to expire\n",
                "lease",
                visible(holder)
            ),
        );
        tokio::time::sleep(*remaining + std::time::Duration::from_millis(50)).await;
        let scope = match Scope::builder().grants(refund::CAPABILITIES).limits(limits).build() {
            Ok(scope) => scope,
            Err(error) => {
                emit(err, &format!("demo330: {error}\n"));
                return crate::vocabulary::EXIT_INTERNAL;
            }
        };
        conversation = refund::conversation();
        result = runtime.run_journaled(&journal, &run, &scope, &mut conversation, &completed).await;
    }
    match result {
        Ok(outcome) => {
            emit(out, "\n");
            emit(out, &render_outcome(&outcome));
            emit(out, &next_steps(path, &outcome));
            status_exit_code(outcome.status())
        }
        Err(error) => {
            let code = error_exit_code(&error);
            emit(err, &format!("demo330: {error}; no outcome (exit {code})\n"));
            code
        }
    }
}

fn header(scenario: Durable, path: &Path, scope: &Scope) -> String {
    let mut out = String::new();
    let agent = Agent::new(Composition::Harness, scope.limits());
    line(&mut out, "agent", &agent.loop_line());
    line(&mut out, "transport", "scripted");
    line(&mut out, "capabilities", &scope.capabilities().collect::<Vec<_>>().join(", "));
    line(&mut out, "limits", &scope.limits().to_string());
    line(
        &mut out,
        "completion",
        "the refund is in the payments system (the .refunds file), not the model's words",
    );
    line(&mut out, "scenario", &format!("{}: {}", scenario.name(), scenario.demonstrates()));
    line(
        &mut out,
        "journal",
        &format!("{} (SQLite, WAL, synchronous FULL, leases of {}s)", path.display(), LEASE.as_secs()),
    );
    line(&mut out, "payments", &refunds_path(path).display().to_string());
    line(&mut out, "run", scenario.run());
    line(
        &mut out,
        "tools",
        &format!(
            "lookup_order read/allow, refund effect/{}, send_receipt idempotent/allow",
            scenario.policy()
        ),
    );
    out
}

/// What the host does next, after `outcome`.
fn next_steps(path: &Path, outcome: &Outcome) -> String {
    let mut out = String::new();
    let Some(operation) = outcome.operation().and_then(|id| OperationId::parse(id).ok()) else {
        return out;
    };
    let journal_arg = path.display();
    let run = operation.run();
    match outcome.status() {
        Status::AwaitingApproval => {
            let Some(proposal) = outcome.pending() else { return out };
            let digest = proposal.digest();
            line(
                &mut out,
                "proposal",
                &format!(
                    "{} {} ({}, needs {})",
                    proposal.tool(),
                    visible(proposal.arguments()),
                    proposal.effect(),
                    proposal.capability()
                ),
            );
            line(&mut out, "digest", digest.as_str());
            line(&mut out, "next", "approve or deny exactly this call, then resume:");
            line(
                &mut out,
                "",
                &format!(
                    "demo330 approve --journal {journal_arg} {operation} --digest {digest} --approver alice"
                ),
            );
            line(
                &mut out,
                "",
                &format!(
                    "demo330 deny --journal {journal_arg} {operation} --digest {digest} --approver alice"
                ),
            );
            line(&mut out, "", &format!("demo330 resume --journal {journal_arg} {run}"));
        }
        Status::Ambiguous => {
            let refunds = refunds_path(path);
            line(
                &mut out,
                "next",
                &format!("look for \"refund {operation}\" in {}: it is the truth", refunds.display()),
            );
            line(
                &mut out,
                "",
                &format!("demo330 reconcile --journal {journal_arg} {operation} --not-run --by ops"),
            );
            line(
                &mut out,
                "",
                &format!(
                    "demo330 reconcile --journal {journal_arg} {operation} --ran \"Refunded.\" --by ops"
                ),
            );
            line(&mut out, "", &format!("demo330 resume --journal {journal_arg} {run}"));
        }
        _ => {}
    }
    out
}

/// Approves (`allow`) or denies operation `operation` as `approver`, presenting `digest`.
pub async fn decide(
    path: &Path,
    operation: &str,
    digest: &str,
    approver: &str,
    allow: bool,
    out: &mut impl std::io::Write,
    err: &mut impl std::io::Write,
) -> i32 {
    let parsed = OperationId::parse(operation).and_then(|op| Digest::parse(digest).map(|d| (op, d)));
    let (operation, digest) = match parsed {
        Ok(parsed) => parsed,
        Err(error) => return refuse(err, &error),
    };
    let Some(journal) = open(path, err) else { return EXIT_JOURNAL };
    let result = if allow {
        journal::approve(&journal, journal::ProposalKey::new(&operation, &digest), approver).await
    } else {
        journal::deny(&journal, journal::ProposalKey::new(&operation, &digest), approver).await
    };
    match result {
        Ok(proposal) => {
            let verb = if allow { "approved" } else { "denied" };
            let mut text = String::new();
            line(
                &mut text,
                verb,
                &format!(
                    "{operation}: {} {} by approver {approver}",
                    proposal.tool(),
                    visible(proposal.arguments())
                ),
            );
            line(
                &mut text,
                "next",
                &format!("demo330 resume --journal {} {}", path.display(), operation.run()),
            );
            emit(out, &text);
            0
        }
        Err(error) => refuse(err, &error),
    }
}

/// Reconciles the ambiguous `operation`: it ran with `ran` as its result, or did not run.
pub async fn reconcile(
    path: &Path,
    operation: &str,
    ran: Option<&str>,
    by: &str,
    out: &mut impl std::io::Write,
    err: &mut impl std::io::Write,
) -> i32 {
    let operation = match OperationId::parse(operation) {
        Ok(operation) => operation,
        Err(error) => return refuse(err, &error),
    };
    let Some(journal) = open(path, err) else { return EXIT_JOURNAL };
    let resolution = match ran {
        Some(result) => journal::Resolution::Ran { result: result.to_owned() },
        None => journal::Resolution::NotRun,
    };
    let said = if ran.is_some() {
        "it ran; the resume hands its result to the model"
    } else {
        "it did not run; the resume runs it"
    };
    match journal::reconcile(&journal, &operation, resolution, by).await {
        Ok(()) => {
            let mut text = String::new();
            line(&mut text, "reconciled", &format!("{operation} by {by}: {said}"));
            line(
                &mut text,
                "next",
                &format!("demo330 resume --journal {} {}", path.display(), operation.run()),
            );
            emit(out, &text);
            0
        }
        Err(error) => refuse(err, &error),
    }
}

/// Resumes run `run`.
pub async fn resume(
    path: &Path,
    run: &str,
    out: &mut impl std::io::Write,
    err: &mut impl std::io::Write,
) -> i32 {
    if let Some(scenario) = Durable::of_run(run) {
        return play(scenario, path, out, err).await;
    }
    let known: Vec<&str> = Durable::ALL.iter().map(|d| d.run()).collect();
    emit(
        err,
        &format!(
            "demo330: no durable scenario has the run '{}'; expected one of: {}\n",
            visible(run),
            known.join(", ")
        ),
    );
    crate::vocabulary::EXIT_USAGE
}

pub(crate) fn refuse(err: &mut impl std::io::Write, error: &JournalError) -> i32 {
    emit(err, &format!("demo330: refused: {error} (exit {EXIT_JOURNAL})\n"));
    EXIT_JOURNAL
}

/// The journal, with the `crash` scenario's death: the process is killed right after the commit
/// that carries a refund's `started` record, before the refund's body can run.
struct Dying {
    inner: SqliteJournal,
    dies: bool,
}

impl Journal for Dying {
    fn lease(&self) -> std::time::Duration {
        self.inner.lease()
    }

    async fn acquire(&self, run: &RunId, fresh: RunRow) -> Result<StoredRun, JournalError> {
        self.inner.acquire(run, fresh).await
    }

    async fn renew(&self, run: &RunId, epoch: u64) -> Result<(), JournalError> {
        self.inner.renew(run, epoch).await
    }

    async fn list_rows(&self, query: &RunQuery) -> Result<Vec<ListedRow>, JournalError> {
        self.inner.list_rows(query).await
    }

    async fn load(&self, run: &RunId) -> Result<Option<StoredRun>, JournalError> {
        self.inner.load(run).await
    }

    async fn commit(&self, run: &RunId, fence: Fence, batch: Batch) -> Result<(), JournalError> {
        let starts_refund = batch.entries.iter().any(|e| matches!(e, Entry::Started(_)))
            && batch.entries.iter().any(
                |e| matches!(e, Entry::Event(row) if row.kind == "EffectStarted" && row.name == "refund"),
            );
        let first_start = batch.entries.iter().any(|e| matches!(e, Entry::Started(s) if s.start == 1));
        self.inner.commit(run, fence, batch).await?;
        if self.dies && starts_refund && first_start {
            die();
        }
        Ok(())
    }
}

/// Kills this process with SIGKILL, as a crash would: no destructor, no flush, no exit code of
/// its own.
fn die() -> ! {
    let mut stdout = std::io::stdout();
    emit(
        &mut stdout,
        "\n*** the process is killed now (SIGKILL), right after the refund's started record was committed ***\n",
    );
    let pid = std::process::id().to_string();
    let _ = std::process::Command::new("kill").args(["-KILL", &pid]).status();
    std::process::abort()
}

/// What a host reads back: the record of `run` in the journal at `path`.
///
/// # Errors
///
/// The journal's error.
pub async fn inspect(path: &Path, run: &str) -> Result<RunRecord, JournalError> {
    let journal = SqliteJournal::open(path)?;
    journal::inspect(&journal, &RunId::new(run)?).await
}
