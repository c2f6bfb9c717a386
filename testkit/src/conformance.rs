//! The journal conformance suite: what every [`Journal`] backend must do, checked the same way
//! on each (the in-memory reference, SQLite, PostgreSQL).
//!
//! A backend's test calls [`check_all`] with a factory of fresh, empty journals; each check
//! panics with a message naming the rule it found broken.
//!
//! # Invariants
//!
//! - The checks use the trait only, plus one end-to-end journaled run of the refund task.

use std::future::Future;
use std::sync::Arc;

use loopbound::journal::{
    self, Batch, CallRow, DecisionRow, Entry, EventRow, Fence, Journal, JournalError, OperationId,
    ProposalRow, ReconciliationRow, ReplyRow, RunId, RunRow, RunState, StartedRow,
};
use loopbound::tool::Policy;
use loopbound::{Runtime, Scope, Status};

use crate::refund::{self, EffectSink, MemorySink};

/// Runs every check, each on a fresh journal from `fresh`.
pub async fn check_all<J, F, Fut>(fresh: F)
where
    J: Journal,
    F: Fn() -> Fut,
    Fut: Future<Output = J>,
{
    acquire_creates_then_bumps_the_epoch(&fresh().await).await;
    an_older_epoch_is_fenced_out_and_writes_nothing(&fresh().await).await;
    a_batch_is_written_whole_or_not_at_all(&fresh().await).await;
    keys_are_written_once(&fresh().await).await;
    rows_read_back_as_written_in_key_order(&fresh().await).await;
    a_finished_run_is_not_taken_again(&fresh().await).await;
    unknown_runs_are_none_and_refused(&fresh().await).await;
    an_approved_refund_runs_once_end_to_end(&fresh().await).await;
}

fn run() -> RunId {
    RunId::new("conformance-1").unwrap_or_else(|error| panic!("a valid run id: {error}"))
}

fn fresh_row() -> RunRow {
    RunRow {
        epoch: 1,
        attempts: 1,
        conversation: "[]".to_owned(),
        ledger: r#"{"model_calls":0,"tool_calls":0,"middleware":0,"repetitions":[]}"#.to_owned(),
        state: "open".to_owned(),
    }
}

fn batch(entries: Vec<Entry>) -> Batch {
    Batch { entries }
}

fn event(kind: &str, count: u32) -> Entry {
    Entry::Event(EventRow {
        kind: kind.to_owned(),
        name: "model".to_owned(),
        count,
        operation: None,
        by: None,
    })
}

