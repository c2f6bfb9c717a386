//! A journal written by an earlier version opens, lists and resumes to the right outcome: what a
//! journal stores is a promise to every later version, not the current code's shape.
//!
//! `tests/fixtures/journal-2026-12-06.db` was written once, by the `main` of 2026-12-06 (schema
//! version 5), with [`write_fixture`] and committed; it is never rewritten. It holds two runs of
//! the refund task: `refund-done`, completed under a token budget (its spend, replies and effects
//! recorded), and `refund-waiting`, stopped awaiting the approval of its refund. A later version
//! must open it (migrating it if its schema moved on), list both runs as they were, refuse a new
//! attempt of the completed one (nothing asked, nothing run), and take the waiting one from its
//! approval to its end, replaying its recorded replies and running the refund once.
//!
//! To write a fixture of a new schema version beside this one (never over it):
//! `LOOPBOUND_WRITE_FIXTURE=path/to/new.db cargo test -p loopbound-sqlite --test upgrade`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use loopbound::journal::{self, JournalError, RunId, RunQuery, RunState};
use loopbound::tool::Policy;
use loopbound::transport::{ModelReply, Usage};
use loopbound::{Limits, Outcome, RunError, Runner, Scope, Status};
use loopbound_sqlite::SqliteJournal;
use loopbound_sqlite::Synchronous;
use loopbound_testkit::refund::{self, EffectSink, MemorySink};
use loopbound_testkit::{backend, journal_fixture, scratch};

const FIXTURE: &str = "tests/fixtures/journal-2026-12-06.db";

fn done() -> RunId {
    RunId::new("refund-done").unwrap()
}

fn waiting() -> RunId {
    RunId::new("refund-waiting").unwrap()
}

/// One attempt of the refund task on `run`: fresh tools over `sink`, a scripted model that
/// logs the steps it serves in `asked`.
async fn attempt(
    journal: &SqliteJournal,
    run: &RunId,
    sink: &Arc<MemorySink>,
    policy: Policy,
    script: Vec<ModelReply>,
    limits: Limits,
    asked: &Arc<Mutex<Vec<usize>>>,
) -> Result<Outcome, RunError> {
    let tools = refund::tools(Arc::clone(sink) as Arc<dyn EffectSink>, policy);
    let log = Arc::clone(asked);
    let model = refund::model(script, move |step| log.lock().unwrap().push(step));
    let runtime = Runner::new(&tools.set, model).options(refund::metered_options());
    let scope = Scope::builder().grants(refund::CAPABILITIES).limits(limits).build().unwrap();
    runtime.run_journaled(journal, run, &scope, &mut refund::conversation(), |_| true).await
}

/// Writes the fixture's two runs into a new journal at `path` with this version's code.
async fn write_fixture(path: &Path) {
    let journal = SqliteJournal::open(path).unwrap();
    let sink = Arc::new(MemorySink::default());
    let asked = Arc::new(Mutex::new(Vec::new()));
    let metered = refund::metered_limits();
    let script = refund::metered_script();
    let completed = attempt(&journal, &done(), &sink, Policy::Allow, script, metered, &asked).await.unwrap();
    assert_eq!(completed.status(), Status::Completed);
    let script = refund::short_script();
    let stopped =
        attempt(&journal, &waiting(), &sink, Policy::Ask, script, Limits::default(), &asked).await.unwrap();
    assert_eq!(stopped.status(), Status::AwaitingApproval);
    drop(journal);
}

/// A copy of the committed fixture in a scratch folder (a test never writes the original).
fn copy_of_fixture() -> PathBuf {
    let path = scratch::dir("sqlite-upgrade").join("runs.db");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE);
    std::fs::copy(&fixture, &path).unwrap_or_else(|error| panic!("{}: {error}", fixture.display()));
    path
}

#[tokio::test]
async fn a_journal_written_on_2026_12_06_opens_lists_and_resumes_to_the_right_outcome() {
    if let Ok(target) = std::env::var("LOOPBOUND_WRITE_FIXTURE") {
        assert!(!Path::new(&target).exists(), "{target} exists: a fixture is written once, never over");
        write_fixture(Path::new(&target)).await;
    }
    let journal = SqliteJournal::open(copy_of_fixture()).unwrap();

    let page = journal::list(&journal, &RunQuery::new()).await.unwrap();
    let listed: Vec<(&str, RunState, u32)> =
        page.runs().iter().map(|run| (run.run().as_str(), run.state(), run.attempts())).collect();
    assert_eq!(
        listed,
        [
            ("refund-done", RunState::Finished(Status::Completed), 1),
            ("refund-waiting", RunState::AwaitingApproval(2), 1)
        ]
    );
    let record = journal::inspect(&journal, &done()).await.unwrap();
    assert_eq!((record.replies(), record.model_calls()), (5, 5));
    assert_eq!(record.spend().settled, Usage::new(5 * 20, 5 * 10));

    // The completed run stays ended: another attempt is refused with its status, before the
    // model is asked or anything runs.
    let sink = Arc::new(MemorySink::default());
    let asked = Arc::new(Mutex::new(Vec::new()));
    let (metered, script) = (refund::metered_limits(), refund::metered_script());
    let again = attempt(&journal, &done(), &sink, Policy::Allow, script, metered, &asked).await;
    assert_eq!(again.err(), Some(RunError::Journal(JournalError::Finished(Status::Completed))));
    assert_eq!((sink.count("refund"), asked.lock().unwrap().len()), (0, 0));

    // The waiting run's proposal, approved now, runs once and the run ends.
    let record = journal::inspect(&journal, &waiting()).await.unwrap();
    let proposal = record.operation(2).map(|operation| operation.proposal().clone()).expect("its proposal");
    assert_eq!(
        (proposal.tool(), proposal.capability(), proposal.arguments()),
        ("refund", "payments.refund", r#"{"amount_cents":1500,"order":42}"#)
    );
    journal::approve(&journal, &proposal, "alice").await.unwrap();
    let script = refund::short_script();
    let resumed =
        attempt(&journal, &waiting(), &sink, Policy::Ask, script, Limits::default(), &asked).await.unwrap();
    assert_eq!(resumed.status(), Status::Completed);
    assert_eq!(sink.count("refund"), 1);
    assert_eq!(*asked.lock().unwrap(), [3], "replies 1 and 2 were replayed from the old journal");
}

/// The journal fixture of `testkit/fixtures/journal-2026-12-06/` (see
/// `loopbound_testkit::journal_fixture`): six runs, each left in a state a resume must handle,
/// open, list, read and resume to the right outcome.
#[tokio::test]
async fn the_2026_12_06_fixture_opens_lists_reads_and_resumes_every_run_to_its_outcome() {
    let path = scratch::dir("sqlite-fixture").join("journal.db");
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testkit/fixtures/journal-2026-12-06/journal.db");
    std::fs::copy(&fixture, &path).unwrap_or_else(|error| panic!("{}: {error}", fixture.display()));
    journal_fixture::check(&backend::sqlite_place(&path, Synchronous::Full)).await;
}
