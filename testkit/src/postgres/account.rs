//! Which account runs `initdb` and the server, and how a command is put under it.
//!
//! `initdb` and `postgres` refuse to run as root. When the tests run as root (as CI does here),
//! both run as the unprivileged `nobody` through `setpriv`; otherwise they run as the caller.
//!
//! # Invariants
//!
//! - Every server process is started through `setpriv --pdeathsig INT`, which `exec`s the server
//!   (so the child's PID is the postmaster's) after dropping privileges: when the thread that
//!   started it ends, which happens at the latest when the test process ends, killed or not, the
//!   server receives a fast-shutdown request. No server outlives its test process.
//! - The account's IDs come from `/etc/passwd`; none is hard-coded.

use std::path::Path;
use std::process::Command;

/// The account that owns a cluster's folder and runs its programs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Account {
    /// Tests run unprivileged: the programs run as the caller.
    Caller,
    /// Tests run as root: the programs run as this unprivileged user and group.
    Unprivileged { uid: u32, gid: u32 },
}

impl Account {
    /// The account for this process: the caller, or `nobody` when the caller is root.
    pub(crate) fn for_this_process() -> Result<Self, String> {
        if !nix::unistd::geteuid().is_root() {
            return Ok(Self::Caller);
        }
        let passwd = std::fs::read_to_string("/etc/passwd")
            .map_err(|error| format!("running as root, /etc/passwd is needed to find `nobody`: {error}"))?;
        passwd
            .lines()
            .find_map(|line| {
                let fields: Vec<&str> = line.split(':').collect();
                match fields.as_slice() {
                    ["nobody", _, uid, gid, ..] => {
                        Some(Self::Unprivileged { uid: uid.parse().ok()?, gid: gid.parse().ok()? })
                    }
                    _ => None,
                }
            })
            .ok_or_else(|| "running as root, but /etc/passwd has no usable `nobody` account".to_owned())
    }

    /// Gives `path` to this account (nothing to do when it is the caller).
    pub(crate) fn take_ownership(self, path: &Path) -> std::io::Result<()> {
        match self {
            Self::Caller => Ok(()),
            Self::Unprivileged { uid, gid } => std::os::unix::fs::chown(path, Some(uid), Some(gid)),
        }
    }

    /// A command that runs `program` under this account, with an empty environment (so no
    /// `PGDATA`, `PGPORT` or locale of the caller leaks in), ending with a fast shutdown when
    /// the starting thread ends.
    pub(crate) fn command(self, setpriv: &Path, program: &Path) -> Command {
        let mut command = Command::new(setpriv);
        command.env_clear();
        if let Self::Unprivileged { uid, gid } = self {
            command.arg(format!("--reuid={uid}")).arg(format!("--regid={gid}")).arg("--clear-groups");
        }
        command.args(["--pdeathsig", "INT", "--"]).arg(program);
        command
    }
}
