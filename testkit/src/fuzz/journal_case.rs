//! Corrupted journal rows: the rows of real journaled runs (completed, waiting for approval,
//! stopped ambiguous), mutated field by field (texts replaced, integers changed, rows dropped or
//! duplicated), then decoded and, when they decode, resumed.
//!
//! # Invariants checked
//!
//! - Decoding never panics: it gives a record or a typed `Corrupt` error.
//! - Rows that do not decode, even as the attempt's acquisition rewrites them (epoch, attempts,
//!   state), run nothing: the resume fails before any body starts.
//! - A resume over rows that do decode never runs again an operation they show as started and
//!   not reconciled as unrun (an `effect`), nor one whose result they hold. (Rows deleted
//!   consistently are a journal that lost them: nothing can tell, and the run redoes that work.)
//! - Nothing panics.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use arbitrary::Arbitrary;
use loopbound::journal::backend::StoredRun;
use loopbound::journal::{
    Journal, JournalError, MemoryJournal, OperationId, OperationStatus, RunId, RunRecord,
};
use loopbound::tool::{EffectKind, Policy};
use loopbound::transport::ModelReply;
use loopbound::{Limits, Runner, Scope, ToolBuilder};

use crate::refund::{self, EffectSink, MemorySink};

/// A mutation of one stored value or row.
#[derive(Arbitrary, Clone, Debug)]
pub enum Mutation {
    /// Replace a text column.
    Text {
        /// Which table (modulo their number).
        table: u8,
        /// Which row (modulo the table's length).
        row: u8,
        /// Which text column (modulo the row's).
        field: u8,
        /// The new text.
        text: TextChoice,
    },
    /// Replace an integer column.
    Int {
        /// Which table.
        table: u8,
        /// Which row.
        row: u8,
        /// Which integer column.
        field: u8,
        /// The new value.
        value: u32,
    },
    /// Drop a row.
    Drop {
        /// Which table.
        table: u8,
        /// Which row.
        row: u8,
    },
    /// Duplicate a row.
    Duplicate {
        /// Which table.
        table: u8,
        /// Which row.
        row: u8,
    },
}

/// Texts that often mean something to the decoder, and arbitrary ones.
#[derive(Arbitrary, Clone, Debug)]
pub enum TextChoice {
    /// A name the decoder knows in some column.
    Known(u8),
    /// Anything.
    Any(String),
    /// A valid text with its last bytes cut.
    Cut(u8),
}

const KNOWN: [&str; 24] = [
    "open",
    "ambiguous:2",
    "awaiting_approval:2",
    "finished:Completed",
    "finished:Denied",
    "read",
    "effect",
    "idempotent",
    "allow",
    "deny",
    "policy",
    "approver:alice",
    "ran",
    "not_run",
    "Proposed",
    "EffectStarted",
    "Denied",
    "refund",
    "lookup_order",
    "crash/op/2",
    "[]",
    "{}",
    r#"{"content":null,"tool_calls":[],"usage":null}"#,
    r#"{"model_calls":9,"tool_calls":9,"middleware":9,"repetitions":[]}"#,
];

/// The whole input: which base journal, and the mutations.
#[derive(Arbitrary, Clone, Debug)]
pub struct JournalCase {
    /// Which base (modulo their number).
    pub base: u8,
    /// Mutations applied in order.
    pub mutations: Vec<Mutation>,
}

fn run_id() -> RunId {
    RunId::new("crash").unwrap_or_else(|error| panic!("a run id: {error}"))
}

/// The base journals: the rows of three real runs, made once.
fn bases() -> &'static [StoredRun] {
    static BASES: OnceLock<Vec<StoredRun>> = OnceLock::new();
    BASES.get_or_init(|| {
        let runtime = super::paused_runtime();
        runtime.block_on(async {
            let mut bases = Vec::new();
            for (policy, hang) in [(Policy::Allow, false), (Policy::Ask, false), (Policy::Allow, true)] {
                let journal = MemoryJournal::default();
                let sink = Arc::new(MemorySink::default());
                let hangs = Arc::new(AtomicU32::new(u32::from(hang)));
                attempt(&journal, &sink, policy, &hangs).await;
                if hang {
                    attempt(&journal, &sink, policy, &hangs).await;
                }
                let stored = journal.load(&run_id()).await.ok().flatten();
                bases.push(stored.unwrap_or_else(|| panic!("the base run is in its journal")));
            }
            bases
        })
    })
}

