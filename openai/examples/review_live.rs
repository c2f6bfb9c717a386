//! The review task over a live OpenAI-compatible endpoint, bounded by loopbound.
//!
//! ```sh
//! LOOPBOUND_BASE_URL=http://127.0.0.1:8080/v1 LOOPBOUND_MODEL=smollm2 \
//!     cargo run -p loopbound-openai --example review_live -- [--simple] [--stream] [--transcript]
//! ```
//!
//! The conversation carries one worked example (ticket 7: read it, finish its review, say so)
//! before the real request (ticket 42), which is what lets a small model emit real tool calls.
//! Whatever the model does, the run ends with a status within the default limits; the process
//! exits with the outcome's code (0 completed, 2 stopped or unavailable, 1 provider error).
//!
//! `--transcript` also prints the conversation the model produced, tool arguments included
//! (events never carry arguments; this is the host printing its own memory).

use std::process::ExitCode;

use loopbound::{ChatOptions, Composition, Limits, Message, Runtime, Scope, ToolCall};
use loopbound_openai::OpenAiTransport;

#[path = "../tests/support/review_task.rs"]
mod review_task;

use review_task::Review;

const SYSTEM: &str = "You review support tickets. To review a ticket, first call read_ticket with its id, \
    then call finish_review with the same id, then answer exactly: Review finished.";

/// The worked example, for ticket 7, followed by the real request.
fn conversation() -> Vec<Message> {
    let call = |id: &str, name: &str| Message::Assistant {
        content: None,
        tool_calls: vec![ToolCall::new(id, name, r#"{"input": 7}"#)],
    };
    vec![
        Message::system(SYSTEM),
        Message::user("Review ticket 7."),
        call("call_example_read", "read_ticket"),
        Message::tool_result("call_example_read", "Ticket 7: the printer on floor 2 is offline."),
        call("call_example_finish", "finish_review"),
        Message::tool_result("call_example_finish", "Review of ticket 7 recorded."),
        Message::Assistant { content: Some("Review finished.".into()), tool_calls: vec![] },
        Message::user("Review ticket 42."),
    ]
}

fn print_transcript(messages: &[Message]) {
    println!("transcript (after the worked example):");
    for message in messages {
        match message {
            Message::Assistant { content, tool_calls } => {
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
    let scope = match Scope::builder().grant("ticket.read").grant("review.finish").limits(limits).build() {
        Ok(scope) => scope,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(64);
        }
    };
    let review = Review::register(&scope);

    let config = transport.config();
    println!("transport: openai-compatible at {} (model {})", config.base_url(), config.model());
    println!("agent: {}", composition.describe(&limits));
    println!("call path: {}", if has("--stream") { "streaming" } else { "whole replies" });
    println!("limits: {limits:?}");

    let mut messages = conversation();
    let example_len = messages.len();
    let result = Runtime::new(composition, &scope, transport)
        .options(ChatOptions::default().with_max_output_tokens(800))
        .streaming(has("--stream"))
        .run(&mut messages, || review.is_complete())
        .await;
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
                    usage.prompt_tokens, usage.completion_tokens
                );
            }
            println!("model calls: {}, tool calls: {}", scope.model_calls(), scope.tool_calls());
            ExitCode::from(u8::try_from(outcome.exit_code()).unwrap_or(2))
        }
        Err(error) => {
            println!("events:");
            for event in scope.events() {
                println!("  {event}");
            }
            println!("error: {error}");
            ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(1))
        }
    }
}
