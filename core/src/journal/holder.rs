//! Who holds a lease: this process's name for the leases it takes, and whether a lease's holder
//! is a process of this machine that no longer exists, so that its lease may be taken over at
//! once instead of after it expires.
//!
//! A process names itself `<host>:<pid>/<start>/<scope>` ([`process_holder`]): the host's name
//! (cut to fit), its process id, when it started (`/proc/<pid>/stat`'s start time, in clock
//! ticks since boot: a pid that is reused gets another), and 12 hexadecimal digits of a digest
//! of the machine's boot id and the process's pid namespace (which machine, which boot, which
//! table of process ids). Where that cannot be read (not Linux, no `/proc`), it is
//! `<host>:<pid>` as before.
//!
//! # Invariants
//!
//! - A holder is judged dead ([`is_dead_holder`]) only when all of these hold: it has the
//!   process form; its scope is this process's (the same boot of the same machine, the same
//!   pid namespace); this process's `/proc` shows every process of that namespace (it is that
//!   namespace's, and not mounted with `hidepid`); and `/proc` has no process with that pid,
//!   or a zombie, or one that started at another time. Anything else is never judged dead and
//!   its lease is waited out: a name a host chose (`with_holder`, `with_worker`, a pod's name),
//!   the older `<host>:<pid>` form, a process of another machine, boot or container, a `/proc`
//!   that could not be read, any other system than Linux.
//! - A process stopped (SIGSTOP) or paused is alive: only its lease's expiry ends its hold.
//! - Judging reads `/proc` only; it never signals a process, and never panics.
//! - [`process_holder`] is at most [`MAX_ACTOR_LEN`] bytes, without a control character.

use std::sync::OnceLock;

use super::id::Digest;
use super::record::MAX_ACTOR_LEN;

/// How many hexadecimal digits of the scope's digest a holder carries: 48 bits, so two
/// machines' scopes differ but with a chance of one in 2^48.
const SCOPE_LEN: usize = 12;

/// This process, as a holder of its form names it.
#[derive(Debug)]
struct Me {
    /// When this process started, in clock ticks since boot.
    start: u64,
    /// The machine's boot and this process's pid namespace, digested.
    scope: String,
    /// Whether this process's `/proc` shows every process of its pid namespace.
    sees_all: bool,
}

/// This process's identity, read once.
fn me() -> Option<&'static Me> {
    static ME: OnceLock<Option<Me>> = OnceLock::new();
    ME.get_or_init(read_me).as_ref()
}

fn read_me() -> Option<Me> {
    let pid = std::process::id();
    // `/proc` must be this namespace's: its `self` is this process under the id it knows.
    let seen = std::fs::read_link("/proc/self").ok()?;
    if seen.to_str()? != pid.to_string() {
        return None;
    }
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let namespace = std::fs::read_link("/proc/self/ns/pid").ok()?;
    let digest = Digest::of(&format!("{}\n{}", boot.trim(), namespace.to_str()?));
    let (_, start) = stat(pid)?;
    Some(Me { start, scope: digest.as_str()[..SCOPE_LEN].to_owned(), sees_all: sees_all() })
}

/// Whether `/proc` is mounted without `hidepid`: a process of another user is then listed.
fn sees_all() -> bool {
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mountinfo") else { return false };
    // The last mount on `/proc` is the one paths under it reach.
    let Some(filesystem) = mounts
        .lines()
        .rev()
        .filter_map(|line| line.split_once(" - "))
        .find(|(mount, _)| mount.split(' ').nth(4) == Some("/proc"))
        .map(|(_, filesystem)| filesystem)
    else {
        return false;
    };
    let mut parts = filesystem.split(' ');
    let is_proc = parts.next() == Some("proc");
    let hidden = parts
        .nth(1)
        .unwrap_or_default()
        .split(',')
        .filter_map(|option| option.strip_prefix("hidepid="))
        .any(|value| !matches!(value, "0" | "off"));
    is_proc && !hidden
}

/// The state letter and the start time of process `pid` in `/proc/<pid>/stat`, or `None` when
/// it cannot be read or parsed.
fn stat(pid: u32) -> Option<(char, u64)> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// The state letter and the start time (the 22nd field) of a `/proc/<pid>/stat` line. The
/// command's name (the 2nd field, in parentheses) may hold spaces and parentheses: the fields
/// are counted after its last `)`.
fn parse_stat(line: &str) -> Option<(char, u64)> {
    let (_, rest) = line.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let start = fields.nth(18)?.parse().ok()?;
    Some((state, start))
}

