//! One `initdb` per machine: a cached template data folder that each new cluster copies.
//!
//! `initdb` takes seconds (it starts a server several times to size its settings); copying its
//! result takes a fraction of that. The template lives beside the cluster folders, named after
//! the server's version and [`FORMAT`], so a new PostgreSQL or new `initdb` options make a new one.
//!
//! # Invariants
//!
//! - A template is never started: clusters run on copies.
//! - A template appears whole or not at all: it is built in a folder named like a cluster's
//!   (`<pid>-building`, swept like one if its process dies) and renamed into place; of two
//!   processes building it at once, the first rename wins and the other's copy is removed. Within
//!   one process, builds are serialised.
//! - The copy keeps owners and modes (`cp -a`), so the server's account owns its data folder.

use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

use super::account::Account;
use super::binaries::Binaries;

/// Bumped whenever the options of [`initdb`] or the written `pg_hba.conf` change.
const FORMAT: u32 = 1;

/// The group role whose members must log in with a password (SCRAM-SHA-256).
pub(crate) const PASSWORD_GROUP: &str = "loopbound_password_login";

/// Makes `data` a fresh data folder: a copy of the cached template (built first if needed, which
/// takes an `initdb`). Returns whether the template had to be built.
pub(crate) fn materialise(
    binaries: &Binaries,
    account: Account,
    root: &Path,
    data: &Path,
) -> Result<bool, String> {
    static BUILDING: Mutex<()> = Mutex::new(());
    let template = root.join(format!("template-{}-{FORMAT}", version(binaries)?));
    let guard = BUILDING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let built = if template.join("PG_VERSION").is_file() {
        false
    } else {
        let building = root.join(format!("{}-building", std::process::id()));
        let _ = std::fs::remove_dir_all(&building);
        std::fs::create_dir(&building).map_err(|error| format!("{}: {error}", building.display()))?;
        account.take_ownership(&building).map_err(|error| format!("{}: {error}", building.display()))?;
        let result = initdb(binaries, account, &building.join("data"));
        if result.is_ok() && std::fs::rename(building.join("data"), &template).is_err() {
            // Another process finished first; its template is as good as ours.
            assert!(
                template.join("PG_VERSION").is_file(),
                "{} could not be put in place",
                template.display()
            );
        }
        let _ = std::fs::remove_dir_all(&building);
        result?;
        true
    };
    drop(guard);
    copy(&template, data)?;
    Ok(built)
}

fn version(binaries: &Binaries) -> Result<String, String> {
    let output = Command::new(&binaries.postgres)
        .arg("--version")
        .output()
        .map_err(|error| format!("`postgres --version` failed: {error}"))?;
    let text = String::from_utf8_lossy(&output.stdout);
    // "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)": the third word.
    text.split_whitespace()
        .nth(2)
        .filter(|version| version.chars().all(|c| c.is_ascii_alphanumeric() || c == '.'))
        .map(str::to_owned)
        .ok_or_else(|| format!("`postgres --version` printed {text:?}"))
}

fn initdb(binaries: &Binaries, account: Account, data: &Path) -> Result<(), String> {
    let output = account
        .command(&binaries.setpriv, &binaries.initdb)
        .arg("-D")
        .arg(data)
        .args(["-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"])
        .output()
        .map_err(|error| format!("setpriv could not run initdb: {error}"))?;
    if !output.status.success() {
        return Err(format!(
            "initdb failed ({}):\n{}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let hba = format!(
        "# Written by loopbound's test harness: the superuser is trusted, members of\n\
         # {PASSWORD_GROUP} must give their password.\n\
         local all all trust\n\
         host all +{PASSWORD_GROUP} 127.0.0.1/32 scram-sha-256\n\
         host all all 127.0.0.1/32 trust\n"
    );
    // Rewriting the existing file keeps its owner (the server's account) and mode.
    std::fs::write(data.join("pg_hba.conf"), hba).map_err(|error| format!("pg_hba.conf: {error}"))
}

fn copy(template: &Path, data: &Path) -> Result<(), String> {
    let output = Command::new("cp")
        .arg("-a")
        .arg(template)
        .arg(data)
        .output()
        .map_err(|error| format!("cp could not run: {error}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!("copying {} failed: {}", template.display(), String::from_utf8_lossy(&output.stderr)))
    }
}