/// One attempt of the long refund script; the first refund body hangs while `hangs` is not 0.
async fn attempt(journal: &impl Journal, sink: &Arc<MemorySink>, policy: Policy, hangs: &Arc<AtomicU32>) {
    let tools = hanging_tools(sink, policy, hangs);
    let runtime = Runner::new(&tools, refund::model(refund::long_script(), |_| {}));
    let limits = Limits::default().with_deadline(Duration::from_secs(5));
    let scope = Scope::builder()
        .grants(refund::CAPABILITIES)
        .limits(limits)
        .build()
        .unwrap_or_else(|error| panic!("valid limits: {error}"));
    let _ = runtime.run_journaled(journal, &run_id(), &scope, &mut refund::conversation(), |_| true).await;
}

fn hanging_tools(sink: &Arc<MemorySink>, policy: Policy, hangs: &Arc<AtomicU32>) -> loopbound::ToolSet {
    let base = refund::tools(Arc::clone(sink) as Arc<dyn EffectSink>, policy);
    let (applied, hangs) = (Arc::clone(sink), Arc::clone(hangs));
    let refund = ToolBuilder::new("refund", refund::REFUND_CAPABILITY)
        .effect(EffectKind::Effect)
        .policy(policy)
        .build(move |input: refund::RefundInput, call: loopbound::ToolContext| {
            applied.apply("refund", call.idempotency_key());
            let hang = hangs.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
            async move {
                if hang {
                    std::future::pending::<()>().await;
                }
                Ok::<_, String>(format!("refunded {}", input.amount_cents))
            }
        })
        .unwrap_or_else(|error| panic!("refund is a valid name: {error}"));
    let set =
        loopbound::ToolSet::builder().add(&base.lookup_order).add(&refund).add(&base.send_receipt).build();
    set.unwrap_or_else(|error| panic!("distinct names: {error}"))
}

fn pick<T>(rows: &mut [T], row: u8) -> Option<&mut T> {
    let len = rows.len();
    if len == 0 { None } else { rows.get_mut(usize::from(row) % len) }
}

fn text_of(choice: &TextChoice, old: &str) -> String {
    match choice {
        TextChoice::Known(n) => KNOWN[usize::from(*n) % KNOWN.len()].to_owned(),
        TextChoice::Any(text) => text.clone(),
        TextChoice::Cut(n) => {
            let keep = old.len().saturating_sub(usize::from(*n % 16) + 1);
            old.get(..keep).unwrap_or_default().to_owned()
        }
    }
}

/// Applies one mutation to `stored`.
fn mutate(stored: &mut StoredRun, mutation: &Mutation) {
    match mutation {
        Mutation::Text { table, row, field, text } => {
            let column: Option<&mut String> = match table % 9 {
                0 => Some(match field % 4 {
                    0 => &mut stored.run.conversation,
                    1 => &mut stored.run.ledger,
                    _ => &mut stored.run.definition,
                }),
                1 => pick(&mut stored.replies, *row).map(|r| &mut r.reply),
                2 => pick(&mut stored.calls, *row).map(|c| &mut c.text),
                3 => pick(&mut stored.proposals, *row).map(|p| match field % 4 {
                    0 => &mut p.tool,
                    1 => &mut p.effect,
                    2 => &mut p.arguments,
                    _ => &mut p.capability,
                }),
                4 => pick(&mut stored.decisions, *row)
                    .map(|d| if field % 2 == 0 { &mut d.verdict } else { &mut d.by }),
                5 => pick(&mut stored.reconciliations, *row)
                    .map(|r| if field % 2 == 0 { &mut r.resolution } else { &mut r.by }),
                _ => pick(&mut stored.events, *row)
                    .map(|e| if field % 2 == 0 { &mut e.kind } else { &mut e.name }),
            };
            if let Some(column) = column {
                *column = text_of(text, column);
            }
        }
        Mutation::Int { table, field, value, .. } if table % 7 == 0 && field % 2 == 1 => {
            // The state, naming the operation `value` (which may not exist).
            stored.run.state = if field % 4 == 1 {
                loopbound::journal::RunState::Ambiguous(*value)
            } else {
                loopbound::journal::RunState::AwaitingApproval(*value)
            };
        }
        Mutation::Int { table, row, field, value } => {
            let column: Option<&mut u32> = match table % 7 {
                0 => Some(&mut stored.run.attempts),
                1 => pick(&mut stored.replies, *row).map(|r| &mut r.ordinal),
                2 => pick(&mut stored.calls, *row)
                    .map(|c| if field % 2 == 0 { &mut c.reply } else { &mut c.index }),
                3 => pick(&mut stored.proposals, *row).map(|p| match field % 3 {
                    0 => &mut p.ordinal,
                    1 => &mut p.reply,
                    _ => &mut p.index,
                }),
                4 => pick(&mut stored.decisions, *row).map(|d| &mut d.ordinal),
                5 => pick(&mut stored.started, *row)
                    .map(|s| if field % 2 == 0 { &mut s.ordinal } else { &mut s.start }),
                _ => pick(&mut stored.events, *row).map(|e| &mut e.count),
            };
            if let Some(column) = column {
                *column = *value;
            }
        }
        Mutation::Drop { table, row } => drop_or_duplicate(stored, *table, *row, false),
        Mutation::Duplicate { table, row } => drop_or_duplicate(stored, *table, *row, true),
    }
}