/// This process's name for the leases it holds: `<host>:<pid>/<start>/<scope>` (see the
/// module's documentation), or `<host>:<pid>` where its start and scope cannot be read; the
/// host's name as the kernel gives it, cut to fit 64 bytes. Backends use it unless told
/// another: a host reading a lease sees which machine and process held it, and another process
/// of the same machine can tell when that process is gone ([`is_dead_holder`]).
#[must_use]
pub fn process_holder() -> String {
    let pid = std::process::id();
    let suffix = match me() {
        Some(me) => format!(":{pid}/{}/{}", me.start, me.scope),
        None => format!(":{pid}"),
    };
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|name| name.trim().chars().filter(|c| !c.is_control()).collect::<String>())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "localhost".to_owned());
    let room = MAX_ACTOR_LEN.saturating_sub(suffix.len());
    let mut cut = host.len().min(room);
    while !host.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{suffix}", &host[..cut])
}

/// The pid, start time and scope a holder of the process form names.
fn parse_holder(holder: &str) -> Option<(u32, u64, &str)> {
    let mut parts = holder.rsplitn(3, '/');
    let (scope, start, rest) = (parts.next()?, parts.next()?, parts.next()?);
    let (_, pid) = rest.rsplit_once(':')?;
    let digits = |text: &str| !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    let hex = scope.len() == SCOPE_LEN && scope.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !(digits(pid) && digits(start) && hex) {
        return None;
    }
    Some((pid.parse().ok().filter(|pid| *pid > 0)?, start.parse().ok()?, scope))
}

/// Whether `holder` names a process of this machine (its current boot, this process's pid
/// namespace) that no longer exists: no process has its pid, or a zombie does, or one that
/// started at another time (the pid was reused). A lease such a holder holds cannot be renewed
/// by it any more, so a backend takes it over at once instead of waiting for its expiry,
/// conditioned in its storage on the lease still being that holder's under the same epoch.
///
/// `false` for every other name: a name a host chose, the older `<host>:<pid>` form, a
/// process of another machine, boot or container, a live or stopped process, a `/proc` that
/// hides other users' processes or cannot be read, and on every system but Linux.
///
/// ```
/// use loopbound::journal::backend::{is_dead_holder, process_holder};
///
/// assert!(!is_dead_holder(&process_holder()), "this process is alive");
/// assert!(!is_dead_holder("pod-7"), "a chosen name is never judged");
/// assert!(!is_dead_holder("host-a:4242"), "nor is the older form");
/// ```
#[must_use]
pub fn is_dead_holder(holder: &str) -> bool {
    let (Some(me), Some((pid, start, scope))) = (me(), parse_holder(holder)) else { return false };
    if !me.sees_all || scope != me.scope {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(error) => error.kind() == std::io::ErrorKind::NotFound,
        Ok(line) => match parse_stat(&line) {
            Some((state, started)) => matches!(state, 'Z' | 'X') || started != start,
            None => false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_is_read_after_the_commands_last_parenthesis() {
        let line = "352 (a (b) c) R 345 345 25363 0 -1 4194304 99 0 0 0 0 0 0 0 20 0 1 0 1319620 3133440 382";
        assert_eq!(parse_stat(line), Some(('R', 1_319_620)));
        assert_eq!(parse_stat("352 (cat) R 1 2"), None);
        assert_eq!(parse_stat("no parenthesis"), None);
    }

    #[test]
    fn only_the_process_form_is_parsed() {
        assert_eq!(parse_holder("host-a:42/1319620/0123456789ab"), Some((42, 1_319_620, "0123456789ab")));
        assert_eq!(parse_holder("a:b/c:42/7/0123456789ab"), Some((42, 7, "0123456789ab")));
        for other in [
            "host-a:42",
            "pod-7",
            "host-a:0/7/0123456789ab",
            "host-a:42/7/0123456789AB",
            "host-a:42/7/0123456789a",
            "host-a:42/-7/0123456789ab",
            "host-a:+42/7/0123456789ab",
            "host-a:42//0123456789ab",
            "42/7/0123456789ab",
        ] {
            assert_eq!(parse_holder(other), None, "{other}");
        }
    }

    #[test]
    fn this_processs_holder_fits_and_is_alive_and_a_reused_pid_is_dead() {
        let holder = process_holder();
        assert!(super::super::record::valid_actor(&holder), "{holder}");
        assert!(!is_dead_holder(&holder), "{holder}");
        if let Some((pid, start, scope)) = parse_holder(&holder) {
            assert_eq!(pid, std::process::id());
            let (host, _) = holder.rsplit_once(&format!(":{pid}/")).unwrap_or_default();
            let earlier = format!("{host}:{pid}/{}/{scope}", start.wrapping_sub(1));
            assert_eq!(is_dead_holder(&earlier), me().is_some_and(|me| me.sees_all), "{earlier}");
            let elsewhere = format!("{host}:{pid}/{}/{}", start.wrapping_sub(1), "0".repeat(SCOPE_LEN));
            assert!(!is_dead_holder(&elsewhere), "another machine's is never judged: {elsewhere}");
        }
    }
}
