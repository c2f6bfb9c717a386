//! The server: a loopback listener, one task per connection (hyper's HTTP/1.1, or HTTP/2 when
//! the client opens with its preface), the routes, the latency and the hold.
//!
//! # Invariants
//!
//! - The listener binds 127.0.0.1 on an ephemeral port, never another interface, with a listen
//!   backlog as deep as the kernel allows, so thousands of clients connecting at once are not
//!   dropped to a SYN retry.
//! - Every connection task lives in the accept task's `JoinSet`: dropping the [`LoadServer`]
//!   aborts the accept task, whose set aborts every connection, so nothing outlives it.
//! - A reply waits only on tokio's timer, never on a thread: it is sent `latency` after the
//!   first byte of its request arrived (or as soon as possible past that). Over HTTP/2, where
//!   one connection carries many requests, a request's arrival is stamped when its handler
//!   starts, after its headers were read: later than its first byte, so a gap measured from it
//!   can only look longer.
//! - Under a hold, the first request of every run waits until the hold is released; then every
//!   first call since the reset waits the same `D = max(latency, release − first arrival)` from
//!   its own arrival, so the replies come back spaced as their requests arrived. A release
//!   spread over `W` instead has a pacer wake the k-th of the n held calls (in arrival order) at
//!   `S + k·W/n`, answered then, where `S = max(release, last held arrival + latency)`: every
//!   held call has waited a latency by its turn, so their replies, and every later call of their
//!   runs, come evenly spaced over `W`, as a service's arrivals would be, and the server's own
//!   work of waking them is spread the same way. (Starting at the release would answer together
//!   every call whose latency ran out after its turn: a burst at the window's start.)
//! - A request body over [`MAX_REQUEST_BODY`] is refused with 413, a body that is not a chat
//!   request with 400, a request in the mode the server does not answer with 400: nothing a
//!   client sends panics a task.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde::Deserialize;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};

use super::body::{Followed, ReplyBody};
use super::clock::monotonic_ns;
use super::conn::{Conn, Stamped};
use super::reply::{Reply, Usage};
use super::script::{self, ChatRequest};
use super::stats::{Runs, Snapshot, Tracker};

/// The largest request body read: 4 MiB.
pub const MAX_REQUEST_BODY: usize = 4 << 20;
/// The listen backlog asked for; the kernel caps it at `net.core.somaxconn`.
const BACKLOG: u32 = 65_535;
/// The chat-completions route.
pub const CHAT_PATH: &str = "/v1/chat/completions";

/// Which requests the server answers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Whole and streamed requests alike, each as it asks.
    #[default]
    Any,
    /// Streamed requests only (`stream: true`); others are refused with 400.
    Stream,
    /// Whole requests only; streamed ones are refused with 400.
    Whole,
}

impl Mode {
    fn refuses(self, stream: bool) -> Option<&'static str> {
        match (self, stream) {
            (Self::Stream, false) => Some("this load server answers streamed requests only (stream: true)"),
            (Self::Whole, true) => Some("this load server answers whole requests only (no stream)"),
            _ => None,
        }
    }
}

/// How the server answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// The time from a request's first byte to its reply.
    pub latency: Duration,
    /// Which requests it answers.
    pub mode: Mode,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self { latency: Duration::from_millis(200), mode: Mode::Any }
    }
}

/// Where the hold stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hold {
    Off,
    Holding,
    /// Released: every first call waits `delay_ns` from its arrival; with `spread`, a held call
    /// is answered when the release's pacer wakes it (first calls that came after the release
    /// wait `delay_ns` still).
    Released {
        delay_ns: u64,
        spread: bool,
    },
}

/// The hold and the first calls it holds, under one lock: a call is queued only while the hold
/// holds, and the release takes the whole queue, so no call is left waiting.
#[derive(Debug)]
struct HoldState {
    hold: Hold,
    /// One waker per held call, in arrival order; dropped unsent, a held call is answered as
    /// if there were no hold.
    waiting: VecDeque<(oneshot::Sender<()>, u64)>,
}

