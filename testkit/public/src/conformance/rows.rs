//! Rows: a batch is written whole or not at all, keys once, rows read back in key order.

use loopbound::Status;
use loopbound::journal::backend::{
    CallRow, DecisionRow, Entry, EventRow, Fence, LabelRow, ProposalRow, ReconciliationRow, ReplyRow,
    StartedRow,
};
use loopbound::journal::{Journal, JournalError, RunState};

use super::{Backend, batch, ending, fresh_row, one, run};

pub(crate) async fn check_all<B: Backend>(backend: &B) {
    a_new_run_keeps_its_row_and_a_later_attempt_changes_only_epoch_and_attempts(&one(backend).await).await;
    a_batch_is_written_whole_or_not_at_all(&one(backend).await).await;
    keys_are_written_once(&one(backend).await).await;
    rows_read_back_as_written_in_key_order(&one(backend).await).await;
    a_finished_run_is_not_taken_again(&one(backend).await).await;
    a_batch_expecting_another_state_writes_nothing(&one(backend).await).await;
    unknown_runs_are_none_and_refused(&one(backend).await).await;
}

pub(crate) fn event(kind: &str, count: u32) -> Entry {
    Entry::Event(EventRow {
        kind: kind.to_owned(),
        name: "model".to_owned(),
        count,
        operation: None,
        by: None,
        reason: None,
    })
}

