//! The temporary folder of one cluster, and the sweep of folders left by dead test processes.
//!
//! Layout: `$TMPDIR/loopbound-postgres-<euid>/<test pid>-<n>/` holds `data/` (a copy of the
//! cached template), the server's Unix socket and `server.log`; the templates themselves are
//! `template-<version>-<format>/` beside them (see `template`), never swept.
//!
//! # Invariants
//!
//! - A cluster's folder belongs to the account that runs the server and is private to it
//!   (mode 0700); the common parent is traversable (0755) so that account can reach it.
//! - The folder is removed when its cluster is stopped. A folder whose test process is gone
//!   (killed before it could clean up, or holding a shared cluster, which is never dropped) is
//!   removed by the next test process that starts a cluster, after any server still running in it
//!   has been stopped.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Once;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use nix::sys::signal::Signal;

use super::account::Account;
use super::server::{postmaster_pid, signal};

/// One cluster's folder.
#[derive(Debug)]
pub(crate) struct Workdir {
    path: PathBuf,
}

impl Workdir {
    /// Creates a fresh folder owned by `account`, after sweeping what dead test processes left.
    pub(crate) fn create(account: Account) -> std::io::Result<Self> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        static SWEEP: Once = Once::new();
        let root = root();
        std::fs::create_dir_all(&root)?;
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755))?;
        SWEEP.call_once(|| {
            sweep(&root).expect("the clusters' common folder can be read");
        });
        let path = root.join(format!("{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
        // A folder of this name can only be a leftover of an earlier process with this PID.
        remove(&path);
        std::fs::create_dir(&path)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))?;
        account.take_ownership(&path)?;
        Ok(Self { path })
    }

    /// The folder itself (the server's socket folder).
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The data folder that `initdb` creates.
    pub(crate) fn data(&self) -> PathBuf {
        self.path.join("data")
    }

    /// The server's log file.
    pub(crate) fn log(&self) -> PathBuf {
        self.path.join("server.log")
    }
}

impl Drop for Workdir {
    fn drop(&mut self) {
        remove(&self.path);
    }
}

/// The common parent of every cluster folder of this user: in the temporary folder, or in
/// `/tmp` when some folder on the way to it is closed to other users (as root, the server runs as
/// another user, who must be able to reach its folder).
pub(crate) fn root() -> PathBuf {
    let temporary = std::env::temp_dir();
    let base = if open_to_others(&temporary) { temporary } else { PathBuf::from("/tmp") };
    base.join(format!("loopbound-postgres-{}", nix::unistd::geteuid().as_raw()))
}

/// Whether every folder from `/` down to `path` lets other users through.
fn open_to_others(path: &Path) -> bool {
    path.ancestors().all(|folder| folder.metadata().is_ok_and(|meta| meta.permissions().mode() & 0o001 != 0))
}

fn remove(path: &Path) {
    if let Err(error) = std::fs::remove_dir_all(path)
        && error.kind() != std::io::ErrorKind::NotFound
    {
        eprintln!("warning: could not remove {}: {error}", path.display());
    }
}

fn alive(pid: u32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

/// Removes the folders of test processes that no longer exist, stopping their servers first;
/// returns how many it removed.
pub(crate) fn sweep(root: &Path) -> std::io::Result<usize> {
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(error) => return Err(error),
    };
    let mut removed = 0;
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let Some(owner) =
            name.to_str().and_then(|name| name.split('-').next()).and_then(|pid| pid.parse().ok())
        else {
            continue;
        };
        if owner == std::process::id() || alive(owner) {
            continue;
        }
        let folder = entry.path();
        if let Some(server) = postmaster_pid(&folder.join("data")).filter(|&pid| alive(pid)) {
            eprintln!("warning: stopping the leftover PostgreSQL server {server} in {}", folder.display());
            signal(server, Signal::SIGQUIT);
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while alive(server) && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            signal(server, Signal::SIGKILL);
        }
        remove(&folder);
        removed += 1;
    }
    Ok(removed)
}
