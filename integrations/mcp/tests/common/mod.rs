//! What the tests against real servers share: scripted runs, tool results, counting reports.

#![allow(dead_code, reason = "each test binary uses a different part of the helpers")]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use loopbound::scripted::{Step, sequence};
use loopbound::transport::ModelReply;
use loopbound::{Limits, Message, Outcome, Runner, Scope, ToolError, ToolSet};
use loopbound_mcp::{Arguments, CallError, Connection, Mapping, Registered};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing_subscriber::layer::{Context, SubscriberExt};

/// A scripted model asking for these calls, one per reply, then saying `done`.
pub(crate) fn calls(calls: &[(&str, &str)]) -> Vec<Step> {
    let mut steps: Vec<Step> = calls
        .iter()
        .zip(1..)
        .map(|((name, arguments), n): (&(&str, &str), u32)| {
            Step::Reply(ModelReply::call(format!("c{n}"), *name, *arguments))
        })
        .collect();
    steps.push(Step::Reply(ModelReply::text("done")));
    steps
}

/// Runs `steps` over `tools` in `scope`; the host's condition is always true.
pub(crate) async fn run(tools: &ToolSet, scope: &Scope, steps: Vec<Step>) -> (Outcome, Vec<Message>) {
    let mut conversation = vec![Message::user("Use the tools.")];
    let outcome = Runner::new(tools, sequence(steps))
        .observe(loopbound::Middleware)
        .run(scope, &mut conversation, |_| true)
        .await
        .expect("the run ends with an outcome");
    (outcome, conversation)
}

/// The tool results handed to the model, in order.
pub(crate) fn results(conversation: &[Message]) -> Vec<String> {
    conversation
        .iter()
        .filter_map(|message| match message {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect()
}

/// The events as `kind name count` lines.
pub(crate) fn events(outcome: &Outcome) -> Vec<String> {
    outcome.events().iter().map(ToString::to_string).collect()
}

/// All the connection's tools in a set, with the default mapping.
pub(crate) fn register(connection: &Connection) -> (ToolSet, Registered) {
    register_with(connection, &Mapping::new())
}

/// All the connection's tools in a set, as `mapping` says.
pub(crate) fn register_with(connection: &Connection, mapping: &Mapping) -> (ToolSet, Registered) {
    let registered = connection.register(mapping);
    let set = registered.add_to(ToolSet::builder()).build().expect("the server's names are distinct");
    (set, registered)
}

/// A scope granting `capabilities` under `limits`.
pub(crate) fn scope(capabilities: &[&str], limits: Limits) -> Scope {
    Scope::builder().grants(capabilities.iter().copied()).limits(limits).build().expect("valid limits")
}

/// A scope granting `capability` whose caller cancels it `after` from now.
pub(crate) fn cancelled_after(capability: &str, after: Duration) -> Scope {
    let caller = CancellationToken::new();
    let scope = Scope::builder().grant(capability).caller(caller.clone()).build().expect("valid limits");
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        caller.cancel();
    });
    scope
}

/// `value` (an object) as a tool's arguments.
pub(crate) fn arguments(value: Value) -> Arguments {
    serde_json::from_value(value).expect("an object")
}

/// The body error a call ended with.
pub(crate) fn body_error(result: Result<String, ToolError>) -> CallError {
    match result {
        Err(ToolError::Failed { source, .. }) => {
            source.downcast_ref::<CallError>().expect("a CallError").clone()
        }
        other => panic!("expected a body error, got {other:?}"),
    }
}

/// Counts the `warn` events of this crate, on the current thread while the guard lives.
#[derive(Clone, Default)]
pub(crate) struct Warnings(Arc<AtomicUsize>);

impl Warnings {
    pub(crate) fn install(&self) -> tracing::subscriber::DefaultGuard {
        let subscriber = tracing_subscriber::registry().with(self.clone());
        tracing::subscriber::set_default(subscriber)
    }

    pub(crate) fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Warnings {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let metadata = event.metadata();
        if *metadata.level() == tracing::Level::WARN && metadata.target().starts_with("loopbound_mcp") {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}
