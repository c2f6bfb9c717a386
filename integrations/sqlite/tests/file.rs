//! The SQLite file itself: pragmas, schema versions, foreign and damaged files, the commit
//! budget of a journaled run, and stored values that do not decode.

use std::sync::Arc;

use loopbound::journal::{self, JournalError, RunId};
use loopbound::tool::Policy;
use loopbound::transport::ModelReply;
use loopbound::{Limits, Outcome, RunError, Runner, Scope, Status};
use loopbound_sqlite::{APPLICATION_ID, SCHEMA_VERSION, SqliteJournal, Synchronous};
use loopbound_testkit::refund::{self, EffectSink, MemorySink};
use loopbound_testkit::scratch;
use rusqlite::Connection;

fn run_id() -> RunId {
    RunId::new("refund-42").unwrap()
}

async fn attempt(
    journal: &SqliteJournal,
    sink: &Arc<MemorySink>,
    script: Vec<ModelReply>,
) -> Result<Outcome, RunError> {
    let tools = refund::tools(Arc::clone(sink) as Arc<dyn EffectSink>, Policy::Allow);
    let scope = Scope::builder().grants(refund::CAPABILITIES).limits(Limits::default()).build().unwrap();
    let runtime = Runner::new(&tools.set, refund::model(script, |_| {}));
    runtime.run_journaled(journal, &run_id(), &scope, &mut refund::conversation(), |_| true).await
}

fn pragma(path: &std::path::Path, name: &str) -> String {
    let connection = Connection::open(path).unwrap();
    connection.pragma_query_value(None, name, |row| row.get::<_, rusqlite::types::Value>(0)).map_or_else(
        |error| format!("error {error}"),
        |value| match value {
            rusqlite::types::Value::Integer(n) => n.to_string(),
            rusqlite::types::Value::Text(text) => text,
            other => format!("{other:?}"),
        },
    )
}

#[tokio::test]
async fn a_new_file_is_a_versioned_wal_journal_and_reopens_unchanged() {
    let path = scratch::dir("sqlite-new").join("runs.db");
    let journal = SqliteJournal::open(&path).unwrap();
    assert_eq!(journal.synchronous(), Synchronous::Full);
    assert_eq!(pragma(&path, "journal_mode"), "wal");
    assert_eq!(pragma(&path, "user_version"), SCHEMA_VERSION.to_string());
    assert_eq!(pragma(&path, "application_id"), APPLICATION_ID.to_string());
    drop(journal);
    let again = SqliteJournal::open(&path).unwrap();
    assert_eq!(again.commits(), 0);
    assert_eq!(pragma(&path, "user_version"), SCHEMA_VERSION.to_string());
}

#[tokio::test]
async fn a_newer_schema_a_foreign_database_and_garbage_are_refused_untouched() {
    let dir = scratch::dir("sqlite-refused");
    let newer = dir.join("newer.db");
    drop(SqliteJournal::open(&newer).unwrap());
    Connection::open(&newer).unwrap().pragma_update(None, "user_version", 99).unwrap();
    assert_eq!(
        SqliteJournal::open(&newer).err(),
        Some(JournalError::UnsupportedSchema { found: 99, supported: SCHEMA_VERSION })
    );

    let foreign = dir.join("foreign.db");
    Connection::open(&foreign).unwrap().execute_batch("CREATE TABLE mine (x INTEGER);").unwrap();
    assert!(matches!(SqliteJournal::open(&foreign), Err(JournalError::Corrupt(_))));
    assert_eq!(pragma(&foreign, "user_version"), "0", "a foreign file is left as it was");

    let garbage = dir.join("garbage.db");
    std::fs::write(&garbage, vec![0x5a; 8192]).unwrap();
    assert!(matches!(SqliteJournal::open(&garbage), Err(JournalError::Corrupt(_))));
}

