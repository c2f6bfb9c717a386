//! HTTP/1.1 over cleartext TCP on hyper's own connections, for an `http://` endpoint: a
//! request in flight keeps hyper's response future and its connection, where the pooled
//! `reqwest` client also keeps its pool's boxed request future, its retry and redirect layers
//! and its own request future (about 6.5 KB per call), and its pool scans every waiting
//! checkout each time one is dropped.
//!
//! # Invariants
//!
//! - One request at a time on a connection, as HTTP/1.1 has it; a connection is kept for the
//!   next request once its response's body has been read to its end, and dropped otherwise (a
//!   body left unread, an error, a `Connection: close`). Idle connections are taken newest
//!   first; one idle past [`IDLE_TIMEOUT`] is closed when the pool is next used.
//! - One call, one request: a request that went out is never sent again. A kept connection can
//!   turn out closed (the server closed it while it sat idle) before the request is written;
//!   hyper then hands the request back unsent, and it goes out on the next idle connection or a
//!   new one. A new connection's failure is the call's.
//! - The configured timeout bounds the whole call: the connect, the response's head and its
//!   body's last byte, from the moment the request is sent (the `direct` module).
//! - The response comes out as a `reqwest::Response`, so the body bounds, the stream decoders
//!   and the error mapping are the same code for every connection.

use std::collections::VecDeque;
use std::error::Error as StdError;
use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use loopbound::transport::TransportError;
use tokio::time::Instant;

use crate::direct::{BodyDeadline, connect_tcp, within};

/// How long a kept connection may sit idle before it is closed: `reqwest`'s default.
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

type Sender = SendRequest<Full<Bytes>>;

/// The idle connections, newest at the back, each with the instant it became idle, and how
/// long one may stay.
struct Idle {
    list: Mutex<VecDeque<(Sender, Instant)>>,
    timeout: Duration,
}

impl Idle {
    fn list(&self) -> std::sync::MutexGuard<'_, VecDeque<(Sender, Instant)>> {
        // A panic under this lock leaves the list whole (each change is one push or pop).
        self.list.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The newest idle connection still open, closing those idle too long.
    fn take(&self) -> Option<Sender> {
        let now = Instant::now();
        let mut list = self.list();
        while list.front().is_some_and(|(_, since)| now.duration_since(*since) > self.timeout) {
            list.pop_front();
        }
        while let Some((sender, _)) = list.pop_back() {
            if !sender.is_closed() {
                return Some(sender);
            }
        }
        None
    }

    /// Keeps `sender` for the next request.
    fn keep(&self, sender: Sender) {
        if !sender.is_closed() {
            self.list().push_back((sender, Instant::now()));
        }
    }
}

/// HTTP/1.1 connections to one cleartext endpoint, opened as requests need them.
pub(crate) struct H1 {
    authority: String,
    timeout: Option<Duration>,
    idle: Arc<Idle>,
}

impl fmt::Debug for H1 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("H1").field("authority", &self.authority).finish_non_exhaustive()
    }
}

impl H1 {
    /// Connections to `authority` (`host:port`), bounded by `timeout` when one is set.
    #[must_use]
    pub(crate) fn new(authority: String, timeout: Option<Duration>) -> Self {
        Self::keeping_idle(authority, timeout, IDLE_TIMEOUT)
    }

    /// The same, a connection kept idle for at most `idle`.
    fn keeping_idle(authority: String, timeout: Option<Duration>, idle: Duration) -> Self {
        Self { authority, timeout, idle: Arc::new(Idle { list: Mutex::new(VecDeque::new()), timeout: idle }) }
    }

