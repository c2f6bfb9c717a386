//! The release console, run against a server under `peak_rss`, and what it left behind.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use loopbound_testkit::release;
use serde_json::Value;

/// The API key every run sends (52 characters, as in the report).
pub(crate) const KEY: &str = "sk-live-4f9a2c7e1b8d3f6a0c5e9b2d7f1a4c8e6b3d0f5a9c2e";

/// Where the release console is, when the caller built it already (`.ci/run` does).
const DEMO_ENV: &str = "LOOPBOUND_DEMO330_RELEASE";

/// The release `demo330`: the path in `LOOPBOUND_DEMO330_RELEASE`, else built here once with
/// `cargo build --release` (the path read from cargo's own report of the build).
pub(crate) fn release_demo() -> &'static Path {
    static DEMO: OnceLock<PathBuf> = OnceLock::new();
    DEMO.get_or_init(|| release::binary(DEMO_ENV, "loopbound-demos", "demo330"))
}

/// One run of the console.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    /// The console's peak resident set, in KiB.
    pub(crate) peak_kib: u64,
    /// From its start to its exit.
    pub(crate) elapsed: Duration,
}

impl Run {
    /// The JSON report on stdout (a run with `--json` that produced an outcome).
    pub(crate) fn report(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|error| {
            panic!("one JSON object on stdout ({error}): {}\n{}", self.stdout, self.stderr)
        })
    }

    /// The report's events as `Kind name count` lines.
    pub(crate) fn events(&self) -> Vec<String> {
        let report = self.report();
        report["events"]
            .as_array()
            .expect("events")
            .iter()
            .map(|event| {
                format!(
                    "{} {} {}",
                    event["kind"].as_str().unwrap(),
                    event["name"].as_str().unwrap(),
                    event["count"]
                )
            })
            .collect()
    }
}

/// Runs the release console with `args` against the endpoint at `base_url` (both providers'
/// variables point there), under `peak_rss`.
pub(crate) fn run(base_url: &str, args: &[&str]) -> Run {
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let report = std::env::temp_dir().join(format!(
        "loopbound-peak-{}-{}",
        std::process::id(),
        RUNS.fetch_add(1, Ordering::Relaxed)
    ));
    let output = Command::new(env!("CARGO_BIN_EXE_peak_rss"))
        .arg(&report)
        .arg(release_demo())
        .args(args)
        .env("LOOPBOUND_OPENAI_BASE_URL", base_url)
        .env("LOOPBOUND_OPENAI_MODEL", "hostile")
        .env("LOOPBOUND_OPENAI_API_KEY", KEY)
        .env("LOOPBOUND_OPENAI_TIMEOUT_SECS", "30")
        .env_remove("LOOPBOUND_OPENAI_STREAM_USAGE")
        // The same server in its Anthropic mode, for `--provider anthropic`.
        .env("LOOPBOUND_ANTHROPIC_BASE_URL", base_url)
        .env("LOOPBOUND_ANTHROPIC_MODEL", "hostile")
        .env("LOOPBOUND_ANTHROPIC_API_KEY", KEY)
        .env("LOOPBOUND_ANTHROPIC_TIMEOUT_SECS", "30")
        .env_remove("LOOPBOUND_ANTHROPIC_MAX_TOKENS")
        .stdin(Stdio::null())
        .output()
        .expect("peak_rss runs");
    let measured = std::fs::read_to_string(&report).expect("peak_rss wrote its report");
    let _ = std::fs::remove_file(&report);
    let mut fields = measured.split_whitespace().map(|field| field.parse::<u64>().expect("a number"));
    let (peak_kib, micros) = (fields.next().expect("a peak"), fields.next().expect("a time"));
    Run {
        code: output.status.code().expect("an exit code"),
        stdout: String::from_utf8(output.stdout).expect("UTF-8 stdout"),
        stderr: String::from_utf8(output.stderr).expect("UTF-8 stderr"),
        peak_kib,
        elapsed: Duration::from_micros(micros),
    }
}

/// Panics if `text` holds any eight consecutive characters of [`KEY`].
pub(crate) fn assert_no_key_run(text: &str, what: &str) {
    loopbound_testkit::leaks::assert_no_run_of(KEY, text, what);
}
