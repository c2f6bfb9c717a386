//! One provider endpoint over HTTP: a `POST` per model call, its status mapped, its body read
//! within the request's bounds, whole or streamed.
//!
//! # Invariants
//!
//! - One call, one HTTP request: no retry, no redirect followed, no second endpoint. Every
//!   attempt the runtime admits is exactly one request, so the model budget counts what the
//!   provider sees.
//! - HTTP/1.1 unless the connection asks for HTTP/2 ([`HttpVersion`]); then the endpoint holds
//!   one connection per connection asked for and sends each request on the next in turn, so the
//!   requests in flight spread evenly over that many connections: for `https://`, a pooled
//!   client each (TLS negotiates the version), for `http://`, an HTTP/2 connection driven
//!   directly (the `h2c` module), which keeps less per request in flight.
//! - The headers are fixed when the endpoint is built (an API key among them, marked sensitive);
//!   the endpoint's `Debug` shows its URL and nothing of the client or the headers.
//! - Everything the provider sends back passes through the [`Redactor`] before it leaves: error
//!   messages (redacted before they are cut), the model's text, tool-call ids, names and
//!   arguments, whole or streamed, and every error once more on its way out.
//! - A call stops when the request's cancellation fires (the scope's deadline, a halt, or the
//!   caller), besides the runtime dropping the call's future.
//! - Every reply is read within the request's [`ReplyBounds`]: a whole body is refused at its
//!   `Content-Length` or at the first byte past `bytes()`; a stream is cut at the first byte past
//!   `bytes()` (keep-alives included) or at the event that opens one call index too many. An
//!   error body is read up to [`MAX_ERROR_BODY`] only.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures_core::Stream;
use loopbound::transport::{ChatRequest, ModelReply, ReplyChunk, TransportError};
use reqwest::Url;
use reqwest::header::{self, HeaderMap, HeaderName, HeaderValue};

use crate::body::{read_body, read_reply};
use crate::config::{ConfigError, Connection, HttpVersion};
use crate::errors::{send_error, status_error};
use crate::events::Protocol;
use crate::h2c::H2c;
use crate::redact::Redactor;
use crate::stream::{chunk_stream, parse_whole};
use crate::work::until_cancelled;

/// Longest part of an error body, in bytes, read to explain a failure status.
pub const MAX_ERROR_BODY: usize = 64 << 10;

/// How a provider wants its API key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyHeader {
    /// `Authorization: Bearer <key>`.
    Bearer,
    /// The key alone in the header of this (lower-case) name, e.g. `x-api-key`.
    Named(&'static str),
}

/// An HTTP endpoint that answers model calls in one protocol.
///
/// A transport builds the request body in its provider's shape and hands it here with the
/// request; the endpoint sends it, maps the status, and reads the reply with the protocol's
/// decoders.
pub struct Endpoint {
    url: Url,
    connections: Connections,
    next: AtomicUsize,
    headers: HeaderMap,
    redactor: Redactor,
}

/// What the requests go out on.
enum Connections {
    /// `reqwest` clients, each with its own pool: HTTP/1.1, or HTTP/2 over TLS.
    Pooled(Box<[reqwest::Client]>),
    /// Cleartext HTTP/2 connections driven directly, and the URI every request names.
    H2c(Box<[H2c]>, http::Uri),
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint").field("url", &self.url.as_str()).finish_non_exhaustive()
    }
}