fn edit<T: Clone>(rows: &mut Vec<T>, row: u8, duplicate: bool) {
    if rows.is_empty() {
        return;
    }
    let index = usize::from(row) % rows.len();
    if duplicate {
        let copy = rows[index].clone();
        rows.insert(index, copy);
    } else {
        rows.remove(index);
    }
}

fn drop_or_duplicate(stored: &mut StoredRun, table: u8, row: u8, duplicate: bool) {
    match table % 8 {
        0 => edit(&mut stored.replies, row, duplicate),
        1 => edit(&mut stored.calls, row, duplicate),
        2 => edit(&mut stored.proposals, row, duplicate),
        3 => edit(&mut stored.decisions, row, duplicate),
        4 => edit(&mut stored.started, row, duplicate),
        5 => edit(&mut stored.reconciliations, row, duplicate),
        _ => edit(&mut stored.events, row, duplicate),
    }
}

/// `stored` as an acquisition leaves it: unless finished, one more epoch and attempt (when they
/// fit); the state is left as it is.
fn as_acquired(stored: &StoredRun) -> StoredRun {
    let mut acquired = stored.clone();
    if !acquired.run.state.is_finished()
        && let (Some(epoch), Some(attempts)) =
            (acquired.run.epoch.checked_add(1), acquired.run.attempts.checked_add(1))
    {
        acquired.run.epoch = epoch;
        acquired.run.attempts = attempts;
    }
    acquired
}

/// Checks one case; returns whether the mutated rows decoded.
pub fn check(case: &JournalCase) -> bool {
    let all = bases();
    let mut stored = all[usize::from(case.base) % all.len()].clone();
    for mutation in case.mutations.iter().take(16) {
        mutate(&mut stored, mutation);
    }
    let decoded = RunRecord::decode(&run_id(), &stored);
    if let Err(error) = &decoded {
        assert!(matches!(error, JournalError::Corrupt(_)), "a bad row is Corrupt, not {error:?}");
    }
    // What the resume acts on: the rows as the attempt's acquisition leaves them (it rewrites the
    // run's epoch and attempts, so a corrupt value there may be overwritten).
    let acted_on = decoded.clone().ok().or_else(|| RunRecord::decode(&run_id(), &as_acquired(&stored)).ok());
    let runtime = super::paused_runtime();
    runtime.block_on(async {
        let journal = MemoryJournal::holding(run_id(), stored);
        let sink = Arc::new(MemorySink::default());
        let resumed = resume(&journal, &sink).await;
        let Some(record) = acted_on else {
            assert!(
                sink.applied().is_empty(),
                "rows that do not decode ran {:?}: {resumed:?}",
                sink.applied()
            );
            assert!(matches!(resumed, Err(loopbound::RunError::Journal(_))), "{resumed:?}");
            return;
        };
        for (_, key) in sink.applied() {
            let Some(id) = key.as_deref().and_then(|k| OperationId::parse(k).ok()) else { continue };
            let Some(operation) = record.operation(id.ordinal()) else { continue };
            match operation.status() {
                OperationStatus::Settled(_) => panic!("{id} had its result and ran again"),
                OperationStatus::Started { .. } if operation.proposal().effect() == EffectKind::Effect => {
                    panic!("{id} was started, not reconciled, and ran again")
                }
                _ => {}
            }
        }
    });
    decoded.is_ok()
}

async fn resume(
    journal: &MemoryJournal,
    sink: &Arc<MemorySink>,
) -> Result<loopbound::Outcome, loopbound::RunError> {
    let tools = refund::tools(Arc::clone(sink) as Arc<dyn EffectSink>, Policy::Allow);
    let script = refund::long_script().into_iter().chain([ModelReply::text("extra")]).collect();
    let runtime = Runner::new(&tools.set, refund::model(script, |_| {}));
    let limits = Limits::default().with_deadline(Duration::from_secs(5));
    let scope = Scope::builder()
        .grants(refund::CAPABILITIES)
        .limits(limits)
        .build()
        .unwrap_or_else(|error| panic!("valid limits: {error}"));
    runtime.run_journaled(journal, &run_id(), &scope, &mut refund::conversation(), |_| true).await
}
