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
//!   requests in flight spread evenly over that many connections.
//! - `https://` goes through `reqwest`'s pooled client (TLS, and ALPN for HTTP/2). `http://`
//!   goes on connections driven directly, which keep less per request in flight: hyper's
//!   HTTP/1.1 connections (the `h1` module) or one `h2` connection per connection asked for
//!   (the `h2c` module). When the environment names a proxy (`HTTP_PROXY`, `ALL_PROXY`, or
//!   their lower-case forms), `http://` goes through `reqwest` too, which applies it (and
//!   `NO_PROXY`); so does a [`Connection`](crate::Connection) built with `set_direct(false)`.
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
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures_core::Stream;
use futures_util::TryFutureExt;
use http_body_util::Full;
use loopbound::transport::{ChatRequest, ModelReply, ReplyChunk, TransportError};
use reqwest::Url;
use reqwest::header::{self, HeaderMap, HeaderName, HeaderValue};

use crate::body::{read_body, read_reply};
use crate::config::{ConfigError, Connection, HttpVersion};
use crate::errors::{send_error, status_error_at};
use crate::events::Protocol;
use crate::h1::H1;
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
    /// `reqwest` clients, each with its own pool: HTTPS, or any endpoint when a proxy is set
    /// in the environment or the connection turned the direct connections off.
    Pooled(Box<[reqwest::Client]>),
    /// Cleartext HTTP/1.1 connections driven directly, the target every request names (origin
    /// form) and its `Host`.
    H1(H1, http::Uri, HeaderValue),
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
        Self::build(url, headers, timeout, http, redactor, proxy_in_environment())
    }

    /// [`Self::new`], told whether every request goes through `reqwest`'s pool (a proxy is
    /// named in the environment, or the connection asked for it).
    fn build(
        url: Url,
        headers: HeaderMap,
        timeout: Option<Duration>,
        http: HttpVersion,
        redactor: Redactor,
        pooled: bool,
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
                // Over TLS, TLS negotiates the version; a server that offers only HTTP/1.1
                // gets it. (Cleartext HTTP/2 comes here only through a proxy, which gets
                // HTTP/1.1; otherwise it is `H2c`'s.)
                (true, _) => builder,
            };
            builder.build().map_err(|error| ConfigError::Client(error.without_url().to_string()))
        };
        // `reqwest` applies the proxy the environment names; the connections driven directly
        // do not, so with one set every request goes through `reqwest`, as it does when the
        // connection asks for the pooled client.
        // The host and port a direct connection dials, when the requests go direct.
        let direct = match (url.scheme(), pooled, url.host_str(), url.port_or_known_default()) {
            ("http", false, Some(host), Some(port)) => Some(format!("{host}:{port}")),
            _ => None,
        };
        let connections = match (http, direct) {
            (HttpVersion::Http1, Some(authority)) => {
                let target = match url.query() {
                    Some(query) => format!("{}?{query}", url.path()),
                    None => url.path().to_owned(),
                };
                let target = target
                    .parse::<http::Uri>()
                    .map_err(|error| ConfigError::Client(format!("the endpoint's URL: {error}")))?;
                let host = match url.port() {
                    Some(port) => format!("{}:{port}", url.host_str().unwrap_or_default()),
                    None => url.host_str().unwrap_or_default().to_owned(),
                };
                let host = HeaderValue::from_str(&host)
                    .map_err(|error| ConfigError::Client(format!("the endpoint's host: {error}")))?;
                Connections::H1(H1::new(authority, timeout), target, host)
            }
            (HttpVersion::Http1, None) => Connections::Pooled(Box::new([client(false)?])),
            (HttpVersion::Http2 { connections }, _) if connections.get() > HttpVersion::MAX_CONNECTIONS => {
                return Err(ConfigError::TooManyConnections {
                    requested: connections.get(),
                    max: HttpVersion::MAX_CONNECTIONS,
                });
            }
            (HttpVersion::Http2 { connections }, Some(authority)) => {
                let uri = url
                    .as_str()
                    .parse::<http::Uri>()
                    .map_err(|error| ConfigError::Client(format!("the endpoint's URL: {error}")))?;
                Connections::H2c(
                    (0..connections.get()).map(|_| H2c::new(authority.clone(), timeout)).collect(),
                    uri,
                )
            }
            (HttpVersion::Http2 { connections }, None) => {
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
        let pooled = proxy_in_environment() || !connection.direct();
        Self::build(
            connection.endpoint(path),
            headers,
            connection.timeout(),
            connection.http(),
            redactor,
            pooled,
        )
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
    pub fn complete<'s, P: Protocol>(
        &'s self,
        request: ChatRequest<'s>,
        body: Vec<u8>,
    ) -> impl Future<Output = Result<ModelReply, TransportError>> + Send + 's {
        // Built of combinators, not an `async fn`: a waiting call keeps this future, and an
        // `async fn` keeps each argument twice and the future it awaits beside them.
        let bounds = request.bounds;
        let call = async move {
            let response = self.send(body, "application/json").await?;
            let body = read_reply(response, bounds).await?;
            parse_whole::<P>(body, bounds, &self.redactor).await
        };
        until_cancelled(request.cancel, call).map_err(|error| self.redactor.scrub(error))
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
    ///
    /// An `async` block, not an `async fn` (which would keep the body twice), whose own state
    /// is one of the connections' futures at a time: the pooled client's (`reqwest`'s own box)
    /// and HTTP/1.1's (boxed where it is made) are a pointer, HTTP/2's is kept in place.
    #[allow(clippy::manual_async_fn, reason = "an `async fn` would keep its by-value arguments twice")]
    fn send(
        &self,
        mut body: Vec<u8>,
        accept: &'static str,
    ) -> impl Future<Output = Result<reqwest::Response, TransportError>> + Send + '_ {
        async move {
            // The body lives until the reply comes (it goes out as it is, without a copy): give
            // back what its serialiser reserved beyond its length, often a third of it.
            body.shrink_to_fit();
            // The connections take requests in turn.
            let turn = self.next.fetch_add(1, Ordering::Relaxed);
            let response = match &self.connections {
                Connections::Pooled(clients) => {
                    self.pooled(&clients[turn % clients.len()], body, accept).await.map_err(send_error)?
                }
                Connections::H1(connections, target, host) => {
                    self.h1(connections, target, host, body, accept).await?
                }
                Connections::H2c(connections, uri) => {
                    let request = || self.request((), uri, accept);
                    connections[turn % connections.len()].send(request, Bytes::from(body)).await?
                }
            };
            if response.status().is_success() {
                return Ok(response);
            }
            // Boxed: a call waiting on its reply keeps this future, and reading a failure's
            // body is the largest part of it.
            Err(Box::pin(self.failure(response)).await)
        }
    }

    /// The request on `client`, through its pool.
    fn pooled(
        &self,
        client: &reqwest::Client,
        body: Vec<u8>,
        accept: &'static str,
    ) -> impl Future<Output = reqwest::Result<reqwest::Response>> + Send + use<> {
        client
            .post(self.url.clone())
            .headers(self.headers.clone())
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, HeaderValue::from_static(accept))
            .body(body)
            .send()
    }

    /// The request on a direct HTTP/1.1 connection, boxed: it is the largest of the three, and
    /// made here its head is not part of the caller's state either.
    fn h1<'s>(
        &'s self,
        connections: &'s H1,
        target: &http::Uri,
        host: &HeaderValue,
        body: Vec<u8>,
        accept: &'static str,
    ) -> Pin<Box<dyn Future<Output = Result<reqwest::Response, TransportError>> + Send + 's>> {
        let mut request = self.request(Full::new(Bytes::from(body)), target, accept);
        request.headers_mut().insert(header::HOST, host.clone());
        Box::pin(connections.send(request))
    }

    /// A request on a direct connection: `POST` to `uri` with `body`, the endpoint's headers,
    /// the JSON content type and `accept`.
    fn request<B>(&self, body: B, uri: &http::Uri, accept: &'static str) -> http::Request<B> {
        let mut request = http::Request::new(body);
        *request.method_mut() = http::Method::POST;
        *request.uri_mut() = uri.clone();
        let headers = request.headers_mut();
        headers.clone_from(&self.headers);
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(header::ACCEPT, HeaderValue::from_static(accept));
        request
    }

    /// The error a response with a failure status is mapped to, its body read to explain it.
    async fn failure(&self, response: reqwest::Response) -> TransportError {
        let status = response.status();
        let retry_after = response
            .headers()
            .get(header::RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        // The body only explains the failure: a read error leaves the explanation empty.
        let body = read_body(response, MAX_ERROR_BODY).await.unwrap_or_default();
        status_error_at(
            status.as_u16(),
            retry_after.as_deref(),
            &body,
            Some(self.url.as_str()),
            &self.redactor,
        )
    }
}

