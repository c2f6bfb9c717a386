//! An Anthropic Messages API transport for [`loopbound`].
//!
//! [`AnthropicTransport`] implements [`loopbound::transport::Transport`] over HTTP: `POST
//! {base}/messages` with the model, `max_tokens` (the run's output cap, else a configured
//! default: the API requires one), the system prompt, the conversation as content blocks (user
//! and assistant `text`, `tool_use` with the call's id, name and input, `tool_result` with the id
//! it answers and `is_error`, the results of one reply merged into one user message), the tools
//! (`input_schema`: the JSON schema core derives from each tool's input type) and `tool_choice`;
//! whole replies or server-sent events (`stream: true`: `message_start`, `content_block_start`,
//! `content_block_delta` with `text_delta` and `input_json_delta`, `content_block_stop`,
//! `message_delta`, `message_stop`, `ping`, `error`).
//!
//! Usage counts every input token: `input_tokens`, `cache_read_input_tokens` and
//! `cache_creation_input_tokens` are added into `Usage::input_tokens`, and the cache reads and
//! writes are also reported apart (`cached_input_tokens`, `cache_write_tokens`). A stream's
//! `message_delta` counts are cumulative: each report replaces the one before.
//!
//! It is configured explicitly, by environment or in code, and never falls back to any provider
//! of its own choosing (not even Anthropic's own endpoint):
//!
//! | variable | required | meaning |
//! |---|---|---|
//! | `LOOPBOUND_ANTHROPIC_BASE_URL` | yes | base URL, e.g. `https://api.anthropic.com/v1` or `http://127.0.0.1:8080/v1` |
//! | `LOOPBOUND_ANTHROPIC_MODEL` | yes | model name sent with each request |
//! | `LOOPBOUND_ANTHROPIC_API_KEY` | no | sent as `x-api-key`; never printed |
//! | `LOOPBOUND_ANTHROPIC_TIMEOUT_SECS` | no | per-request timeout (connection, then whole response) |
//! | `LOOPBOUND_ANTHROPIC_MAX_TOKENS` | no | the output cap of a request whose run sets none (default 4096) |
//! | `LOOPBOUND_ANTHROPIC_VERSION` | no | the `anthropic-version` header (default `2023-06-01`) |
//! | `LOOPBOUND_ANTHROPIC_TOOL_CHOICE` | no | `auto` (default), `any` or `none` |
//!
//! Failures map to the transport contract as for every provider (`loopbound_provider`): an
//! unreachable endpoint, a timeout, HTTP 5xx (529 `overloaded_error` included) or 429 (its
//! `Retry-After` in the message) end a run with `ProviderUnavailable`; 401 and 403 are an
//! authentication error; malformed or truncated replies are `Malformed`. An `error` event in the
//! middle of a stream ends it with the provider's error, mapped by its type as its HTTP status
//! would be (an overload is `Unavailable`, an invalid request `Other`). There is no retry: each
//! attempt would have to be a counted model call.
//!
//! The bounds of one reply (tool calls and bytes) are enforced while it is read, whole or
//! streamed, and the API key is redacted from everything the provider sends back, exactly as for
//! the OpenAI-compatible transport: both are built on `loopbound-provider`.
//!
//! The wire format ([`wire`]), the reply parser ([`parse`]) and the stream decoder ([`events`])
//! are pure functions of bytes, so they can be fuzzed and property-tested without a server.
//!
//! # Example
//!
//! ```no_run
//! use loopbound::{Message, Runner, Scope, Status, ToolBuilder, ToolSet};
//! use loopbound::transport::ChatOptions;
//! use loopbound_anthropic::{AnthropicTransport, Config};
//! use std::time::Duration;
//!
//! #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
//! struct Ticket {
//!     input: i64,
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Or `AnthropicTransport::from_env()?` with the LOOPBOUND_ANTHROPIC_* variables set.
//! let config = Config::new("https://api.anthropic.com/v1", "claude-sonnet-4-5")?
//!     .with_api_key(loopbound_anthropic::ApiKey::new(std::env::var("MY_KEY")?)?)
//!     .with_timeout(Duration::from_secs(60));
//! let transport = AnthropicTransport::new(config)?;
//!
//! let read_ticket = ToolBuilder::new("read_ticket", "ticket.read")
//!     .description("Read one ticket by its id.")
//!     .build(|t: Ticket, _call| async move { Ok::<_, String>(format!("Ticket {}: login fails.", t.input)) })?;
//! let tools = ToolSet::builder().add(&read_ticket).build()?;
//! let runtime = Runner::new(&tools, transport)
//!     .options(ChatOptions::default().with_max_output_tokens(800))
//!     .streaming(true);
//!
//! let scope = Scope::builder().grant("ticket.read").build()?;
//! let outcome = runtime.run(&scope, &mut vec![Message::user("Read ticket 42.")], |_| false).await?;
//! match outcome.status() {
//!     Status::ProviderUnavailable => eprintln!("unavailable: {}", outcome.detail().unwrap_or("")),
//!     status => println!("{status}: {:?} {:?}", outcome.text(), outcome.usage()),
//! }
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![warn(clippy::pedantic)]
// Module names prefix most types; repeating them in item names reads well here.
#![allow(clippy::module_name_repetitions)]

mod config;
mod errors;
// Public for the fuzz target and the replayed seeds (in the testkit) only: hidden from the docs,
// outside the API, free to change in any release.
#[doc(hidden)]
pub mod events;
#[doc(hidden)]
pub mod parse;
#[cfg(test)]
mod properties;
mod transport;
#[doc(hidden)]
pub mod wire;

pub use config::{
    Config, DEFAULT_MAX_TOKENS, DEFAULT_VERSION, ENV_API_KEY, ENV_BASE_URL, ENV_MAX_TOKENS, ENV_MODEL,
    ENV_TIMEOUT_SECS, ENV_TOOL_CHOICE, ENV_VERSION, ToolChoice,
};
/// The key, its redaction and the configuration errors are the shared provider crate's.
pub use loopbound_provider::{ApiKey, ConfigError, HttpVersion, REDACTED, Redactor};
pub use transport::{Anthropic, AnthropicTransport, MAX_TEMPERATURE};
