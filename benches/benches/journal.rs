//! What a journaled effect costs on this machine: the time from the start of its `started`
//! commit to the end of its result commit (its body does nothing else), on one SQLite file in
//! WAL mode, under `synchronous = FULL` and `NORMAL` side by side in one process, rounds
//! interleaved; and the commits counted per effect and per read.
//!
//! Run with `cargo bench -p loopbound-benches --bench journal` (600 effects per mode);
//! `cargo test --benches` runs it as a smoke test with 40 per mode. It prints a table and
//! asserts only the commit counts, which are exact.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use loopbound::journal::RunId;
use loopbound::tool::Policy;
use loopbound::transport::{ModelReply, ToolCall};
use loopbound::{Limits, Runner, Scope, Status};
use loopbound_benches::journal::{TimedJournal, percentile};
use loopbound_sqlite::{SqliteJournal, Synchronous};
use loopbound_testkit::refund::{self, EffectSink, MemorySink};
use loopbound_testkit::scratch;

/// Effects in one run (one model reply asking for this many refunds, so the run allows this
/// many calls per reply).
const EFFECTS_PER_RUN: u32 = 20;

/// One run of `EFFECTS_PER_RUN` refunds (or reads) on `journal`; returns the commits it made.
async fn one_run(journal: &TimedJournal<SqliteJournal>, run: &RunId, reads: bool) -> u64 {
    let sink = Arc::new(MemorySink::default());
    let tools = refund::tools(Arc::clone(&sink) as Arc<dyn EffectSink>, Policy::Allow);
    let calls: Vec<ToolCall> = (1..=EFFECTS_PER_RUN)
        .map(|n| {
            if reads {
                ToolCall::new(format!("c{n}"), "lookup_order", format!(r#"{{"order":{n}}}"#))
            } else {
                ToolCall::new(format!("c{n}"), "refund", format!(r#"{{"order":{n},"amount_cents":100}}"#))
            }
        })
        .collect();
    let script = vec![ModelReply::calls(calls), ModelReply::text(refund::CLOSING)];
    let runtime = Runner::new(&tools.set, refund::model(script, |_| {}));
    let limits = Limits::default().with_tool_calls(EFFECTS_PER_RUN).with_calls_per_reply(EFFECTS_PER_RUN);
    let scope = Scope::builder().grants(refund::CAPABILITIES).limits(limits).build().expect("valid limits");
    let before = journal.inner().commits();
    let outcome = runtime
        .run_journaled(journal, run, &scope, &mut refund::conversation(), |_| true)
        .await
        .expect("a journaled run");
    assert_eq!(outcome.status(), Status::Completed);
    let ran = if reads { 0 } else { EFFECTS_PER_RUN as usize };
    assert_eq!(sink.count("refund"), ran);
    journal.inner().commits() - before
}

fn main() {
    let measuring = std::env::args().any(|a| a == "--bench");
    let rounds = if measuring { 30 } else { 2 };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let dir = scratch::dir("bench-journal");
    let modes = [("FULL", Synchronous::Full), ("NORMAL", Synchronous::Normal)];
    let journals: Vec<TimedJournal<SqliteJournal>> = modes
        .iter()
        .map(|(name, mode)| {
            TimedJournal::new(SqliteJournal::open_with(dir.join(format!("{name}.db")), *mode).expect("open"))
        })
        .collect();
    let next = AtomicU32::new(0);
    let mut per_run = [0u64; 2];
    runtime.block_on(async {
        for _ in 0..rounds {
            for (journal, commits) in journals.iter().zip(per_run.iter_mut()) {
                let run =
                    RunId::new(format!("bench-{}", next.fetch_add(1, Ordering::Relaxed))).expect("run id");
                *commits = one_run(journal, &run, false).await;
            }
        }
    });
    let reads = runtime.block_on(async {
        let run = RunId::new("bench-reads").expect("run id");
        one_run(&journals[0], &run, true).await
    });
    // One to take the run, two per effect, one at the end; reads none of their own.
    assert_eq!(per_run, [u64::from(2 * EFFECTS_PER_RUN + 2); 2]);
    assert_eq!(reads, 2);

    println!(
        "journaled effect on SQLite (WAL), {EFFECTS_PER_RUN} refunds per run, {rounds} runs per mode, interleaved"
    );
    println!("| synchronous | effects | p50 µs | p99 µs | commits per effect | commits per read |");
    println!("|---|---:|---:|---:|---:|---:|");
    let mut p50s = Vec::new();
    for ((name, _), journal) in modes.iter().zip(&journals) {
        let mut effects = journal.effects();
        effects.sort_unstable();
        let micros = |per_mille| percentile(&effects, per_mille).as_secs_f64() * 1e6;
        let (p50, p99) = (micros(500), micros(990));
        p50s.push(p50);
        println!("| {name} | {} | {p50:.0} | {p99:.0} | 2 | 0 |", effects.len());
    }
    println!("FULL ÷ NORMAL at p50: ×{:.2}", p50s[0] / p50s[1]);
}