    /// Sends `request` and returns its response (any status), its body bounded in time by the
    /// timeout. The request names its target in origin form (`/path`) and carries its `Host`.
    ///
    /// # Errors
    ///
    /// `Unavailable` when the endpoint cannot be reached, the connection fails before the
    /// response's head, or the timeout passes; the cause is the error's source.
    pub(crate) async fn send(
        &self,
        mut request: http::Request<Full<Bytes>>,
    ) -> Result<reqwest::Response, TransportError> {
        let deadline = self.timeout.map(|timeout| Instant::now() + timeout);
        let failed =
            |error: hyper::Error| TransportError::unavailable("the request failed").with_source(error);
        loop {
            let (mut sender, kept) = match self.idle.take() {
                Some(sender) => (sender, true),
                // Opening is boxed: its state (the connect, the handshake) is not part of every
                // request's future, which a waiting call keeps for as long as it waits.
                None => (Box::pin(within(deadline, "the request timed out", self.connect())).await??, false),
            };
            if let Err(error) = within(deadline, "the request timed out", sender.ready()).await? {
                // A kept connection that closed while idle: nothing was written; try the next.
                if kept {
                    continue;
                }
                return Err(failed(error));
            }
            match within(deadline, "the request timed out", sender.try_send_request(request)).await? {
                Ok(response) => {
                    let response = response.map(|body| {
                        reqwest::Body::wrap(Returning::new(body, deadline, sender, Arc::clone(&self.idle)))
                    });
                    return Ok(reqwest::Response::from(response));
                }
                Err(mut error) => match error.take_message() {
                    // Handed back unwritten by a kept connection that closed: send it on another.
                    Some(unsent) if kept => request = unsent,
                    _ => return Err(failed(error.into_error())),
                },
            }
        }
    }

    /// Opens a new connection.
    async fn connect(&self) -> Result<Sender, TransportError> {
        let stream = connect_tcp(&self.authority).await?;
        let (sender, connection) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|error| TransportError::unavailable("cannot connect").with_source(error))?;
        // The connection's task reads and writes every request it carries; it ends when the
        // connection closes or every handle to it is gone.
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(sender)
    }
}

/// A response body that fails with `TimedOut` once its deadline passes, and gives its
/// connection back to the idle ones once read to its end.
struct Returning {
    body: Incoming,
    deadline: BodyDeadline,
    /// The connection and where it goes back, until the body ends.
    back: Option<(Sender, Arc<Idle>)>,
}

impl Returning {
    fn new(body: Incoming, deadline: Option<Instant>, sender: Sender, idle: Arc<Idle>) -> Self {
        let mut body = Self { body, deadline: BodyDeadline::new(deadline), back: Some((sender, idle)) };
        if body.body.is_end_stream() {
            body.give_back();
        }
        body
    }

    fn give_back(&mut self) {
        if let Some((sender, idle)) = self.back.take() {
            idle.keep(sender);
        }
    }
}

impl Body for Returning {
    type Data = Bytes;
    type Error = Box<dyn StdError + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Some(passed) = self.deadline.passed(cx) {
            // Cut short: the connection is not reused.
            self.back = None;
            return Poll::Ready(Some(Err(Box::new(passed))));
        }
        let frame = ready!(Pin::new(&mut self.body).poll_frame(cx));
        match &frame {
            // The last byte is read: the connection can take the next request at once.
            Some(Ok(_)) if self.body.is_end_stream() => self.give_back(),
            Some(Ok(_)) => {}
            None => self.give_back(),
            Some(Err(_)) => self.back = None,
        }
        Poll::Ready(frame.map(|frame| frame.map_err(Into::into)))
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use tokio::net::TcpListener;

    use super::*;
    use crate::test_server::{Answer, Protocol, body_of, serve};

    const KEEP_ALIVE: Protocol = Protocol::Http1 { keep_alive: true };

    fn request(authority: &str) -> http::Request<Full<Bytes>> {
        let mut request = http::Request::new(Full::new(Bytes::from_static(b"{}")));
        *request.method_mut() = http::Method::POST;
        *request.uri_mut() = http::Uri::from_static("/v1/chat/completions");
        request.headers_mut().insert(http::header::HOST, authority.parse().expect("a host"));
        request
    }

    #[tokio::test]
    async fn requests_one_after_another_reuse_one_connection() {
        let server = serve(KEEP_ALIVE, Answer::Whole).await;
        let connections = H1::new(server.authority.clone(), None);
        for _ in 0..5 {
            let response = connections.send(request(&server.authority)).await.expect("a response");
            assert_eq!(response.status(), 200);
            assert_eq!(body_of(response).await.as_deref(), Ok(&b"ok"[..]));
        }
        assert_eq!(server.accepted(), 1, "five requests, one connection");
    }

    #[tokio::test]
    async fn concurrent_requests_each_get_a_connection_and_then_share_them() {
        let server = serve(KEEP_ALIVE, Answer::Slow).await;
        let connections = Arc::new(H1::new(server.authority.clone(), None));
        for _ in 0..2 {
            let calls: Vec<_> = (0..8)
                .map(|_| {
                    let (connections, authority) = (Arc::clone(&connections), server.authority.clone());
                    tokio::spawn(async move {
                        let response = connections.send(request(&authority)).await.expect("a response");
                        body_of(response).await
                    })
                })
                .collect();
            for call in calls {
                assert_eq!(call.await.expect("a call").as_deref(), Ok(&b"ok"[..]));
            }
        }
        assert_eq!(server.accepted(), 8, "eight at once, twice: eight connections");
        assert_eq!(connections.idle.list().len(), 8);
    }

