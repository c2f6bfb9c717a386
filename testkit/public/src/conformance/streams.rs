//! Recorded streams: lines written under their numbers, a number written once, read a page at a
//! time from any position by any journal on the storage; a commit refused writes no line;
//! a journaled run's stream, followed from another process, is exactly what its watchers got,
//! across a suspension and a resume; a follower in the attempt's own process sees a step before
//! it is committed, under the number it is committed with; after an attempt cut before it
//! committed its end, the next attempt numbers its lines past every number the cut one could
//! have shown live, so a reader that reconnects with one gets the next attempt's lines once.

use std::sync::Arc;

use loopbound::journal::backend::{Entry, EventRow, Fence, UpdateRow};
use loopbound::journal::{self, Journal, JournalError};
use loopbound::scripted::{self, Step};
use loopbound::tool::Policy;
use loopbound::transport::ModelReply;
use loopbound::watch::{self, Updates};
use loopbound::{Message, Outcome, RunError, Runner, Scope, Status, ToolSet};

use super::{Backend, LONG, PAST_SHORT, SHORT, batch, fresh_row, pair, run, run_named, two};
use crate::refund::{self, EffectSink, MemorySink};

pub(crate) async fn check_all<B: Backend>(backend: &B) {
    let (a, b) = two(backend, LONG).await;
    Box::pin(lines_are_numbered_in_commit_order_and_read_a_page_at_a_time(&a, &b)).await;
    let (a, _) = two(backend, LONG).await;
    Box::pin(a_refused_commit_writes_no_line(&a)).await;
    let (a, b) = two(backend, LONG).await;
    Box::pin(a_runs_stream_followed_from_another_process_is_what_its_watchers_got(&a, &b)).await;
    let (a, b) = two(backend, LONG).await;
    Box::pin(a_follower_in_the_attempts_process_sees_a_step_before_it_is_committed_under_the_same_number(
        &a, &b,
    ))
    .await;
    let (a, b) = two(backend, LONG).await;
    Box::pin(a_run_that_does_not_record_writes_no_line_and_is_refused_to_a_follower(&a, &b)).await;
    let (a, b) = pair(backend, SHORT, LONG).await;
    Box::pin(a_reader_of_an_attempt_cut_before_its_end_gets_every_line_of_the_next_once(&a, &b)).await;
}