/// A count taken for as long as the value lives.
#[derive(Debug)]
pub(crate) struct InFlight {
    shared: Arc<Shared>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.shared.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Counts a request waiting on the hold for as long as it waits (or until it is dropped).
struct Held<'a>(&'a AtomicU64);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What every connection shares.
#[derive(Debug)]
pub(crate) struct Shared {
    config: ServerConfig,
    tracker: Tracker,
    requests: AtomicU64,
    replies: AtomicU64,
    bad_requests: AtomicU64,
    in_flight: AtomicU64,
    peak_in_flight: AtomicU64,
    held: AtomicU64,
    connections: AtomicU64,
    open: AtomicU64,
    peak_open: AtomicU64,
    /// The first byte of the first chat request since the reset (0: none yet).
    first_arrival_ns: AtomicU64,
    hold: Mutex<HoldState>,
    /// The runtime the server was started on, where a spread release's pacer runs.
    runtime: tokio::runtime::Handle,
}

impl Shared {
    fn new(config: ServerConfig) -> Self {
        Self {
            config,
            tracker: Tracker::default(),
            requests: AtomicU64::new(0),
            replies: AtomicU64::new(0),
            bad_requests: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            peak_in_flight: AtomicU64::new(0),
            held: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            open: AtomicU64::new(0),
            peak_open: AtomicU64::new(0),
            first_arrival_ns: AtomicU64::new(0),
            hold: Mutex::new(HoldState { hold: Hold::Off, waiting: VecDeque::new() }),
            runtime: tokio::runtime::Handle::current(),
        }
    }

    pub(crate) fn reply_ended(&self, run: &str, tool_results: u32, at: u64) {
        self.replies.fetch_add(1, Ordering::Relaxed);
        self.tracker.reply_ended(run, tool_results, at);
    }

    fn snapshot(&self) -> Snapshot {
        let latency_ns = u64::try_from(self.config.latency.as_nanos()).unwrap_or(u64::MAX);
        let extra_ns = match self.hold_state() {
            Hold::Released { delay_ns, .. } => delay_ns.saturating_sub(latency_ns),
            Hold::Off | Hold::Holding => 0,
        };
        let load = |counter: &AtomicU64| counter.load(Ordering::Acquire);
        let mut snapshot = Snapshot {
            requests: load(&self.requests),
            replies: load(&self.replies),
            bad_requests: load(&self.bad_requests),
            in_flight: load(&self.in_flight),
            peak_in_flight: load(&self.peak_in_flight),
            held: load(&self.held),
            hold_extra_ms: Duration::from_nanos(extra_ns).as_secs_f64() * 1000.0,
            connections: load(&self.connections),
            open_connections: load(&self.open),
            peak_open_connections: load(&self.peak_open),
            ..Snapshot::default()
        };
        self.tracker.fill(&mut snapshot);
        snapshot
    }

    /// Forgets every figure; with `hold`, first requests wait for [`Self::release`].
    fn reset(&self, hold: bool) {
        self.tracker.reset();
        for counter in [&self.requests, &self.replies, &self.bad_requests, &self.connections] {
            counter.store(0, Ordering::Release);
        }
        self.peak_in_flight.store(self.in_flight.load(Ordering::Acquire), Ordering::Release);
        self.peak_open.store(self.open.load(Ordering::Acquire), Ordering::Release);
        self.first_arrival_ns.store(0, Ordering::Release);
        let mut state = self.hold_lock();
        state.hold = if hold { Hold::Holding } else { Hold::Off };
        // Calls held by an earlier hold are answered as if there were none.
        state.waiting.clear();
    }

    fn hold_lock(&self) -> std::sync::MutexGuard<'_, HoldState> {
        // A panic under this lock leaves its state whole (each change is one assignment).
        self.hold.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn hold_state(&self) -> Hold {
        self.hold_lock().hold
    }

