//! The review task over a live OpenAI-compatible endpoint, bounded by loopbound.
//!
//! ```sh
//! LOOPBOUND_OPENAI_BASE_URL=http://127.0.0.1:8080/v1 LOOPBOUND_OPENAI_MODEL=smollm2 \
//!     cargo run -p loopbound-openai --example review_live -- [--simple] [--stream] [--transcript]
//! ```
//!
//! The conversation carries one worked example (ticket 7: read it, finish its review, say so)
//! before the real request (ticket 42), which is what lets a small model emit real tool calls. The
//! review task is the testkit's, the same the console and the tests run.
//! Whatever the model does, the run ends with a status within the default limits; the process
//! exits with the outcome's code (0 completed, 2 stopped or unavailable, 1 provider error).
//!
//! `--transcript` also prints the conversation the model produced, tool arguments included
//! (events never carry arguments; this is the host printing its own memory).

use std::process::ExitCode;

use loopbound::transport::Transport;
use loopbound::{Limits, Message};
use loopbound_openai::OpenAiTransport;
use loopbound_testkit::Composition;
use loopbound_testkit::review::{self, BOTH_CAPABILITIES, Review};

fn print_transcript(messages: &[Message]) {
    println!("transcript (after the worked example):");
    for message in messages {
        match message {
            Message::Assistant { content, tool_calls, .. } => {
                for call in tool_calls {
                    println!("  model calls {}({}) [{}]", call.name, call.arguments, call.id);
                }
                if let Some(text) = content {
                    println!("  model says {text:?}");
                }
            }
            Message::Tool { content, is_error, .. } => {
                let kind = if *is_error { "error" } else { "result" };
                println!("  tool {kind}: {content}");
            }
            Message::System { .. } | Message::User { .. } => {}
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    for arg in &args {
        if !matches!(arg.as_str(), "--simple" | "--stream" | "--transcript") {
            eprintln!("usage: review_live [--simple] [--stream] [--transcript]  (unknown argument {arg:?})");
            return ExitCode::from(64);
        }
    }
    let has = |flag: &str| args.iter().any(|arg| arg == flag);
    let transport = match OpenAiTransport::from_env() {
        Ok(transport) => transport,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(64);
        }
    };
    let composition = if has("--simple") { Composition::Simple } else { Composition::Harness };
    let limits = Limits::default();
    let scope = match review::scope(BOTH_CAPABILITIES, limits.clone()) {
        Ok(scope) => scope,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(64);
        }
    };

    let config = transport.config();
    let connection = config.connection();
    println!("transport: openai-compatible at {} (model {})", connection.base_url(), connection.model());
    println!("agent: {composition}, iteration cap {}", composition.max_iterations(&limits));
    println!("call path: {}", if has("--stream") { "streaming" } else { "whole replies" });
    println!("limits: {limits}");

    let mut messages = review::live_conversation();
    let example_len = messages.len();
    let result = run(composition, transport, has("--stream"), &scope, &mut messages).await;
    if has("--transcript") {
        print_transcript(&messages[example_len..]);
    }
    match result {
        Ok(outcome) => {
            println!("events:");
            for event in outcome.events() {
                println!("  {event}");
            }
            println!("status: {}", outcome.status());
            if let Some(detail) = outcome.detail() {
                println!("detail: {detail}");
            }
            if let Some(text) = outcome.text() {
                println!("text: {text:?}");
            }
            if let Some(usage) = outcome.usage() {
                println!(
                    "usage: {} prompt tokens, {} completion tokens",
                    usage.input_tokens, usage.output_tokens
                );
            }
            println!("model calls: {}, tool calls: {}", scope.model_calls(), scope.tool_calls());
            ExitCode::from(if outcome.status() == loopbound::Status::Completed { 0 } else { 2 })
        }
        Err(error) => {
            println!("events:");
            for event in scope.events() {
                println!("  {event}");
            }
            println!("error: {error}");
            ExitCode::from(if error == loopbound::RunError::Cancelled { 130 } else { 1 })
        }
    }
}

/// One bounded run of the review over `transport`.
async fn run<T: Transport>(
    composition: Composition,
    transport: T,
    streaming: bool,
    scope: &loopbound::Scope<Review>,
    messages: &mut Vec<Message>,
) -> Result<loopbound::Outcome, loopbound::RunError> {
    composition
        .runner(&review::tools().set, transport)
        .options(review::options())
        .streaming(streaming)
        .run(scope, messages, |ended| ended.state().completed())
        .await
}
