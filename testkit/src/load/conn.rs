//! One accepted connection, and the time stamp of the first byte of each request it carries.
//!
//! # Invariants
//!
//! - A connection carries one request at a time (HTTP/1.1 without pipelining, which no client
//!   here uses): it is armed when it opens and again when a reply on it ends, and the first
//!   read that returns bytes while it is armed stamps the arrival of the next request. A read
//!   that returns nothing stamps nothing.
//! - The stamp is taken when the server's task reads the bytes, so a busy server can only make
//!   a gap look longer, never shorter.
//! - An HTTP/2 connection carries many requests at once, so its stamps mean nothing: the
//!   server stamps each of its requests itself when the request's handler starts.
//! - Writes, flushes and shutdowns pass through unchanged.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::clock::monotonic_ns;

/// What a connection's reader and its requests' handlers share.
#[derive(Debug)]
pub(crate) struct Conn {
    armed: AtomicBool,
    first_byte_ns: AtomicU64,
}

impl Conn {
    /// A connection waiting for its first request.
    pub(crate) fn new() -> Self {
        Self { armed: AtomicBool::new(true), first_byte_ns: AtomicU64::new(0) }
    }

    /// When the first byte of the current request arrived.
    pub(crate) fn first_byte_ns(&self) -> u64 {
        self.first_byte_ns.load(Ordering::Acquire)
    }

    /// The current reply ended: the next bytes read start the next request.
    pub(crate) fn arm(&self) {
        self.armed.store(true, Ordering::Release);
    }

    fn stamp(&self) {
        if self.armed.swap(false, Ordering::AcqRel) {
            self.first_byte_ns.store(monotonic_ns(), Ordering::Release);
        }
    }
}

/// A TCP stream that stamps the first byte of each request on its [`Conn`].
#[derive(Debug)]
pub(crate) struct Stamped {
    stream: TcpStream,
    conn: std::sync::Arc<Conn>,
}

impl Stamped {
    pub(crate) fn new(stream: TcpStream, conn: std::sync::Arc<Conn>) -> Self {
        Self { stream, conn }
    }
}

impl AsyncRead for Stamped {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.stream).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.conn.stamp();
        }
        polled
    }
}

impl AsyncWrite for Stamped {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}