/// Whether the environment names a proxy for `http://` requests, as `reqwest` reads it.
fn proxy_in_environment() -> bool {
    ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"]
        .iter()
        .any(|name| std::env::var_os(name).is_some_and(|value| !value.is_empty()))
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroUsize;

    use super::*;

    fn connections(url: &str, http: HttpVersion, pooled: bool) -> &'static str {
        let endpoint = Endpoint::build(
            url.parse().expect("a URL"),
            HeaderMap::new(),
            None,
            http,
            Redactor::new(None),
            pooled,
        )
        .expect("an endpoint");
        kind(&endpoint)
    }

    fn kind(endpoint: &Endpoint) -> &'static str {
        match endpoint.connections {
            Connections::Pooled(_) => "pooled",
            Connections::H1(..) => "h1",
            Connections::H2c(..) => "h2c",
        }
    }

    #[test]
    fn cleartext_goes_direct_unless_a_proxy_is_named_and_tls_always_goes_through_reqwest() {
        let http2 = HttpVersion::Http2 { connections: NonZeroUsize::new(2).expect("two") };
        assert_eq!(connections("http://127.0.0.1:8080/v1/chat", HttpVersion::Http1, false), "h1");
        assert_eq!(connections("http://127.0.0.1:8080/v1/chat", http2, false), "h2c");
        assert_eq!(connections("http://127.0.0.1:8080/v1/chat", HttpVersion::Http1, true), "pooled");
        assert_eq!(connections("http://127.0.0.1:8080/v1/chat", http2, true), "pooled");
        assert_eq!(connections("https://api.example.com/v1/chat", HttpVersion::Http1, false), "pooled");
        assert_eq!(connections("https://api.example.com/v1/chat", http2, false), "pooled");
    }

    #[test]
    fn a_connection_that_turns_direct_off_sends_cleartext_through_reqwest() {
        let names =
            crate::config::Names { base_url: "URL", model: "MODEL", api_key: "KEY", timeout: "TIMEOUT" };
        let mut connection =
            crate::Connection::new("http://127.0.0.1:8080/v1", "m", &names).expect("a connection");
        assert!(connection.direct());
        let endpoint = |connection: &crate::Connection| {
            Endpoint::connect(connection, "chat", KeyHeader::Bearer, HeaderMap::new()).expect("an endpoint")
        };
        let expected_default = if proxy_in_environment() { "pooled" } else { "h1" };
        assert_eq!(kind(&endpoint(&connection)), expected_default);
        connection.set_direct(false);
        assert!(!connection.direct());
        assert_eq!(kind(&endpoint(&connection)), "pooled");
    }

    #[test]
    fn a_direct_http1_request_names_its_target_in_origin_form_and_its_host() {
        let endpoint = |url: &str| {
            Endpoint::build(
                url.parse().expect("a URL"),
                HeaderMap::new(),
                None,
                HttpVersion::Http1,
                Redactor::new(None),
                false,
            )
            .expect("an endpoint")
        };
        let Connections::H1(_, target, host) = endpoint("http://localhost:8080/v1/chat?x=1").connections
        else {
            panic!("not direct");
        };
        assert_eq!(
            (target.to_string(), host.to_str().ok()),
            ("/v1/chat?x=1".to_owned(), Some("localhost:8080"))
        );
        let Connections::H1(_, target, host) = endpoint("http://models.internal/v1").connections else {
            panic!("not direct");
        };
        assert_eq!((target.to_string(), host.to_str().ok()), ("/v1".to_owned(), Some("models.internal")));
    }
}
