//! `utilization`: the share of a token budget a runaway loop spends before it is stopped, and
//! its overshoot, for each way of counting a request, on a provider that bills what a real
//! tokenizer counts.
//!
//! ```text
//! cargo run --release -p loopbound-benches --features tiktoken --bin utilization
//! ```
//!
//! Without the `tiktoken` feature the provider still counts with `o200k_base` (through the
//! `tiktoken-rs` crate the benches depend on) and every row but `tiktoken` prints.
//!
//! With `--tokenizer-url http://127.0.0.1:PORT` the provider counts with a real model's own
//! template and tokenizer instead: llama.cpp's server renders each request (`/apply-template`)
//! and counts it (`/tokenize`), and the reply the same way (not a model's reply: the runaway's
//! scripted one). `demos/smoke/real-model.sh` starts such a server; the `exact` row is not
//! printed then (no counter of a templated model's requests exists here).
//!
//! # The workload
//!
//! A runaway loop: every reply says a line and asks for one more order (`lookup` with a new id),
//! and every tool result is an order record of about 400 bytes, so the conversation grows as an
//! agent's does. The provider is honest: it bills the request as OpenAI's `o200k_base` encoding
//! counts it, with a real chat template's framing (4 tokens a message, 3 a request; a tool
//! definition its name, description and schema), and its reply's tokens, never more than the
//! request's output cap. Each call takes 100 ms on tokio's paused clock, so parallel children
//! overlap; the figures do not depend on the machine.
//!
//! # What it prints
//!
//! For one run and for 8 parallel children of one parent holding the budget (each with the
//! defaults a user gets otherwise), and for budgets of 4,000, 20,000 and 60,000 tokens: the calls
//! made, the tokens billed, the utilization (billed ÷ budget), the overshoot past the budget, and
//! how the run ended, for four ways of counting a request:
//!
//! - `bytes`: the default counter (UTF-8 bytes), every request counted whole;
//! - `bytes, calibrated` (the default): the last report plus the bytes appended since;
//! - `tiktoken`: `o200k_base`'s exact count of the text with the byte counter's framing;
//! - `exact`: the provider's own count (what no host has; the ceiling a count can reach).

#![forbid(unsafe_code)]
#![warn(clippy::pedantic)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use loopbound::spend::TokenCounter;
#[cfg(feature = "tiktoken")]
use loopbound::spend::{Encoding, TiktokenCounter};
use loopbound::transport::{
    ChatRequest, ModelReply, ToolCall, ToolDefinition, Transport, TransportError, Usage,
};
use loopbound::{Limits, Message, Runner, Scope, Status, ToolBuilder, ToolContext, ToolSet};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The provider's framing: per message, and per request.
const MESSAGE_FRAMING: u64 = 4;
const REQUEST_FRAMING: u64 = 3;
/// What a call takes, on the paused clock.
const LATENCY: Duration = Duration::from_millis(100);
const BUDGETS: [u64; 3] = [4_000, 20_000, 60_000];
const CHILDREN: usize = 8;

/// The provider's tokenizer, counting a text once (texts repeat in every request); with a
/// server, a real model's template and tokenizer.
#[derive(Default)]
struct Tokenizer {
    seen: Mutex<HashMap<String, u64>>,
    server: Option<(reqwest::Client, String)>,
}

impl Tokenizer {
    fn count(&self, text: &str) -> u64 {
        if let Some(count) = self.seen.lock().expect("not poisoned").get(text) {
            return *count;
        }
        let count = tiktoken_rs::o200k_base_singleton().encode_ordinary(text).len() as u64;
        self.seen.lock().expect("not poisoned").insert(text.to_owned(), count);
        count
    }

    /// The provider's count of a request: the server's, or [`framed`](Self::framed).
    async fn request(&self, messages: &[Message], tools: &[ToolDefinition]) -> u64 {
        match &self.server {
            Some((client, url)) => served(client, url, messages, tools).await,
            None => self.framed(messages, tools),
        }
    }

