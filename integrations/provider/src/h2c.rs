//! HTTP/2 over cleartext TCP ("prior knowledge") on hyper's own connection, for an `http://`
//! endpoint asked to speak HTTP/2: a request in flight keeps hyper's response future and
//! nothing else of the client, where a pooled `reqwest` client keeps its pool's request future,
//! its retry and redirect layers and its own request future for every call in flight (about
//! 6 KB per call; docs/performance.md has the heap profile).
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
//! - The configured timeout bounds the connect and the handshake, then the response from its
//!   request's send to its body's last byte (the same bound as the pooled client's).
//! - The response comes out as a `reqwest::Response`, so the body bounds, the stream decoders
//!   and the error mapping are the same code for every connection.

use std::error::Error as StdError;
use std::fmt;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::client::conn::http2::{Builder, SendRequest};
use hyper_util::rt::{TokioExecutor, TokioIo};
use loopbound::transport::TransportError;
use tokio::net::TcpStream;
use tokio::sync::Mutex;
use tokio::time::{Instant, Sleep};

/// One HTTP/2 connection to a cleartext endpoint, opened when first needed.
pub(crate) struct H2c {
    authority: String,
    timeout: Option<Duration>,
    /// The open connection's sender; taken under a lock held for a clone only.
    sender: std::sync::Mutex<Option<SendRequest<Full<Bytes>>>>,
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
        Self { authority, timeout, sender: std::sync::Mutex::new(None), connecting: Mutex::new(()) }
    }

    /// Sends `request` and returns its response (any status), its body bounded in time by the
    /// timeout.
    ///
    /// # Errors
    ///
    /// `Unavailable` when the endpoint cannot be reached, the connection fails before the
    /// response's head, or the timeout passes; the cause is the error's source.
    pub(crate) async fn send(
        &self,
        request: http::Request<Full<Bytes>>,
    ) -> Result<reqwest::Response, TransportError> {
        let deadline = self.timeout.map(|timeout| Instant::now() + timeout);
        let mut sender = match self.open() {
            Some(sender) => sender,
            // Opening is boxed: its state (the connect, the handshake) is not part of every
            // request's future, which a waiting call keeps for as long as it waits.
            None => Box::pin(within(deadline, "the request timed out", self.connect())).await??,
        };
        let response = within(deadline, "the request timed out", sender.send_request(request))
            .await?
            .map_err(|error| TransportError::unavailable("the request failed").with_source(error))?;
        let response = response.map(|body| reqwest::Body::wrap(Bounded::new(body, deadline)));
        Ok(reqwest::Response::from(response))
    }

    /// The open connection's sender, if it is open.
    fn open(&self) -> Option<SendRequest<Full<Bytes>>> {
        let slot = self.sender.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        slot.as_ref().filter(|sender| !sender.is_closed()).cloned()
    }

    /// Opens a connection, unless another caller opened one while this one waited its turn.
    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, TransportError> {
        let _turn = self.connecting.lock().await;
        if let Some(sender) = self.open() {
            return Ok(sender);
        }
        let stream = TcpStream::connect(self.authority.as_str())
            .await
            .map_err(|error| TransportError::unavailable("cannot connect").with_source(error))?;
        // Requests are small and answered as a whole: no waiting to coalesce them.
        let _ = stream.set_nodelay(true);
        let (sender, connection) = Builder::new(TokioExecutor::new())
            .handshake::<_, Full<Bytes>>(TokioIo::new(stream))
            .await
            .map_err(|error| TransportError::unavailable("cannot connect").with_source(error))?;
        // The connection's task reads and writes every request it carries; it ends when the
        // connection closes, and the next request then opens another.
        tokio::spawn(async move {
            let _ = connection.await;
        });
        *self.sender.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(sender.clone());
        Ok(sender)
    }
}

/// `work`, or an `Unavailable` error saying `what` if `deadline` passes first.
async fn within<F: Future>(
    deadline: Option<Instant>,
    what: &'static str,
    work: F,
) -> Result<F::Output, TransportError> {
    match deadline {
        None => Ok(work.await),
        Some(deadline) => tokio::time::timeout_at(deadline, work).await.map_err(|elapsed| {
            TransportError::unavailable(what).with_source(io::Error::new(io::ErrorKind::TimedOut, elapsed))
        }),
    }
}

/// A response body that fails with `TimedOut` once its deadline passes.
struct Bounded {
    body: Incoming,
    deadline: Option<Pin<Box<Sleep>>>,
}

impl Bounded {
    fn new(body: Incoming, deadline: Option<Instant>) -> Self {
        Self { body, deadline: deadline.map(|at| Box::pin(tokio::time::sleep_until(at))) }
    }
}

impl Body for Bounded {
    type Data = Bytes;
    type Error = Box<dyn StdError + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Some(deadline) = self.deadline.as_mut()
            && deadline.as_mut().poll(cx).is_ready()
        {
            return Poll::Ready(Some(Err(Box::new(io::Error::new(
                io::ErrorKind::TimedOut,
                "the response timed out",
            )))));
        }
        Pin::new(&mut self.body).poll_frame(cx).map_err(Into::into)
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
    use std::convert::Infallible;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use http_body_util::combinators::UnsyncBoxBody;
    use http_body_util::{BodyExt, StreamBody};
    use hyper::service::service_fn;
    use tokio::net::TcpListener;
    use tokio::task::JoinHandle;

