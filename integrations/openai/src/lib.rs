//! OpenAI-compatible transports for [`loopbound`]: chat completions ([`OpenAiTransport`]) and the
//! Responses API ([`ResponsesTransport`]).
//!
//! [`OpenAiTransport`] implements [`loopbound::transport::Transport`] over HTTP: `POST
//! {base}/chat/completions` with the model, the conversation (system, user, assistant with
//! `tool_calls`, tool results with their `tool_call_id`), the tools (`type: "function"` with the
//! JSON schema core derives from each tool's input type) and the run's output cap
//! (`max_completion_tokens`, or `max_tokens` for older servers); whole replies or server-sent
//! events (`stream: true` with `stream_options: {"include_usage": true}`, so the usage arrives,
//! ended by `data: [DONE]`).
//!
//! It is configured explicitly, by environment or in code, and never falls back to any
//! provider of its own choosing:
//!
//! | variable | required | meaning |
//! |---|---|---|
//! | `LOOPBOUND_OPENAI_BASE_URL` | yes | base URL, e.g. `http://127.0.0.1:8080/v1` |
//! | `LOOPBOUND_OPENAI_MODEL` | yes | model name sent with each request |
//! | `LOOPBOUND_OPENAI_API_KEY` | no | sent as `Authorization: Bearer …`; never printed |
//! | `LOOPBOUND_OPENAI_TIMEOUT_SECS` | no | per-request timeout (connection, then whole response) |
//! | `LOOPBOUND_OPENAI_STREAM_USAGE` | no | `off` stops asking for usage in streams (default `on`) |
//! | `LOOPBOUND_OPENAI_OUTPUT_CAP_FIELD` | no | `max_tokens` sends the output cap in the older field (default `max_completion_tokens`) |
//!
//! Failures map to the transport contract as `loopbound_provider`'s error table tells: an
//! unreachable endpoint, a timeout, HTTP 5xx or 429 end a run with `ProviderUnavailable`; refused
//! credentials, malformed or truncated replies and other statuses are provider errors; an `error`
//! object inside a reply or a stream is mapped by its `code`. There is no retry: each attempt
//! would have to be a counted model call. The HTTP machinery (bounds, redaction of the API key,
//! the event-stream decoder, cancellation) is `loopbound-provider`'s, shared with the Anthropic
//! transport.
//!
//! The wire format ([`wire`]), the reply parsers ([`parse`]) and the chunk decoder ([`chunks`])
//! are pure functions of bytes, so they can be fuzzed and property-tested without a server.
//!
//! [`ResponsesTransport`] takes the same [`Config`] and variables and posts to
//! `{base}/responses`: stateless (`store: false`, the whole conversation each time as `input`
//! items, tool results as `function_call_output` items), `function` tools with `strict: false`,
//! the run's output cap as `max_output_tokens`; whole replies are one `response` object, streams
//! its events up to `response.completed`, whose usage (cached input tokens included) settles the
//! call; a `response.failed` or `error` event is mapped by its `code` as above. The chat-only
//! settings (`LOOPBOUND_OPENAI_STREAM_USAGE`, `LOOPBOUND_OPENAI_OUTPUT_CAP_FIELD`) do not apply to it. It is a
//! second API of this crate rather than a crate of its own because all but the body is shared:
//! the base URL, the bearer key, the error objects; a host switches by changing one constructor.
//!
//! # Example
//!
//! ```no_run
//! use loopbound::{Message, Runner, Scope, Status, ToolBuilder, ToolSet};
//! use loopbound::transport::ChatOptions;
//! use loopbound_openai::{Config, OpenAiTransport};
//! use std::time::Duration;
//!
//! #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
//! struct Ticket {
//!     input: i64,
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Or `OpenAiTransport::from_env()?` with LOOPBOUND_OPENAI_BASE_URL and LOOPBOUND_OPENAI_MODEL set.
//! let config = Config::new("http://127.0.0.1:8080/v1", "smollm2")?.with_timeout(Duration::from_secs(30));
//! let transport = OpenAiTransport::new(config)?;
//!
//! // Once: the tools and the runtime, shared by every request.
//! let read_ticket = ToolBuilder::new("read_ticket", "ticket.read")
//!     .description("Read one ticket by its id.")
//!     .build(|t: Ticket, _call| async move { Ok::<_, String>(format!("Ticket {}: login fails.", t.input)) })?;
//! let tools = ToolSet::builder().add(&read_ticket).build()?;
//! let runtime = Runner::new(&tools, transport)
//!     .options(ChatOptions::default().with_max_output_tokens(800))
//!     .streaming(true);
//!
//! // Per request: a scope, and a run.
//! let scope = Scope::builder().grant("ticket.read").build()?;
//! let outcome = runtime.run(&scope, &mut vec![Message::user("Read ticket 42.")], |_| false).await?;
//! match outcome.status() {
//!     Status::ProviderUnavailable => eprintln!("unavailable: {}", outcome.detail().unwrap_or("")),
//!     status => println!("{status}: {:?}", outcome.text()),
//! }
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![warn(clippy::pedantic)]
// Module names prefix most types; repeating them in item names reads well here.
#![allow(clippy::module_name_repetitions)]

// The decoders are public only so that the fuzz targets and properties (in other crates) reach
// them; they are not part of the API, hidden from the docs, and may change in any release.
#[doc(hidden)]
pub mod chunks;
mod config;
mod errors;
#[doc(hidden)]
pub mod parse;
#[cfg(test)]
mod properties;
// The Responses API: its transport is re-exported below; the module is public, like the chat
// decoders, only for the fuzz targets and properties.
#[doc(hidden)]
pub mod responses;
mod transport;
#[doc(hidden)]
pub mod wire;

pub use config::{
    Config, ENV_API_KEY, ENV_BASE_URL, ENV_MODEL, ENV_OUTPUT_CAP_FIELD, ENV_STREAM_USAGE, ENV_TIMEOUT_SECS,
    OutputCapField,
};
/// The key, its redaction and the configuration errors are the shared provider crate's.
pub use loopbound_provider::{ApiKey, ConfigError, HttpVersion, REDACTED, Redactor};
pub use responses::{Responses, ResponsesTransport};
pub use transport::{OpenAi, OpenAiTransport};
