//! `freeze-worker`: one process of the frozen-store tests (`testkit/tests/frozen_store.rs`,
//! SPEC §24): a journaled refund whose store stops answering at a chosen point.
//!
//! ```text
//! freeze-worker attempt <dir> <point> <deadline|cancel> <lease_ms>   one attempt
//! freeze-worker finish <dir>                                          attempts until the run ends
//! ```
//!
//! The journal is at the place in `FREEZE_WORKER_PLACE` (`sqlite-full:<path>`,
//! `sqlite-normal:<path>` or `postgres:<url>`, see `loopbound_testkit::backend`). The task is the
//! short refund script: `lookup_order` (op 1, a read), `refund` (op 2, an `effect`), the
//! closing text. `<dir>/effects` gets one fsynced line per effect body that ran, written by the
//! body itself, so the test counts them outside the process.
//!
//! An attempt runs under a deadline of [`DEADLINE`] (`deadline`), or a long one and a caller's
//! cancellation [`CANCEL_AFTER`] after the freeze (`cancel`). At its point it prints
//! `at <point>` and waits for a line on its standard input: the test freezes the store, then
//! writes it. Points: `before-acquire` (before the run is taken), `during-commit` (op 2's
//! `started` commit about to be sent), `during-body` (op 2's body applied its effect and is
//! about to return), `during-renewal` (op 2's body applied its effect and waits past the
//! deadline, the lease renewals beside it). It prints
//! `outcome <status or error kind> <end record> overrun_ms <n>`, `n` being how long after the
//! deadline (or the cancellation) the attempt returned.
//!
//! `finish` runs attempts until the run ends, waiting out leases and reconciling an ambiguous
//! refund by the effects file (ran if its line is there), and prints `finished <status>`.

use std::io::{BufRead, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use loopbound::journal::backend::{Batch, Entry};
use loopbound::journal::{self, JournalError, OperationId, Resolution, RunId};
use loopbound::tool::{EffectKind, Policy};
use loopbound::{
    CancellationToken, Limits, RunError, Runner, Scope, Status, ToolBuilder, ToolContext, ToolSet,
};
use loopbound_testkit::backend::{self, AnyJournal};
use loopbound_testkit::hooked::{self, Hook, Hooked};
use loopbound_testkit::refund::{self, EffectSink, FileSink, OrderInput, RefundInput};
use tokio::time::Instant;

/// The run every worker of one directory works on.
const RUN: &str = "frozen-run";
/// The variable naming the journal's place.
const PLACE: &str = "FREEZE_WORKER_PLACE";
/// An attempt's deadline.
const DEADLINE: Duration = Duration::from_secs(3);
/// Under `cancel`, how long after the freeze the caller cancels.
const CANCEL_AFTER: Duration = Duration::from_millis(300);
/// The lease of `finish`'s attempts.
const FINISH_LEASE: Duration = Duration::from_secs(2);

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

async fn dispatch(args: &[String]) -> String {
    let place = std::env::var(PLACE).unwrap_or_else(|_| fail("FREEZE_WORKER_PLACE is not set"));
    let holder = format!("freeze-worker:{}", std::process::id());
    match args {
        [mode, dir, point, ending, lease] if mode == "attempt" => {
            let lease = lease.parse().map(Duration::from_millis).unwrap_or_else(|_| fail("lease_ms"));
            let journal = backend::open(&place, &holder, lease).await.unwrap_or_else(|error| fail(&error));
            attempt(Path::new(dir), journal, point, ending == "cancel").await
        }
        [mode, dir] if mode == "finish" => {
            let journal =
                backend::open(&place, &holder, FINISH_LEASE).await.unwrap_or_else(|error| fail(&error));
            finish(Path::new(dir), journal).await
        }
        _ => fail("usage: freeze-worker attempt DIR POINT deadline|cancel LEASE_MS | finish DIR"),
    }
}

fn run_id() -> RunId {
    RunId::new(RUN).unwrap_or_else(|error| fail(&error.to_string()))
}

/// Says that the worker reached `point`, then waits for the test's go (the store is frozen).
async fn reached(point: &str) {
    println!("at {point}");
    let _ = std::io::stdout().flush();
    let read = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line).map(|_| line)
    });
    match read.await {
        Ok(Ok(line)) if line.trim() == "go" => WENT.store(true, Ordering::SeqCst),
        _ => fail("no go on standard input"),
    }
}

/// Set once the test said go.
static WENT: AtomicBool = AtomicBool::new(false);