impl Endpoint {
    /// An endpoint at `url` that sends `headers` with every request (besides the content type
    /// and what it accepts), gives up after `timeout` when one is set (to connect, then for the
    /// whole response), speaks `http`, and redacts with `redactor` everything the provider
    /// sends back.
    ///
    /// # Errors
    ///
    /// [`ConfigError::TooManyConnections`] for HTTP/2 over more than
    /// [`HttpVersion::MAX_CONNECTIONS`] connections (nothing is built then);
    /// [`ConfigError::Client`] if the HTTP client cannot be built (no TLS backend).
    pub fn new(
        url: Url,
        headers: HeaderMap,
        timeout: Option<Duration>,
        http: HttpVersion,
        redactor: Redactor,
    ) -> Result<Self, ConfigError> {
        let client = |http2: bool| {
            let mut builder = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none());
            if let Some(timeout) = timeout {
                builder = builder.timeout(timeout).connect_timeout(timeout);
            }
            builder = match (http2, url.scheme()) {
                // The client's only automatic retries are of HTTP/2's refusals (a stream the
                // server refused, a graceful GOAWAY): over HTTP/1.1 there is nothing to retry,
                // yet it would keep a copy of every request (its headers, its body) for as long
                // as the call waits on its reply. No retries, no copy.
                (false, _) => builder.http1_only().retry(reqwest::retry::never().max_retries_per_request(0)),
                // Over TLS (cleartext HTTP/2 does not come here: it is `H2c`'s), TLS
                // negotiates the version; a server that offers only HTTP/1.1 gets it.
                (true, _) => builder,
            };
            builder.build().map_err(|error| ConfigError::Client(error.without_url().to_string()))
        };
        let connections = match http {
            HttpVersion::Http1 => Connections::Pooled(Box::new([client(false)?])),
            HttpVersion::Http2 { connections } if connections.get() > HttpVersion::MAX_CONNECTIONS => {
                return Err(ConfigError::TooManyConnections {
                    requested: connections.get(),
                    max: HttpVersion::MAX_CONNECTIONS,
                });
            }
            HttpVersion::Http2 { connections } if url.scheme() == "http" => {
                let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
                    return Err(ConfigError::Client("the endpoint's URL names no host".to_owned()));
                };
                let uri = url
                    .as_str()
                    .parse::<http::Uri>()
                    .map_err(|error| ConfigError::Client(format!("the endpoint's URL: {error}")))?;
                let authority = format!("{host}:{port}");
                Connections::H2c(
                    (0..connections.get()).map(|_| H2c::new(authority.clone(), timeout)).collect(),
                    uri,
                )
            }
            HttpVersion::Http2 { connections } => {
                Connections::Pooled((0..connections.get()).map(|_| client(true)).collect::<Result<_, _>>()?)
            }
        };
        Ok(Self { url, connections, next: AtomicUsize::new(0), headers, redactor })
    }

    /// The endpoint at `path` below `connection`'s base URL, with its timeout, its key sent as
    /// `key` says (marked sensitive) besides `headers`, and a redactor of that key.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Client`] if the HTTP client cannot be built; [`ConfigError::InvalidApiKey`]
    /// if the key cannot be a header (a visible ASCII key always can).
    pub fn connect(
        connection: &Connection,
        path: &str,
        key: KeyHeader,
        mut headers: HeaderMap,
    ) -> Result<Self, ConfigError> {
        if let Some(api_key) = connection.api_key() {
            let (name, value) = match key {
                KeyHeader::Bearer => (header::AUTHORIZATION, api_key.header(Some("Bearer"))?),
                KeyHeader::Named(name) => (HeaderName::from_static(name), api_key.header(None)?),
            };
            headers.insert(name, value);
        }
        let redactor = Redactor::new(connection.api_key().cloned());
        Self::new(connection.endpoint(path), headers, connection.timeout(), connection.http(), redactor)
    }

    /// The URL requests are posted to.
    #[must_use]
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// Sends `body` for `request` and parses the whole reply with protocol `P`.
    ///
    /// # Errors
    ///
    /// The mapped [`TransportError`] (see [`crate::errors`]), redacted.
    pub async fn complete<P: Protocol>(
        &self,
        request: ChatRequest<'_>,
        body: Vec<u8>,
    ) -> Result<ModelReply, TransportError> {
        let call = async {
            let response = self.send(body, "application/json").await?;
            let body = read_reply(response, request.bounds).await?;
            parse_whole::<P>(body, request.bounds, &self.redactor).await
        };
        until_cancelled(request.cancel, call).await.map_err(|error| self.redactor.scrub(error))
    }

    /// Sends `body` for `request` and returns the reply's chunks as protocol `P` decodes them.
    ///
    /// # Errors
    ///
    /// The mapped [`TransportError`] of the request itself, redacted; errors while reading come
    /// as the stream's items.
    pub async fn stream<P: Protocol>(
        &self,
        request: ChatRequest<'_>,
        body: Vec<u8>,
    ) -> Result<impl Stream<Item = Result<ReplyChunk, TransportError>> + Send + 'static, TransportError> {
        let response = until_cancelled(request.cancel, self.send(body, "text/event-stream"))
            .await
            .map_err(|error| self.redactor.scrub(error))?;
        Ok(chunk_stream::<P>(response, request.cancel.clone(), request.bounds, self.redactor.clone()))
    }

    /// Sends one request and returns the response if its status is a success.
    async fn send(
        &self,
        mut body: Vec<u8>,
        accept: &'static str,
    ) -> Result<reqwest::Response, TransportError> {
        // The body lives until the reply comes (it goes out as it is, without a copy): give
        // back what its serialiser reserved beyond its length, often a third of it.
        body.shrink_to_fit();
        // The connections take requests in turn.
        let turn = self.next.fetch_add(1, Ordering::Relaxed);
        let response = match &self.connections {
            Connections::Pooled(clients) => clients[turn % clients.len()]
                .post(self.url.clone())
                .headers(self.headers.clone())
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::ACCEPT, HeaderValue::from_static(accept))
                .body(body)
                .send()
                .await
                .map_err(send_error)?,
            Connections::H2c(connections, uri) => {
                let mut request = http::Request::new(());
                *request.method_mut() = http::Method::POST;
                *request.uri_mut() = uri.clone();
                let headers = request.headers_mut();
                headers.clone_from(&self.headers);
                headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
                headers.insert(header::ACCEPT, HeaderValue::from_static(accept));
                connections[turn % connections.len()].send(request, Bytes::from(body)).await?
            }
        };
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let retry_after = response
            .headers()
            .get(header::RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        // The body only explains the failure: a read error leaves the explanation empty.
        let body = read_body(response, MAX_ERROR_BODY).await.unwrap_or_default();
        Err(status_error(status.as_u16(), retry_after.as_deref(), &body, &self.redactor))
    }
}