    /// Releases a hold: every first call since the reset waits `max(latency, now − first
    /// arrival)` from its own arrival, or with a `spread`, a pacer task wakes the held calls one
    /// by one, the k-th of n at `max(now, last held arrival + latency) + k·spread/n`, and each
    /// is answered when woken. Without a hold, nothing changes.
    fn release(&self, spread: Duration) {
        let latency_ns = u64::try_from(self.config.latency.as_nanos()).unwrap_or(u64::MAX);
        let first = self.first_arrival_ns.load(Ordering::Acquire);
        let released = tokio::time::Instant::now();
        let waited = if first == 0 { 0 } else { monotonic_ns().saturating_sub(first) };
        let waiting = {
            let mut state = self.hold_lock();
            if state.hold != Hold::Holding {
                return;
            }
            state.hold = Hold::Released { delay_ns: latency_ns.max(waited), spread: !spread.is_zero() };
            std::mem::take(&mut state.waiting)
        };
        if spread.is_zero() {
            for (waker, _) in waiting {
                let _ = waker.send(());
            }
            return;
        }
        // Waking every held call at once would be a burst of work on this machine's cores at the
        // very moment the spread is meant to avoid one: the pacer wakes them as their turn comes.
        // The pacer starts once the last held call has waited a latency, so each is answered
        // at its turn and none sooner: the turns, not the arrivals, space the replies.
        let last_arrival = waiting.iter().map(|&(_, arrival)| arrival).max().unwrap_or(0);
        let start = released
            + Duration::from_nanos(last_arrival.saturating_add(latency_ns).saturating_sub(monotonic_ns()));
        self.runtime.spawn(async move {
            let count = u32::try_from(waiting.len()).unwrap_or(u32::MAX).max(1);
            for (place, (waker, _)) in (0_u32..).zip(waiting) {
                tokio::time::sleep_until(start + spread * place / count).await;
                let _ = waker.send(());
            }
        });
    }

    /// When to answer a request that arrived at `arrival_ns` carrying `tool_results` tool
    /// results, after waiting for a hold to be released.
    async fn due(self: &Arc<Self>, tool_results: u32, arrival_ns: u64) -> u64 {
        let latency_ns = u64::try_from(self.config.latency.as_nanos()).unwrap_or(u64::MAX);
        let plain = arrival_ns.saturating_add(latency_ns);
        if tool_results > 0 {
            return plain;
        }
        let woken = {
            let mut state = self.hold_lock();
            match state.hold {
                Hold::Holding => {
                    let (waker, woken) = oneshot::channel();
                    state.waiting.push_back((waker, arrival_ns));
                    self.held.fetch_add(1, Ordering::AcqRel);
                    woken
                }
                // A first call that came after the release: as every first call since the reset.
                Hold::Released { delay_ns, .. } => return arrival_ns.saturating_add(delay_ns),
                Hold::Off => return plain,
            }
        };
        let _held = Held(&self.held);
        if woken.await.is_err() {
            // A reset dropped the hold: no hold.
            return plain;
        }
        match self.hold_state() {
            Hold::Released { spread: true, .. } => plain.max(monotonic_ns()),
            Hold::Released { delay_ns, spread: false } => arrival_ns.saturating_add(delay_ns),
            Hold::Off | Hold::Holding => plain,
        }
    }
}

/// The load model server on loopback; it stops when dropped.
#[derive(Debug)]
pub struct LoadServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl LoadServer {
    /// Starts a server on 127.0.0.1 and an ephemeral port, on the current tokio runtime.
    ///
    /// # Errors
    ///
    /// The error of binding or listening.
    pub fn start(config: ServerConfig) -> io::Result<Self> {
        let socket = TcpSocket::new_v4()?;
        socket.bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))?;
        let listener = socket.listen(BACKLOG)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::new(config));
        let accept = tokio::spawn(accept(listener, Arc::clone(&shared)));
        Ok(Self { addr, shared, accept })
    }

    /// The address it listens on.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL an OpenAI-compatible client is given: `http://127.0.0.1:<port>/v1`.
    #[must_use]
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The figures since the last reset, as `GET /__load/stats` reports them.
    #[must_use]
    pub fn stats(&self) -> Snapshot {
        self.shared.snapshot()
    }

    /// Every followed run, as `GET /__load/runs` reports them.
    #[must_use]
    pub fn runs(&self) -> Runs {
        self.shared.tracker.runs()
    }

    /// Forgets every figure, as `POST /__load/reset` does; with `hold`, the first request of
    /// every run waits for [`release`](Self::release).
    pub fn reset(&self, hold: bool) {
        self.shared.reset(hold);
    }

    /// Releases the hold, as `POST /__load/release` does: the held calls are answered evenly
    /// over `spread` (at once for a zero spread, each `latency` after its arrival or now).
    pub fn release(&self, spread: Duration) {
        self.shared.release(spread);
    }
}

