//! HTTP/2 over cleartext TCP ("prior knowledge") on the `h2` crate's connection directly, for
//! an `http://` endpoint asked to speak HTTP/2: a request in flight keeps its stream's response
//! future inside the caller's own future and nothing else. A pooled `reqwest` client keeps its
//! pool's request future, its retry and redirect layers and its own request future for every
//! call in flight (about 6 KB), and hyper's HTTP/2 client one task per request that waits on its
//! response (about 2.3 KB); docs/performance.md has the heap profiles.
//!
//! # Invariants
//!
//! - One TCP connection per [`H2c`], opened on the first request and opened again by the first
//!   request after it closed (the server went away, sent `GOAWAY`, or the connection failed);
//!   at most one connect in flight: the others wait for it, then share it. A request that finds
//!   the connection open takes its sender under a lock held for a clone, never across an await.
//! - One call, one request: a request is never retried, on this connection or another, so the
//!   model budget counts what the server sees. A request the server refused unprocessed (a
//!   stream reset with `REFUSED_STREAM`, or sent as a `GOAWAY` arrived) fails `Unavailable`
//!   like any other; the pooled client would have sent it again.
//! - A request waits for a stream the server allows (its `MAX_CONCURRENT_STREAMS`; one until
//!   the server's settings arrive, so no stream is opened past a limit not known yet) within
//!   its timeout; the body goes out as the flow-control windows open, buffered by `h2`
//!   meanwhile.
//! - The response body gives its bytes' flow-control capacity back as each piece is read, so
//!   the server can send the rest; a body dropped unread resets its stream.
//! - The configured timeout bounds the connect and the handshake, then the response from its
//!   request's send to its body's last byte (the same bound as the pooled client's).
//! - The response comes out as a `reqwest::Response`, so the body bounds, the stream decoders
//!   and the error mapping are the same code for every connection.

use std::error::Error as StdError;
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use h2::RecvStream;
use h2::client::{Builder, SendRequest};
use http_body::{Body, Frame, SizeHint};
use loopbound::transport::TransportError;
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::direct::{BodyDeadline, connect_tcp, within};

/// The receive windows the client offers, as hyper's HTTP/2 client does: a stream may send 2
/// MiB before it waits for the client to read, the connection 5 MiB.
const STREAM_WINDOW: u32 = 2 << 20;
const CONNECTION_WINDOW: u32 = 5 << 20;
/// The most request body `h2` buffers for one stream while the server's window is shut.
const MAX_SEND_BUFFER: usize = 1 << 20;

/// An open connection: its request sender, and whether its task has ended.
#[derive(Clone)]
struct Open {
    sender: SendRequest<Bytes>,
    closed: Arc<AtomicBool>,
}

/// One HTTP/2 connection to a cleartext endpoint, opened when first needed.
pub(crate) struct H2c {
    authority: String,
    timeout: Option<Duration>,
    /// The open connection; taken under a lock held for a clone only.
    open: std::sync::Mutex<Option<Open>>,
    /// Held while a connection opens, so that one opens at a time.
    connecting: Mutex<()>,
}

impl fmt::Debug for H2c {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("H2c").field("authority", &self.authority).finish_non_exhaustive()
    }
}

impl H2c {
    /// A connection to `authority` (`host:port`), bounded by `timeout` when one is set.
    #[must_use]
    pub(crate) fn new(authority: String, timeout: Option<Duration>) -> Self {
        Self { authority, timeout, open: std::sync::Mutex::new(None), connecting: Mutex::new(()) }
    }

