//! `watch-probe MODE`: one run of five streamed replies, each of 10,000 text pieces of 64 bytes,
//! the first four with 16 tool calls each, measured from outside by `testkit/tests/watch_memory.rs`
//! (under `peak_rss`, in release).
//!
//! - `idle`: builds the runtime and the tools, runs nothing;
//! - `unwatched`: the run without a watcher;
//! - `never-reads`: the run with a watcher that holds its end and never reads it.
//!
//! Prints one line: the outcome as JSON, then, for `never-reads`, ` pending <updates queued>`.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use loopbound::scripted::{Scripted, Step};
use loopbound::transport::{ModelReply, ToolCall};
use loopbound::watch;
use loopbound::{Limits, Message, Runner, Scope};
use loopbound_fixtures::review::{self, Review};

/// Text pieces per reply.
const PIECES: usize = 10_000;
/// Bytes per piece.
const PIECE: usize = 64;
/// Tool calls in each of the first four replies.
const CALLS: usize = 16;
/// Replies with tool calls; one text reply follows.
const CALL_REPLIES: u32 = 4;

fn main() -> ExitCode {
    let mode = std::env::args().nth(1).unwrap_or_default();
    if !matches!(mode.as_str(), "idle" | "unwatched" | "never-reads") {
        eprintln!("usage: watch-probe idle|unwatched|never-reads");
        return ExitCode::from(64);
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("watch-probe: no runtime: {error}");
            return ExitCode::from(70);
        }
    };
    runtime.block_on(probe(&mode))
}

async fn probe(mode: &str) -> ExitCode {
    let tools = review::tools();
    let text = "x".repeat(PIECES * PIECE);
    let model = Scripted::new(move |call, _| {
        let calls = if call <= CALL_REPLIES {
            (0..CALLS)
                .map(|n| {
                    let id = u32::try_from(n).unwrap_or(0) + 100 * call;
                    ToolCall::new(format!("c{id}"), "read_ticket", format!(r#"{{"input":{id}}}"#))
                })
                .collect()
        } else {
            Vec::new()
        };
        Step::Reply(ModelReply::new(Some(text.clone()), calls))
    })
    .fragment_size(PIECE);
    let runtime = Runner::new(&tools.set, model).observe(loopbound::Middleware).streaming(true);
    let limits = Limits::default().with_model_calls(5).with_tool_calls(64);
    let (feed, updates) = watch::channel();
    let mut scope = Scope::builder().grants(review::BOTH_CAPABILITIES).limits(limits);
    if mode == "never-reads" {
        scope = scope.watch(feed);
    } else {
        drop(feed);
    }
    let scope = match scope.state(Review::default()).build() {
        Ok(scope) => scope,
        Err(error) => {
            eprintln!("watch-probe: {error}");
            return ExitCode::from(70);
        }
    };
    if mode == "idle" {
        println!("idle");
        return ExitCode::SUCCESS;
    }
    let mut conversation = vec![Message::user("Review the tickets.")];
    let outcome = match runtime.run(&scope, &mut conversation, |ended| Review::completed(ended.state())).await
    {
        Ok(outcome) => outcome,
        Err(error) => {
            eprintln!("watch-probe: {error}");
            return ExitCode::from(1);
        }
    };
    let json = serde_json::to_string(&outcome).unwrap_or_default();
    if mode == "never-reads" {
        println!("{json} pending {}", updates.pending());
    } else {
        println!("{json}");
    }
    ExitCode::SUCCESS
}
