//! A load model server: an OpenAI-compatible `POST /v1/chat/completions` on loopback that plays
//! the review task for thousands of concurrent runs, and measures from its side of the wire how
//! much time each client adds to every model call. Written on hyper and tokio's timers, so that
//! it is never what limits a load test.
//!
//! - **The script** ([`script`]): a run names itself in its user message
//!   (`Review ticket 42. run=<id>`, see [`script::prompt`]); the number of tool results in the
//!   conversation decides the reply: `read_ticket(42)`, then `finish_review(42)`, then the text
//!   `Review finished.`. Nothing but the request decides it.
//! - **The replies** ([`reply`]): whole JSON or server-sent events ended by `data: [DONE]`, as
//!   each request asks; usage in every whole reply, and in a stream when
//!   `stream_options.include_usage` is asked. [`Mode`] can refuse the other kind, so that a
//!   client measured in the wrong mode fails loudly.
//! - **The latency** ([`ServerConfig::latency`]): each reply goes out that long after the first
//!   byte of its request arrived.
//! - **The figures** ([`stats`]): per run, the time from the end of each reply to the first byte
//!   of the run's next request (the client's added latency per model call), and when each run's
//!   first request arrived (on `CLOCK_MONOTONIC`, [`clock`], so that a client can subtract its
//!   own start time). The client's time from a run's start to its first request cannot be seen
//!   from here: the client measures it with these arrival times.
//! - **The hold**: reset with a hold, the server keeps every run's first call waiting until it is
//!   released, so that a client can measure its memory while all its runs wait on the model.
//!   Released over a window, the held calls are answered evenly over it, so that the runs'
//!   later calls arrive spread as a service's would rather than all at once.
//!
//! Control routes, all JSON: `GET /__load/stats` ([`Snapshot`]), `GET /__load/runs`
//! ([`stats::Runs`]), `POST /__load/reset` (body `{"hold": true}` optional), `POST
//! /__load/release` (body `{"over_ms": 2000}` optional). `cargo run -p loopbound-testkit --bin load-server -- --latency-ms 200`
//! runs it alone and prints its base URL.
//!
//! # Invariants
//!
//! - Loopback only (127.0.0.1, an ephemeral port), and nothing outlives a dropped
//!   [`LoadServer`].
//! - Every reply, error replies included, arms its connection for the next request's first byte;
//!   a gap is recorded only between a run's reply k−1 and its request k.
//! - Memory is bounded whatever clients send: request bodies (4 MiB), runs followed and gaps
//!   kept (see [`stats`]).

mod body;
pub mod clock;
mod conn;
pub mod reply;
pub mod script;
mod server;
pub mod stats;

pub use server::{CHAT_PATH, LoadServer, MAX_REQUEST_BODY, Mode, ServerConfig};
pub use stats::{Snapshot, Summary};

/// Raises this process's soft limit on open files to its hard limit, and returns the new soft
/// limit: each of thousands of concurrent runs holds a connection, on each side of it.
///
/// # Errors
///
/// The error of `getrlimit` or `setrlimit`.
pub fn raise_open_files() -> Result<u64, nix::Error> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard)?;
    }
    Ok(hard)
}

/// Runs a server alone until the process is killed, on a multi-thread runtime of `workers`
/// threads, with the open-files limit raised: `announce` is told the server once it listens
/// (the standalone binaries print its base URL there).
///
/// # Errors
///
/// The error of building the runtime or of binding; it returns only on error.
pub fn serve_forever(
    config: ServerConfig,
    workers: usize,
    announce: impl FnOnce(&LoadServer),
) -> std::io::Result<()> {
    // A lower limit only caps how many connections are accepted at once, which the figures show.
    let _ = raise_open_files();
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(workers.max(1)).enable_all().build()?;
    runtime.block_on(async {
        let server = LoadServer::start(config)?;
        announce(&server);
        std::future::pending::<std::io::Result<()>>().await
    })
}
