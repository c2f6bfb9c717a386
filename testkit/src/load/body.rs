//! The body of every response, which notices the moment its last byte is handed to the
//! connection.
//!
//! # Invariants
//!
//! - When the body yields its last frame (or reports its end) it runs its end exactly once: the
//!   connection is armed for the next request, and a followed run's reply is recorded as ended
//!   at that moment. A body dropped before its end (the client went away) arms nothing and
//!   records no end.
//! - The in-flight count a reply holds is given back exactly once, at its end or when it is
//!   dropped, whichever comes first.
//! - A whole body states its exact length (`Content-Length`); a stream's does not (chunked).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper::body::{Body, Bytes, Frame, SizeHint};

use super::clock::monotonic_ns;
use super::conn::Conn;
use super::server::{InFlight, Shared};

/// The reply to a followed run's request, to record when it ends.
#[derive(Debug)]
pub(crate) struct Followed {
    pub(crate) shared: Arc<Shared>,
    pub(crate) run: Box<str>,
    pub(crate) tool_results: u32,
}

/// What a body does at its end.
#[derive(Debug)]
struct End {
    conn: Arc<Conn>,
    followed: Option<Followed>,
    in_flight: Option<InFlight>,
}

impl End {
    fn run(self) {
        let at = monotonic_ns();
        self.conn.arm();
        if let Some(followed) = self.followed {
            followed.shared.reply_ended(&followed.run, followed.tool_results, at);
        }
        drop(self.in_flight);
    }
}

/// A response body of frames ready in memory.
#[derive(Debug)]
pub(crate) struct ReplyBody {
    frames: VecDeque<Bytes>,
    exact: Option<u64>,
    end: Option<End>,
}

impl ReplyBody {
    /// One frame, of known length.
    pub(crate) fn whole(bytes: Vec<u8>, conn: Arc<Conn>) -> Self {
        let exact = u64::try_from(bytes.len()).ok();
        Self {
            frames: VecDeque::from([Bytes::from(bytes)]),
            exact,
            end: Some(End { conn, followed: None, in_flight: None }),
        }
    }

    /// Frames sent one after another, of no declared length.
    pub(crate) fn stream(frames: Vec<Vec<u8>>, conn: Arc<Conn>) -> Self {
        Self {
            frames: frames.into_iter().map(Bytes::from).collect(),
            exact: None,
            end: Some(End { conn, followed: None, in_flight: None }),
        }
    }

    /// This body, recording the end of a reply to `followed` and holding `in_flight` until then.
    pub(crate) fn reply(mut self, followed: Option<Followed>, in_flight: InFlight) -> Self {
        if let Some(end) = self.end.as_mut() {
            end.followed = followed;
            end.in_flight = Some(in_flight);
        }
        self
    }

    fn ended(&mut self) {
        if let Some(end) = self.end.take() {
            end.run();
        }
    }
}

impl Body for ReplyBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        let next = this.frames.pop_front();
        if this.frames.is_empty() {
            this.ended();
        }
        Poll::Ready(next.map(|bytes| Ok(Frame::data(bytes))))
    }

    fn is_end_stream(&self) -> bool {
        self.frames.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        self.exact.map_or_else(SizeHint::default, SizeHint::with_exact)
    }
}