fn line(seq: u64, text: &str) -> Entry {
    Entry::Update(UpdateRow { seq, line: format!(r#"{{"type":"text","reply":1,"text":"{text}"}}"#) })
}

fn numbered(rows: &[UpdateRow]) -> Vec<(u64, String)> {
    rows.iter().map(|row| (row.seq, row.line.clone())).collect()
}

fn expected(lines: &[(u64, &str)]) -> Vec<(u64, String)> {
    lines
        .iter()
        .map(|(seq, text)| (*seq, format!(r#"{{"type":"text","reply":1,"text":"{text}"}}"#)))
        .collect()
}

async fn lines_are_numbered_in_commit_order_and_read_a_page_at_a_time(a: &impl Journal, b: &impl Journal) {
    let granted = a.acquire(&run(), fresh_row()).await.expect("the run is free");
    let epoch = Fence::Epoch(granted.run.epoch);
    let event = Entry::Event(EventRow {
        kind: "ModelCall".to_owned(),
        name: "model".to_owned(),
        count: 1,
        operation: None,
        by: None,
        reason: None,
    });
    a.commit(&run(), epoch, batch(vec![line(1, "a"), event, line(2, "b")])).await.expect("a first commit");
    a.commit(&run(), epoch, batch(vec![line(3, "c")])).await.expect("a second commit");
    let again = a.commit(&run(), epoch, batch(vec![line(3, "c again")])).await;
    assert!(matches!(again, Err(JournalError::Conflict(_))), "a number written twice: {again:?}");
    let all = b.updates(&run(), 0, 10).await.expect("another process reads");
    assert_eq!(numbered(&all), expected(&[(1, "a"), (2, "b"), (3, "c")]), "numbered from 1 in order");
    let page = b.updates(&run(), 1, 1).await.expect("a page");
    assert_eq!(numbered(&page), expected(&[(2, "b")]), "after line 1, one line");
    assert_eq!(b.updates(&run(), 3, 10).await.expect("read"), [], "nothing after the last line");
    assert_eq!(b.updates(&run_named("unknown"), 0, 10).await.expect("read"), [], "an unknown run has none");
    let stored = b.load(&run()).await.expect("load").expect("the run");
    assert_eq!(
        (stored.events.len(), stored.stream),
        (1, 3),
        "a line is not an event; the last line's number"
    );
}

async fn a_refused_commit_writes_no_line(a: &impl Journal) {
    let granted = a.acquire(&run(), fresh_row()).await.expect("the run is free");
    let epoch = granted.run.epoch;
    a.commit(&run(), Fence::Epoch(epoch), batch(vec![line(1, "kept")])).await.expect("a commit");
    let stale = a.commit(&run(), Fence::Epoch(epoch + 1), batch(vec![line(2, "fenced out")])).await;
    assert_eq!(stale, Err(JournalError::LeaseLost), "another epoch's commit is refused");
    let reply = || Entry::Reply(loopbound::journal::backend::ReplyRow { ordinal: 1, reply: "{}".to_owned() });
    a.commit(&run(), Fence::Epoch(epoch), batch(vec![reply()])).await.expect("a reply");
    let conflict = a.commit(&run(), Fence::Epoch(epoch), batch(vec![line(2, "conflicting"), reply()])).await;
    assert!(matches!(conflict, Err(JournalError::Conflict(_))), "a key written twice: {conflict:?}");
    let host = a.commit(&run(), Fence::Host, batch(vec![line(2, "while held")])).await;
    assert!(matches!(host, Err(JournalError::LeaseHeld { .. })), "a host's commit while held: {host:?}");
    let all = a.updates(&run(), 0, 10).await.expect("read");
    assert_eq!(numbered(&all), expected(&[(1, "kept")]), "the refused commits wrote no line");
    assert_eq!(a.load(&run()).await.expect("load").map(|stored| stored.stream), Some(1));
}

/// One attempt of the refund task (short script) on `run`, the refund asking for approval,
/// with a watcher whose updates come back as the JSON a live stream sends.
async fn watched(journal: &impl Journal, sink: &Arc<MemorySink>) -> (Outcome, Vec<String>) {
    let tools = refund::tools(Arc::clone(sink) as Arc<dyn EffectSink>, Policy::Ask).set;
    let (feed, updates) = watch::channel();
    let scope = Scope::builder()
        .grants(refund::CAPABILITIES)
        .watch(feed)
        .record_stream()
        .build()
        .expect("valid limits");
    let runtime = Runner::new(&tools, refund::model(refund::short_script(), |_| {}));
    let outcome = runtime
        .run_journaled(journal, &run(), &scope, &mut refund::conversation(), |ended| {
            ended.has_succeeded("refund")
        })
        .await
        .expect("an attempt");
    drop(scope);
    (outcome, json(updates).await)
}

async fn json(mut updates: Updates) -> Vec<String> {
    let mut lines = Vec::new();
    while let Some(update) = updates.next().await {
        lines.push(serde_json::to_string(&update).expect("an update serialises"));
    }
    lines
}

/// Every line after `after` until the follower ends, with their ids.
async fn followed(journal: &impl Journal, after: u64) -> Vec<(u64, String)> {
    let mut follower = journal::follow(journal, run(), after);
    let mut lines = Vec::new();
    while let Some(line) = follower.next().await.expect("the journal answers") {
        lines.push((line.id(), line.json().to_owned()));
    }
    lines
}

async fn a_runs_stream_followed_from_another_process_is_what_its_watchers_got(
    a: &impl Journal,
    b: &impl Journal,
) {
    let sink = Arc::new(MemorySink::default());
    let (first, seen) = watched(a, &sink).await;
    assert_eq!(first.status(), Status::AwaitingApproval);
    let recorded = followed(b, 0).await;
    let ids: Vec<u64> = recorded.iter().map(|(id, _)| *id).collect();
    assert_eq!(
        ids,
        (1..=u64::try_from(seen.len()).expect("a count")).collect::<Vec<_>>(),
        "numbered 1, 2, …"
    );
    let lines: Vec<&str> = recorded.iter().map(|(_, line)| line.as_str()).collect();
    assert_eq!(lines, seen, "the first attempt's stream, line for line");
    let last = ids.last().copied().expect("lines");
    assert_eq!(followed(b, last).await, [], "a reader after the suspension's outcome ends at once");
    assert_eq!(followed(b, last - 2).await, recorded[recorded.len() - 2..], "from any position");

    let pending = first.pending().expect("the refund waits").clone();
    journal::approve(b, &pending, "alice").await.expect("approved");
    let (second, resumed) = watched(a, &sink).await;
    assert_eq!(second.status(), Status::Completed);
    assert_eq!(sink.count("refund"), 1, "the refund ran once");
    let restored = first.events().len();
    let more = followed(b, last).await;
    let lines: Vec<&str> = more.iter().map(|(_, line)| line.as_str()).collect();
    assert_eq!(
        lines,
        resumed[restored..],
        "the resume's lines follow the first attempt's: its watcher's, without the restored events"
    );
    assert_eq!(more.first().map(|(id, _)| *id), Some(last + 1), "numbered on from the first attempt's");
    assert_eq!(
        more.first().map(|(_, line)| line.as_str()),
        Some(r#"{"type":"event","kind":"Resumed","name":"run","count":2}"#),
        "the resume's first line is its own"
    );
}

async fn a_follower_in_the_attempts_process_sees_a_step_before_it_is_committed_under_the_same_number(
    a: &impl Journal,
    b: &impl Journal,
) {
    let tools = ToolSet::default();
    let scope = Scope::builder().record_stream().build().expect("valid limits");
    let runtime = Runner::new(&tools, scripted::sequence(vec![Step::Hang]));
    let mut conversation = vec![Message::user("Wait for a model that never answers.")];
    let id = run();
    let attempt = runtime.run_journaled(a, &id, &scope, &mut conversation, |_| true);
    let watcher = async {
        let mut live = journal::follow(a, run(), 0);
        let first = live.next().await.expect("the journal answers").expect("a first line");
        let committed = b.updates(&run(), 0, 10).await.expect("another process reads");
        scope.cancel();
        let mut lines = vec![(first.id(), first.json().to_owned())];
        while let Some(line) = live.next().await.expect("the journal answers") {
            lines.push((line.id(), line.json().to_owned()));
        }
        (lines, committed)
    };
    let (ended, (seen, committed)) = tokio::join!(attempt, watcher);
    assert_eq!(ended.err(), Some(RunError::Cancelled), "the caller cancelled while the model hung");
    assert_eq!(
        seen.first().map(|(id, line)| (*id, line.as_str())),
        Some((1, r#"{"type":"event","kind":"ModelCall","name":"model","count":1}"#)),
        "the model call's event, live"
    );
    assert_eq!(
        committed,
        [],
        "seen while its attempt had committed no line (a run without a budget commits at its end)"
    );
    assert_eq!(
        seen.last().map(|(_, line)| line.as_str()),
        Some(r#"{"type":"error","kind":"cancelled","message":"the run was cancelled by its caller"}"#)
    );
    assert_eq!(followed(b, 0).await, seen, "another process reads the same lines under the same numbers");
}

async fn a_run_that_does_not_record_writes_no_line_and_is_refused_to_a_follower(
    a: &impl Journal,
    b: &impl Journal,
) {
    let sink = Arc::new(MemorySink::default());
    let tools = refund::tools(Arc::clone(&sink) as Arc<dyn EffectSink>, Policy::Allow).set;
    let scope = Scope::builder().grants(refund::CAPABILITIES).build().expect("valid limits");
    let runtime = Runner::new(&tools, refund::model(refund::short_script(), |_| {}));
    let id = run();
    let done = runtime
        .run_journaled(a, &id, &scope, &mut refund::conversation(), |ended| ended.has_succeeded("refund"))
        .await
        .expect("an attempt");
    assert_eq!(done.status(), Status::Completed);
    assert_eq!(b.updates(&run(), 0, 10).await.expect("read"), [], "no line written");
    assert_eq!(b.load(&run()).await.expect("load").map(|stored| stored.stream), Some(0));
    let refused = journal::follow(b, run(), 0).next().await;
    assert_eq!(refused, Err(JournalError::StreamNotRecorded));
}

async fn a_reader_of_an_attempt_cut_before_its_end_gets_every_line_of_the_next_once(
    a: &impl Journal,
    b: &impl Journal,
) {
    let tools = ToolSet::default();
    let id = run();
    let scope = Scope::builder().record_stream().build().expect("valid limits");
    let hangs = Runner::new(&tools, scripted::sequence(vec![Step::Hang]));
    let mut conversation = vec![Message::user("Answer once the model does.")];
    let mut live = journal::follow(a, run(), 0);
    // The attempt shows its model call live, then its process dies: the attempt is dropped
    // where it stands (nothing more is committed, its lease is left to expire).
    let seen = tokio::select! {
        ended = hangs.run_journaled(a, &id, &scope, &mut conversation, |_| true) => panic!("the model hangs: {ended:?}"),
        line = live.next() => line.expect("the journal answers").expect("a line"),
    };
    assert_eq!(
        (seen.id(), seen.json()),
        (1, r#"{"type":"event","kind":"ModelCall","name":"model","count":1}"#),
        "shown live"
    );
    assert_eq!(b.updates(&run(), 0, 10).await.expect("read"), [], "never committed");
    drop(live);
    drop(scope);
    tokio::time::sleep(PAST_SHORT).await;

    let answers = Runner::new(&tools, scripted::sequence(vec![Step::Reply(ModelReply::text("Done."))]));
    let scope = Scope::builder().record_stream().build().expect("valid limits");
    let mut conversation = Vec::new();
    // A reader on the resuming handle, reconnected with the number it saw, while it runs.
    let (done, during) = tokio::join!(
        answers.run_journaled(b, &id, &scope, &mut conversation, |_| true),
        followed(b, seen.id())
    );
    assert_eq!(done.expect("an attempt").status(), Status::Completed);
    let all = followed(b, 0).await;
    assert_eq!(during, all, "read live from the resuming handle: none missed, none repeated");
    let first = journal::backend::LIVE_AHEAD + 1;
    assert_eq!(
        all.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        (first..first + 4).collect::<Vec<_>>(),
        "numbered past all that the cut attempt could have shown: {all:?}"
    );
    assert_eq!(
        all.first().map(|(_, line)| line.as_str()),
        Some(r#"{"type":"event","kind":"Resumed","name":"run","count":2}"#)
    );
    assert_eq!(followed(b, seen.id()).await, all, "the reader's reconnection misses none and repeats none");
}
