//! Writes the journal fixtures of one schema version, once, by hand: a SQLite journal file and
//! a plain-SQL `pg_dump` of a PostgreSQL journal, each holding the runs of
//! [`loopbound_testkit::journal_fixture`], into a new folder.
//!
//! ```text
//! cargo run -p loopbound-testkit --bin write-journal-fixtures -- testkit/fixtures/journal-<date>
//! ```
//!
//! The folder must not exist: a fixture is written once and never over, and a later version
//! adds its own folder beside the earlier ones. PostgreSQL comes from the testkit's throwaway
//! cluster, so its programs (`initdb`, `postgres`, `pg_dump`) must be installed.

use std::path::{Path, PathBuf};
use std::process::Command;

use loopbound_sqlite::Synchronous;
use loopbound_testkit::backend;
use loopbound_testkit::journal_fixture;
use loopbound_testkit::postgres::{Cluster, Durability};

fn main() {
    let Some(folder) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: write-journal-fixtures FOLDER (a folder that does not exist yet)");
        std::process::exit(2);
    };
    if folder.exists() {
        eprintln!("{} exists: a fixture is written once, never over", folder.display());
        std::process::exit(1);
    }
    std::fs::create_dir_all(&folder).unwrap_or_else(|error| panic!("{}: {error}", folder.display()));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|error| panic!("a runtime: {error}"));
    runtime.block_on(write(&folder));
}

async fn write(folder: &Path) {
    let file = folder.join("journal.db");
    let ended = journal_fixture::write(&backend::sqlite_place(&file, Synchronous::Full)).await;
    println!("sqlite {}:\n  {}", file.display(), ended.join("\n  "));
    // One small file: no write-ahead log beside it, small pages.
    let connection = rusqlite::Connection::open(&file).unwrap_or_else(|error| panic!("{error}"));
    connection
        .execute_batch(
            "PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode = DELETE; PRAGMA page_size = 1024; VACUUM;",
        )
        .unwrap_or_else(|error| panic!("checkpointing {}: {error}", file.display()));
    drop(connection);

    let cluster = Cluster::start(Durability::Fast).unwrap_or_else(|| panic!("PostgreSQL is not installed"));
    let database = cluster.create_database("journal");
    let ended = journal_fixture::write(&backend::postgres_place(&database.url)).await;
    println!("postgres {}:\n  {}", database.name, ended.join("\n  "));
    let dump = Command::new("pg_dump")
        .args(["--no-owner", "--no-privileges", "--no-comments", "-h", "127.0.0.1", "-U", "postgres"])
        .arg("-p")
        .arg(cluster.port().to_string())
        .arg(&database.name)
        .output()
        .unwrap_or_else(|error| panic!("pg_dump did not start: {error}"));
    assert!(dump.status.success(), "pg_dump failed: {}", String::from_utf8_lossy(&dump.stderr));
    // `\restrict` and `\unrestrict` guard a restore from a dump's content; this dump is written
    // here and committed, and without them every `psql` (not only 15.14 and later) restores it.
    let text = String::from_utf8(dump.stdout).unwrap_or_else(|error| panic!("pg_dump wrote {error}"));
    let text: String = text
        .lines()
        .filter(|line| !line.starts_with("\\restrict ") && !line.starts_with("\\unrestrict "))
        .flat_map(|line| [line, "\n"])
        .collect();
    let path = folder.join("journal.sql");
    std::fs::write(&path, &text).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    println!("pg_dump {}: {} bytes", path.display(), text.len());
}
