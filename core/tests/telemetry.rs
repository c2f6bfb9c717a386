//! The harness's spans follow the OpenTelemetry GenAI conventions (version 1.41.0): their
//! names, kinds and attributes, the run's id and final status; no span field, event or log
//! line carries a tool argument's value; the simple loop emits none.

mod common;

use common::{scope_with, tools};
#[cfg(feature = "journal")]
use loopbound::journal::{MemoryJournal, RunId};
use loopbound::scripted::{Step, sequence};
use loopbound::transport::{
    ChatOptions, ChatRequest, ModelReply, ReplyChunk, Transport, TransportError, Usage,
};
use loopbound::{Limits, Status};
use loopbound_fixtures::Composition;
use loopbound_test::telemetry::Capture;

const SECRET: &str = "4242424242";

/// A transport that names its provider and model, as a live one does.
struct Named<T>(T);

impl<T: Transport> Transport for Named<T> {
    async fn complete<'a>(&'a self, request: ChatRequest<'a>) -> Result<ModelReply, TransportError> {
        self.0.complete(request).await
    }

    async fn stream<'a>(
        &'a self,
        request: ChatRequest<'a>,
    ) -> Result<
        impl futures_core::Stream<Item = Result<ReplyChunk, TransportError>> + Send + 'a,
        TransportError,
    > {
        self.0.stream(request).await
    }

    fn provider_name(&self) -> &str {
        "openai"
    }

    fn model(&self) -> Option<&str> {
        Some("review-model")
    }
}

fn model() -> Named<impl Transport> {
    let call = |id: &str| ModelReply::call(id, "read_ticket", format!(r#"{{"input":{SECRET}}}"#));
    Named(sequence(vec![
        Step::Reply(call("c1").with_usage(Usage::new(120, 9).with_cached_input(100))),
        Step::Reply(call("c2").with_usage(Usage::new(150, 8))),
    ]))
}

async fn run_and_capture(composition: Composition, journaled: bool) -> Vec<String> {
    let capture = Capture::default();
    let _installed = capture.install();
    let scope = scope_with(Limits::default());
    let tools = tools();
    let runtime =
        composition.runner(&tools.set, model()).options(ChatOptions::default().with_max_output_tokens(800));
    let outcome = match journaled {
        #[cfg(feature = "journal")]
        true => {
            let journal = MemoryJournal::default();
            let run = RunId::new("review-42").expect("a run id");
            runtime
                .run_journaled(&journal, &run, &scope, &mut Vec::new(), |ended| ended.state().completed())
                .await
        }
        _ => runtime.run(&scope, &mut Vec::new(), |ended| ended.state().completed()).await,
    };
    assert_eq!(outcome.map(|o| o.status()), Ok(Status::RepeatedCall));
    let seen = capture.seen();
    assert!(seen.iter().all(|line| !line.contains(SECRET)), "an argument leaked into telemetry: {seen:?}");
    seen
}

/// A model call's span and what is recorded on it when the reply comes back.
fn chat(input: u64, output: u64, cached: u64) -> Vec<String> {
    let mut lines = vec![
        "span chat".to_owned(),
        r#"otel.name="chat review-model""#.to_owned(),
        r#"otel.kind="client""#.to_owned(),
        r#"gen_ai.operation.name="chat""#.to_owned(),
        r#"gen_ai.provider.name="openai""#.to_owned(),
        "gen_ai.request.stream=false".to_owned(),
        r#"gen_ai.request.model="review-model""#.to_owned(),
        "gen_ai.request.max_tokens=800".to_owned(),
    ];
    lines.extend([
        format!("gen_ai.usage.input_tokens={input}"),
        format!("gen_ai.usage.output_tokens={output}"),
        format!("gen_ai.usage.cache_read.input_tokens={cached}"),
    ]);
    lines
}

fn tool(call_id: &str) -> Vec<String> {
    vec![
        "span execute_tool".to_owned(),
        r#"otel.name="execute_tool read_ticket""#.to_owned(),
        r#"otel.kind="internal""#.to_owned(),
        r#"gen_ai.operation.name="execute_tool""#.to_owned(),
        r#"gen_ai.tool.name="read_ticket""#.to_owned(),
        format!(r#"gen_ai.tool.call.id="{call_id}""#),
        r#"gen_ai.tool.type="function""#.to_owned(),
    ]
}

fn agent(run: Option<&str>) -> Vec<String> {
    let mut lines = vec![
        "span invoke_agent".to_owned(),
        r#"otel.name="invoke_agent""#.to_owned(),
        r#"otel.kind="internal""#.to_owned(),
        r#"gen_ai.operation.name="invoke_agent""#.to_owned(),
        r#"gen_ai.provider.name="openai""#.to_owned(),
        r#"gen_ai.request.model="review-model""#.to_owned(),
    ];
    if let Some(run) = run {
        lines.push(format!(r#"gen_ai.conversation.id="{run}""#));
        lines.push(format!(r#"loopbound.run.id="{run}""#));
    }
    lines
}

fn run_end() -> Vec<String> {
    vec![
        r#"loopbound.run.status="RepeatedCall""#.to_owned(),
        "gen_ai.usage.input_tokens=270".to_owned(),
        "gen_ai.usage.output_tokens=17".to_owned(),
    ]
}

#[tokio::test(flavor = "current_thread")]
async fn harness_spans_follow_the_genai_conventions_and_never_carry_arguments() {
    let seen = run_and_capture(Composition::Harness, false).await;
    let expected: Vec<String> =
        [agent(None), chat(120, 9, 100), tool("c1"), chat(150, 8, 0), tool("c2"), run_end()].concat();
    assert_eq!(seen, expected);
}

#[cfg(feature = "journal")]
#[tokio::test(flavor = "current_thread")]
async fn a_journaled_run_span_names_its_run() {
    let seen = run_and_capture(Composition::Harness, true).await;
    let agent = agent(Some("review-42"));
    assert_eq!(agent.len(), 8);
    assert_eq!(seen[..agent.len()], agent[..]);
    assert_eq!(seen[seen.len() - 3..], run_end()[..]);
}

#[tokio::test(flavor = "current_thread")]
async fn the_simple_loop_emits_no_spans() {
    assert!(run_and_capture(Composition::Simple, false).await.is_empty());
}
