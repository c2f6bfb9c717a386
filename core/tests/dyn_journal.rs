//! A journaled run through a journal held as `dyn` (`Arc<dyn DynJournal>`): the boxed form
//! forwards every call, so the run, its approval and its resume go as they do on the journal
//! itself.

#![cfg(feature = "journal")]

use std::sync::{Arc, Mutex};

use loopbound::journal::{self, DynJournal, Journal, MemoryJournal, RunId, RunQuery, RunState};
use loopbound::tool::Policy;
use loopbound::{Limits, Outcome, RunError, Runner, Scope, Status};
use loopbound_test::refund::{self, EffectSink, MemorySink};

fn run_id() -> RunId {
    RunId::new("refund-42").unwrap()
}

/// One attempt of the refund task, asking before it refunds, with a model that counts the steps
/// it serves in `asked`.
async fn attempt(
    journal: &impl Journal,
    sink: &Arc<MemorySink>,
    asked: &Arc<Mutex<Vec<usize>>>,
) -> Result<Outcome, RunError> {
    let tools = refund::tools(Arc::clone(sink) as Arc<dyn EffectSink>, Policy::Ask);
    let log = Arc::clone(asked);
    let model = refund::model(refund::short_script(), move |step| log.lock().unwrap().push(step));
    let runtime = Runner::new(&tools.set, model);
    let scope = Scope::builder().grants(refund::CAPABILITIES).limits(Limits::default()).build().unwrap();
    let mut conversation = refund::conversation();
    runtime.run_journaled(journal, &run_id(), &scope, &mut conversation, |_| true).await
}

#[tokio::test]
async fn a_run_through_a_dyn_journal_is_approved_resumed_and_refunds_once() {
    let memory = Arc::new(MemoryJournal::default());
    let held: Arc<dyn DynJournal> = Arc::clone(&memory) as Arc<dyn DynJournal>;
    let sink = Arc::new(MemorySink::default());
    let asked = Arc::new(Mutex::new(Vec::new()));

    let first = attempt(&held, &sink, &asked).await.unwrap();
    assert_eq!(first.status(), Status::AwaitingApproval);
    assert_eq!(first.operation(), Some("refund-42/op/2"));
    assert_eq!(sink.count("refund"), 0, "nothing ran before the decision");
    assert_eq!(memory.commits(), 2, "the commits reached the journal inside the box");

    let listed = journal::list(&held, &RunQuery::default()).await.unwrap();
    let ids: Vec<&str> = listed.runs().iter().map(|summary| summary.run().as_str()).collect();
    assert_eq!(ids, ["refund-42"]);

    let proposal = first.pending().expect("the outcome hands out its proposal").clone();
    assert_eq!(journal::approve(&held, &proposal, "alice").await.unwrap(), proposal);

    let second = attempt(&held, &sink, &asked).await.unwrap();
    assert_eq!(second.status(), Status::Completed);
    assert_eq!(sink.count("refund"), 1);
    assert_eq!(*asked.lock().unwrap(), [1, 2, 3], "replies 1 and 2 were replayed, not asked again");
    let record = journal::inspect(&memory, &run_id()).await.unwrap();
    assert_eq!(record.state(), RunState::Finished(Status::Completed));
    assert_eq!(record.attempts(), 2);
}

#[test]
fn a_dyn_journal_forwards_the_shared_watchers_and_the_lease() {
    let memory = MemoryJournal::default();
    let held: Box<dyn DynJournal> = Box::new(memory.clone());
    assert_eq!(Journal::lease(&held), Journal::lease(&memory));
    assert!(Journal::cancel_watch(&held).is_some(), "the memory journal's watcher, through the box");
    assert!(Journal::live_streams(&held).is_some(), "the memory journal's live streams, through the box");
}
