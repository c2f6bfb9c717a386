//! Writing one response: the head, then a body under the byte budget, framed by
//! `Content-Length` or by chunked transfer encoding.
//!
//! # Invariants
//!
//! - A response never writes more than `max_bytes` body bytes: the write that would pass the
//!   limit is cut to land on it exactly, flushed, and answered with [`Stop::Budget`].
//! - The shared byte counter grows only by body bytes whose write to the socket completed;
//!   framing and headers are never counted.
//! - A chunked body is terminated (the zero-length chunk) only by [`Responder::finish`]; a
//!   response stopped by its budget is left unterminated, so the client sees a cut stream. An
//!   empty write never emits a chunk, so it can never end a body by accident.
//! - Every response says `Connection: close`; [`Responder::finish`] shuts the write side down.

use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncWrite, AsyncWriteExt};

/// Pending bytes past which a body write is sent to the socket at once.
const FLUSH_AT: usize = 64 * 1024;

/// Why a response stopped before its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The response wrote its budget of body bytes.
    Budget,
    /// The connection failed (the client left).
    Closed,
}

/// What a write of a response yields: `Err` when the response must stop now.
pub(crate) type Sent = Result<(), Stop>;

/// How the body's end is marked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// A `Content-Length` of this many bytes.
    Length(u64),
    /// Chunked transfer encoding.
    Chunked,
}

/// One response in progress on `stream`.
#[derive(Debug)]
pub(crate) struct Responder<'a, S> {
    stream: &'a mut S,
    /// Bytes written but not yet sent: head, framing and body.
    pending: Vec<u8>,
    /// How many of the pending bytes are body bytes.
    pending_body: u64,
    chunked: bool,
    /// Body bytes of this response so far, pending ones included.
    written: u64,
    max_bytes: u64,
    /// The server's count of body bytes sent, over every response.
    sent: &'a AtomicU64,
}

impl<'a, S: AsyncWrite + Unpin> Responder<'a, S> {
    /// A response on `stream` of at most `max_bytes` body bytes, counted into `sent`.
    pub(crate) fn new(stream: &'a mut S, max_bytes: u64, sent: &'a AtomicU64) -> Self {
        Self { stream, pending: Vec::new(), pending_body: 0, chunked: false, written: 0, max_bytes, sent }
    }

    /// Queues the head: `status`, `content_type` and `framing`, and `Connection: close`.
    pub(crate) fn head(&mut self, status: u16, content_type: &str, framing: Framing) {
        let _ =
            write!(self.pending, "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\n", reason(status));
        match framing {
            Framing::Length(len) => {
                let _ = write!(self.pending, "Content-Length: {len}\r\n");
            }
            Framing::Chunked => {
                self.pending.extend_from_slice(b"Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n");
                self.chunked = true;
            }
        }
        self.pending.extend_from_slice(b"Connection: close\r\n\r\n");
    }

    /// Queues the head of a server-sent-event stream of `status`.
    pub(crate) fn sse_head(&mut self, status: u16) {
        self.head(status, "text/event-stream", Framing::Chunked);
    }

    /// Writes `bytes` of body, cut at the budget; sends them once enough are pending.
    pub(crate) async fn body(&mut self, bytes: &[u8]) -> Sent {
        let room = self.max_bytes.saturating_sub(self.written);
        let take = usize::try_from(room).map_or(bytes.len(), |room| room.min(bytes.len()));
        if take > 0 {
            if self.chunked {
                let _ = write!(self.pending, "{take:x}\r\n");
            }
            self.pending.extend_from_slice(bytes.get(..take).unwrap_or_default());
            if self.chunked {
                self.pending.extend_from_slice(b"\r\n");
            }
            let take = take as u64;
            self.pending_body += take;
            self.written += take;
        }
        if take < bytes.len() {
            self.flush().await?;
            return Err(Stop::Budget);
        }
        if self.pending.len() >= FLUSH_AT {
            self.flush().await?;
        }
        Ok(())
    }

    /// Sends every pending byte now.
    pub(crate) async fn flush(&mut self) -> Sent {
        if !self.pending.is_empty() {
            self.stream.write_all(&self.pending).await.map_err(|_| Stop::Closed)?;
            self.sent.fetch_add(self.pending_body, Ordering::SeqCst);
            self.pending.clear();
            self.pending_body = 0;
        }
        self.stream.flush().await.map_err(|_| Stop::Closed)
    }

    /// Ends the body (the zero-length chunk when chunked), sends it, and shuts the write side.
    pub(crate) async fn finish(mut self) -> Sent {
        if self.chunked {
            self.pending.extend_from_slice(b"0\r\n\r\n");
        }
        self.flush().await?;
        self.stream.shutdown().await.map_err(|_| Stop::Closed)
    }

    /// Writes a whole `application/json` response of `status` with `body`.
    pub(crate) async fn whole(mut self, status: u16, body: &[u8]) -> Sent {
        self.head(status, "application/json", Framing::Length(body.len() as u64));
        self.body(body).await?;
        self.finish().await
    }
}

/// The reason phrase of `status`.
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        411 => "Length Required",
        413 => "Content Too Large",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Hostile",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn cuts_a_chunked_body_at_the_budget() {
        let sent = AtomicU64::new(0);
        let mut out = Vec::new();
        let mut responder = Responder::new(&mut out, 5, &sent);
        responder.sse_head(200);
        assert_eq!(responder.body(b"").await, Ok(()));
        assert_eq!(responder.body(b"abc").await, Ok(()));
        assert_eq!(responder.body(b"defg").await, Err(Stop::Budget));
        assert_eq!(responder.body(b"h").await, Err(Stop::Budget));
        assert_eq!(sent.load(Ordering::SeqCst), 5);
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"), "{text}");
        assert!(text.ends_with("\r\n\r\n3\r\nabc\r\n2\r\nde\r\n"), "{text}");
    }

    #[tokio::test]
    async fn whole_replies_have_a_length_and_end() {
        let sent = AtomicU64::new(0);
        let mut out = Vec::new();
        Responder::new(&mut out, 100, &sent).whole(401, b"{}").await.unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.1 401 Unauthorized\r\n"), "{text}");
        assert!(text.contains("Content-Length: 2\r\n") && text.ends_with("close\r\n\r\n{}"), "{text}");
        assert_eq!(sent.load(Ordering::SeqCst), 2);
    }
}
