//! The HTTP machinery that [`loopbound`]'s provider transports share, so that every provider gets
//! the same bounds, the same redaction and the same error mapping:
//!
//! - [`config`]: explicit configuration ([`Variables`] read from the environment or a lookup,
//!   base URLs checked, [`ConfigError`]); no default endpoint, no fallback;
//! - [`ApiKey`] and [`Redactor`]: the key prints as `[redacted]`, and every run of eight of its
//!   characters that a provider echoes back (in an error, the model's text, a tool call) is
//!   replaced, whole replies and streams alike ([`StreamRedactor`]);
//! - [`sse`]: an incremental decoder of server-sent events;
//! - [`events`]: a stream of events decoded into reply chunks within the reply's bounds, for any
//!   provider's [`Protocol`];
//! - [`errors`]: HTTP statuses and client failures mapped to the transport contract;
//! - [`Endpoint`]: one `POST` per model call, no retry, no redirect, the body read within the
//!   request's bounds, whole or streamed, cancelled with the run;
//! - [`HttpTransport`]: a `loopbound` transport over any provider's [`Api`].
//!
//! A transport (`loopbound-openai`, `loopbound-anthropic`) keeps only what is its provider's
//! own, its [`Api`]: its configuration (around a shared [`Connection`]), its request body, and
//! its [`Protocol`] (what each streamed event means, how a whole reply reads).
//!
//! | failure | [`TransportError`](loopbound::transport::TransportError) | run ends with |
//! |---|---|---|
//! | connection refused, DNS or TLS failure, a timeout, HTTP 5xx, 408, 429 | `Unavailable` | `ProviderUnavailable` |
//! | HTTP 401, 403 | `Authentication` | a provider error |
//! | any other non-2xx status | `Other` | a provider error |
//! | a body cut short, a stream cut before its end, an unparsable reply, a reply past its byte bound | `Malformed` | a provider error |
//! | a reply with more tool calls than the bound | `TooManyCalls` | the `TooManyCalls` halt |
//!
//! The decoders are pure functions of bytes, so they can be fuzzed and property-tested without
//! a server.

#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![warn(clippy::pedantic)]
// Module names prefix most types; repeating them in item names reads well here.
#![allow(clippy::module_name_repetitions)]

pub mod body;
pub mod config;
mod direct;
mod endpoint;
pub mod errors;
pub mod events;
mod h1;
mod h2c;
pub mod json;
mod key;
#[cfg(test)]
mod properties;
pub mod redact;
pub mod sse;
mod stream;
#[cfg(test)]
mod test_server;
mod transport;
pub mod work;

pub use config::{ConfigError, Connection, HttpVersion, Variables};
pub use endpoint::{Endpoint, KeyHeader, MAX_ERROR_BODY};
pub use events::{Protocol, Step, StreamDecoder};
pub use key::{ApiKey, REDACTED};
pub use redact::{Redactor, StreamRedactor};
pub use transport::{Api, HttpTransport};