impl Drop for LoadServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn accept(listener: TcpListener, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        match listener.accept().await {
            Ok((stream, _)) => {
                connections.spawn(connection(stream, Arc::clone(&shared)));
            }
            // Out of descriptors or a connection reset before its accept: the listener itself
            // is fine; pause a little so that a lack of descriptors does not spin.
            Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
}

/// The HTTP/2 flow-control window of a whole connection: 10,000 requests of 6 KiB in flight.
const H2_CONNECTION_WINDOW: u32 = 64 << 20;

/// The HTTP/2 flow-control window of one request: a whole request body, up to the largest.
const H2_STREAM_WINDOW: u32 = 1 << 20;

/// Counts an open connection for as long as it lives.
struct Open(Arc<Shared>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
    }
}

async fn connection(stream: TcpStream, shared: Arc<Shared>) {
    shared.connections.fetch_add(1, Ordering::Relaxed);
    let open = shared.open.fetch_add(1, Ordering::AcqRel) + 1;
    shared.peak_open.fetch_max(open, Ordering::AcqRel);
    let _open = Open(Arc::clone(&shared));
    // Small replies go out at once rather than waiting to be coalesced.
    let _ = stream.set_nodelay(true);
    let conn = Arc::new(Conn::new());
    let io = TokioIo::new(Stamped::new(stream, Arc::clone(&conn)));
    let service = service_fn(move |request| {
        let (shared, conn) = (Arc::clone(&shared), Arc::clone(&conn));
        async move { Ok::<_, Infallible>(route(shared, conn, request).await) }
    });
    // A connection that fails (the client went away) only ends its own task. One connection of
    // HTTP/2 carries every request a client has in flight: a limit on its streams no client
    // reaches, announced (httpx sends one stream at a time until the server names a limit), and
    // a window wide enough for every request body in flight at once, so that flow control never
    // holds a client back.
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http2()
        .max_concurrent_streams(Some(1 << 20))
        .initial_connection_window_size(H2_CONNECTION_WINDOW)
        .initial_stream_window_size(H2_STREAM_WINDOW);
    let _ = builder.serve_connection(io, service).await;
}

async fn route(shared: Arc<Shared>, conn: Arc<Conn>, request: Request<Incoming>) -> Response<ReplyBody> {
    let first_byte_ns =
        if request.version() == hyper::Version::HTTP_2 { monotonic_ns() } else { conn.first_byte_ns() };
    match (request.method(), request.uri().path()) {
        (&Method::POST, CHAT_PATH) => chat(&shared, conn, request, first_byte_ns).await,
        (&Method::GET, "/__load/stats") => json(StatusCode::OK, &shared.snapshot(), conn),
        (&Method::GET, "/__load/runs") => json(StatusCode::OK, &shared.tracker.runs(), conn),
        (&Method::POST, "/__load/reset") => {
            #[derive(Default, Deserialize)]
            struct ResetBody {
                #[serde(default)]
                hold: bool,
            }
            match control_body::<ResetBody>(request).await {
                Some(reset) => {
                    shared.reset(reset.hold);
                    json(StatusCode::OK, &serde_json::json!({"reset": true, "hold": reset.hold}), conn)
                }
                None => error(StatusCode::BAD_REQUEST, "the reset body must be {\"hold\": true|false}", conn),
            }
        }
        (&Method::POST, "/__load/release") => {
            #[derive(Default, Deserialize)]
            struct ReleaseBody {
                #[serde(default)]
                over_ms: u64,
            }
            match control_body::<ReleaseBody>(request).await {
                Some(release) => {
                    shared.release(Duration::from_millis(release.over_ms));
                    let released = serde_json::json!({"released": true, "over_ms": release.over_ms});
                    json(StatusCode::OK, &released, conn)
                }
                None => error(StatusCode::BAD_REQUEST, "the release body must be {\"over_ms\": <ms>}", conn),
            }
        }
        _ => error(StatusCode::NOT_FOUND, "no such route on the load server", conn),
    }
}