    /// Sends the request `request` makes, with `body`, and returns its response (any status),
    /// its body bounded in time by the timeout. The request's URI must be absolute
    /// (`http://host/path`).
    ///
    /// # Errors
    ///
    /// `Unavailable` when the endpoint cannot be reached, the connection fails before the
    /// response's head, or the timeout passes; the cause is the error's source.
    #[allow(clippy::manual_async_fn, reason = "an `async fn` would keep its by-value arguments twice")]
    pub(crate) fn send<'s>(
        &'s self,
        request: impl FnOnce() -> http::Request<()> + Send + 's,
        body: Bytes,
    ) -> impl Future<Output = Result<reqwest::Response, TransportError>> + Send + 's {
        // An `async` block, not an `async fn`, which would keep its arguments twice.
        async move {
            let deadline = self.timeout.map(|timeout| Instant::now() + timeout);
            let sender = match self.current() {
                Some(open) => open.sender,
                // Opening is boxed: its state (the connect, the handshake) is not part of every
                // request's future, which a waiting call keeps for as long as it waits.
                None => Box::pin(within(deadline, "the request timed out", self.connect())).await??.sender,
            };
            let failed =
                |error: h2::Error| TransportError::unavailable("the request failed").with_source(error);
            let mut sender =
                within(deadline, "the request timed out", sender.ready()).await?.map_err(failed)?;
            // The request's head is made only now, as it goes out: a call waiting for a
            // connection or a stream keeps its few references, not the head.
            let (response, mut stream) = sender.send_request(request(), body.is_empty()).map_err(failed)?;
            drop(sender);
            if !body.is_empty() {
                stream.send_data(body, true).map_err(failed)?;
            }
            let response = within(deadline, "the request timed out", response).await?.map_err(failed)?;
            let response = response.map(|body| reqwest::Body::wrap(Bounded::new(body, deadline)));
            Ok(reqwest::Response::from(response))
        }
    }

    /// The open connection, if it is open.
    fn current(&self) -> Option<Open> {
        let slot = self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        slot.as_ref().filter(|open| !open.closed.load(Ordering::Acquire)).cloned()
    }

    /// Opens a connection, unless another caller opened one while this one waited its turn.
    async fn connect(&self) -> Result<Open, TransportError> {
        let _turn = self.connecting.lock().await;
        if let Some(open) = self.current() {
            return Ok(open);
        }
        let stream = connect_tcp(&self.authority).await?;
        let (sender, connection) = Builder::new()
            .initial_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONNECTION_WINDOW)
            .max_send_buffer_size(MAX_SEND_BUFFER)
            // Until the server's settings say how many streams it takes at once, one: a stream
            // opened past its limit would be refused, and a refused call is not sent again.
            .initial_max_send_streams(1)
            .enable_push(false)
            .handshake::<_, Bytes>(stream)
            .await
            .map_err(|error| TransportError::unavailable("cannot connect").with_source(error))?;
        let closed = Arc::new(AtomicBool::new(false));
        // The connection's task reads and writes every stream it carries; it ends when the
        // connection closes, and the next request then opens another.
        let ended = Arc::clone(&closed);
        tokio::spawn(async move {
            let _ = connection.await;
            ended.store(true, Ordering::Release);
        });
        let open = Open { sender, closed };
        *self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(open.clone());
        Ok(open)
    }
}

/// A response body read off its stream, giving back each piece's window as it is read, that
/// fails with `TimedOut` once its deadline passes.
struct Bounded {
    body: RecvStream,
    deadline: BodyDeadline,
    /// The data is over: the trailers (if any) come next.
    data_done: bool,
}

impl Bounded {
    fn new(body: RecvStream, deadline: Option<Instant>) -> Self {
        Self { body, deadline: BodyDeadline::new(deadline), data_done: false }
    }
}

