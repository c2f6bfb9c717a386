//! The stored text of a recorded stream line of every kind, pinned: the wire form of each
//! [`Update`] variant (the `watch` module's table), which a journal stores and serves back. A
//! change shows here as a failing test; unless it only adds, it needs a new line format and
//! the conversion of the older lines (`codec_stream.rs`).

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use super::codec_stream::{decode_line, encode_line};
use super::id::RunId;
use super::record::Proposal;
use crate::event::{ControlEvent, EventKind, HaltReason, Subject};
use crate::outcome::{EndRecord, Outcome, RunError, Status};
use crate::spend::{Micros, Reserved, Spend};
use crate::tool::EffectKind;
use crate::transport::{TransportError, Usage};
use crate::watch::{Suspension, Text, ToolResult, ToolStarted, Update};

/// `update`'s stored line, checked to read back as written.
fn stored(update: &Update) -> String {
    let line = encode_line(update);
    assert_eq!(decode_line(&line), Ok(Cow::Borrowed(line.as_str())), "a line of the current format");
    line
}

fn proposal() -> Proposal {
    let run = RunId::new("refund-42").expect("a run id");
    Proposal {
        operation: run.operation(2),
        reply: 1,
        index: 0,
        tool: "refund".to_owned(),
        capability: "payments:refund".to_owned(),
        effect: EffectKind::Effect,
        arguments: r#"{"amount":1200,"order":"Ä-42"}"#.to_owned(),
        expires: Some(UNIX_EPOCH + Duration::from_millis(1_765_000_000_123)),
    }
}

#[test]
fn an_event_line_is_the_event_after_its_tag() {
    let plain = ControlEvent::new(EventKind::ModelCall, Subject::Model, 1);
    assert_eq!(
        stored(&Update::Event(plain)),
        r#"{"type":"event","kind":"ModelCall","name":"model","count":1}"#
    );
    let decided = ControlEvent::new(EventKind::Halt(HaltReason::Denied), Subject::Tool("refund".into()), 2)
        .on("refund-42/op/2".into())
        .by("approver zoë".into())
        .because("over the \"limit\"".into());
    assert_eq!(
        stored(&Update::Event(decided)),
        r#"{"type":"event","kind":"Denied","name":"refund","count":2,"operation":"refund-42/op/2","by":"approver zoë","reason":"over the \"limit\""}"#
    );
}

