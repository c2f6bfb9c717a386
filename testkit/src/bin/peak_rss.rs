//! `peak_rss REPORT PROGRAM [ARGS…]`: runs PROGRAM with ARGS (and this process's standard
//! streams), waits for it, then writes to the file REPORT one line, `<peak resident set in KiB>
//! <wall time in microseconds>`, and exits with PROGRAM's exit code (128 + the signal if a
//! signal ended it).
//!
//! The peak comes from `getrusage(RUSAGE_CHILDREN)` once PROGRAM is reaped: PROGRAM is this
//! process's only child, so it is PROGRAM's own high-water mark, its last moments included
//! (`/proc/<pid>/status` loses `VmHWM` when the process exits, so a parent polling it can miss
//! a peak reached just before the exit).

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitCode};
use std::time::Instant;

use nix::sys::resource::{UsageWho, getrusage};

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let (Some(report), Some(program)) = (args.next(), args.next()) else {
        eprintln!("usage: peak_rss REPORT PROGRAM [ARGS...]");
        return ExitCode::from(64);
    };
    let rest: Vec<OsString> = args.collect();
    let started = Instant::now();
    let status = match Command::new(&program).args(&rest).status() {
        Ok(status) => status,
        Err(error) => {
            eprintln!("peak_rss: cannot run {}: {error}", program.to_string_lossy());
            return ExitCode::from(70);
        }
    };
    let elapsed = started.elapsed();
    let peak = match getrusage(UsageWho::RUSAGE_CHILDREN) {
        Ok(usage) => usage.max_rss(),
        Err(error) => {
            eprintln!("peak_rss: getrusage failed: {error}");
            return ExitCode::from(70);
        }
    };
    if let Err(error) = std::fs::write(&report, format!("{peak} {}\n", elapsed.as_micros())) {
        eprintln!("peak_rss: cannot write {}: {error}", report.to_string_lossy());
        return ExitCode::from(70);
    }
    let code = status.code().or_else(|| status.signal().map(|signal| 128 + signal)).unwrap_or(1);
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
