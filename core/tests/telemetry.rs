//! The harness emits spans; no span field, event or log line carries tool arguments.

mod common;

use std::sync::{Arc, Mutex};

use common::{scope_with, tools};
use loopbound::scripted::{Step, sequence};
use loopbound::transport::ModelReply;
use loopbound::{Composition, Limits, Runtime, Status};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// Records every span name and every field value, of spans and events.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<String>>>);

struct Fields<'a>(&'a mut Vec<String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push(format!("{}={value:?}", field.name()));
    }
}

impl<S: Subscriber> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, _id: &Id, _ctx: Context<'_, S>) {
        let mut seen = self.0.lock().unwrap();
        seen.push(format!("span {}", attrs.metadata().name()));
        attrs.record(&mut Fields(&mut seen));
    }

    fn on_record(&self, _id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        values.record(&mut Fields(&mut self.0.lock().unwrap()));
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        event.record(&mut Fields(&mut self.0.lock().unwrap()));
    }
}

async fn run_and_capture(composition: Composition) -> Vec<String> {
    const SECRET: &str = "4242424242";
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    let _default = tracing::subscriber::set_default(subscriber);
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
    let seen = capture.0.lock().unwrap().clone();
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