#[test]
fn a_text_line_holds_its_reply_and_its_text() {
    let text = Update::Text(Text { reply: 3, text: "Déjà vu:\n\t\"東京\" 🚚".to_owned() });
    assert_eq!(stored(&text), r#"{"type":"text","reply":3,"text":"Déjà vu:\n\t\"東京\" 🚚"}"#);
}

#[test]
fn a_tool_started_line_holds_arguments_only_when_the_host_opted_in() {
    let mut started = ToolStarted {
        reply: 1,
        index: 2,
        call_id: "call-7".to_owned(),
        name: "lookup_order".to_owned(),
        arguments: None,
    };
    assert_eq!(
        stored(&Update::ToolStarted(started.clone())),
        r#"{"type":"tool_started","reply":1,"index":2,"call_id":"call-7","name":"lookup_order"}"#
    );
    started.arguments = Some(r#"{"order":41}"#.to_owned());
    assert_eq!(
        stored(&Update::ToolStarted(started)),
        r#"{"type":"tool_started","reply":1,"index":2,"call_id":"call-7","name":"lookup_order","arguments":"{\"order\":41}"}"#
    );
}

#[test]
fn a_tool_result_line_holds_the_answer_and_whether_it_failed() {
    let result = ToolResult {
        reply: 2,
        index: 0,
        call_id: "call-x".to_owned(),
        text: "unknown tool: \"teleport\"".to_owned(),
        is_error: true,
    };
    assert_eq!(
        stored(&Update::ToolResult(result)),
        r#"{"type":"tool_result","reply":2,"index":0,"call_id":"call-x","text":"unknown tool: \"teleport\"","is_error":true}"#
    );
}

#[test]
fn a_suspended_line_holds_its_operation_and_the_pending_proposal() {
    let ambiguous =
        Suspension { status: Status::Ambiguous, operation: Some(Arc::from("refund-42/op/1")), pending: None };
    assert_eq!(
        stored(&Update::Suspended(ambiguous)),
        r#"{"type":"suspended","status":"Ambiguous","operation":"refund-42/op/1","pending":null}"#
    );
    let waiting = Suspension {
        status: Status::AwaitingApproval,
        operation: Some(Arc::from("refund-42/op/2")),
        pending: Some(Box::new(proposal())),
    };
    assert_eq!(
        stored(&Update::Suspended(waiting)),
        concat!(
            r#"{"type":"suspended","status":"AwaitingApproval","operation":"refund-42/op/2","#,
            r#""pending":{"operation":"refund-42/op/2","tool":"refund","capability":"payments:refund","#,
            r#""arguments":"{\"amount\":1200,\"order\":\"Ä-42\"}","#,
            r#""digest":"2d0ba7a28801bd2a620ac11b1d05acb8faaa9df225c1e8dfd74bd9a055e8bd5b","#,
            r#""expires_at_ms":1765000000123}}"#
        )
    );
}

#[test]
fn an_outcome_line_is_the_outcome_after_its_tag() {
    let events = vec![ControlEvent::new(EventKind::ModelCall, Subject::Model, 1)];
    let spend = Spend {
        settled: Usage::new(120, 30).with_cached_input(20),
        cost: Micros(450),
        reserved: Reserved { input_tokens: 0, output_tokens: 0, cost: Micros::ZERO },
        calls_over_reservation: 1,
        ..Spend::default()
    };
    let completed = Outcome::ended(true, Some("Refunded.".to_owned()), events, Some(Usage::new(120, 30)))
        .spent(spend)
        .recorded(EndRecord::Recorded);
    assert_eq!(
        stored(&Update::Outcome(completed)),
        concat!(
            r#"{"type":"outcome","status":"Completed","text":"Refunded.","partial_text":null,"#,
            r#""events":[{"kind":"ModelCall","name":"model","count":1}],"#,
            r#""usage":{"input_tokens":120,"cached_input_tokens":0,"cache_write_tokens":0,"output_tokens":30},"#,
            r#""spend":{"settled":{"input_tokens":120,"cached_input_tokens":20,"cache_write_tokens":0,"output_tokens":30},"#,
            r#""cost":450,"reserved":{"input_tokens":0,"output_tokens":0,"cost":0},"calls_over_reservation":1,"#,
            r#""overshoot_tokens":0,"overshoot_cost":0},"detail":null,"operation":null,"pending":null,"#,
            r#""end_record":"recorded"}"#
        )
    );
    let waiting = Outcome::stopped(Status::AwaitingApproval, Vec::new(), None, None)
        .on(Some(Arc::from("refund-42/op/2")))
        .awaiting(Box::new(proposal()))
        .recorded(EndRecord::Unconfirmed);
    assert_eq!(
        stored(&Update::Outcome(waiting)),
        concat!(
            r#"{"type":"outcome","status":"AwaitingApproval","text":null,"partial_text":null,"events":[],"usage":null,"#,
            r#""spend":{"settled":{"input_tokens":0,"cached_input_tokens":0,"cache_write_tokens":0,"output_tokens":0},"#,
            r#""cost":0,"reserved":{"input_tokens":0,"output_tokens":0,"cost":0},"calls_over_reservation":0,"#,
            r#""overshoot_tokens":0,"overshoot_cost":0},"detail":null,"operation":"refund-42/op/2","#,
            r#""pending":{"operation":"refund-42/op/2","tool":"refund","capability":"payments:refund","#,
            r#""arguments":"{\"amount\":1200,\"order\":\"Ä-42\"}","#,
            r#""digest":"2d0ba7a28801bd2a620ac11b1d05acb8faaa9df225c1e8dfd74bd9a055e8bd5b","#,
            r#""expires_at_ms":1765000000123},"end_record":"unconfirmed"}"#
        )
    );
}

#[test]
fn an_error_line_holds_the_kind_and_the_message_with_its_causes() {
    assert_eq!(
        stored(&Update::Error(RunError::Cancelled)),
        r#"{"type":"error","kind":"cancelled","message":"the run was cancelled by its caller"}"#
    );
    let provider = RunError::Provider(TransportError::malformed("no choices"));
    assert_eq!(
        stored(&Update::Error(provider)),
        r#"{"type":"error","kind":"provider","message":"malformed provider response: no choices"}"#
    );
}