pub(crate) fn reply(ordinal: u32) -> Entry {
    Entry::Reply(ReplyRow {
        ordinal,
        reply: format!(r#"{{"content":"r{ordinal}","tool_calls":[],"usage":null}}"#),
    })
}

async fn a_new_run_keeps_its_row_and_a_later_attempt_changes_only_epoch_and_attempts(journal: &impl Journal) {
    let mut fresh = fresh_row();
    fresh.definition = r#"{"grants":["x"]}"#.to_owned();
    fresh.labels = vec![
        LabelRow { key: "tenant".to_owned(), value: "acme".to_owned() },
        LabelRow { key: "user".to_owned(), value: "u-7".to_owned() },
    ];
    let first = journal.acquire(&run(), fresh.clone()).await.expect("acquire a new run");
    assert_eq!((first.run.epoch, first.run.attempts), (1, 1), "a new run starts at epoch 1, attempt 1");
    assert_eq!(first.run, fresh, "a new run keeps its row as given");
    assert!(first.replies.is_empty() && first.events.is_empty(), "a new run has no rows");
    let lease = first.lease.expect("the new attempt holds the lease");
    assert_eq!(lease.holder, "attempt-a", "the lease names its holder");
    assert!(lease.is_live(), "a granted lease is live");
    journal.commit(&run(), Fence::Epoch(1), ending(RunState::Ambiguous(1))).await.expect("stop ambiguous");
    let mut other = fresh_row();
    other.conversation = r#"[{"role":"user","content":"other"}]"#.to_owned();
    other.definition = "other".to_owned();
    other.labels = vec![LabelRow { key: "tenant".to_owned(), value: "beta".to_owned() }];
    let second = journal
        .acquire(&run(), other)
        .await
        .expect("the stopping commit released the run for another attempt");
    assert_eq!((second.run.epoch, second.run.attempts), (2, 2), "acquiring again bumps epoch and attempts");
    let mut expected = fresh;
    expected.epoch = 2;
    expected.attempts = 2;
    expected.state = RunState::Ambiguous(1);
    assert_eq!(second.run, expected, "acquiring keeps the state, conversation, definition and labels");
}

async fn a_batch_is_written_whole_or_not_at_all(journal: &impl Journal) {
    journal.acquire(&run(), fresh_row()).await.expect("acquire");
    journal.commit(&run(), Fence::Epoch(1), batch(vec![reply(1)])).await.expect("first reply");
    let clashing = batch(vec![
        reply(2),
        event("ModelCall", 2),
        Entry::State(RunState::Finished(Status::Completed)),
        Entry::Release,
        reply(1),
    ]);
    let refused = journal.commit(&run(), Fence::Epoch(1), clashing).await;
    assert!(
        matches!(refused, Err(JournalError::Conflict(_))),
        "a key written twice is a conflict: {refused:?}"
    );
    let stored = journal.load(&run()).await.expect("load").expect("the run exists");
    assert_eq!(stored.replies.len(), 1, "nothing of a refused batch is written");
    assert!(stored.events.is_empty(), "not even its events");
    assert_eq!(stored.run.state, RunState::Open, "nor its state");
    assert!(stored.lease.is_some_and(|lease| lease.is_live()), "nor its release");
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
        expires: Some(1_796_119_200_000),
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
        .commit(&run(), Fence::Epoch(1), batch(vec![result(0), Entry::Release]))
        .await
        .expect("one result");
    journal
        .commit(&run(), Fence::Host, batch(vec![reconciliation.clone()]))
        .await
        .expect("one reconciliation");
    let stored = journal.load(&run()).await.expect("load").expect("the run exists");
    assert_eq!(
        stored.proposals.first().map(|row| Entry::Proposal(row.clone())).as_ref(),
        Some(&proposal),
        "with its expiry"
    );
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
                Entry::State(RunState::AwaitingApproval(7)),
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
    assert_eq!((stored.run.ledger.as_str(), stored.run.state), ("L", RunState::AwaitingApproval(7)));
    let calls: Vec<(u32, u32, bool, &str)> =
        stored.calls.iter().map(|c| (c.reply, c.index, c.is_error, c.text.as_str())).collect();
    assert_eq!(
        calls,
        [(1, 0, false, ""), (2, 3, true, "é\n\"x\"\u{0}")],
        "calls come back by (reply, index), texts exact (NUL included)"
    );
    let finished = Status::ALL.iter().map(|status| RunState::Finished(*status));
    for state in [RunState::Ambiguous(2)].into_iter().chain(finished).chain([RunState::Open]) {
        journal.commit(&run(), Fence::Epoch(1), batch(vec![Entry::State(state)])).await.expect("a state");
        let stored = journal.load(&run()).await.expect("load").expect("the run exists");
        assert_eq!(stored.run.state, state, "every state reads back as written");
    }
}

async fn a_finished_run_is_not_taken_again(journal: &impl Journal) {
    journal.acquire(&run(), fresh_row()).await.expect("acquire");
    journal
        .commit(&run(), Fence::Epoch(1), ending(RunState::Finished(Status::Completed)))
        .await
        .expect("finish");
    let again = journal.acquire(&run(), fresh_row()).await.expect("acquire a finished run");
    assert_eq!((again.run.epoch, again.run.attempts), (1, 1), "a finished run keeps its epoch and attempts");
    assert_eq!(again.run.state, RunState::Finished(Status::Completed));
    assert_eq!(again.lease, None, "and gets no lease");
}

async fn a_batch_expecting_another_state_writes_nothing(journal: &impl Journal) {
    journal.acquire(&run(), fresh_row()).await.expect("acquire");
    let closed = EventRow {
        kind: "Closed".to_owned(),
        name: "run".to_owned(),
        count: 1,
        operation: None,
        by: Some("alice".to_owned()),
        reason: Some("é \"quoted\" ; DROP TABLE".to_owned()),
    };
    let expecting = |state| {
        batch(vec![
            Entry::ExpectState(state),
            reply(1),
            Entry::Event(closed.clone()),
            Entry::State(RunState::Finished(Status::Closed)),
        ])
    };
    let refused = journal.commit(&run(), Fence::Epoch(1), expecting(RunState::AwaitingApproval(1))).await;
    assert!(matches!(refused, Err(JournalError::Conflict(_))), "another state is a conflict: {refused:?}");
    let stored = journal.load(&run()).await.expect("load").expect("the run exists");
    assert_eq!(
        (stored.replies.len(), stored.events.len(), stored.run.state),
        (0, 0, RunState::Open),
        "nothing of the refused batch is written"
    );
    journal.commit(&run(), Fence::Epoch(1), expecting(RunState::Open)).await.expect("the state expected");
    let stored = journal.load(&run()).await.expect("load").expect("the run exists");
    assert_eq!(stored.run.state, RunState::Finished(Status::Closed));
    assert_eq!(stored.events, [closed], "an event's author and reason read back as written");
}

async fn unknown_runs_are_none_and_refused(journal: &impl Journal) {
    assert_eq!(journal.load(&run()).await, Ok(None), "an unknown run loads as None");
    let refused = journal.commit(&run(), Fence::Host, batch(vec![reply(1)])).await;
    assert_eq!(refused, Err(JournalError::UnknownRun), "a write to an unknown run is refused");
    assert_eq!(journal.renew(&run(), 1).await, Err(JournalError::UnknownRun), "so is a renewal");
}
