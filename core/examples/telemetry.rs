//! The harness's spans exported to OpenTelemetry with `tracing-opentelemetry`: a run of the
//! review task, then every exported span with its name, kind and attributes. A service swaps the
//! exporter below for its own (OTLP, say); the spans are the same.
//!
//! `cargo run -p loopbound --example telemetry`

use std::sync::{Arc, Mutex, PoisonError};

use loopbound::scripted::{Step, sequence};
use loopbound::transport::{ChatOptions, ModelReply, Usage};
use loopbound::{Message, Runner, Status};
use loopbound_fixtures::review::{self, Review};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use tracing_subscriber::layer::SubscriberExt;

/// An exporter that keeps what it is given, as `name kind key=value …` lines.
#[derive(Clone, Debug, Default)]
struct Kept(Arc<Mutex<Vec<String>>>);

impl SpanExporter for Kept {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        for span in batch {
            let attributes: Vec<String> =
                span.attributes.iter().map(|kv| format!("{}={}", kv.key, kv.value)).collect();
            kept.push(format!("{} [{:?}] {}", span.name, span.span_kind, attributes.join(" ")));
        }
        Ok(())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let kept = Kept::default();
    let provider = SdkTracerProvider::builder().with_simple_exporter(kept.clone()).build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("loopbound"));
    let _installed = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));

    let tools = review::tools();
    let secret = 4_242_424_242_i64;
    let model = sequence(vec![
        Step::Reply(
            ModelReply::call("call-1", "read_ticket", r#"{"input":42}"#).with_usage(Usage::new(120, 9)),
        ),
        Step::Reply(ModelReply::call("call-2", "finish_review", format!(r#"{{"input":{secret}}}"#))),
        Step::Reply(ModelReply::call("call-3", "finish_review", r#"{"input":42}"#)),
        Step::Reply(ModelReply::text("Review finished.").with_usage(Usage::new(300, 4))),
    ]);
    let runtime = Runner::new(&tools.set, model).options(ChatOptions::default().with_max_output_tokens(800));
    let scope = review::scope(review::BOTH_CAPABILITIES, loopbound::Limits::default())?;
    let mut conversation = vec![Message::user("Review ticket 42.")];
    let outcome = runtime.run(&scope, &mut conversation, |ended| Review::completed(ended.state())).await?;
    provider.force_flush()?;

    let spans = kept.0.lock().unwrap_or_else(PoisonError::into_inner).clone();
    for span in &spans {
        println!("{span}");
    }
    assert_eq!(outcome.status(), Status::Completed);
    let names: Vec<&str> = spans.iter().filter_map(|span| span.split(" [").next()).collect();
    assert_eq!(
        names,
        [
            "chat",
            "execute_tool read_ticket",
            "chat",
            "execute_tool finish_review",
            "chat",
            "execute_tool finish_review",
            "chat",
            "invoke_agent",
        ],
        "spans end before their parent, each exported under its otel.name"
    );
    let agent = spans.last().map(String::as_str).unwrap_or_default();
    assert!(
        agent.contains("loopbound.run.status=Completed") && agent.contains("gen_ai.usage.input_tokens=420")
    );
    assert!(spans.iter().all(|span| !span.contains(&secret.to_string())), "no argument value is exported");
    Ok(())
}
