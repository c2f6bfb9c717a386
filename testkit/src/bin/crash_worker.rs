//! `crash-worker`: one process of the crash matrix (`testkit/tests/crash_matrix.rs`).
//!
//! ```text
//! crash-worker run <dir> <policy: allow|ask> <point|none>    one attempt of the refund task
//! crash-worker batch <dir> <policy> <point|none>             the same, both refunds in one reply,
//!                                                            run as a parallel batch
//! crash-worker approve <dir> <operation> <point|none>        approve an operation
//! crash-worker reconcile <dir> <operation> <ran|not-run>     reconcile an ambiguous effect
//! crash-worker metered <dir> <during-model-call|none>        one attempt of the metered task
//! ```
//!
//! `<dir>` holds `runs.db` (the SQLite journal), `effects` (one fsynced line per effect body
//! that ran, written by the body itself) and `asks` (one fsynced line per model reply asked
//! for). With `CRASH_WORKER_DATABASE_URL` set, the journal is PostgreSQL at that URL instead
//! (`runs.db` unused). Either way each process holds its leases as `crash-worker:<pid>` for 2 s,
//! so a resume after a kill waits for the killed worker's lease to expire, then takes the run
//! over. At the injection point the worker prints `at <point>` and waits for its SIGKILL.
//! Otherwise it prints `outcome <status> <operation or ->` or `error <message>`.
//!
//! Injection points (operations: 1 `lookup_order`, 2 and 3 `refund`, 4 `send_receipt`):
//! `before-proposal` (the commit that carries op 2's proposal, before it is written),
//! `after-proposal` (after it, under `ask`), `after-decision` (after an approver's commit),
//! `after-started` (after op 2's `started` commit), `during-body` (op 2's body applied its
//! effect), `after-result` (after op 2's result commit), `between-effects` (op 2 recorded, op 3's
//! `started` commit not yet written), `receipt-during-body` (op 4's body applied its effect).
//! The metered task (the long script with usage, under an output-token budget) has one:
//! `during-model-call` (the request for step 2 was sent, its reply not received). Its attempts
//! print `outcome <status> <operation or -> spend <settled input> <settled output>`.

use std::fs::OpenOptions;
use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use loopbound::journal::backend::{Batch, Entry, Fence, ListedRow, RunRow, StoredRun};
use loopbound::journal::{self, Journal, JournalError, OperationId, Resolution, RunId, RunQuery};
use loopbound::tool::Policy;
use loopbound::{Concurrency, Runner, Scope};
use loopbound_sqlite::Synchronous;
use loopbound_testkit::backend::{self, AnyJournal};
use loopbound_testkit::refund::{self, EffectSink, FileSink};

/// The run every worker of one directory works on.
const RUN: &str = "crash-run";

/// The variable naming the PostgreSQL database to journal in, instead of `<dir>/runs.db`.
const DATABASE_URL: &str = "CRASH_WORKER_DATABASE_URL";

/// Each worker's lease: short, so a resume after a kill does not wait long.
const LEASE: Duration = Duration::from_secs(2);

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|error| fail(&format!("runtime: {error}")));
    let line = runtime.block_on(dispatch(&args));
    println!("{line}");
}

fn fail(message: &str) -> ! {
    println!("error {message}");
    std::process::exit(1)
}

