//! A deliberately hostile model server, on loopback, for tests that prove a client's bounds hold
//! against a provider that misbehaves on purpose. It speaks OpenAI-compatible chat completions,
//! in its Anthropic mode the Messages API, and in its Responses mode the OpenAI Responses API:
//! the request's path decides.
//!
//! [`HostileServer::start`] binds `127.0.0.1` on an ephemeral port and answers every
//! `POST /v1/chat/completions`, `POST /v1/messages` and `POST /v1/responses` with one
//! [`Behaviour`], in the
//! request's API: endless streams of text, of new tool-call indices, of growing arguments or of
//! growing usage reports; an error inside the stream after many deltas; a flood of tool calls; a
//! reply trickled one byte at a time; a stream of keep-alives only; replies that echo the
//! client's API key (from `Authorization: Bearer` or `x-api-key`); text full of terminal control
//! sequences; canned and scripted replies. The counters
//! ([`HostileServer::requests`], [`HostileServer::bytes_sent`],
//! [`HostileServer::last_request_body_len`]) let a test assert what the client did.
//!
//! # Invariants
//!
//! - The server listens on loopback only and stops, closing every connection, when the
//!   [`HostileServer`] is dropped.
//! - Every connection is bounded by the [`Budget`]: at most `max_bytes` body bytes per response
//!   and at most `max_time` per connection, whichever comes first, so a test can never hang or
//!   exhaust memory or disk because of the server itself.
//! - Every response closes its connection (`Connection: close`); request bodies are read only
//!   with `Content-Length`, up to [`MAX_REQUEST_BODY`].
//! - No client input can panic the server: malformed requests are answered with 4xx errors and
//!   closed, failed writes close the connection.
//!
//! # Example
//!
//! ```
//! use loopbound_testkit::hostile::{Behaviour, Budget, HostileServer};
//! use std::time::Duration;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! let budget = Budget::new(8 * 1024 * 1024, Duration::from_secs(2));
//! let server = HostileServer::start_with(Behaviour::EndlessText { delta: 1024 * 1024 }, budget).await?;
//! assert!(server.base_url().starts_with("http://127.0.0.1:"));
//! assert_eq!(server.requests(), 0);
//! # Ok(())
//! # }
//! ```

#![warn(clippy::pedantic)]
// A misbehaving client must not panic the server: no `unwrap` or `expect` outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

mod answer;
mod behaviour;
mod budget;
mod dialect;
mod http;
mod messages;
mod payload;
mod response;
mod responses;
mod server;

pub use answer::{ESCAPE_TEXT, FAKE_STATUS_LINE};
pub use behaviour::{Behaviour, KeyPart, KeyPlace, Reply};
pub use budget::Budget;
pub use server::{HostileServer, MAX_REQUEST_BODY};