/// The refund task's tools, `refund` pausing at `point` after it applied its effect.
fn tools(effects: FileSink, point: &str) -> ToolSet {
    let lookup_order = ToolBuilder::new("lookup_order", refund::READ_CAPABILITY)
        .effect(EffectKind::Read)
        .build(|input: OrderInput, _call: ToolContext| async move {
            Ok::<_, String>(format!("Order {}: 15.00 EUR, paid, delivered damaged.", input.order))
        })
        .unwrap_or_else(|error| fail(&error.to_string()));
    let point = point.to_owned();
    let refund = ToolBuilder::new("refund", refund::REFUND_CAPABILITY)
        .effect(EffectKind::Effect)
        .policy(Policy::Allow)
        .build(move |input: RefundInput, call: ToolContext| {
            effects.apply("refund", call.idempotency_key());
            let point = point.clone();
            async move {
                if point == "during-body" || point == "during-renewal" {
                    reached(&point).await;
                }
                if point == "during-renewal" {
                    // Past any deadline: the attempt's deadline ends the body.
                    tokio::time::sleep(Duration::from_secs(60)).await;
                }
                Ok::<_, String>(format!("Refunded {} cents on order {}.", input.amount_cents, input.order))
            }
        })
        .unwrap_or_else(|error| fail(&error.to_string()));
    ToolSet::builder()
        .add(&lookup_order)
        .add(&refund)
        .build()
        .unwrap_or_else(|error| fail(&error.to_string()))
}

async fn attempt(dir: &Path, journal: AnyJournal, point: &str, cancel: bool) -> String {
    let tools = tools(FileSink::new(dir.join("effects")), point);
    let runtime = Runner::new(&tools, refund::model(refund::short_script(), |_| {}));
    let journal = Hooked::new(journal, Freezing { point: point.to_owned() });
    if point == "before-acquire" {
        reached(point).await;
    }
    let caller = CancellationToken::new();
    let deadline = if cancel { Duration::from_secs(60) } else { DEADLINE };
    let scope = Scope::builder()
        .grants(refund::CAPABILITIES)
        .limits(Limits::default().with_deadline(deadline))
        .caller(caller.clone())
        .build()
        .unwrap_or_else(|error| fail(&error.to_string()));
    let started = Instant::now();
    let mut conversation = refund::conversation();
    let run = run_id();
    let running = runtime.run_journaled(&journal, &run, &scope, &mut conversation, |_| true);
    let (result, bound) = if cancel {
        // The caller cancels once the store is frozen (the point is reached) and a little more.
        let cancelled = async {
            while !WENT.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            tokio::time::sleep(CANCEL_AFTER).await;
            caller.cancel();
            Instant::now()
        };
        let (result, at) = tokio::join!(running, cancelled);
        (result, at)
    } else {
        (running.await, started + deadline)
    };
    let returned = Instant::now();
    let overrun = i128::try_from(returned.duration_since(bound).as_millis()).unwrap_or(i128::MAX)
        - i128::try_from(bound.saturating_duration_since(returned).as_millis()).unwrap_or(0);
    match result {
        Ok(outcome) => {
            format!("outcome {} {:?} overrun_ms {overrun}", outcome.status(), outcome.end_record())
        }
        Err(RunError::CancelledUnrecorded) => format!("outcome cancelled Unconfirmed overrun_ms {overrun}"),
        Err(RunError::Cancelled) => format!("outcome cancelled Recorded overrun_ms {overrun}"),
        Err(error) => format!("error {error}"),
    }
}

async fn finish(dir: &Path, journal: AnyJournal) -> String {
    let effects = FileSink::new(dir.join("effects"));
    let tools = tools(effects.clone(), "none");
    let runtime = Runner::new(&tools, refund::model(refund::short_script(), |_| {}));
    for _ in 0..20 {
        let scope = Scope::builder()
            .grants(refund::CAPABILITIES)
            .build()
            .unwrap_or_else(|error| fail(&error.to_string()));
        let mut conversation = refund::conversation();
        match runtime.run_journaled(&journal, &run_id(), &scope, &mut conversation, |_| true).await {
            Ok(outcome) if outcome.status() == Status::Ambiguous => {
                let operation = outcome.operation().map(OperationId::parse);
                let Some(Ok(operation)) = operation else { fail("an ambiguous outcome names no operation") };
                let key = operation.to_string();
                let ran = effects
                    .applied()
                    .iter()
                    .any(|(tool, applied)| tool == "refund" && applied.as_deref() == Some(&key));
                let resolution = if ran {
                    Resolution::Ran { result: "Refunded 1500 cents on order 42.".to_owned() }
                } else {
                    Resolution::NotRun
                };
                if let Err(error) = journal::reconcile(&journal, &operation, resolution, "frozen-store").await
                {
                    return format!("error {error}");
                }
            }
            Ok(outcome) => return format!("finished {}", outcome.status()),
            Err(RunError::Journal(JournalError::LeaseHeld { remaining, .. })) => {
                tokio::time::sleep(remaining + Duration::from_millis(50)).await;
            }
            Err(error) => return format!("error {error}"),
        }
    }
    "error the run did not end".to_owned()
}

/// The hook that waits at `during-commit` before op 2's `started` commit is sent.
struct Freezing {
    point: String,
}

impl Hook for Freezing {
    async fn before(&self, call: hooked::Call<'_>) -> Result<(), JournalError> {
        if let hooked::Call::Commit { batch, .. } = call
            && self.point == "during-commit"
            && starts_refund(batch)
            && !WENT.load(Ordering::SeqCst)
        {
            reached(&self.point).await;
        }
        Ok(())
    }
}

fn starts_refund(batch: &Batch) -> bool {
    batch.entries.iter().any(|e| matches!(e, Entry::Started(s) if s.ordinal == 2))
}
