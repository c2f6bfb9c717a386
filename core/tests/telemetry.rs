//! The harness emits spans; no span field, event or log line carries tool arguments.

mod common;

use common::{scope_with, tools};
use loopbound::scripted::{Step, sequence};
use loopbound::transport::ModelReply;
use loopbound::{Composition, Limits, Runtime, Status};
use loopbound_testkit::telemetry::Capture;

async fn run_and_capture(composition: Composition) -> Vec<String> {
    const SECRET: &str = "4242424242";
    let capture = Capture::default();
    let _installed = capture.install();
    let scope = scope_with(Limits::default());
    let tools = tools();
    let model = sequence(vec![
        Step::Reply(ModelReply::call("c1", "read_ticket", format!(r#"{{"input":{SECRET}}}"#))),
        Step::Reply(ModelReply::call("c2", "read_ticket", format!(r#"{{"input":{SECRET}}}"#))),
    ]);
    let outcome = Runtime::new(composition, &tools.set, model)
        .run(&scope, &mut Vec::new(), |review| review.completed())
        .await;
    assert_eq!(outcome.map(|o| o.status()), Ok(Status::RepeatedCall));
    let seen = capture.seen();
    assert!(seen.iter().all(|line| !line.contains(SECRET)), "an argument leaked into telemetry: {seen:?}");
    seen
}

#[tokio::test(flavor = "current_thread")]
async fn harness_spans_name_the_tool_but_never_its_arguments() {
    let seen = run_and_capture(Composition::Harness).await;
    assert_eq!(
        seen,
        [
            "span loopbound.run",
            "composition=\"harness\"",
            "span loopbound.model_call",
            "streaming=false",
            "span loopbound.tool_call",
            "tool=\"read_ticket\"",
            "span loopbound.model_call",
            "streaming=false",
            "span loopbound.tool_call",
            "tool=\"read_ticket\"",
        ]
    );
}

#[tokio::test(flavor = "current_thread")]
async fn the_simple_loop_emits_no_spans() {
    assert!(run_and_capture(Composition::Simple).await.is_empty());
}
