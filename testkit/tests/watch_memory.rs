//! A watcher that never reads cannot grow a run's memory past the documented bound nor change
//! its outcome: the release `watch-probe` (demos/src/bin/watch_probe.rs) runs five streamed
//! replies of 10,000 text pieces of 64 bytes, the first four with 16 tool calls each, under
//! `peak_rss`, idle, without a watcher, and with a watcher that never reads.
//!
//! The documented bound (`loopbound::watch`): the run's events, one start and one answer per
//! call, one merged text per reply (at most twice its bytes while the string grows), one final
//! update. Here: 133 events + 64 + 64 + 5 + 1 = 267 updates, 5 × 640,000 bytes of text.
//!
//! The probe is the release build: `LOOPBOUND_WATCH_PROBE_RELEASE` names it when the caller
//! built it already, else it is built here once with `cargo build --release`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use loopbound_testkit::release;
use serde_json::Value;

const PROBE_ENV: &str = "LOOPBOUND_WATCH_PROBE_RELEASE";
const KIB: u64 = 1024;
/// Text bytes of the whole run: five replies of 10,000 pieces of 64 bytes.
const TEXT: u64 = 5 * 10_000 * 64;
/// Updates queued for a watcher that never reads.
const UPDATES: u64 = 133 + 64 + 64 + 5 + 1;
/// What one queued update may take beyond its text: the enum, its short strings (names, call
/// ids, an answer), and the allocator's own bookkeeping; generous.
const PER_UPDATE: u64 = 1024;
/// The documented bound for this run: the text twice (a merged string grows by doubling), every
/// update at `PER_UPDATE`, and the final update's copy of the outcome (133 events).
const BACKLOG_BOUND: u64 = 2 * TEXT + UPDATES * PER_UPDATE + 133 * PER_UPDATE;

fn probe() -> &'static Path {
    static PROBE: OnceLock<PathBuf> = OnceLock::new();
    PROBE.get_or_init(|| release::binary(PROBE_ENV, "loopbound-demos", "watch-probe"))
}

/// One run of the probe: its peak resident set in KiB and its one line of output.
fn measure(mode: &str) -> (u64, String) {
    let report = std::env::temp_dir().join(format!("loopbound-watch-peak-{}-{mode}", std::process::id()));
    let output = Command::new(env!("CARGO_BIN_EXE_peak_rss"))
        .arg(&report)
        .arg(probe())
        .arg(mode)
        .stdin(Stdio::null())
        .output()
        .expect("peak_rss runs");
    assert!(output.status.success(), "{mode}: {}", String::from_utf8_lossy(&output.stderr));
    let measured = std::fs::read_to_string(&report).expect("peak_rss wrote its report");
    let _ = std::fs::remove_file(&report);
    let peak = measured.split_whitespace().next().and_then(|kib| kib.parse().ok()).expect("a peak");
    (peak, String::from_utf8(output.stdout).expect("utf-8").trim_end().to_owned())
}

#[test]
fn a_watcher_that_never_reads_stays_within_the_documented_bound_and_changes_nothing() {
    let (idle, _) = measure("idle");
    let (unwatched, outcome) = measure("unwatched");
    let (never_reads, line) = measure("never-reads");
    let (watched_outcome, pending) = line.rsplit_once(" pending ").expect("the probe reports its backlog");
    assert_eq!(watched_outcome, outcome, "the same outcome as without a watcher");
    let outcome: Value = serde_json::from_str(&outcome).expect("the outcome's JSON");
    assert_eq!(outcome["status"], "Incomplete");
    assert_eq!(outcome["events"].as_array().map(Vec::len), Some(133));
    assert_eq!(pending.parse::<u64>().ok(), Some(UPDATES), "every piece of a reply merged into one update");
    let above_unwatched = never_reads.saturating_sub(unwatched) * KIB;
    let above_idle = never_reads.saturating_sub(idle) * KIB;
    eprintln!(
        "peak RSS: idle {idle} KiB, unwatched {unwatched} KiB, never-reads {never_reads} KiB; \
         the watcher's backlog {above_unwatched} bytes against a bound of {BACKLOG_BOUND}"
    );
    assert!(
        above_unwatched <= BACKLOG_BOUND,
        "the backlog took {above_unwatched} bytes, over the documented {BACKLOG_BOUND}"
    );
    // The run itself: five replies of 640,000 bytes, their 64 answers, the conversation that
    // holds them, and the backlog; far below the 64 MiB the attack tests allow above idle.
    assert!(above_idle < 4 * BACKLOG_BOUND, "{above_idle} bytes above idle");
}
