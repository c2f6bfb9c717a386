//! The crash matrix (SPEC §15), with real processes: a `crash-worker` runs the journaled refund
//! task on a SQLite file, or on PostgreSQL (SPEC §16: a database per point, each process its own
//! worker, a resume taking the killed worker's run over once its lease expires), and is killed
//! with SIGKILL at each injection point; other processes approve, reconcile and resume until
//! the run ends.
//!
//! Counted outside the processes (fsynced files): every effect body that ran, with its key, and
//! every model reply asked for. Across every point: each `effect` operation's body ran at most
//! once, and exactly once in the end; `Ambiguous` is reported exactly when the kill fell between
//! an effect's `started` commit and its result; the `idempotent` call saw one key; the logical
//! run's counters never went down and end where a run without a crash ends; no reply recorded
//! before the kill was asked for again.
//!
//! One more point, on both backends: `during-model-call`, a worker running the task under an
//! output-token budget killed while its second request is with the model. The reservation it
//! committed before sending is in the journal, and the resume charges it whole: the spend over
//! both attempts is exact, replayed replies are not charged again, and the budget holds.
//!
//! The same matrix runs a journaled parallel batch (`crash-worker batch`): both refunds in one
//! reply, run two at a time, their `started` records in one commit and their results in one
//! commit. A kill after that `started` commit or during a body leaves both refunds `Ambiguous`
//! (each is reconciled in turn); every other point leaves none.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};

use loopbound::journal::{self, RunId, RunRecord};
use loopbound_postgres::{Config, PostgresJournal};
use loopbound_sqlite::SqliteJournal;
use loopbound_testkit::postgres::{Cluster, Durability};
use loopbound_testkit::{refund, scratch};

const RUN: &str = "crash-run";

/// Where the workers of one point journal: `runs.db` in their folder, or a PostgreSQL database.
#[derive(Clone, Copy)]
enum Backend<'a> {
    Sqlite,
    Postgres(&'a str),
}

/// A `crash-worker` command for `backend`.
fn command(backend: Backend<'_>, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_crash-worker"));
    command.args(args);
    if let Backend::Postgres(url) = backend {
        command.env("CRASH_WORKER_DATABASE_URL", url);
    }
    command
}

/// Runs a worker to its end and returns its last line.
fn worker(backend: Backend<'_>, args: &[&str]) -> String {
    let output = command(backend, args).output().expect("the worker starts");
    let stdout = String::from_utf8(output.stdout).expect("utf-8");
    assert!(output.status.success(), "worker {args:?} failed: {stdout}");
    stdout.lines().last().unwrap_or_default().to_owned()
}

/// Starts a worker, waits for it to announce `point`, and kills it with SIGKILL.
fn kill_at(backend: Backend<'_>, args: &[&str], point: &str) {
    let mut child = command(backend, args).stdout(Stdio::piped()).spawn().expect("the worker starts");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = BufReader::new(stdout).lines();
    let first = lines.next().and_then(Result::ok).unwrap_or_default();
    assert_eq!(first, format!("at {point}"), "worker {args:?} did not reach {point}");
    child.kill().expect("SIGKILL");
    let status = child.wait().expect("the killed worker is reaped");
    assert_eq!(status.signal(), Some(9), "the worker died of SIGKILL at {point}");
}

/// Effect bodies that ran: `(tool, key) -> count`.
fn effects(dir: &Path) -> BTreeMap<(String, String), u32> {
    let mut counts = BTreeMap::new();
    for line in std::fs::read_to_string(dir.join("effects")).unwrap_or_default().lines() {
        let (tool, key) = line.split_once(' ').expect("tool key");
        *counts.entry((tool.to_owned(), key.to_owned())).or_insert(0) += 1;
    }
    counts
}

/// Model steps asked for so far, in order.
fn asks(dir: &Path) -> Vec<usize> {
    let text = std::fs::read_to_string(dir.join("asks")).unwrap_or_default();
    text.lines().map(|line| line.parse().expect("a step")).collect()
}

/// The run as the journal holds it, if the journal knows it.
fn inspect(backend: Backend<'_>, dir: &Path) -> Option<RunRecord> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let run = RunId::new(RUN).expect("run id");
        let inspected = match backend {
            Backend::Sqlite => {
                let journal = SqliteJournal::open(dir.join("runs.db")).expect("open the journal");
                journal::inspect(&journal, &run).await
            }
            Backend::Postgres(url) => {
                let config = Config::new(url).expect("the cluster's URL");
                let journal = PostgresJournal::connect(&config).await.expect("connect to the journal");
                journal::inspect(&journal, &run).await
            }
        };
        match inspected {
            Ok(record) => Some(record),
            Err(journal::JournalError::UnknownRun) => None,
            Err(error) => panic!("the journal after a kill: {error}"),
        }
    })
}