fn reply(ordinal: u32) -> Entry {
    Entry::Reply(ReplyRow {
        ordinal,
        reply: format!(r#"{{"content":"r{ordinal}","tool_calls":[],"usage":null}}"#),
    })
}

async fn acquire_creates_then_bumps_the_epoch(journal: &impl Journal) {
    let first = journal.acquire(&run(), fresh_row()).await.expect("acquire a new run");
    assert_eq!((first.run.epoch, first.run.attempts), (1, 1), "a new run starts at epoch 1, attempt 1");
    assert_eq!(first.run.conversation, "[]", "a new run keeps its conversation");
    assert!(first.replies.is_empty() && first.events.is_empty(), "a new run has no rows");
    journal
        .commit(&run(), Fence::Epoch(1), batch(vec![Entry::State("ambiguous:1".to_owned())]))
        .await
        .expect("a state");
    let mut other = fresh_row();
    other.conversation = r#"[{"role":"user","content":"other"}]"#.to_owned();
    let second = journal.acquire(&run(), other).await.expect("acquire again");
    assert_eq!((second.run.epoch, second.run.attempts), (2, 2), "acquiring again bumps epoch and attempts");
    assert_eq!(second.run.conversation, "[]", "acquiring an existing run keeps its conversation");
    assert_eq!(second.run.state, "open", "an attempt in flight leaves the run open");
}

async fn an_older_epoch_is_fenced_out_and_writes_nothing(journal: &impl Journal) {
    journal.acquire(&run(), fresh_row()).await.expect("acquire");
    journal.acquire(&run(), fresh_row()).await.expect("take over");
    let refused = journal.commit(&run(), Fence::Epoch(1), batch(vec![reply(1), event("ModelCall", 1)])).await;
    assert_eq!(refused, Err(JournalError::LeaseLost), "a write under a taken-over epoch is refused");
    let stored = journal.load(&run()).await.expect("load").expect("the run exists");
    assert!(stored.replies.is_empty() && stored.events.is_empty(), "a fenced write leaves nothing");
    journal.commit(&run(), Fence::Epoch(2), batch(vec![reply(1)])).await.expect("the newest epoch writes");
    journal.commit(&run(), Fence::Host, batch(vec![event("ModelCall", 1)])).await.expect("the host writes");
}

async fn a_batch_is_written_whole_or_not_at_all(journal: &impl Journal) {
    journal.acquire(&run(), fresh_row()).await.expect("acquire");
    journal.commit(&run(), Fence::Epoch(1), batch(vec![reply(1)])).await.expect("first reply");
    let clashing = batch(vec![reply(2), event("ModelCall", 2), Entry::State("open".to_owned()), reply(1)]);
    let refused = journal.commit(&run(), Fence::Epoch(1), clashing).await;
    assert!(
        matches!(refused, Err(JournalError::Conflict(_))),
        "a key written twice is a conflict: {refused:?}"
    );
    let stored = journal.load(&run()).await.expect("load").expect("the run exists");
    assert_eq!(stored.replies.len(), 1, "nothing of a refused batch is written");
    assert!(stored.events.is_empty(), "not even its events");
}

async fn keys_are_written_once(journal: &impl Journal) {
    journal.acquire(&run(), fresh_row()).await.expect("acquire");
    let proposal = Entry::Proposal(ProposalRow {
        ordinal: 1,
        reply: 1,
        index: 0,
        tool: "refund".to_owned(),
        capability: "payments.refund".to_owned(),
        effect: "effect".to_owned(),
        arguments: "{}".to_owned(),
    });
    let decision = |by: &str| {
        Entry::Decision(DecisionRow { ordinal: 1, verdict: "allow".to_owned(), by: by.to_owned() })
    };
    let started = Entry::Started(StartedRow { ordinal: 1, start: 1 });
    let result = |index| {
        Entry::Call(CallRow { reply: 1, index, operation: Some(1), is_error: false, text: "ok".to_owned() })
    };
    let reconciliation = Entry::Reconciliation(ReconciliationRow {
        ordinal: 1,
        start: 1,
        resolution: "not_run".to_owned(),
        result: None,
        by: "ops".to_owned(),
    });
    journal
        .commit(
            &run(),
            Fence::Epoch(1),
            batch(vec![reply(1), proposal.clone(), decision("policy"), started.clone()]),
        )
        .await
        .expect("the first of each");
    journal
        .commit(&run(), Fence::Host, batch(vec![reconciliation.clone()]))
        .await
        .expect("one reconciliation");
    journal.commit(&run(), Fence::Epoch(1), batch(vec![result(0)])).await.expect("one result");
    for (entry, what) in [
        (proposal, "a second proposal"),
        (decision("approver:bob"), "a second decision"),
        (started, "the same start twice"),
        (reconciliation, "a second reconciliation of one start"),
        (result(1), "a second result for one operation"),
    ] {
        let refused = journal.commit(&run(), Fence::Host, batch(vec![entry])).await;
        assert!(matches!(refused, Err(JournalError::Conflict(_))), "{what} must be a conflict: {refused:?}");
    }
}

async fn rows_read_back_as_written_in_key_order(journal: &impl Journal) {
    journal.acquire(&run(), fresh_row()).await.expect("acquire");
    let events: Vec<Entry> = (1..=3).map(|n| event("ModelCall", n)).collect();
    journal.commit(&run(), Fence::Epoch(1), batch(vec![reply(2), events[0].clone()])).await.expect("commit");
    journal.commit(&run(), Fence::Epoch(1), batch(vec![reply(1), events[1].clone()])).await.expect("commit");
    journal
        .commit(
            &run(),
            Fence::Epoch(1),
            batch(vec![
                events[2].clone(),
                Entry::Ledger("L".to_owned()),
                Entry::State("ambiguous:1".to_owned()),
                Entry::Call(CallRow {
                    reply: 2,
                    index: 3,
                    operation: None,
                    is_error: true,
                    text: "é\n\"x\"\u{0}".to_owned(),
                }),
                Entry::Call(CallRow {
                    reply: 1,
                    index: 0,
                    operation: None,
                    is_error: false,
                    text: String::new(),
                }),
            ]),
        )
        .await
        .expect("commit");
    let stored = journal.load(&run()).await.expect("load").expect("the run exists");
    let ordinals: Vec<u32> = stored.replies.iter().map(|r| r.ordinal).collect();
    assert_eq!(ordinals, [1, 2], "replies come back by ordinal");
    let counts: Vec<u32> = stored.events.iter().map(|e| e.count).collect();
    assert_eq!(counts, [1, 2, 3], "events come back in append order");
    assert_eq!((stored.run.ledger.as_str(), stored.run.state.as_str()), ("L", "ambiguous:1"));
    let calls: Vec<(u32, u32, bool, &str)> =
        stored.calls.iter().map(|c| (c.reply, c.index, c.is_error, c.text.as_str())).collect();
    assert_eq!(
        calls,
        [(1, 0, false, ""), (2, 3, true, "é\n\"x\"\u{0}")],
        "calls come back by (reply, index), texts exact (NUL included)"
    );
}

async fn a_finished_run_is_not_taken_again(journal: &impl Journal) {
    journal.acquire(&run(), fresh_row()).await.expect("acquire");
    journal
        .commit(&run(), Fence::Epoch(1), batch(vec![Entry::State("finished:Completed".to_owned())]))
        .await
        .expect("finish");
    let again = journal.acquire(&run(), fresh_row()).await.expect("acquire a finished run");
    assert_eq!((again.run.epoch, again.run.attempts), (1, 1), "a finished run keeps its epoch and attempts");
}

async fn unknown_runs_are_none_and_refused(journal: &impl Journal) {
    assert_eq!(journal.load(&run()).await, Ok(None), "an unknown run loads as None");
    let refused = journal.commit(&run(), Fence::Host, batch(vec![reply(1)])).await;
    assert_eq!(refused, Err(JournalError::UnknownRun), "a write to an unknown run is refused");
}

async fn an_approved_refund_runs_once_end_to_end(journal: &impl Journal) {
    let sink = Arc::new(MemorySink::default());
    let attempt = || async {
        let tools = refund::tools(Arc::clone(&sink) as Arc<dyn EffectSink>, Policy::Ask);
        let scope = Scope::builder().grants(refund::CAPABILITIES).build().expect("valid limits");
        let runtime = Runtime::harness(&tools.set, refund::model(refund::short_script(), |_| {}));
        runtime.run_journaled(journal, &run(), &scope, &mut refund::conversation(), |()| true).await
    };
    let first = attempt().await.expect("a first attempt");
    assert_eq!(first.status(), Status::AwaitingApproval);
    let operation =
        OperationId::parse(first.operation().expect("names its operation")).expect("an operation id");
    let record = journal::inspect(journal, &run()).await.expect("inspect");
    assert_eq!(record.state(), RunState::AwaitingApproval(2));
    let digest = record.operation(2).expect("operation 2").proposal().digest();
    journal::approve(journal, &operation, &digest, "alice").await.expect("approve");
    let second = attempt().await.expect("the resumed attempt");
    assert_eq!(second.status(), Status::Completed, "the approved run completes");
    assert_eq!(sink.count("refund"), 1, "the refund ran exactly once");
    let record = journal::inspect(journal, &run()).await.expect("inspect");
    assert_eq!(record.state(), RunState::Finished(Status::Completed));
    let logged: Vec<String> = record.events().iter().map(ToString::to_string).collect();
    let outcome: Vec<String> = second.events().iter().map(ToString::to_string).collect();
    assert_eq!(logged, outcome, "the journal holds the outcome's audit log");
}