impl Body for Bounded {
    type Data = Bytes;
    type Error = Box<dyn StdError + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Some(passed) = self.deadline.passed(cx) {
            return Poll::Ready(Some(Err(Box::new(passed))));
        }
        if !self.data_done {
            match ready!(self.body.poll_data(cx)) {
                Some(Ok(data)) => {
                    // The piece is the reader's now: the server may send that much more.
                    let _ = self.body.flow_control().release_capacity(data.len());
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Some(Err(error)) => return Poll::Ready(Some(Err(Box::new(error)))),
                None => self.data_done = true,
            }
        }
        match ready!(self.body.poll_trailers(cx)) {
            Ok(Some(trailers)) => Poll::Ready(Some(Ok(Frame::trailers(trailers)))),
            Ok(None) => Poll::Ready(None),
            Err(error) => Poll::Ready(Some(Err(Box::new(error)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

#[cfg(test)]
mod tests {
    use tokio::net::TcpListener;

    use super::*;
    use crate::body::read_body;
    use crate::test_server::{Answer, Protocol, body_of, serve};

    const PLAIN: Protocol = Protocol::Http2 { streams: None, window: None };

    /// What makes a request to the server at `authority`.
    fn request(authority: &str) -> impl FnOnce() -> http::Request<()> + use<> {
        let uri: http::Uri = format!("http://{authority}/v1/chat/completions").parse().expect("a URI");
        move || {
            let mut request = http::Request::new(());
            *request.method_mut() = http::Method::POST;
            *request.uri_mut() = uri;
            request
        }
    }

    const BODY: Bytes = Bytes::from_static(b"{}");

    #[tokio::test]
    async fn requests_share_one_connection_and_a_closed_one_is_opened_again() {
        let server = serve(PLAIN, Answer::Whole).await;
        let connection = H2c::new(server.authority.clone(), None);
        for _ in 0..3 {
            let response = connection.send(request(&server.authority), BODY).await.expect("a response");
            assert_eq!(response.status(), 200);
            assert_eq!(body_of(response).await.as_deref(), Ok(&b"ok"[..]));
        }
        assert_eq!(server.accepted(), 1, "three requests, one connection");
        // The server drops the connection: the next request opens a new one, once.
        server.drop_connections();
        let mut answered = 0;
        for _ in 0..100 {
            // A request sent before the client saw the close fails, unretried; the next opens.
            if let Ok(response) = connection.send(request(&server.authority), BODY).await {
                assert_eq!(body_of(response).await.as_deref(), Ok(&b"ok"[..]));
                answered += 1;
                if answered == 2 {
                    break;
                }
            } else {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        assert_eq!(answered, 2);
        assert_eq!(server.accepted(), 2, "one new connection for both");
    }

    #[tokio::test]
    async fn a_server_that_never_answers_is_given_up_on_at_the_timeout() {
        let server = serve(PLAIN, Answer::Never).await;
        let connection = H2c::new(server.authority.clone(), Some(Duration::from_millis(300)));
        let started = std::time::Instant::now();
        let error = connection.send(request(&server.authority), BODY).await.expect_err("no answer");
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert_eq!(error.to_string(), "provider unavailable: the request timed out");
    }

    #[tokio::test]
    async fn a_body_that_never_ends_is_cut_at_the_timeout() {
        let server = serve(PLAIN, Answer::EndlessBody).await;
        let connection = H2c::new(server.authority.clone(), Some(Duration::from_millis(300)));
        let response = connection.send(request(&server.authority), BODY).await.expect("its head");
        assert_eq!(response.status(), 200);
        assert_eq!(body_of(response).await, Err("provider unavailable: the response timed out".to_owned()));
    }

    #[tokio::test]
    async fn a_body_that_floods_without_end_is_refused_at_its_byte_bound() {
        // No timeout: the byte bound alone ends the read, after one piece past it at most.
        let server = serve(PLAIN, Answer::Flood).await;
        let connection = H2c::new(server.authority.clone(), None);
        let response = connection.send(request(&server.authority), BODY).await.expect("its head");
        assert_eq!(response.status(), 200);
        assert_eq!(body_of(response).await, Err("too long".to_owned()));
        // The connection carries the next request as before.
        let response = connection.send(request(&server.authority), BODY).await.expect("its head");
        assert_eq!(body_of(response).await, Err("too long".to_owned()));
        assert_eq!(server.accepted(), 1);
    }

    #[tokio::test]
    async fn an_endpoint_that_is_not_listening_cannot_be_connected_to() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let authority = listener.local_addr().expect("an address").to_string();
        drop(listener);
        let error =
            H2c::new(authority.clone(), None).send(request(&authority), BODY).await.expect_err("refused");
        assert_eq!(error.to_string(), "provider unavailable: cannot connect");
    }

    #[tokio::test]
    async fn requests_past_the_servers_stream_limit_wait_for_a_stream_on_the_same_connection() {
        // Two streams at once, 100 ms each: eight requests go out two by two, all answered,
        // none refused, on one connection; so at least four rounds of 100 ms.
        let server = serve(Protocol::Http2 { streams: Some(2), window: None }, Answer::Slow).await;
        let connection = Arc::new(H2c::new(server.authority.clone(), Some(Duration::from_secs(10))));
        let started = std::time::Instant::now();
        let calls: Vec<_> = (0..8)
            .map(|_| {
                let (connection, authority) = (Arc::clone(&connection), server.authority.clone());
                tokio::spawn(async move {
                    let response = connection.send(request(&authority), BODY).await?;
                    Ok::<_, TransportError>(body_of(response).await)
                })
            })
            .collect();
        for call in calls {
            let body = call.await.expect("a call").expect("an answer, not a refusal");
            assert_eq!(body.as_deref(), Ok(&b"ok"[..]));
        }
        assert!(started.elapsed() >= Duration::from_millis(400), "{:?}", started.elapsed());
        assert_eq!(server.accepted(), 1);
    }

    #[tokio::test]
    async fn a_request_waiting_for_a_stream_gives_up_at_the_timeout() {
        // One stream, held by a request the server never answers: the next waits for a stream
        // that never frees, and gives up at its timeout.
        let server = serve(Protocol::Http2 { streams: Some(1), window: None }, Answer::Never).await;
        let connection = Arc::new(H2c::new(server.authority.clone(), Some(Duration::from_millis(300))));
        let first = tokio::spawn({
            let (connection, authority) = (Arc::clone(&connection), server.authority.clone());
            async move { connection.send(request(&authority), BODY).await.map(|_| ()) }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let started = std::time::Instant::now();
        let error = connection.send(request(&server.authority), BODY).await.expect_err("no stream");
        assert!(started.elapsed() >= Duration::from_millis(200), "{:?}", started.elapsed());
        assert_eq!(error.to_string(), "provider unavailable: the request timed out");
        let first = first.await.expect("the first call").expect_err("never answered");
        assert_eq!(first.to_string(), "provider unavailable: the request timed out");
    }

    #[tokio::test]
    async fn a_request_body_far_past_the_servers_window_goes_out_whole() {
        // 3 MiB against a window of 64 KiB: the body waits for each window update, and the
        // server reads every byte.
        let server = serve(Protocol::Http2 { streams: None, window: Some(65_535) }, Answer::Echo).await;
        let connection = H2c::new(server.authority.clone(), Some(Duration::from_secs(10)));
        let body = Bytes::from(vec![b'z'; 3 << 20]);
        let response = connection.send(request(&server.authority), body).await.expect("an answer");
        assert_eq!(body_of(response).await.as_deref(), Ok((3 << 20).to_string().as_bytes()));
    }

    #[tokio::test]
    async fn a_response_body_past_the_clients_windows_is_read_whole() {
        // 6 MiB: three stream windows, more than the connection's. Unless each piece read gives
        // its window back, the server stops at 2 MiB and the read times out.
        let server = serve(PLAIN, Answer::Big).await;
        let connection = H2c::new(server.authority.clone(), Some(Duration::from_secs(10)));
        let response = connection.send(request(&server.authority), BODY).await.expect("its head");
        let body = read_body(response, 8 << 20).await.map_err(|_| "not read whole").expect("the body");
        assert_eq!(body.len(), 6 << 20);
        assert!(body.iter().all(|&byte| byte == b'y'));
        // Twice on one connection: the connection's window was given back too.
        let response = connection.send(request(&server.authority), BODY).await.expect("its head");
        assert_eq!(
            read_body(response, 8 << 20).await.map_err(|_| "not read whole").expect("the body").len(),
            6 << 20
        );
    }
}
