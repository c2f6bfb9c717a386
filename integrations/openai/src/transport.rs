//! The HTTP transport: one `POST {base}/chat/completions` per model call.
//!
//! # Invariants
//!
//! - One call, one HTTP request: no retry, no redirect followed, no second endpoint. Every
//!   attempt the runtime admits is exactly one request, so the model budget counts what the
//!   provider sees.
//! - The API key is sent only as a sensitive `Authorization` header; the transport's `Debug`
//!   shows the configuration (key redacted) and nothing of the client. Everything the provider
//!   sends back passes through the [`Redactor`] before it leaves: error messages (redacted before
//!   they are cut), the model's text, tool-call ids, names and arguments, whole or streamed.
//! - A call stops when the request's cancellation fires (the scope's deadline, a halt, or the
//!   caller), besides the runtime dropping the call's future.
//! - The run's task never does long work: parsing a large reply, or decoding what a large
//!   piece of a stream completes, runs on tokio's blocking pool, so the deadline is noticed
//!   while it runs.
//! - Every reply is read within the request's [`ReplyBounds`]: a whole body is refused at its
//!   `Content-Length` or at the first byte past `bytes()`, and its tool calls are counted before
//!   it is parsed; a stream is cut at the first byte past `bytes()` (keep-alive comments
//!   included) or at the event that opens one call index too many. So the memory of a call is
//!   bounded by the reply's byte bound, whatever the server sends, and reading stops as soon as
//!   the bound is crossed.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::pin;

use futures_core::Stream;
use futures_util::StreamExt;
use futures_util::future::{Either, select};
use loopbound::transport::{
    ChatRequest, ChunkStream, ModelReply, ReplyBounds, ReplyChunk, Transport, TransportError,
};
use reqwest::header::{self, HeaderValue};
use tokio_util::sync::CancellationToken;

use crate::chunks::ChunkDecoder;
use crate::config::{Config, ConfigError};
use crate::errors::{body_error, send_error, status_error};
use crate::parse::parse_completion;
use crate::redact::Redactor;
use crate::wire::{Mode, request_body};

/// Longest part of an error body, in bytes, read to explain a failure status.
const MAX_ERROR_BODY: usize = 64 << 10;

/// An OpenAI-compatible chat-completions transport.
///
/// ```no_run
/// use loopbound::{Message, Runtime, Scope, ToolSet};
/// use loopbound_openai::OpenAiTransport;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// // LOOPBOUND_BASE_URL=http://127.0.0.1:8080/v1 LOOPBOUND_MODEL=smollm2
/// let transport = OpenAiTransport::from_env()?;
/// let runtime = Runtime::harness(&ToolSet::default(), transport).streaming(true);
/// let scope = Scope::builder().build()?;
/// let outcome = runtime.run(&scope, &mut vec![Message::user("Say hello.")], |_| true).await?;
/// println!("{} {:?}", outcome.status(), outcome.text());
/// # Ok(())
/// # }
/// ```
pub struct OpenAiTransport {
    config: Config,
    endpoint: reqwest::Url,
    client: reqwest::Client,
    redactor: Redactor,
}

impl fmt::Debug for OpenAiTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiTransport").field("config", &self.config).finish_non_exhaustive()
    }
}

impl OpenAiTransport {
    /// A transport for `config`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Client`] if the HTTP client cannot be built (no TLS backend).
    pub fn new(config: Config) -> Result<Self, ConfigError> {
        let mut builder = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none());
        if let Some(timeout) = config.timeout() {
            builder = builder.timeout(timeout).connect_timeout(timeout);
        }
        let client = builder.build().map_err(|error| ConfigError::Client(error.without_url().to_string()))?;
        Ok(Self {
            endpoint: config.endpoint(),
            redactor: Redactor::new(config.api_key().cloned()),
            config,
            client,
        })
    }

    /// A transport configured by the environment (see [`Config::from_env`]).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the variable that is missing or invalid.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::new(Config::from_env()?)
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Sends one request and returns the response if its status is a success.
    async fn send(&self, request: &ChatRequest<'_>, mode: Mode) -> Result<reqwest::Response, TransportError> {
        let accept = match mode {
            Mode::Whole => "application/json",
            Mode::Stream { .. } => "text/event-stream",
        };
        let mut builder = self
            .client
            .post(self.endpoint.clone())
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, accept)
            .body(request_body(self.config.model(), request, mode));
        if let Some(key) = self.config.api_key() {
            let mut value = HeaderValue::try_from(format!("Bearer {}", key.expose()))
                .map_err(|_| TransportError::other("the API key cannot be sent in a header"))?;
            value.set_sensitive(true);
            builder = builder.header(header::AUTHORIZATION, value);
        }
        let response = builder.send().await.map_err(send_error)?;
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

