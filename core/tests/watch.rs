//! The live stream of a run: order and completeness, merged text under a slow watcher, a
//! watcher that never reads, arguments only on request, suspensions, errors, and the JSON form.

mod common;

use std::time::Duration;

use common::{TICKET_TEXT, scope_with, tools};
#[cfg(feature = "journal")]
use loopbound::journal::{MemoryJournal, RunId};
use loopbound::scripted::{Scripted, Step, sequence};
#[cfg(feature = "journal")]
use loopbound::tool::Policy;
use loopbound::transport::{ModelReply, ToolCall};
use loopbound::watch::{self, Update, Updates};
use loopbound::{CancellationToken, Limits, Message, Outcome, RunError, Runner, Scope, Status};
use loopbound_fixtures::review::{COMPLETE_EVENTS, Review};
#[cfg(feature = "journal")]
use loopbound_test::refund::{self, EffectSink, MemorySink};

fn complete_script() -> Vec<Step> {
    vec![
        Step::Reply(ModelReply::call("call-1", "read_ticket", r#"{"input":42}"#)),
        Step::Reply(ModelReply::call("call-2", "finish_review", r#"{"input":42}"#)),
        Step::Reply(ModelReply::text("Review finished.")),
    ]
}

fn watched(limits: Limits, feed: watch::Feed) -> Scope<Review> {
    Scope::builder()
        .grants(common::BOTH_CAPABILITIES)
        .limits(limits)
        .watch(feed)
        .state(Review::default())
        .build()
        .expect("valid limits")
}

/// Everything queued, in order.
fn drain(updates: &mut Updates) -> Vec<Update> {
    std::iter::from_fn(|| updates.try_next()).collect()
}

/// A compact line per update.
fn line(update: &Update) -> String {
    match update {
        Update::Event(event) => format!("event {event}"),
        Update::Text(text) => format!("text {} {:?}", text.reply(), text.text()),
        Update::ToolStarted(call) => format!("start {} {} {}", call.reply(), call.index(), call.name()),
        Update::ToolResult(result) => {
            format!(
                "result {} {} {:?} error={}",
                result.reply(),
                result.index(),
                result.text(),
                result.is_error()
            )
        }
        Update::Suspended(suspension) => format!("suspended {:?}", suspension.operation()),
        Update::Outcome(outcome) => format!("outcome {}", outcome.status()),
        Update::Error(error) => format!("error {}", error.kind()),
        _ => "other".to_owned(),
    }
}

fn events_of(updates: &[Update]) -> Vec<String> {
    updates
        .iter()
        .filter_map(|update| match update {
            Update::Event(event) => Some(event.to_string()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn every_step_arrives_in_order_and_ends_with_the_outcome() {
    for streaming in [false, true] {
        let (feed, mut updates) = watch::channel();
        let scope = watched(Limits::default(), feed);
        let tools = tools();
        let runtime = Runner::new(&tools.set, sequence(complete_script())).streaming(streaming);
        let outcome = runtime
            .run(&scope, &mut vec![Message::user("Review 42.")], |ended| Review::completed(ended.state()))
            .await;
        let outcome = outcome.expect("an outcome");
        let updates = drain(&mut updates);
        let lines: Vec<String> = updates.iter().map(line).collect();
        assert_eq!(
            lines,
            [
                "event ModelCall model 1",
                "start 1 0 read_ticket",
                "event ToolCall read_ticket 1",
                &format!("result 1 0 {TICKET_TEXT:?} error=false"),
                "event ModelCall model 2",
                "start 2 0 finish_review",
                "event ToolCall finish_review 2",
                "result 2 0 \"Review completed. No business write performed.\" error=false",
                "event ModelCall model 3",
                "text 3 \"Review finished.\"",
                "outcome Completed",
            ],
            "streaming={streaming}"
        );
        // The review's events without the middleware's: this runner attaches none.
        let expected: Vec<&str> =
            COMPLETE_EVENTS.iter().copied().filter(|event| !event.starts_with("Middleware")).collect();
        assert_eq!(events_of(&updates), expected);
        assert_eq!(updates.last(), Some(&Update::Outcome(outcome)));
    }
}

/// A model that streams `pieces` text pieces of `size` bytes, then a reply of `calls` tool
/// calls, then the final text.
fn chatty(
    pieces: usize,
    size: usize,
    calls: usize,
) -> Scripted<impl Fn(u32, &loopbound::transport::ChatRequest<'_>) -> Step + Send + Sync> {
    let text = "x".repeat(pieces * size);
    Scripted::new(move |call, _| match call {
        1 => Step::Reply(ModelReply::new(
            Some(text.clone()),
            (0..calls)
                .map(|n| ToolCall::new(format!("c{n}"), "read_ticket", format!(r#"{{"input":{n}}}"#)))
                .collect(),
        )),
        _ => Step::Reply(ModelReply::text(text.clone())),
    })
    .fragment_size(size)
}

#[tokio::test(start_paused = true)]
async fn a_slow_watcher_changes_nothing_and_gets_merged_text() {
    let limits = Limits::default().with_tool_calls(16);
    let unwatched = scope_with(limits.clone());
    let tools = tools();
    let runtime = Runner::new(&tools.set, chatty(1000, 8, 16)).streaming(true);
    let expected = runtime
        .run(&unwatched, &mut Vec::new(), |ended| Review::completed(ended.state()))
        .await
        .expect("an outcome");

    let (feed, mut updates) = watch::channel();
    let scope = watched(limits, feed);
    let runtime = Runner::new(&tools.set, chatty(1000, 8, 16)).streaming(true);
    let mut conversation = Vec::new();
    let run = runtime.run(&scope, &mut conversation, |ended| Review::completed(ended.state()));
    let slow = async {
        let mut seen = Vec::new();
        while let Some(update) = updates.next().await {
            seen.push(update);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        seen
    };
    let (outcome, seen) = tokio::join!(run, slow);
    assert_eq!(outcome.as_ref(), Ok(&expected), "the same outcome as without a watcher");
    assert_eq!(events_of(&seen), expected.events().iter().map(ToString::to_string).collect::<Vec<_>>());
    let text: String = seen
        .iter()
        .filter_map(|update| match update {
            Update::Text(text) if text.reply() == 2 => Some(text.text()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "x".repeat(8000), "every piece arrives, merged or not");
    let pieces = seen.iter().filter(|update| matches!(update, Update::Text(t) if t.reply() == 2)).count();
    assert!(pieces < 1000, "a watcher that falls behind gets pieces merged: {pieces}");
}

#[tokio::test]
async fn a_watcher_that_never_reads_holds_the_documented_updates_only() {
    let limits = Limits::default().with_tool_calls(16);
    let (feed, updates) = watch::channel();
    let scope = watched(limits, feed);
    let tools = tools();
    let runtime = Runner::new(&tools.set, chatty(10_000, 4, 16)).streaming(true);
    let outcome = runtime
        .run(&scope, &mut Vec::new(), |ended| Review::completed(ended.state()))
        .await
        .expect("an outcome");
    assert_eq!(outcome.status(), Status::Incomplete);
    // 2 model calls, 16 calls each with an event, a start and an answer, one merged text per
    // reply and the outcome: nothing grows with the 20,000 text pieces.
    let events = outcome.events().len();
    assert_eq!(events, 2 + 16);
    assert_eq!(updates.pending(), events + 16 * 2 + 2 + 1);
}

#[tokio::test]
async fn arguments_reach_the_stream_only_on_request_and_never_its_debug() {
    for opted in [false, true] {
        let (feed, mut updates) = watch::channel();
        let feed = if opted { feed.with_arguments() } else { feed };
        let scope = watched(Limits::default(), feed);
        let tools = tools();
        let runtime = Runner::new(&tools.set, sequence(complete_script()));
        runtime
            .run(&scope, &mut Vec::new(), |ended| Review::completed(ended.state()))
            .await
            .expect("an outcome");
        let updates = drain(&mut updates);
        let started = updates
            .iter()
            .find_map(|update| match update {
                Update::ToolStarted(call) => Some(call.clone()),
                _ => None,
            })
            .expect("a call started");
        assert_eq!(started.arguments(), opted.then_some(r#"{"input":42}"#));
        assert!(!format!("{updates:?}").contains(r#""input""#), "no argument in Debug");
        let json = serde_json::to_string(&Update::ToolStarted(started)).unwrap_or_default();
        assert_eq!(json.contains("arguments"), opted, "{json}");
    }
}

#[cfg(feature = "journal")]
#[tokio::test]
async fn a_journaled_suspension_comes_before_its_outcome_and_a_resume_replays_the_log_first() {
    let journal = MemoryJournal::default();
    let sink = std::sync::Arc::new(MemorySink::default());
    let tools = refund::tools(std::sync::Arc::clone(&sink) as std::sync::Arc<dyn EffectSink>, Policy::Ask);
    let run = RunId::new("refund-42").expect("a run id");
    let attempt = |feed| {
        let scope = Scope::builder().grants(refund::CAPABILITIES).watch(feed).build().expect("a scope");
        let runtime = Runner::new(&tools.set, refund::model(refund::short_script(), |_| {}));
        let journal = &journal;
        let run = &run;
        async move { runtime.run_journaled(journal, run, &scope, &mut refund::conversation(), |_| true).await }
    };
    let (feed, mut updates) = watch::channel();
    let outcome = attempt(feed).await.expect("an outcome");
    assert_eq!(outcome.status(), Status::AwaitingApproval);
    let first = drain(&mut updates);
    let tail: Vec<String> = first[first.len() - 2..].iter().map(line).collect();
    assert_eq!(tail, ["suspended Some(\"refund-42/op/2\")", "outcome AwaitingApproval"]);
    assert_eq!(events_of(&first), outcome.events().iter().map(ToString::to_string).collect::<Vec<_>>());

    let (feed, mut updates) = watch::channel();
    let again = attempt(feed).await.expect("an outcome");
    let second = drain(&mut updates);
    assert_eq!(events_of(&second), again.events().iter().map(ToString::to_string).collect::<Vec<_>>());
    assert_eq!(events_of(&second)[..outcome.events().len()], events_of(&first)[..], "the log comes first");
}

#[tokio::test]
async fn a_cancelled_run_ends_its_stream_with_the_error() {
    let caller = CancellationToken::new();
    let (feed, mut updates) = watch::channel();
    let scope = Scope::builder().caller(caller.clone()).watch(feed).build().expect("a scope");
    let model = Scripted::new(move |_, _| {
        caller.cancel();
        Step::Reply(ModelReply::text("too late"))
    });
    let runtime = Runner::new(&loopbound::ToolSet::default(), model);
    let result = runtime.run(&scope, &mut Vec::new(), |_| true).await;
    assert_eq!(result, Err(RunError::Cancelled));
    let updates = drain(&mut updates);
    assert_eq!(updates.last(), Some(&Update::Error(RunError::Cancelled)));
    assert_eq!(
        serde_json::to_string(&updates.last()).unwrap_or_default(),
        r#"{"type":"error","kind":"cancelled","message":"the run was cancelled by its caller"}"#
    );
}

#[tokio::test]
async fn updates_serialise_with_a_type_tag() {
    let (feed, mut updates) = watch::channel();
    let scope = watched(Limits::default(), feed);
    let tools = tools();
    let runtime = Runner::new(&tools.set, sequence(complete_script()));
    let outcome: Outcome = runtime
        .run(&scope, &mut Vec::new(), |ended| Review::completed(ended.state()))
        .await
        .expect("an outcome");
    let json: Vec<String> =
        drain(&mut updates).iter().map(|u| serde_json::to_string(u).unwrap_or_default()).collect();
    assert_eq!(json[0], r#"{"type":"event","kind":"ModelCall","name":"model","count":1}"#);
    assert_eq!(
        json[1],
        r#"{"type":"tool_started","reply":1,"index":0,"call_id":"call-1","name":"read_ticket"}"#
    );
    assert_eq!(
        json[3],
        format!(
            r#"{{"type":"tool_result","reply":1,"index":0,"call_id":"call-1","text":{TICKET_TEXT:?},"is_error":false}}"#
        )
    );
    let last = json.last().cloned().unwrap_or_default();
    let mut expected = serde_json::to_value(&outcome).unwrap_or_default();
    expected["type"] = "outcome".into();
    assert_eq!(serde_json::from_str::<serde_json::Value>(&last).unwrap_or_default(), expected);
}