    use super::*;
    use crate::body::{BodyError, read_body};

    /// How the test server answers.
    #[derive(Clone, Copy)]
    enum Answer {
        /// 200 with `ok`.
        Whole,
        /// Never.
        Never,
        /// 200, then a body that never ends.
        EndlessBody,
        /// 200, then 1 KiB pieces of a body, without end.
        Flood,
    }

    /// An HTTP/2 server on loopback: its address, the connections it accepted, and their tasks.
    struct Server {
        authority: String,
        accepted: Arc<AtomicUsize>,
        connections: Arc<std::sync::Mutex<Vec<JoinHandle<()>>>>,
    }

    async fn serve(answer: Answer) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let authority = listener.local_addr().expect("an address").to_string();
        let accepted = Arc::new(AtomicUsize::new(0));
        let connections = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (count, tasks) = (Arc::clone(&accepted), Arc::clone(&connections));
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let service = service_fn(move |_request| async move {
                    let body: UnsyncBoxBody<Bytes, Infallible> = match answer {
                        Answer::Whole => Full::new(Bytes::from_static(b"ok")).boxed_unsync(),
                        Answer::Never => std::future::pending().await,
                        Answer::EndlessBody => {
                            StreamBody::new(futures_util::stream::pending()).boxed_unsync()
                        }
                        Answer::Flood => StreamBody::new(futures_util::stream::repeat_with(|| {
                            Ok(Frame::data(Bytes::from_static(&[b'x'; 1 << 10])))
                        }))
                        .boxed_unsync(),
                    };
                    Ok::<_, Infallible>(hyper::Response::new(body))
                });
                let connection = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service);
                let task = tokio::spawn(async move {
                    let _ = connection.await;
                });
                tasks.lock().expect("the tasks").push(task);
            }
        });
        Server { authority, accepted, connections }
    }

    fn request(authority: &str) -> http::Request<Full<Bytes>> {
        let mut request = http::Request::new(Full::new(Bytes::from_static(b"{}")));
        *request.method_mut() = http::Method::POST;
        *request.uri_mut() = format!("http://{authority}/v1/chat/completions").parse().expect("a URI");
        request
    }

    async fn body_of(response: reqwest::Response) -> Result<Vec<u8>, String> {
        read_body(response, 1 << 10).await.map_err(|error| match error {
            BodyError::TooLong => "too long".to_owned(),
            BodyError::Read(error) => error.to_string(),
        })
    }

    #[tokio::test]
    async fn requests_share_one_connection_and_a_closed_one_is_opened_again() {
        let server = serve(Answer::Whole).await;
        let connection = H2c::new(server.authority.clone(), None);
        for _ in 0..3 {
            let response = connection.send(request(&server.authority)).await.expect("a response");
            assert_eq!(response.status(), 200);
            assert_eq!(body_of(response).await.as_deref(), Ok(&b"ok"[..]));
        }
        assert_eq!(server.accepted.load(Ordering::SeqCst), 1, "three requests, one connection");
        // The server drops the connection: the next request opens a new one, once.
        for task in server.connections.lock().expect("the tasks").drain(..) {
            task.abort();
        }
        let mut answered = 0;
        for _ in 0..100 {
            // A request sent before the client saw the close fails, unretried; the next opens.
            if let Ok(response) = connection.send(request(&server.authority)).await {
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
        assert_eq!(server.accepted.load(Ordering::SeqCst), 2, "one new connection for both");
    }

    #[tokio::test]
    async fn a_server_that_never_answers_is_given_up_on_at_the_timeout() {
        let server = serve(Answer::Never).await;
        let connection = H2c::new(server.authority.clone(), Some(Duration::from_millis(300)));
        let started = std::time::Instant::now();
        let error = connection.send(request(&server.authority)).await.expect_err("no answer");
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert_eq!(error.to_string(), "provider unavailable: the request timed out");
    }

    #[tokio::test]
    async fn a_body_that_never_ends_is_cut_at_the_timeout() {
        let server = serve(Answer::EndlessBody).await;
        let connection = H2c::new(server.authority.clone(), Some(Duration::from_millis(300)));
        let response = connection.send(request(&server.authority)).await.expect("its head");
        assert_eq!(response.status(), 200);
        assert_eq!(body_of(response).await, Err("provider unavailable: the response timed out".to_owned()));
    }

    #[tokio::test]
    async fn a_body_that_floods_without_end_is_refused_at_its_byte_bound() {
        // No timeout: the byte bound alone ends the read, after one piece past it at most.
        let server = serve(Answer::Flood).await;
        let connection = H2c::new(server.authority.clone(), None);
        let response = connection.send(request(&server.authority)).await.expect("its head");
        assert_eq!(response.status(), 200);
        assert_eq!(body_of(response).await, Err("too long".to_owned()));
        // The connection carries the next request as before.
        let response = connection.send(request(&server.authority)).await.expect("its head");
        assert_eq!(body_of(response).await, Err("too long".to_owned()));
        assert_eq!(server.accepted.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn an_endpoint_that_is_not_listening_cannot_be_connected_to() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let authority = listener.local_addr().expect("an address").to_string();
        drop(listener);
        let error = H2c::new(authority.clone(), None).send(request(&authority)).await.expect_err("refused");
        assert_eq!(error.to_string(), "provider unavailable: cannot connect");
    }
}