/// Announces `point` and waits for the SIGKILL that the test sends on reading it.
fn reached(point: &str) -> ! {
    println!("at {point}");
    let _ = std::io::stdout().flush();
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

async fn dispatch(args: &[String]) -> String {
    let [mode, dir, rest @ ..] = args else { fail("usage: crash-worker MODE DIR ...") };
    let dir = PathBuf::from(dir);
    let place = match std::env::var(DATABASE_URL) {
        Ok(url) => backend::postgres_place(&url),
        Err(_) => backend::sqlite_place(&dir.join("runs.db"), Synchronous::Full),
    };
    let holder = format!("crash-worker:{}", std::process::id());
    let journal = backend::open(&place, &holder, LEASE).await.unwrap_or_else(|error| fail(&error));
    match (mode.as_str(), rest) {
        ("run", [policy, point]) => run(&dir, journal, policy, point, false).await,
        ("batch", [policy, point]) => run(&dir, journal, policy, point, true).await,
        ("metered", [point]) => metered(&dir, journal, point).await,
        ("approve", [operation, point]) => approve(journal, operation, point).await,
        ("reconcile", [operation, resolution]) => reconcile(&dir, journal, operation, resolution).await,
        _ => fail("usage: crash-worker run|approve|reconcile DIR ..."),
    }
}

fn run_id() -> RunId {
    RunId::new(RUN).unwrap_or_else(|error| fail(&error.to_string()))
}

/// Appends `line` to `path` and syncs it before going on.
fn append(path: &Path, line: &str) {
    let written =
        OpenOptions::new().create(true).append(true).open(path).and_then(|mut file| {
            file.write_all(format!("{line}\n").as_bytes()).and_then(|()| file.sync_all())
        });
    if let Err(error) = written {
        fail(&format!("{}: {error}", path.display()));
    }
}

async fn run(dir: &Path, journal: AnyJournal, policy: &str, point: &str, batch: bool) -> String {
    let policy = if policy == "ask" { Policy::Ask } else { Policy::Allow };
    let sink = Arc::new(Blocking { inner: FileSink::new(dir.join("effects")), point: point.to_owned() });
    let tools = refund::tools(sink as Arc<dyn EffectSink>, policy);
    let asks = dir.join("asks");
    let script = if batch { refund::batched_script() } else { refund::long_script() };
    let model = refund::model(script, move |step| append(&asks, &step.to_string()));
    let mut runtime = Runner::new(&tools.set, model);
    if batch {
        let cap = Concurrency::new(2).unwrap_or_else(|error| fail(&error.to_string()));
        runtime = runtime.parallel(cap);
    }
    let journal = Injecting { inner: journal, point: point.to_owned() };
    // A killed worker's lease holds the run until it expires: wait, then take over.
    for _ in 0..10 {
        let scope = Scope::builder()
            .grants(refund::CAPABILITIES)
            .build()
            .unwrap_or_else(|error| fail(&error.to_string()));
        let mut conversation = refund::conversation();
        match runtime.run_journaled(&journal, &run_id(), &scope, &mut conversation, |_| true).await {
            Ok(outcome) => {
                return format!("outcome {} {}", outcome.status(), outcome.operation().unwrap_or("-"));
            }
            Err(loopbound::RunError::Journal(JournalError::LeaseHeld { remaining, .. })) => {
                tokio::time::sleep(remaining + Duration::from_millis(50)).await;
            }
            Err(error) => return format!("error {error}"),
        }
    }
    "error the run's lease stayed held".to_owned()
}

/// One attempt of the metered refund task (the long script, each reply reporting its usage,
/// under an output-token budget); at `during-model-call`, the process stops while its first
/// request for step 2 is with the model.
async fn metered(dir: &Path, journal: AnyJournal, point: &str) -> String {
    let sink = Arc::new(FileSink::new(dir.join("effects")));
    let tools = refund::tools(sink as Arc<dyn EffectSink>, Policy::Allow);
    let asks = dir.join("asks");
    let stop = point == "during-model-call";
    let model = refund::model(refund::metered_script(), move |step| {
        append(&asks, &step.to_string());
        if stop && step == 2 {
            reached("during-model-call");
        }
    });
    let runtime = Runner::new(&tools.set, model).options(refund::metered_options());
    for _ in 0..10 {
        let scope = Scope::builder()
            .grants(refund::CAPABILITIES)
            .limits(refund::metered_limits())
            .build()
            .unwrap_or_else(|error| fail(&error.to_string()));
        let mut conversation = refund::conversation();
        match runtime.run_journaled(&journal, &run_id(), &scope, &mut conversation, |_| true).await {
            Ok(outcome) => {
                let settled = outcome.spend().settled;
                return format!(
                    "outcome {} {} spend {} {}",
                    outcome.status(),
                    outcome.operation().unwrap_or("-"),
                    settled.input_tokens,
                    settled.output_tokens
                );
            }
            Err(loopbound::RunError::Journal(JournalError::LeaseHeld { remaining, .. })) => {
                tokio::time::sleep(remaining + Duration::from_millis(50)).await;
            }
            Err(error) => return format!("error {error}"),
        }
    }
    "error the run's lease stayed held".to_owned()
}

/// Runs `command` until no killed worker's lease holds the run any more.
async fn past_leases<T, F: Future<Output = Result<T, JournalError>>>(
    command: impl Fn() -> F,
) -> Result<T, JournalError> {
    let mut tries = 0;
    loop {
        match command().await {
            Err(JournalError::LeaseHeld { remaining, .. }) if tries < 10 => {
                tries += 1;
                tokio::time::sleep(remaining + Duration::from_millis(50)).await;
            }
            other => return other,
        }
    }
}

async fn approve(journal: AnyJournal, operation: &str, point: &str) -> String {
    let operation = OperationId::parse(operation).unwrap_or_else(|error| fail(&error.to_string()));
    let record =
        journal::inspect(&journal, operation.run()).await.unwrap_or_else(|error| fail(&error.to_string()));
    let Some(found) = record.operation(operation.ordinal()) else { fail("no such operation") };
    let digest = found.proposal().digest();
    let journal = Injecting { inner: journal, point: point.to_owned() };
    match past_leases(|| {
        journal::approve(&journal, journal::ProposalKey::new(&operation, &digest), "crash-matrix")
    })
    .await
    {
        Ok(_) => "approved".to_owned(),
        Err(error) => format!("error {error}"),
    }
}

async fn reconcile(dir: &Path, journal: AnyJournal, operation: &str, resolution: &str) -> String {
    let operation = OperationId::parse(operation).unwrap_or_else(|error| fail(&error.to_string()));
    let resolution = match resolution {
        "ran" => Resolution::Ran { result: format!("Refund found in {}.", dir.join("effects").display()) },
        _ => Resolution::NotRun,
    };
    match past_leases(|| journal::reconcile(&journal, &operation, resolution.clone(), "crash-matrix")).await {
        Ok(()) => "reconciled".to_owned(),
        Err(error) => format!("error {error}"),
    }
}

/// The effect sink, which stops the process right after a body applied its effect when asked.
struct Blocking {
    inner: FileSink,
    point: String,
}

impl EffectSink for Blocking {
    fn apply(&self, tool: &str, key: Option<&str>) {
        self.inner.apply(tool, key);
        let first_refund = tool == "refund" && key.is_some_and(|k| k.ends_with("/op/2"));
        if (self.point == "during-body" && first_refund)
            || (self.point == "receipt-during-body" && tool == "send_receipt")
        {
            reached(&self.point);
        }
    }

    fn applied(&self) -> Vec<(String, Option<String>)> {
        self.inner.applied()
    }
}

/// The journal, which stops the process before or after the commit of the injection point.
struct Injecting {
    inner: AnyJournal,
    point: String,
}

fn proposes(batch: &Batch, ordinal: u32) -> bool {
    batch.entries.iter().any(|e| matches!(e, Entry::Proposal(p) if p.ordinal == ordinal))
}

fn starts(batch: &Batch, ordinal: u32) -> bool {
    batch.entries.iter().any(|e| matches!(e, Entry::Started(s) if s.ordinal == ordinal))
}

fn records(batch: &Batch, ordinal: u32) -> bool {
    batch.entries.iter().any(|e| matches!(e, Entry::Call(c) if c.operation == Some(ordinal)))
}

fn decides(batch: &Batch) -> bool {
    batch.entries.iter().any(|e| matches!(e, Entry::Decision(_)))
}

impl Journal for Injecting {
    fn lease(&self) -> Duration {
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
        let before = match self.point.as_str() {
            "before-proposal" => proposes(&batch, 2),
            "between-effects" => starts(&batch, 3),
            _ => false,
        };
        if before {
            reached(&self.point);
        }
        let after = match self.point.as_str() {
            "after-proposal" => proposes(&batch, 2),
            "after-decision" => fence == Fence::Host && decides(&batch),
            "after-started" => starts(&batch, 2),
            "after-result" => records(&batch, 2),
            _ => false,
        };
        self.inner.commit(run, fence, batch).await?;
        if after {
            reached(&self.point);
        }
        Ok(())
    }
}