impl Transport for OpenAiTransport {
    async fn complete<'a>(&'a self, request: ChatRequest<'a>) -> Result<ModelReply, TransportError> {
        let call = async {
            let response = self.send(&request, Mode::Whole).await?;
            let body = read_reply(response, request.bounds).await?;
            parse_whole(body, request.bounds, &self.redactor).await
        };
        until_cancelled(request.cancel, call).await.map_err(|error| self.redactor.scrub(error))
    }

    async fn stream<'a>(
        &'a self,
        request: ChatRequest<'a>,
    ) -> Result<impl Stream<Item = Result<ReplyChunk, TransportError>> + Send + 'a, TransportError> {
        let mode = Mode::Stream { usage: self.config.stream_usage() };
        let response = until_cancelled(request.cancel, self.send(&request, mode))
            .await
            .map_err(|error| self.redactor.scrub(error))?;
        Ok(chunk_stream(response, request.cancel.clone(), request.bounds, self.redactor.clone()))
    }

    /// `openai`: the conventions name every OpenAI-compatible client so, whatever serves it.
    fn provider_name(&self) -> &'static str {
        "openai"
    }

    /// The configured model (`LOOPBOUND_MODEL`).
    fn model_name(&self) -> Option<&str> {
        Some(self.config.model())
    }
}

/// Runs `call` unless `cancel` fires first, in which case the call is dropped.
async fn until_cancelled<T>(
    cancel: &CancellationToken,
    call: impl Future<Output = Result<T, TransportError>>,
) -> Result<T, TransportError> {
    match select(pin!(cancel.cancelled()), pin!(call)).await {
        Either::Left(((), _)) => Err(TransportError::cancelled()),
        Either::Right((result, _)) => result,
    }
}

/// Work on more bytes than this (parsing a whole reply, decoding what a large piece of a stream
/// completes) runs on the runtime's blocking pool: the run's task stays free, so a deadline or a
/// cancellation is noticed at once, however long the work takes. Less costs well under a
/// millisecond and runs in place.
const INLINE_WORK: usize = 256 << 10;

/// Runs `work` on the runtime's blocking pool. If the call is dropped meanwhile (the deadline, a
/// halt, the caller), the work finishes on its own and its result is dropped.
/// Dropping the runtime waits for it (tokio's rule for blocking work): a process that exits
/// right after a run shuts its runtime down with `shutdown_background` instead.
async fn off_the_task<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, TransportError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|_| TransportError::other("decoding the reply failed unexpectedly"))
}

/// Parses a whole reply (see [`parse_completion`]), off the task when it is large.
async fn parse_whole(
    body: Vec<u8>,
    bounds: ReplyBounds,
    redactor: &Redactor,
) -> Result<ModelReply, TransportError> {
    if body.len() <= INLINE_WORK {
        return parse_completion(&body, bounds, redactor);
    }
    let redactor = redactor.clone();
    off_the_task(move || parse_completion(&body, bounds, &redactor)).await?
}

/// Reads a whole reply within `bounds`: refused at once when its declared length is over the
/// byte bound, else read until the first byte past it.
async fn read_reply(response: reqwest::Response, bounds: ReplyBounds) -> Result<Vec<u8>, TransportError> {
    if response.content_length().is_some_and(|declared| declared > bounds.bytes() as u64) {
        return Err(bounds.too_long());
    }
    read_body(response, bounds.bytes()).await.map_err(|error| match error {
        BodyError::TooLong => bounds.too_long(),
        BodyError::Read(error) => error,
    })
}

/// Why a body could not be read whole.
enum BodyError {
    /// It is longer than the limit.
    TooLong,
    /// Reading it failed.
    Read(TransportError),
}