/// What the journal holds: (recorded replies, model calls, tool calls).
fn journal_counts(backend: Backend<'_>, dir: &Path) -> (usize, u32, u32) {
    inspect(backend, dir)
        .map_or((0, 0, 0), |record| (record.replies(), record.model_calls(), record.tool_calls()))
}

struct Point {
    name: &'static str,
    policy: &'static str,
    /// Whether the resume after the kill must report `Ambiguous`, one call after another.
    ambiguous: bool,
    /// The same for the parallel batch.
    ambiguous_in_batch: bool,
}

const POINTS: [Point; 8] = [
    Point { name: "before-proposal", policy: "allow", ambiguous: false, ambiguous_in_batch: false },
    Point { name: "after-proposal", policy: "ask", ambiguous: false, ambiguous_in_batch: false },
    Point { name: "after-decision", policy: "ask", ambiguous: false, ambiguous_in_batch: false },
    Point { name: "after-started", policy: "allow", ambiguous: true, ambiguous_in_batch: true },
    Point { name: "during-body", policy: "allow", ambiguous: true, ambiguous_in_batch: true },
    Point { name: "after-result", policy: "allow", ambiguous: false, ambiguous_in_batch: false },
    Point { name: "between-effects", policy: "allow", ambiguous: false, ambiguous_in_batch: false },
    Point { name: "receipt-during-body", policy: "allow", ambiguous: false, ambiguous_in_batch: false },
];

/// One call after another (`run`), or both refunds as one parallel batch (`batch`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Sequential,
    Batch,
}

impl Mode {
    fn command(self) -> &'static str {
        match self {
            Self::Sequential => "run",
            Self::Batch => "batch",
        }
    }
}

const OP2: &str = "crash-run/op/2";

/// Drives one point to the run's end; returns what the resumes reported.
fn drive(backend: Backend<'_>, point: &Point, mode: Mode) -> Vec<String> {
    let tag = if mode == Mode::Batch { "batch-" } else { "" };
    let dir = scratch::dir(&format!("crash-{tag}{}", point.name));
    let d = dir.to_str().expect("utf-8 path");
    let run = mode.command();
    let mut reports = Vec::new();
    if point.name == "after-decision" {
        assert_eq!(
            worker(backend, &[run, d, point.policy, "none"]),
            format!("outcome AwaitingApproval {OP2}")
        );
        kill_at(backend, &["approve", d, OP2, point.name], point.name);
    } else {
        kill_at(backend, &[run, d, point.policy, point.name], point.name);
    }
    let at_kill = journal_counts(backend, &dir);
    let asked_before = asks(&dir).len();
    for _ in 0..8 {
        let report = worker(backend, &[run, d, point.policy, "none"]);
        reports.push(report.clone());
        let after = journal_counts(backend, &dir);
        assert!(
            after.1 >= at_kill.1 && after.2 >= at_kill.2,
            "{}: counters went down: {after:?}",
            point.name
        );
        match report.as_str() {
            "outcome Completed -" => break,
            r if r.starts_with("outcome AwaitingApproval ") => {
                let operation = r.rsplit(' ').next().unwrap_or_default();
                assert_eq!(worker(backend, &["approve", d, operation, "none"]), "approved");
            }
            r if r.starts_with("outcome Ambiguous ") => {
                let operation = r.rsplit(' ').next().unwrap_or_default();
                let refunds = [OP2, "crash-run/op/3"];
                assert!(refunds.contains(&operation), "{}: only a refund is ever ambiguous: {r}", point.name);
                let key = ("refund".to_owned(), operation.to_owned());
                let ran = effects(&dir).get(&key).copied().unwrap_or(0);
                let resolution = if ran == 1 { "ran" } else { "not-run" };
                assert_eq!(worker(backend, &["reconcile", d, operation, resolution]), "reconciled");
            }
            other => panic!("{}: unexpected report {other}", point.name),
        }
    }
    assert_eq!(
        reports.last().map(String::as_str),
        Some("outcome Completed -"),
        "{}: {reports:?}",
        point.name
    );

    let effects = effects(&dir);
    let count = |tool: &str, op: u32| effects.get(&(tool.to_owned(), format!("crash-run/op/{op}"))).copied();
    assert_eq!(count("refund", 2), Some(1), "{}: refund op 2 ran exactly once: {effects:?}", point.name);
    assert_eq!(count("refund", 3), Some(1), "{}: refund op 3 ran exactly once: {effects:?}", point.name);
    let receipts = if point.name == "receipt-during-body" { 2 } else { 1 };
    assert_eq!(count("send_receipt", 4), Some(receipts), "{}: the receipt's key: {effects:?}", point.name);
    assert_eq!(effects.len(), 3, "{}: no other key was used: {effects:?}", point.name);

    let saw_ambiguous = reports.iter().any(|r| r.starts_with("outcome Ambiguous"));
    let expected = if mode == Mode::Batch { point.ambiguous_in_batch } else { point.ambiguous };
    assert_eq!(saw_ambiguous, expected, "{}: Ambiguous exactly in the window: {reports:?}", point.name);

    let (_, model_calls, tool_calls) = journal_counts(backend, &dir);
    let replies = if mode == Mode::Batch { 4 } else { 5 };
    assert_eq!((model_calls, tool_calls), (replies, 4), "{}: the logical run's counters", point.name);
    let recorded_at_kill = at_kill.0;
    let asked_after: Vec<usize> = asks(&dir).split_off(asked_before);
    assert!(
        asked_after.iter().all(|step| *step > recorded_at_kill),
        "{}: a reply recorded before the kill was asked again: {asked_after:?} (recorded {recorded_at_kill})",
        point.name
    );
    reports
}