    #[tokio::test]
    async fn a_kept_connection_the_server_closed_is_passed_over_and_the_call_succeeds() {
        let server = serve(KEEP_ALIVE, Answer::Whole).await;
        let connections = H1::new(server.authority.clone(), None);
        let response = connections.send(request(&server.authority)).await.expect("a response");
        assert_eq!(body_of(response).await.as_deref(), Ok(&b"ok"[..]));
        // The server drops the idle connection; once the client has seen it close, the next
        // request opens a new one and nothing fails.
        server.drop_connections();
        tokio::time::sleep(Duration::from_millis(50)).await;
        for _ in 0..2 {
            let response = connections.send(request(&server.authority)).await.expect("a response");
            assert_eq!(body_of(response).await.as_deref(), Ok(&b"ok"[..]));
        }
        assert_eq!(server.accepted(), 2);
    }

    #[tokio::test]
    async fn a_body_not_read_to_its_end_does_not_give_its_connection_back() {
        let server = serve(KEEP_ALIVE, Answer::Flood).await;
        let connections = H1::new(server.authority.clone(), None);
        for round in 1..=3 {
            // No timeout: the byte bound alone ends the read, and the connection is dropped.
            let response = connections.send(request(&server.authority)).await.expect("its head");
            assert_eq!(body_of(response).await, Err("too long".to_owned()));
            assert_eq!(server.accepted(), round);
            assert!(connections.idle.list().is_empty());
        }
    }

    #[tokio::test]
    async fn a_server_that_never_answers_is_given_up_on_at_the_timeout() {
        let server = serve(KEEP_ALIVE, Answer::Never).await;
        let connections = H1::new(server.authority.clone(), Some(Duration::from_millis(300)));
        let started = std::time::Instant::now();
        let error = connections.send(request(&server.authority)).await.expect_err("no answer");
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert_eq!(error.to_string(), "provider unavailable: the request timed out");
        assert!(connections.idle.list().is_empty());
    }

    #[tokio::test]
    async fn a_body_that_never_ends_is_cut_at_the_timeout() {
        let server = serve(KEEP_ALIVE, Answer::EndlessBody).await;
        let connections = H1::new(server.authority.clone(), Some(Duration::from_millis(300)));
        let response = connections.send(request(&server.authority)).await.expect("its head");
        assert_eq!(response.status(), 200);
        assert_eq!(body_of(response).await, Err("provider unavailable: the response timed out".to_owned()));
        assert!(connections.idle.list().is_empty());
    }

    #[tokio::test]
    async fn an_endpoint_that_is_not_listening_cannot_be_connected_to() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let authority = listener.local_addr().expect("an address").to_string();
        drop(listener);
        let error = H1::new(authority.clone(), None).send(request(&authority)).await.expect_err("refused");
        assert_eq!(error.to_string(), "provider unavailable: cannot connect");
    }

    #[tokio::test]
    async fn a_connection_idle_past_the_idle_timeout_is_closed_not_reused() {
        let server = serve(KEEP_ALIVE, Answer::Whole).await;
        let connections = H1::keeping_idle(server.authority.clone(), None, Duration::from_millis(100));
        let response = connections.send(request(&server.authority)).await.expect("a response");
        assert_eq!(body_of(response).await.as_deref(), Ok(&b"ok"[..]));
        tokio::time::sleep(Duration::from_millis(150)).await;
        let response = connections.send(request(&server.authority)).await.expect("a response");
        assert_eq!(body_of(response).await.as_deref(), Ok(&b"ok"[..]));
        assert_eq!(server.accepted(), 2);
    }

    #[tokio::test]
    async fn a_server_that_closes_after_every_response_gets_a_new_connection_each_time() {
        let server = serve(Protocol::Http1 { keep_alive: false }, Answer::Whole).await;
        let connections = H1::new(server.authority.clone(), None);
        for round in 1..=5 {
            let response = connections.send(request(&server.authority)).await.expect("a response");
            assert_eq!(body_of(response).await.as_deref(), Ok(&b"ok"[..]));
            assert_eq!(server.accepted(), round);
        }
    }
}
