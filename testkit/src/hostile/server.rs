//! The server: a loopback listener, one task per connection, and the counters tests read.
//!
//! # Invariants
//!
//! - The listener binds 127.0.0.1 with an ephemeral port, never another interface.
//! - Every connection task lives inside the accept task's [`JoinSet`]; dropping the
//!   [`HostileServer`] aborts the accept task, whose `JoinSet` then aborts every connection
//!   task, so every socket closes and nothing outlives the server.
//! - Every connection ends at most [`Budget::max_time`] after its accept, and answers at most one
//!   request (every response says `Connection: close`).
//! - Nothing a client sends can panic a task: the request reader and the answers return errors,
//!   and an error only closes the connection.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

use crate::hostile::answer;
use crate::hostile::behaviour::Behaviour;
use crate::hostile::budget::Budget;
use crate::hostile::http::{self, ReadError};
use crate::hostile::payload;
use crate::hostile::response::Responder;

/// The largest request body read: 64 MiB. A larger declared body is refused with 413 unread.
pub const MAX_REQUEST_BODY: usize = 64 * 1024 * 1024;

/// How long, and how many bytes, a refused request's unread body is drained after the answer,
/// so that closing does not reset the connection before the client reads the answer.
const DRAIN: (Duration, u64) = (Duration::from_secs(1), 1024 * 1024);

/// A hostile model server (chat completions and the Messages API) on loopback; it stops when
/// dropped.
#[derive(Debug)]
pub struct HostileServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

/// What every connection task shares.
#[derive(Debug)]
struct Shared {
    behaviour: Behaviour,
    budget: Budget,
    /// Requests answered (with any status).
    requests: AtomicU64,
    /// Body bytes written to clients, over every response.
    bytes_sent: AtomicU64,
    /// The body length of the last request answered (the declared one when refused as too large).
    last_body: AtomicUsize,
    /// The largest such body length.
    largest_body: AtomicUsize,
    /// Model-call requests (either API) so far: the index of the next one.
    chat_requests: AtomicUsize,
}

impl HostileServer {
    /// Binds 127.0.0.1 on an ephemeral port and serves every connection with `behaviour`, under
    /// the default [`Budget`] (256 MiB, 30 s).
    ///
    /// # Errors
    ///
    /// The error of binding or of reading the bound address.
    pub async fn start(behaviour: Behaviour) -> std::io::Result<Self> {
        Self::start_with(behaviour, Budget::default()).await
    }

    /// Binds 127.0.0.1 on an ephemeral port and serves every connection with `behaviour`, under
    /// `budget`. It must be called inside a Tokio runtime, which runs the server's tasks.
    ///
    /// # Errors
    ///
    /// The error of binding or of reading the bound address.
    pub async fn start_with(behaviour: Behaviour, budget: Budget) -> std::io::Result<Self> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            behaviour,
            budget,
            requests: AtomicU64::new(0),
            bytes_sent: AtomicU64::new(0),
            last_body: AtomicUsize::new(0),
            largest_body: AtomicUsize::new(0),
            chat_requests: AtomicUsize::new(0),
        });
        let accept = tokio::spawn(accept_loop(listener, Arc::clone(&shared)));
        Ok(Self { addr, shared, accept })
    }

    /// The bound address, `127.0.0.1:PORT`.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL to configure a client with: `http://127.0.0.1:PORT/v1`.
    #[must_use]
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The budget every connection is served under.
    #[must_use]
    pub fn budget(&self) -> Budget {
        self.shared.budget
    }

    /// The requests answered so far, with any status (a connection that closes before a whole
    /// request head is not counted).
    #[must_use]
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::SeqCst)
    }

    /// The body bytes written to clients so far, over every response (headers and chunk framing
    /// are not counted; a write still in progress is counted when it completes).
    #[must_use]
    pub fn bytes_sent(&self) -> u64 {
        self.shared.bytes_sent.load(Ordering::SeqCst)
    }

    /// The body length of the last request answered; for a body refused as larger than
    /// [`MAX_REQUEST_BODY`], its declared length (saturated to `usize`); 0 for a request refused
    /// before its body was read (a malformed head, a `Transfer-Encoding`).
    #[must_use]
    pub fn last_request_body_len(&self) -> usize {
        self.shared.last_body.load(Ordering::SeqCst)
    }

    /// The largest body length of any request answered, counted as
    /// [`last_request_body_len`](Self::last_request_body_len) is.
    #[must_use]
    pub fn largest_request_body_len(&self) -> usize {
        self.shared.largest_body.load(Ordering::SeqCst)
    }
}

impl Drop for HostileServer {
    /// Aborts the accept task, which closes the listener and aborts every connection task.
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl Shared {
    /// Counts one answered request with a body of `len` bytes.
    fn record(&self, len: usize) {
        self.requests.fetch_add(1, Ordering::SeqCst);
        self.last_body.store(len, Ordering::SeqCst);
        self.largest_body.fetch_max(len, Ordering::SeqCst);
    }
}

/// Accepts connections forever, each served by a task of `connections`, and reaps the finished
/// ones so the set stays as small as the open connections.
async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    connections.spawn(connection(stream, Arc::clone(&shared)));
                }
                // Running out of descriptors must not spin the loop.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Serves one connection until its answer ends or its time budget does, then closes it.
async fn connection(mut stream: TcpStream, shared: Arc<Shared>) {
    // Each byte of a trickle must leave at once.
    let _ = stream.set_nodelay(true);
    match Instant::now().checked_add(shared.budget.max_time) {
        Some(deadline) => {
            let _ = tokio::time::timeout_at(deadline, serve(&mut stream, &shared)).await;
        }
        None => serve(&mut stream, &shared).await,
    }
}

/// Reads one request and answers it.
async fn serve(stream: &mut TcpStream, shared: &Shared) {
    let request = match http::read_request(stream, MAX_REQUEST_BODY).await {
        Ok(request) => request,
        Err(ReadError::Closed) => return,
        Err(ReadError::Refused { status, reason }) => {
            shared.record(0);
            return refuse(stream, shared, status, reason).await;
        }
        Err(ReadError::TooLarge { declared }) => {
            shared.record(usize::try_from(declared).unwrap_or(usize::MAX));
            return refuse(stream, shared, 413, "request body larger than the server's cap").await;
        }
    };
    shared.record(request.body.len());
    let out = Responder::new(stream, shared.budget.max_bytes, &shared.bytes_sent);
    let Some(api) = request.dialect() else {
        let body = payload::error(
            "only POST /v1/chat/completions, /v1/messages and /v1/responses are served",
            "invalid_request_error",
            "not_found",
        );
        let _ = out.whole(404, body.as_bytes()).await;
        return;
    };
    let index = shared.chat_requests.fetch_add(1, Ordering::SeqCst);
    let _ = answer::answer(&shared.behaviour, &request, api, index, out).await;
}

/// Answers an unusable request with an error of `status`, then drains what the client may still
/// be sending, for a bounded time and size.
async fn refuse(stream: &mut TcpStream, shared: &Shared, status: u16, reason: &str) {
    let body = payload::error(reason, "invalid_request_error", "bad_request");
    let out = Responder::new(&mut *stream, shared.budget.max_bytes, &shared.bytes_sent);
    if out.whole(status, body.as_bytes()).await.is_ok() {
        let mut rest = (&mut *stream).take(DRAIN.1);
        let _ = tokio::time::timeout(DRAIN.0, tokio::io::copy(&mut rest, &mut tokio::io::sink())).await;
    }
}
