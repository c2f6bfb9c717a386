//! What the connections this crate drives itself (`h1`, `h2c`) share: the TCP connect, and a
//! call's timeout, one instant fixed when the request is sent, bounding every await of the call,
//! then its body's reading.
//!
//! # Invariants
//!
//! - The instant never moves: the connect, the wait for a connection or a stream, the response's
//!   head and the body's last byte all share it, so a call gives up at most one timeout after it
//!   started, however its time was spent.
//! - A passed deadline is an `io::ErrorKind::TimedOut` error, which `reqwest` and the error
//!   mapping read as a timeout.
//! - Every connection is opened with `TCP_NODELAY`: requests are small and answered as a whole,
//!   so nothing waits to coalesce them.

use std::io;
use std::pin::Pin;
use std::task::Context;

use loopbound::transport::TransportError;
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

/// A TCP connection to `authority` (`host:port`), `TCP_NODELAY` set.
///
/// # Errors
///
/// `Unavailable` ("cannot connect") with the connect's error as its source.
pub(crate) async fn connect_tcp(authority: &str) -> Result<TcpStream, TransportError> {
    let stream = TcpStream::connect(authority)
        .await
        .map_err(|error| TransportError::unavailable("cannot connect").with_source(error))?;
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

/// `work`, or an `Unavailable` error saying `what` if `deadline` passes first.
pub(crate) async fn within<F: Future>(
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

/// A response body's deadline, polled before each piece is read.
pub(crate) struct BodyDeadline(Option<Pin<Box<Sleep>>>);

impl BodyDeadline {
    /// The deadline at `at`, or none.
    pub(crate) fn new(at: Option<Instant>) -> Self {
        Self(at.map(|at| Box::pin(tokio::time::sleep_until(at))))
    }

    /// The error to end the body with, once the deadline has passed (and `cx` woken when it
    /// does).
    pub(crate) fn passed(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        let sleep = self.0.as_mut()?;
        sleep
            .as_mut()
            .poll(cx)
            .is_ready()
            .then(|| io::Error::new(io::ErrorKind::TimedOut, "the response timed out"))
    }
}
