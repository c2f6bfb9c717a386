//! Test binaries that run themselves again as child processes: the parent starts the test it is
//! in with a role in the environment, talks to the child through its stdin, and reads the
//! lines it reports on stdout (marked, apart from what libtest prints there); it can pause and
//! resume a child (SIGSTOP, SIGCONT) to play a stalled process.
//!
//! # Invariants
//!
//! - A child runs exactly one test (`--exact`), single-threaded, and knows its role only from
//!   [`ROLE`]; the parent's own run of that test has no role.

use std::io::{BufRead, BufReader, Lines};
use std::process::{Child, ChildStdout, Command, Stdio};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The variable naming a child's role.
pub const ROLE: &str = "LOOPBOUND_TEST_CHILD_ROLE";
/// Marks the lines a child reports.
const MARK: &str = "@@ ";

/// This process's role, or `None` in the parent.
#[must_use]
pub fn role() -> Option<String> {
    std::env::var(ROLE).ok()
}

/// Reports `line` to the parent.
pub fn report(line: &str) {
    println!("{MARK}{line}");
}

/// The command that runs this binary's test `test` as a child with `role`, stdin and stdout
/// piped.
///
/// # Panics
///
/// If the test binary's path is unknown.
#[must_use]
pub fn command(test: &str, role: &str) -> Command {
    let mut command = Command::new(std::env::current_exe().expect("the test binary"));
    command
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    command
}

/// The lines of a child's stdout.
pub type Output = Lines<BufReader<ChildStdout>>;

/// The child's output, read line by line.
///
/// # Panics
///
/// If its stdout was not piped or was taken already.
pub fn output(child: &mut std::process::Child) -> Output {
    BufReader::new(child.stdout.take().expect("a piped stdout")).lines()
}

/// The child's next report, or `None` when its output ends.
pub fn next_report(lines: &mut Output) -> Option<String> {
    lines.map_while(Result::ok).find_map(|line| line.split_once(MARK).map(|(_, report)| report.to_owned()))
}

/// A current-thread runtime with time and I/O.
///
/// # Panics
///
/// If the runtime cannot be built.
#[must_use]
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime")
}

/// Pauses `child` with SIGSTOP, as a stalled process (a long GC pause, a frozen VM) would be:
/// it keeps its files and sockets but runs no code until [`resume`].
///
/// # Panics
///
/// If the signal cannot be sent (the child is gone, or its id does not fit a PID).
pub fn pause(child: &Child) {
    send(child, Signal::SIGSTOP);
}

/// Resumes a child [`pause`] stopped, with SIGCONT.
///
/// # Panics
///
/// If the signal cannot be sent.
pub fn resume(child: &Child) {
    send(child, Signal::SIGCONT);
}

fn send(child: &Child, signal: Signal) {
    let pid = i32::try_from(child.id()).expect("a child's id fits a PID");
    kill(Pid::from_raw(pid), signal)
        .unwrap_or_else(|error| panic!("{signal} to child {pid} failed: {error}"));
}