#[tokio::test]
async fn commits_per_effect_are_two_and_per_read_none() {
    let journal = SqliteJournal::open(scratch::dir("sqlite-commits").join("runs.db")).unwrap();
    let sink = Arc::new(MemorySink::default());
    let outcome = attempt(&journal, &sink, refund::long_script()).await.unwrap();
    assert_eq!(outcome.status(), Status::Completed);
    // One to take the run; two per effect (refund, refund, send_receipt); none for the read;
    // one at the end.
    assert_eq!(journal.commits(), 1 + 2 * 3 + 1);
    assert_eq!(sink.count("refund"), 2);
    assert_eq!(sink.count("send_receipt"), 1);

    let reads = SqliteJournal::open(scratch::dir("sqlite-reads").join("runs.db")).unwrap();
    let script =
        vec![refund::long_script()[0].clone(), refund::long_script()[0].clone(), ModelReply::text("ok")];
    let mut limits_script = script;
    limits_script[1] = ModelReply::call("x", "lookup_order", r#"{"order":43}"#);
    let outcome = attempt(&reads, &sink, limits_script).await.unwrap();
    assert_eq!(outcome.status(), Status::Completed);
    assert_eq!(reads.commits(), 2, "two reads add no commit of their own");
}

/// Runs the short script to completion in a new file, then damages one stored value with `sql`.
async fn damaged(label: &str, sql: &str) -> (SqliteJournal, std::path::PathBuf) {
    let path = scratch::dir(label).join("runs.db");
    let journal = SqliteJournal::open(&path).unwrap();
    let sink = Arc::new(MemorySink::default());
    let script = vec![refund::short_script()[1].clone()];
    // The run stops when the script runs out: the refund is recorded, the run stays open.
    let outcome = attempt(&journal, &sink, script).await;
    assert!(matches!(outcome, Err(RunError::Provider(_))), "{outcome:?}");
    assert_eq!(sink.count("refund"), 1);
    Connection::open(&path).unwrap().execute_batch(sql).unwrap();
    (journal, path)
}

#[tokio::test]
async fn stored_values_that_do_not_decode_are_typed_errors_and_run_nothing() {
    let cases = [
        ("ordinal", "UPDATE proposals SET ordinal = 5000000000"),
        ("effect", "UPDATE proposals SET effect = 'teleport'"),
        ("reply", "UPDATE replies SET reply = '{\"content\":'"),
        ("ledger", "UPDATE runs SET ledger = '[]'"),
        ("state", "UPDATE runs SET state = 'finished:Maybe'"),
        ("event", "UPDATE events SET kind = 'Nope' WHERE seq = 1"),
        ("orphan start", "DELETE FROM decisions"),
        ("flag", "UPDATE calls SET is_error = 7"),
        ("epoch", "UPDATE runs SET epoch = -1"),
    ];
    for (label, sql) in cases {
        let (journal, _) = damaged("sqlite-damaged", sql).await;
        let inspected = journal::inspect(&journal, &run_id()).await;
        assert!(matches!(inspected, Err(JournalError::Corrupt(_))), "{label}: {inspected:?}");
        let sink = Arc::new(MemorySink::default());
        let resumed = attempt(&journal, &sink, refund::short_script()).await;
        assert!(matches!(resumed, Err(RunError::Journal(JournalError::Corrupt(_)))), "{label}: {resumed:?}");
        assert_eq!(sink.count("refund"), 0, "{label}: a corrupt journal runs no effect");
    }
}

#[tokio::test]
async fn a_truncated_file_is_a_typed_error_or_a_consistent_journal_never_a_panic_or_a_second_effect() {
    let (journal, path) = damaged("sqlite-truncated", "PRAGMA wal_checkpoint(TRUNCATE);").await;
    drop(journal);
    let whole = std::fs::read(&path).unwrap();
    let wal = path.with_extension("db-wal");
    for length in (0..whole.len()).step_by(512).chain([1, 99, 100, 101, whole.len() - 1]) {
        let _ = std::fs::remove_file(&wal);
        std::fs::write(&path, &whole[..length]).unwrap();
        let sink = Arc::new(MemorySink::default());
        match SqliteJournal::open(&path) {
            Err(JournalError::Corrupt(_) | JournalError::Storage(_)) => {}
            Err(other) => panic!("truncated at {length}: unexpected {other:?}"),
            Ok(journal) => {
                let resumed = attempt(&journal, &sink, refund::short_script()).await;
                // A file cut before the run's pages may hold no run at all: that is a new run,
                // whose refund runs. Otherwise the recorded refund never runs again.
                let fresh_run = journal::inspect(&journal, &run_id()).await.is_ok_and(|r| r.attempts() == 1);
                if !fresh_run {
                    assert_eq!(sink.count("refund"), 0, "truncated at {length}: {resumed:?}");
                }
            }
        }
    }
}

#[tokio::test]
async fn an_event_sequence_at_its_limit_is_a_typed_error_not_an_overflow() {
    let (journal, _) =
        damaged("sqlite-seq", "UPDATE events SET seq = 9223372036854775807 WHERE seq = 1").await;
    let sink = Arc::new(MemorySink::default());
    let resumed = attempt(&journal, &sink, refund::short_script()).await;
    assert!(matches!(resumed, Err(RunError::Journal(JournalError::Corrupt(_)))), "{resumed:?}");
    assert_eq!(sink.count("refund"), 0);
}

#[test]
fn a_file_that_cannot_be_opened_keeps_sqlites_error_as_its_source() {
    let dir = scratch::dir("sqlite-chain");
    let missing = dir.join("no-such-folder").join("runs.db");
    let Err(error) = SqliteJournal::open(&missing) else {
        panic!("a file in a missing folder cannot be created")
    };
    assert!(matches!(error, JournalError::Storage(_)), "{error:?}");
    let levels =
        loopbound_testkit::chain::assert_chain(&error, "Error code 14: unable to open database file");
    assert_eq!(levels[0], "journal storage failed: SQLite refused the operation");
    assert!(levels[1].starts_with("unable to open database file"), "{levels:?}");
}
