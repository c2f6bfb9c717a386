//! The journal on PostgreSQL, beyond the conformance suite (which `testkit/tests/conformance.rs`
//! runs on every backend): what leases add when several workers share one database, and a
//! server that goes down under a journal.

use std::sync::Arc;
use std::time::Duration;

use loopbound::journal::backend::{Batch, Entry, Fence};
use loopbound::journal::{self, Journal, JournalError, OperationId, RunId, RunState};
use loopbound::tool::Policy;
use loopbound::{Outcome, RunError, Runner, Scope, Status};
use loopbound_postgres::{PostgresJournal, Store};
use loopbound_testkit::conformance::fresh_row;
use loopbound_testkit::postgres::{Cluster, Durability};
use loopbound_testkit::refund::{self, EffectSink, MemorySink};

use crate::{PASSWORD, assert_no_password, config, fresh, worker};

fn run() -> RunId {
    RunId::new("order-42").expect("a valid run id")
}

fn journal_of(store: &Store, name: &str) -> PostgresJournal {
    PostgresJournal::new(store.clone()).expect("the default lease is valid").with_worker(worker(name))
}

/// One attempt of the refund task (short script) on `journal`, effects counted in `sink`.
async fn attempt(
    journal: &PostgresJournal,
    sink: &Arc<MemorySink>,
    policy: Policy,
) -> Result<Outcome, RunError> {
    let tools = refund::tools(Arc::clone(sink) as Arc<dyn EffectSink>, policy);
    let scope = Scope::builder().grants(refund::CAPABILITIES).build().expect("valid limits");
    let runtime = Runner::new(&tools.set, refund::model(refund::short_script(), |_| {}));
    runtime.run_journaled(journal, &run(), &scope, &mut refund::conversation(), |_| true).await
}

#[tokio::test]
async fn another_workers_live_lease_is_refused_and_nothing_runs() {
    let Some((store, _database)) = fresh("journal_held").await else { return };
    let holder = journal_of(&store, "host-a:1");
    let taken = holder.acquire(&run(), fresh_row()).await.expect("the run is free");
    assert_eq!(taken.run.epoch, 1);

    let sink = Arc::new(MemorySink::default());
    let refused = attempt(&journal_of(&store, "host-b:2"), &sink, Policy::Allow).await.unwrap_err();
    let RunError::Journal(JournalError::LeaseHeld { holder: named, remaining }) = &refused else {
        panic!("expected LeaseHeld, got {refused:?}");
    };
    assert_eq!(named, "host-a:1");
    assert!(remaining > &Duration::from_secs(20) && remaining <= &Duration::from_secs(30), "{remaining:?}");
    assert_eq!(
        refused.to_string(),
        format!(
            "another attempt holds this run: held by host-a:1 for {:.1} s more; nothing ran",
            remaining.as_secs_f64()
        )
    );
    assert!(sink.applied().is_empty(), "nothing ran");
    let stored = holder.load(&run()).await.unwrap().expect("the run exists");
    assert_eq!((stored.run.epoch, stored.run.attempts), (1, 1), "the refusal wrote nothing");
    assert!(stored.events.is_empty() && stored.replies.is_empty());
}

#[tokio::test]
async fn an_attempt_that_stops_releases_the_lease_and_another_worker_resumes_it() {
    let Some((store, _database)) = fresh("journal_handover").await else { return };
    let sink = Arc::new(MemorySink::default());
    let first = attempt(&journal_of(&store, "host-a:1"), &sink, Policy::Ask).await.expect("a first attempt");
    assert_eq!(first.status(), Status::AwaitingApproval);
    let state = store.lease_state(run().as_str()).await.unwrap().expect("leased once");
    assert_eq!((state.epoch, state.holder, state.live), (1, None, false), "the stop released the lease");

    let other = journal_of(&store, "host-b:2");
    let operation = OperationId::parse(first.operation().expect("names it")).expect("an operation id");
    let record = journal::inspect(&other, &run()).await.expect("inspect");
    assert_eq!(record.state(), RunState::AwaitingApproval(2));
    let digest = record.operation(2).expect("operation 2").proposal().digest();
    journal::approve(&other, journal::ProposalKey::new(&operation, &digest), "alice").await.expect("approve");
    let second = attempt(&other, &sink, Policy::Ask).await.expect("another worker resumes at once");
    assert_eq!(second.status(), Status::Completed);
    assert_eq!(sink.count("refund"), 1, "the refund ran once across both workers");
    let state = store.lease_state(run().as_str()).await.unwrap().expect("leased twice");
    assert_eq!((state.epoch, state.attempts, state.holder), (2, 2, None));
    let again = attempt(&journal_of(&store, "host-a:1"), &sink, Policy::Ask).await.unwrap_err();
    assert_eq!(again, RunError::Journal(JournalError::Finished(Status::Completed)));
}

#[tokio::test]
async fn an_expired_lease_is_taken_over_and_the_old_attempt_is_fenced_out() {
    let Some((store, _database)) = fresh("journal_expired").await else { return };
    let slow = journal_of(&store, "slow").with_lease(Duration::from_millis(300)).expect("a valid lease");
    let taken = slow.acquire(&run(), fresh_row()).await.expect("the run is free");
    let mut batch = Batch::default();
    batch.entries.push(Entry::Ledger("before".to_owned()));
    slow.commit(&run(), Fence::Epoch(taken.run.epoch), batch.clone()).await.expect("the holder writes");

    tokio::time::sleep(Duration::from_millis(500)).await;
    let taker = journal_of(&store, "taker");
    let retaken = taker.acquire(&run(), fresh_row()).await.expect("an expired lease is taken over");
    assert_eq!((retaken.run.epoch, retaken.run.attempts), (2, 2));

    let mut late = Batch::default();
    late.entries.push(Entry::Ledger("stale".to_owned()));
    let refused = slow.commit(&run(), Fence::Epoch(1), late).await;
    assert_eq!(refused, Err(JournalError::LeaseLost));
    assert_eq!(slow.load(&run()).await.unwrap().expect("exists").run.ledger, "before", "nothing written");
    let refused = slow.acquire(&run(), fresh_row()).await.unwrap_err();
    assert!(
        matches!(refused, JournalError::LeaseHeld { ref holder, .. } if holder == "taker"),
        "{refused:?}"
    );
}

#[tokio::test]
async fn a_journal_whose_server_goes_down_gets_storage_errors_without_the_password_then_recovers() {
    let Some(mut cluster) = Cluster::start(Durability::Durable) else { return };
    let database = cluster.create_database("journal_down");
    cluster.create_password_role("journal_user", PASSWORD);
    let _ = cluster.execute(&database.name, "GRANT ALL ON SCHEMA public TO journal_user");
    let url = cluster.url_with_password("journal_user", PASSWORD, &database.name);
    let journal = PostgresJournal::connect(&config(&url))
        .await
        .expect("the login is accepted")
        .with_worker(worker("w1"));
    let sink = Arc::new(MemorySink::default());

    cluster.crash();
    for error in [
        attempt(&journal, &sink, Policy::Allow).await.unwrap_err(),
        RunError::Journal(journal.load(&run()).await.unwrap_err()),
    ] {
        assert!(matches!(error, RunError::Journal(JournalError::Storage(_))), "{error:?}");
        assert_no_password(&format!("{error} {error:?}"));
    }
    assert!(sink.applied().is_empty(), "nothing ran while the server was down");

    cluster.recover();
    let outcome = attempt(&journal, &sink, Policy::Allow).await.expect("the journal works again");
    assert_eq!(outcome.status(), Status::Completed);
    assert_eq!(sink.count("refund"), 1);
}
