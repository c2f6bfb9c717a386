//! This process's resources: CPU time so far (user and system) from `getrusage`; resident
//! memory is read by [`crate::timing::rss_kib`] and [`crate::timing::peak_rss_mib`]. Also the
//! CPU time of another process and its children (a database server's), from `/proc`.
//!
//! # Invariants
//!
//! - CPU time counts every thread of the process (`RUSAGE_SELF`), the runtime's workers and its
//!   blocking pool included.
//! - A process tree's CPU time is its root's, the children it has reaped, and its children
//!   alive at the reading: a server's backends that ended are counted once reaped, those alive
//!   as they are.

use std::time::Duration;

use nix::sys::resource::{UsageWho, getrusage};
use nix::sys::time::TimeValLike;

/// User plus system CPU time of the whole process so far; zero if `getrusage` fails.
#[must_use]
pub fn cpu_time() -> Duration {
    getrusage(UsageWho::RUSAGE_SELF).map_or(Duration::ZERO, |usage| {
        let micros = usage.user_time().num_microseconds() + usage.system_time().num_microseconds();
        Duration::from_micros(u64::try_from(micros).unwrap_or(0))
    })
}

/// User plus system CPU time of process `root` so far, with its reaped children's and its live
/// children's own; `None` where `/proc` cannot be read (another system, the process gone).
#[must_use]
pub fn tree_cpu_time(root: u32) -> Option<Duration> {
    let (own, reaped, _) = stat_times(root)?;
    let mut ticks = own + reaped;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|name| name.parse::<u32>().ok()) else {
            continue;
        };
        if let Some((child, _, parent)) = stat_times(pid)
            && parent == root
        {
            ticks += child;
        }
    }
    // Linux reports these times in clock ticks of 1/100 s (`USER_HZ`) on every architecture.
    Some(Duration::from_millis(ticks * 10))
}

/// A process's own user plus system ticks, its reaped children's, and its parent's PID.
fn stat_times(pid: u32) -> Option<(u64, u64, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: fields count from after it.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let number = |index: usize| fields.get(index)?.parse::<u64>().ok();
    // After the name: state (3), ppid (4), ..., utime (14), stime (15), cutime (16), cstime (17).
    let parent = u32::try_from(number(1)?).ok()?;
    Some((number(11)? + number(12)?, number(13)? + number(14)?, parent))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_grows_with_work() {
        // Work until the process's CPU time has grown by 20 ms: on a busy machine that takes
        // longer by the wall clock, never forever (the cap is only there to end a broken count).
        let before = cpu_time();
        let mut x = 0_u64;
        let cap = std::time::Instant::now() + Duration::from_mins(1);
        while cpu_time() < before + Duration::from_millis(20) && std::time::Instant::now() < cap {
            for _ in 0..10_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
        assert!(cpu_time() >= before + Duration::from_millis(20), "{x}");
        assert!(x > 0);
    }

    #[test]
    fn a_process_tree_counts_its_live_children() {
        // `timeout` spends nothing itself; its child spins in shell arithmetic (no process of
        // its own per step) for at most 10 s. The tree's time grows with the child's: on a busy
        // machine it takes longer to show, never forever (the cap only ends a broken count).
        let mut parent = std::process::Command::new("timeout")
            .arg("10")
            .arg("sh")
            .arg("-c")
            .arg("i=0; while [ $i -lt 100000000 ]; do i=$((i + 1)); done")
            .spawn()
            .expect("timeout and sh run");
        let cap = std::time::Instant::now() + Duration::from_mins(1);
        let mut during = Duration::ZERO;
        while during < Duration::from_millis(100) && std::time::Instant::now() < cap {
            std::thread::sleep(Duration::from_millis(20));
            during = tree_cpu_time(parent.id()).unwrap_or(during);
        }
        // `timeout` passes the signal on to its child.
        let pid = nix::unistd::Pid::from_raw(i32::try_from(parent.id()).expect("a PID fits"));
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("the parent is told");
        parent.wait().expect("the parent is reaped");
        assert!(during >= Duration::from_millis(100), "{during:?}");
        assert_eq!(tree_cpu_time(u32::MAX), None);
    }
}
