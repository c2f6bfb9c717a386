//! Where the PostgreSQL server programs are: each one on `PATH`, else in `pg_config --bindir`.
//!
//! # Invariants
//!
//! - A program is accepted only if it is a regular file with an execute bit; a missing one is
//!   reported by name, so a skip says which program this machine lacks.
//! - Symbolic links are resolved, and `postgres` and `psql` are taken from `initdb`'s real folder
//!   first, so the three programs are of one version (Debian's `/usr/bin/psql` is a wrapper that
//!   may pick another).

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The programs a throwaway cluster needs: PostgreSQL's three and util-linux's `setpriv`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Binaries {
    pub(crate) initdb: PathBuf,
    pub(crate) postgres: PathBuf,
    pub(crate) psql: PathBuf,
    pub(crate) setpriv: PathBuf,
}

impl Binaries {
    /// Finds `initdb`, then `postgres` and `psql` beside it (else on `PATH`, else in
    /// `pg_config --bindir`), or says which one is missing.
    pub(crate) fn find() -> Result<Self, String> {
        let bindir = pg_config_bindir();
        let find = |name: &str, beside: Option<&Path>| {
            beside
                .map(|dir| dir.join(name))
                .filter(|path| executable(path))
                .or_else(|| on_path(name))
                .or_else(|| bindir.as_deref().map(|dir| dir.join(name)).filter(|path| executable(path)))
                .map(|path| path.canonicalize().unwrap_or(path))
                .ok_or_else(|| {
                    let searched = bindir
                        .as_deref()
                        .map_or_else(|| "no pg_config".to_owned(), |dir| dir.display().to_string());
                    format!(
                        "PostgreSQL's `{name}` is neither on PATH nor in `pg_config --bindir` ({searched})"
                    )
                })
        };
        let initdb = find("initdb", None)?;
        let folder = initdb.parent();
        let setpriv = on_path("setpriv").ok_or("util-linux's `setpriv` is not on PATH")?;
        Ok(Self { postgres: find("postgres", folder)?, psql: find("psql", folder)?, initdb, setpriv })
    }
}

fn executable(path: &Path) -> bool {
    path.metadata().is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|candidate| executable(candidate))
}

fn pg_config_bindir() -> Option<PathBuf> {
    let pg_config = on_path("pg_config")?;
    let output = Command::new(pg_config).arg("--bindir").stderr(Stdio::null()).output().ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?;
    let dir = PathBuf::from(OsStr::new(text.trim()));
    dir.is_dir().then_some(dir)
}