    /// The provider's count of a reply of `line` and one call with `arguments`.
    async fn reply(&self, line: &str, arguments: &str) -> u64 {
        match &self.server {
            Some((client, url)) => {
                let text = format!(r#"{{"name": "lookup", "arguments": {arguments}}}"#);
                tokens(client, url, &text).await + 2
            }
            None => self.count(line) + self.count(arguments) + MESSAGE_FRAMING,
        }
    }

    /// `o200k_base`'s count of a request: its messages and tool definitions, framed.
    fn framed(&self, messages: &[Message], tools: &[ToolDefinition]) -> u64 {
        let message = |message: &Message| -> u64 {
            let text = match message {
                Message::System { content, .. } | Message::User { content, .. } => self.count(content),
                Message::Assistant { content, tool_calls, .. } => {
                    let calls: u64 = tool_calls
                        .iter()
                        .map(|call| {
                            MESSAGE_FRAMING
                                + self.count(&call.id)
                                + self.count(&call.name)
                                + self.count(&call.arguments)
                        })
                        .sum();
                    content.as_deref().map_or(0, |text| self.count(text)) + calls
                }
                Message::Tool { call_id, content, .. } => self.count(call_id) + self.count(content),
            };
            text + MESSAGE_FRAMING
        };
        let tools: u64 = tools
            .iter()
            .map(|tool| {
                let schema = serde_json::to_string(&tool.parameters).unwrap_or_default();
                MESSAGE_FRAMING + self.count(&tool.name) + self.count(&tool.description) + self.count(&schema)
            })
            .sum();
        messages.iter().map(message).sum::<u64>() + tools + REQUEST_FRAMING
    }
}

/// A request as OpenAI's chat completions would send it, for llama.cpp's `/apply-template`.
fn wire(messages: &[Message], tools: &[ToolDefinition]) -> serde_json::Value {
    use serde_json::json;
    let messages: Vec<serde_json::Value> = messages
        .iter()
        .map(|message| match message {
            Message::System { content, .. } => json!({"role": "system", "content": content}),
            Message::User { content, .. } => json!({"role": "user", "content": content}),
            Message::Assistant { content, tool_calls, .. } => json!({
                "role": "assistant",
                "content": content,
                "tool_calls": tool_calls.iter().map(|call| json!({
                    "id": call.id, "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                })).collect::<Vec<_>>(),
            }),
            Message::Tool { call_id, content, .. } => {
                json!({"role": "tool", "tool_call_id": call_id, "content": content})
            }
        })
        .collect();
    let tools: Vec<serde_json::Value> = tools
        .iter()
        .map(|tool| {
            json!({"type": "function", "function": {
                "name": tool.name, "description": tool.description, "parameters": tool.parameters,
            }})
        })
        .collect();
    json!({"messages": messages, "tools": tools})
}

/// The server's count of a request: its template applied, the prompt tokenized.
async fn served(client: &reqwest::Client, url: &str, messages: &[Message], tools: &[ToolDefinition]) -> u64 {
    let templated: serde_json::Value = client
        .post(format!("{url}/apply-template"))
        .json(&wire(messages, tools))
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .expect("the server applies its template")
        .json()
        .await
        .expect("the server answers JSON");
    let prompt = templated["prompt"].as_str().expect("a prompt");
    tokens(client, url, prompt).await
}

/// The server's count of `text`.
async fn tokens(client: &reqwest::Client, url: &str, text: &str) -> u64 {
    let counted: serde_json::Value = client
        .post(format!("{url}/tokenize"))
        .json(&serde_json::json!({"content": text}))
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .expect("the server tokenizes")
        .json()
        .await
        .expect("the server answers JSON");
    counted["tokens"].as_array().map_or(0, Vec::len) as u64
}

/// The provider's own count as a counter: what an exact count of this provider would reserve.
struct Exact(Arc<Tokenizer>);

impl TokenCounter for Exact {
    fn count(&self, text: &str) -> u64 {
        self.0.count(text)
    }

    fn request_overhead(&self) -> u64 {
        REQUEST_FRAMING
    }

    fn message_overhead(&self) -> u64 {
        MESSAGE_FRAMING
    }
}

/// The runaway model: a line and a new lookup on every reply, billed honestly.
struct Runaway {
    tokenizer: Arc<Tokenizer>,
    calls: AtomicU64,
    billed: AtomicU64,
}

impl Transport for Runaway {
    fn model(&self) -> Option<&str> {
        Some("runaway")
    }

    async fn complete<'a>(&'a self, request: ChatRequest<'a>) -> Result<ModelReply, TransportError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let input = self.tokenizer.request(request.messages, request.tools).await;
        let line = format!("Order {n} is not the one; looking up the next order to compare its lines.");
        let arguments = format!(r#"{{"id":{n}}}"#);
        let written = self.tokenizer.reply(&line, &arguments).await;
        let output = request.options.max_output_tokens.map_or(written, |cap| written.min(u64::from(cap)));
        self.billed.fetch_add(input + output, Ordering::SeqCst);
        tokio::time::sleep(LATENCY).await;
        let reply = ModelReply::new(Some(line), vec![ToolCall::new(format!("c{n}"), "lookup", arguments)]);
        Ok(reply.with_usage(Usage::new(input, output)))
    }
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Lookup {
    /// The order's number.
    id: u64,
}

/// `lookup`: an order record of about 400 bytes.
fn tools() -> ToolSet {
    let lookup = ToolBuilder::new("lookup", "orders.read")
        .description("Reads one order: its customer, lines, totals and status.")
        .build(|lookup: Lookup, _call: ToolContext| async move {
            let id = lookup.id;
            Ok::<_, String>(format!(
                r#"{{"order":{id},"customer":"C-{:05}","status":"shipped","lines":[{{"sku":"A-{id}","qty":2,"price":"19.90"}},{{"sku":"B-{id}","qty":1,"price":"249.00"}},{{"sku":"C-{id}","qty":4,"price":"3.25"}}],"total":"301.80","currency":"EUR","note":"Delivered to the front desk; the customer asked for an invoice with the company's VAT number."}}"#,
                id * 37 % 100_000
            ))
        })
        .expect("the tool is valid");
    ToolSet::builder().add(&lookup).build().expect("a set of one tool")
}

/// Loose call limits: only the token budget stops a run.
fn roomy() -> Limits {
    Limits::default().with_model_calls(100_000).with_tool_calls(100_000).with_repetitions(100_000)
}

#[derive(Clone, Copy, Debug)]
enum Counting {
    Bytes,
    Calibrated,
    #[cfg(feature = "tiktoken")]
    Tiktoken,
    Exact,
}

impl Counting {
    const ALL: &[Self] = &[
        Self::Bytes,
        Self::Calibrated,
        #[cfg(feature = "tiktoken")]
        Self::Tiktoken,
        Self::Exact,
    ];

    fn label(self) -> &'static str {
        match self {
            Self::Bytes => "bytes",
            Self::Calibrated => "bytes, calibrated (the default)",
            #[cfg(feature = "tiktoken")]
            Self::Tiktoken => "tiktoken o200k",
            Self::Exact => "exact (the provider's own count)",
        }
    }

    fn runtime(self, tools: &ToolSet, model: Arc<Runaway>) -> Runner<Arc<Runaway>> {
        let tokenizer = Arc::clone(&model.tokenizer);
        let runtime = Runner::new(tools, model);
        match self {
            Self::Bytes => runtime.calibrate_reservations(false),
            Self::Calibrated => runtime,
            #[cfg(feature = "tiktoken")]
            Self::Tiktoken => {
                runtime.token_counter(TiktokenCounter::new(Encoding::O200k)).calibrate_reservations(false)
            }
            Self::Exact => runtime.token_counter(Exact(tokenizer)).calibrate_reservations(false),
        }
    }
}

/// What one configuration spent.
struct Spent {
    calls: u64,
    billed: u64,
    ended: Vec<Status>,
}

/// A fresh runaway model, counting with `server`'s tokenizer if one is given.
fn runaway(server: Option<&str>) -> Arc<Runaway> {
    let tokenizer = Tokenizer {
        seen: Mutex::default(),
        server: server.map(|url| (reqwest::Client::new(), url.trim_end_matches('/').to_owned())),
    };
    Arc::new(Runaway { tokenizer: Arc::new(tokenizer), calls: AtomicU64::new(0), billed: AtomicU64::new(0) })
}

/// One runaway run under `budget`.
async fn one(counting: Counting, budget: u64, server: Option<&str>) -> Spent {
    let model = runaway(server);
    let scope = Scope::builder()
        .grant("orders.read")
        .limits(roomy().with_total_tokens(budget))
        .build()
        .expect("valid limits");
    let mut conversation = vec![
        Message::system("You audit orders. Look each one up until told otherwise."),
        Message::user("Find the order with a wrong total."),
    ];
    let outcome = counting
        .runtime(&tools(), Arc::clone(&model))
        .run(&scope, &mut conversation, |_| false)
        .await
        .expect("the run is valid");
    Spent {
        calls: model.calls.load(Ordering::SeqCst),
        billed: model.billed.load(Ordering::SeqCst),
        ended: vec![outcome.status()],
    }
}

/// Eight runaway children of one parent holding `budget`.
async fn children(counting: Counting, budget: u64, server: Option<&str>) -> Spent {
    let model = runaway(server);
    let parent = Scope::builder()
        .grant("orders.read")
        .limits(roomy().with_total_tokens(budget))
        .build()
        .expect("valid limits");
    let tools = tools();
    let mut runs = tokio::task::JoinSet::new();
    for _ in 0..CHILDREN {
        let child =
            parent.child().grant("orders.read").limits(roomy()).build().expect("a child within its parent");
        let runtime = counting.runtime(&tools, Arc::clone(&model));
        runs.spawn(async move {
            let mut conversation = vec![
                Message::system("You audit orders. Look each one up until told otherwise."),
                Message::user("Find the order with a wrong total."),
            ];
            runtime.run(&child, &mut conversation, |_| false).await.expect("the run is valid").status()
        });
    }
    let ended = runs.join_all().await;
    Spent { calls: model.calls.load(Ordering::SeqCst), billed: model.billed.load(Ordering::SeqCst), ended }
}

fn ended(statuses: &[Status]) -> String {
    let mut names: Vec<&str> = statuses.iter().map(|status| status.as_str()).collect();
    names.dedup();
    names.join(", ")
}

/// The command's arguments.
#[derive(clap::Parser)]
#[command(about = "The share of a token budget a runaway loop spends, per way of counting a request.")]
struct Cli {
    /// Count with a llama.cpp server's template and tokenizer (its base URL, without `/v1`)
    /// instead of `o200k_base`; the runs then take real time.
    #[arg(long, value_name = "URL")]
    tokenizer_url: Option<String>,
}

fn main() {
    let cli = <Cli as clap::Parser>::parse();
    let server = cli.tokenizer_url.as_deref();
    // The paused clock, unless the provider waits on a real server: a paused clock would jump
    // to the next timer (a deadline) while the runs wait on the network.
    let mut builder = tokio::runtime::Builder::new_current_thread();
    let clock =
        if server.is_some() { builder.enable_all() } else { builder.enable_time().start_paused(true) }
            .build()
            .expect("a current-thread runtime builds");
    println!("| shape | counting | budget | calls | billed | utilization | overshoot | ended with |");
    println!("|---|---|---:|---:|---:|---:|---:|---|");
    for shape in ["one run", "8 parallel children"] {
        for budget in BUDGETS {
            for &counting in Counting::ALL {
                if server.is_some() && matches!(counting, Counting::Exact) {
                    continue;
                }
                let spent = clock.block_on(async {
                    if shape == "one run" {
                        one(counting, budget, server).await
                    } else {
                        children(counting, budget, server).await
                    }
                });
                #[allow(clippy::cast_precision_loss, reason = "token counts far below 2^52")]
                let utilization = spent.billed as f64 / budget as f64;
                println!(
                    "| {shape} | {} | {budget} | {} | {} | {utilization:.2} | {} | {} |",
                    counting.label(),
                    spent.calls,
                    spent.billed,
                    spent.billed.saturating_sub(budget),
                    ended(&spent.ended),
                );
            }
        }
    }
}