async fn chat(
    shared: &Arc<Shared>,
    conn: Arc<Conn>,
    request: Request<Incoming>,
    first_byte_ns: u64,
) -> Response<ReplyBody> {
    let refuse = |status, message: &str, conn| {
        shared.bad_requests.fetch_add(1, Ordering::Relaxed);
        error(status, message, conn)
    };
    let body = match read_body(request).await {
        Ok(body) => body,
        Err(status) => return refuse(status, "the request body could not be read whole", conn),
    };
    let chat: ChatRequest = match script::parse(&body) {
        Ok(chat) => chat,
        Err(bad) => return refuse(StatusCode::BAD_REQUEST, &bad.to_string(), conn),
    };
    if let Some(message) = shared.config.mode.refuses(chat.stream) {
        return refuse(StatusCode::BAD_REQUEST, message, conn);
    }
    shared.requests.fetch_add(1, Ordering::Relaxed);
    let _ = shared.first_arrival_ns.compare_exchange(0, first_byte_ns, Ordering::AcqRel, Ordering::Acquire);
    shared.tracker.request(chat.run.as_deref(), chat.tool_results, chat.feedback_ok, first_byte_ns);
    let in_flight = shared.in_flight.fetch_add(1, Ordering::AcqRel) + 1;
    shared.peak_in_flight.fetch_max(in_flight, Ordering::AcqRel);
    let in_flight = InFlight { shared: Arc::clone(shared) };

    let due = shared.due(chat.tool_results, first_byte_ns).await;
    let wait = due.saturating_sub(monotonic_ns());
    if wait > 0 {
        tokio::time::sleep(Duration::from_nanos(wait)).await;
    }

    let step = chat.step();
    let call_id = match &chat.run {
        Some(run) => format!("call_{run}_{}", chat.tool_results),
        None => format!("call_{}", chat.tool_results),
    };
    let reply = Reply { step, call_id: &call_id, model: &chat.model, usage: Usage::of(step, body.len()) };
    let (content_type, body) = if chat.stream {
        ("text/event-stream", ReplyBody::stream(reply.events(chat.include_usage), conn))
    } else {
        ("application/json", ReplyBody::whole(reply.whole(), conn))
    };
    let followed = chat.run.map(|run| Followed {
        shared: Arc::clone(shared),
        run: run.into_boxed_str(),
        tool_results: chat.tool_results,
    });
    let mut response = Response::new(body.reply(followed, in_flight));
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// A control route's JSON body, its defaults when empty; `None` if it cannot be read or parsed.
async fn control_body<T: Default + serde::de::DeserializeOwned>(request: Request<Incoming>) -> Option<T> {
    let body = read_body(request).await.ok()?;
    if body.is_empty() {
        return Some(T::default());
    }
    serde_json::from_slice(&body).ok()
}

/// Reads a request body of at most [`MAX_REQUEST_BODY`] bytes.
async fn read_body(request: Request<Incoming>) -> Result<Vec<u8>, StatusCode> {
    let declared = request
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<usize>().ok());
    if declared.is_some_and(|length| length > MAX_REQUEST_BODY) {
        return Err(StatusCode::PAYLOAD_TOO_LARGE);
    }
    match Limited::new(request.into_body(), MAX_REQUEST_BODY).collect().await {
        Ok(collected) => Ok(collected.to_bytes().to_vec()),
        Err(error) if error.is::<http_body_util::LengthLimitError>() => Err(StatusCode::PAYLOAD_TOO_LARGE),
        Err(_) => Err(StatusCode::BAD_REQUEST),
    }
}

fn json(status: StatusCode, value: &impl serde::Serialize, conn: Arc<Conn>) -> Response<ReplyBody> {
    let bytes = serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec());
    let mut response = Response::new(ReplyBody::whole(bytes, conn));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn error(status: StatusCode, message: &str, conn: Arc<Conn>) -> Response<ReplyBody> {
    let kind = if status == StatusCode::NOT_FOUND { "not_found" } else { "invalid_request_error" };
    json(status, &serde_json::json!({"error": {"message": message, "type": kind}}), conn)
}
