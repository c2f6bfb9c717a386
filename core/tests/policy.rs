//! A tool's policy outside a journal (SPEC §15, "it fails closed"): a call to a tool under
//! `Deny` or `Ask` is admitted and counted by the guard, then halts `Denied` instead of running,
//! on every path (the loop, a direct call, a reservation). Under `Allow` nothing changes.

use std::sync::Arc;

use loopbound::tool::Policy;
use loopbound::{HaltReason, Limits, Runner, Scope, Status, Stop, ToolError};
use loopbound_test::refund::{self, EffectSink, MemorySink, RefundInput};

fn scope() -> Scope {
    Scope::builder().grants(refund::CAPABILITIES).limits(Limits::default()).build().unwrap()
}

fn refund_input() -> RefundInput {
    RefundInput { order: 42, amount_cents: 1500 }
}

fn lines(scope: &Scope) -> Vec<String> {
    scope.events().iter().map(ToString::to_string).collect()
}

#[tokio::test]
async fn the_loop_halts_denied_before_an_ask_or_deny_body_runs() {
    for (policy, by) in [(Policy::Ask, "policy ask, no journal"), (Policy::Deny, "policy")] {
        let sink = Arc::new(MemorySink::default());
        let tools = refund::tools(Arc::clone(&sink) as Arc<dyn EffectSink>, policy);
        let model = refund::model(refund::short_script(), |_| {});
        let scope = scope();
        let outcome =
            Runner::new(&tools.set, model).run(&scope, &mut refund::conversation(), |_| true).await.unwrap();
        assert_eq!(outcome.status(), Status::Denied, "{policy}");
        assert_eq!(outcome.operation(), None, "no journal, no operation id");
        assert_eq!(sink.count("refund"), 0, "{policy}: the refund never ran");
        let events: Vec<String> = outcome.events().iter().map(ToString::to_string).collect();
        assert_eq!(
            events,
            [
                "ModelCall model 1".to_owned(),
                "ToolCall lookup_order 1".to_owned(),
                "ModelCall model 2".to_owned(),
                "ToolCall refund 2".to_owned(),
                format!("Denied refund 2 by {by}"),
            ],
            "{policy}"
        );
    }
}

#[tokio::test]
async fn a_direct_call_and_a_reservation_halt_denied_and_keep_their_reservation() {
    let sink = Arc::new(MemorySink::default());
    let tools = refund::tools(Arc::clone(&sink) as Arc<dyn EffectSink>, Policy::Ask);

    let direct = scope();
    let error = tools.refund.invoke(&direct, refund_input()).await.unwrap_err();
    assert!(matches!(error, ToolError::Stopped(Stop::Halted(HaltReason::Denied))), "{error}");
    assert_eq!(direct.tool_calls(), 1, "the admission stays counted");
    assert_eq!(lines(&direct), ["ToolCall refund 1", "Denied refund 1 by policy ask, no journal"]);

    let reserved = scope();
    let reservation = tools.refund.reserve(&reserved, refund_input()).unwrap();
    let error = reservation.run().await.unwrap_err();
    assert!(matches!(error, ToolError::Stopped(Stop::Halted(HaltReason::Denied))), "{error}");
    assert_eq!(reserved.stop_reason(), Some(HaltReason::Denied));

    let json = scope();
    let error = tools.set.invoke(&json, "refund", r#"{"order":42,"amount_cents":1500}"#).await.unwrap_err();
    assert!(matches!(error, ToolError::Stopped(Stop::Halted(HaltReason::Denied))), "{error}");

    assert_eq!(sink.count("refund"), 0, "no path ran the body");
}

#[tokio::test]
async fn an_allowed_tool_and_a_read_run_as_before() {
    let sink = Arc::new(MemorySink::default());
    let tools = refund::tools(Arc::clone(&sink) as Arc<dyn EffectSink>, Policy::Allow);
    let scope = scope();
    tools.refund.invoke(&scope, refund_input()).await.unwrap();
    assert_eq!(sink.count("refund"), 1);
    assert_eq!(scope.stop_reason(), None);
}
