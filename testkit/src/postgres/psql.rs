//! SQL run through the cluster's own `psql`, so the harness needs no database client crate.
//!
//! # Invariants
//!
//! - The SQL travels on standard input, never on the command line (where `ps` would show a
//!   password), and `psql` stops at the first error (`ON_ERROR_STOP`), reported with its text.
//! - `psql` runs with an empty environment and without `~/.psqlrc` (`-X`), as the superuser
//!   `postgres` over TCP on 127.0.0.1, which the cluster trusts.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// Runs `sql` in `database` on the server at 127.0.0.1:`port`; returns what `psql` printed,
/// unaligned and without headers (one row per line, columns separated by `|`).
pub(crate) fn run(psql: &Path, port: u16, database: &str, sql: &str) -> Result<String, String> {
    let mut child = Command::new(psql)
        .env_clear()
        .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-U", "postgres"])
        .arg("-p")
        .arg(port.to_string())
        .arg("-d")
        .arg(database)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| format!("psql could not start: {error}"))?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    let written = stdin.write_all(sql.as_bytes());
    drop(stdin);
    let output = child.wait_with_output().map_err(|error| format!("psql failed: {error}"))?;
    if let Err(error) = written {
        return Err(format!("psql did not take the SQL: {error}"));
    }
    if !output.status.success() {
        return Err(format!(
            "psql exited with {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim_end().to_owned())
}

/// `name` as an SQL identifier, double-quoted.
pub(crate) fn identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `text` as an SQL string literal, single-quoted.
pub(crate) fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}