/// Drives every point on databases that `database` gives (one per point), and prints the table.
fn matrix(label: &str, mode: Mode, database: impl Fn(&str) -> Option<String>) {
    let mut table = Vec::new();
    for point in &POINTS {
        let url = database(point.name);
        let backend = url.as_deref().map_or(Backend::Sqlite, Backend::Postgres);
        let reports = drive(backend, point, mode);
        table.push(format!("{:<20} {}", point.name, reports.join(" -> ")));
    }
    // The matrix, for the record (`cargo test -- --nocapture` shows it).
    println!("{label}\n{}", table.join("\n"));
    assert_eq!(table.len(), 8);
}

#[test]
fn every_injection_point_keeps_effects_at_most_once_and_resumes_to_the_end() {
    matrix("SQLite", Mode::Sequential, |_| None);
}

#[test]
fn every_injection_point_keeps_a_parallel_batchs_effects_at_most_once_and_resumes_to_the_end() {
    matrix("SQLite, parallel batch", Mode::Batch, |_| None);
}

#[test]
fn every_injection_point_keeps_effects_at_most_once_and_resumes_to_the_end_on_postgres() {
    let Some(cluster) = Cluster::shared(Durability::Durable) else { return };
    matrix("PostgreSQL", Mode::Sequential, |point| {
        Some(cluster.create_database(&format!("crash_{}", point.replace('-', "_"))).url)
    });
}

/// The metered task killed during its second model call (the request sent, no reply yet),
/// under an output-token budget of 100 with every request capped at 50 output tokens and every
/// reply reporting 20 input and 10 output tokens; then resumed in another process.
fn kill_during_a_model_call(backend: Backend<'_>, name: &str) {
    let dir = scratch::dir(name);
    let d = dir.to_str().expect("utf-8 path");
    kill_at(backend, &["metered", d, "during-model-call"], "during-model-call");
    let record = inspect(backend, &dir).expect("the killed attempt journaled the run");
    assert_eq!(record.model_calls(), 2, "the call in flight was counted before it was sent");
    assert_eq!(record.spend().settled, refund::METERED_USAGE, "the first reply is settled");
    let reserved = record.spend().reserved;
    assert_eq!(reserved.output_tokens, u64::from(refund::METERED_CAP), "the call in flight's reservation");
    let lost = reserved.input_tokens;
    assert!(lost > refund::METERED_USAGE.input_tokens, "the request's bound by the byte counter: {lost}");

    // Settled over both attempts: replies 1 to 4 as reported (reply 1 replayed, not charged
    // again), and the lost call's whole reservation: output 4 x 10 + 50 = 90 of 100; the
    // closing call needs at least 16 and is refused before it is sent.
    let report = worker(backend, &["metered", d, "none"]);
    assert_eq!(report, format!("outcome TokenBudget - spend {} 90", lost + 4 * 20));
    assert_eq!(asks(&dir), [1, 2, 2, 3, 4], "step 2 asked again, step 1 replayed, step 5 never sent");
    let ran = effects(&dir);
    let keys: Vec<&str> = ran.keys().map(|(_, key)| key.as_str()).collect();
    assert_eq!(keys, ["crash-run/op/2", "crash-run/op/3", "crash-run/op/4"], "{ran:?}");
    assert!(ran.values().all(|count| *count == 1), "each effect once: {ran:?}");
    let record = inspect(backend, &dir).expect("the run");
    assert_eq!(record.model_calls(), 5, "four replies and the lost call");
    let settled = record.spend().settled;
    assert_eq!((settled.input_tokens, settled.output_tokens), (lost + 80, 90));
    assert!(settled.output_tokens <= refund::METERED_OUTPUT_BUDGET, "the budget held over both attempts");
}

#[test]
fn a_model_call_cut_by_a_kill_is_charged_its_whole_reservation_on_resume() {
    kill_during_a_model_call(Backend::Sqlite, "crash-metered");
}

#[test]
fn a_model_call_cut_by_a_kill_is_charged_its_whole_reservation_on_resume_on_postgres() {
    let Some(cluster) = Cluster::shared(Durability::Durable) else { return };
    let url = cluster.create_database("crash_metered").url;
    kill_during_a_model_call(Backend::Postgres(&url), "crash-metered-pg");
}