/// Reads a whole body, refusing one longer than `limit` bytes at the read that crosses it. The
/// buffer grows with what arrives (a declared length is trusted only up to the limit).
async fn read_body(mut response: reqwest::Response, limit: usize) -> Result<Vec<u8>, BodyError> {
    let declared = response.content_length().and_then(|len| usize::try_from(len).ok()).unwrap_or(0);
    let mut body = Vec::with_capacity(declared.min(limit));
    while let Some(bytes) = response.chunk().await.map_err(|error| BodyError::Read(body_error(error)))? {
        if body.len() + bytes.len() > limit {
            return Err(BodyError::TooLong);
        }
        body.extend_from_slice(&bytes);
    }
    Ok(body)
}

/// How the body of a streamed call is read.
enum Body {
    /// Server-sent events, decoded as they arrive (boxed: it moves to the blocking pool and back).
    Events(Box<ChunkDecoder>),
    /// A server that ignored `stream: true` and answered with one JSON reply.
    Json(Vec<u8>),
}

/// The state of a streamed call between two chunks.
struct Reading {
    response: reqwest::Response,
    body: Body,
    ready: VecDeque<Result<ReplyChunk, TransportError>>,
    finished: bool,
    cancel: CancellationToken,
    bounds: ReplyBounds,
    redactor: Redactor,
}

/// The chunks of a streamed response, read as the runtime asks for them.
fn chunk_stream(
    response: reqwest::Response,
    cancel: CancellationToken,
    bounds: ReplyBounds,
    redactor: Redactor,
) -> impl Stream<Item = Result<ReplyChunk, TransportError>> + Send {
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.trim_start().starts_with("application/json"));
    let body = if is_json {
        Body::Json(Vec::new())
    } else {
        Body::Events(Box::new(ChunkDecoder::new(bounds, redactor.clone())))
    };
    let reading =
        Reading { response, body, ready: VecDeque::new(), finished: false, cancel, bounds, redactor };
    futures_util::stream::unfold(reading, |mut reading| async move {
        loop {
            if let Some(item) = reading.ready.pop_front() {
                let item = item.map_err(|error| reading.redactor.scrub(error));
                return Some((item, reading));
            }
            if reading.finished {
                return None;
            }
            reading.read_more().await;
        }
    })
}

impl Reading {
    /// Reads one more piece of the body and queues what it completes.
    async fn read_more(&mut self) {
        let mut out = Vec::new();
        let next =
            until_cancelled(&self.cancel, async { self.response.chunk().await.map_err(body_error) }).await;
        match (next, &mut self.body) {
            (Err(error), _) => {
                self.finished = true;
                out.push(Err(error));
            }
            (Ok(Some(bytes)), Body::Events(decoder)) => {
                let completes_a_line = bytes.iter().any(|&byte| byte == b'\n' || byte == b'\r');
                if !completes_a_line || bytes.len() + decoder.buffered() <= INLINE_WORK {
                    decoder.feed(&bytes, &mut out);
                } else {
                    // These bytes may complete a large event: decode it off the task.
                    let mut moved = std::mem::take(decoder);
                    let fed = off_the_task(move || {
                        let mut out = Vec::new();
                        moved.feed(&bytes, &mut out);
                        (moved, out)
                    })
                    .await;
                    match fed {
                        Ok((moved, fed)) => {
                            *decoder = moved;
                            out = fed;
                        }
                        Err(error) => {
                            self.finished = true;
                            out.push(Err(error));
                        }
                    }
                }
                self.finished |= decoder.is_finished();
            }
            (Ok(Some(bytes)), Body::Json(body)) => {
                if body.len() + bytes.len() > self.bounds.bytes() {
                    self.finished = true;
                    out.push(Err(self.bounds.too_long()));
                } else {
                    body.extend_from_slice(&bytes);
                }
            }
            (Ok(None), Body::Events(decoder)) => {
                self.finished = true;
                decoder.finish(&mut out);
            }
            (Ok(None), Body::Json(body)) => {
                self.finished = true;
                match parse_whole(std::mem::take(body), self.bounds, &self.redactor).await {
                    Ok(reply) => {
                        // Core's in-memory stream cuts the reply as its assembler reads it back.
                        let mut chunks = ChunkStream::whole(reply);
                        while let Some(chunk) = chunks.next().await {
                            out.push(chunk);
                        }
                    }
                    Err(error) => out.push(Err(error)),
                }
            }
        }
        self.ready.extend(out);
    }
}
