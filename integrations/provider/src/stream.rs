//! The body of a streamed call, read as the runtime asks for chunks.
//!
//! # Invariants
//!
//! - Nothing is read ahead: each poll that finds no decoded chunk waiting reads one more piece of
//!   the body, so a slow reader slows the server, and memory holds at most one piece beyond the
//!   decoder's own bound.
//! - Server-sent events go through the protocol's [`StreamDecoder`], within the request's
//!   bounds; a server that ignored the request for a stream and answered `application/json` is
//!   read as one whole reply (within the byte bound) and handed on as one reply's chunks.
//! - A piece that may complete a large event (more than [`INLINE_WORK`] bytes buffered) is
//!   decoded on the blocking pool, so the run's task keeps noticing its deadline.
//! - Every error handed on is redacted once more ([`Redactor::scrub`]); the first error ends the
//!   stream, and so does the cancellation of the request.

use std::collections::VecDeque;

use futures_core::Stream;
use futures_util::StreamExt;
use loopbound::transport::{ChunkStream, ModelReply, ReplyBounds, ReplyChunk, TransportError};
use reqwest::header;
use tokio_util::sync::CancellationToken;

use crate::errors::body_error;
use crate::events::{Protocol, StreamDecoder};
use crate::redact::Redactor;
use crate::work::{INLINE_WORK, off_the_task, until_cancelled};

/// How the body of a streamed call is read.
enum Body<P> {
    /// Server-sent events, decoded as they arrive (boxed: it moves to the blocking pool and back).
    Events(Box<StreamDecoder<P>>),
    /// A server that ignored the request for a stream and answered with one JSON reply.
    Json(Vec<u8>),
}

/// The state of a streamed call between two chunks.
struct Reading<P> {
    response: reqwest::Response,
    body: Body<P>,
    ready: VecDeque<Result<ReplyChunk, TransportError>>,
    finished: bool,
    cancel: CancellationToken,
    bounds: ReplyBounds,
    redactor: Redactor,
}

/// The chunks of a streamed `response` of protocol `P`, read as they are asked for, within
/// `bounds`, until `cancel` fires.
pub(crate) fn chunk_stream<P: Protocol>(
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
        Body::<P>::Json(Vec::new())
    } else {
        Body::Events(Box::new(StreamDecoder::new(bounds, redactor.clone())))
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

/// Parses a whole reply of protocol `P`, off the task when it is large.
pub(crate) async fn parse_whole<P: Protocol>(
    body: Vec<u8>,
    bounds: ReplyBounds,
    redactor: &Redactor,
) -> Result<ModelReply, TransportError> {
    if body.len() <= INLINE_WORK {
        return P::whole(&body, bounds, redactor);
    }
    let redactor = redactor.clone();
    off_the_task(move || P::whole(&body, bounds, &redactor)).await?
}

impl<P: Protocol> Reading<P> {
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
                match parse_whole::<P>(std::mem::take(body), self.bounds, &self.redactor).await {
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
