//! Reading a whole response body under a byte bound.
//!
//! # Invariants
//!
//! - A body declared longer than the bound (`Content-Length`) is refused before any of it is
//!   read; any other body is refused at the read that crosses the bound, so memory never holds
//!   more than the bound plus one read.
//! - A declared length is trusted only up to the bound when the buffer is reserved: a lying
//!   server cannot make the reader allocate more than it will accept.

use loopbound::transport::{ReplyBounds, TransportError};

use crate::errors::body_error;

/// Why a body could not be read whole.
#[derive(Debug)]
pub enum BodyError {
    /// It is longer than the limit.
    TooLong,
    /// Reading it failed.
    Read(TransportError),
}

/// Reads a whole reply within `bounds`: refused at once when its declared length is over the
/// byte bound, else read until the first byte past it.
///
/// The response is kept once, in the returned future (an `async fn` would keep its argument
/// twice).
///
/// # Errors
///
/// The bound's error ([`ReplyBounds::too_long`]), or the read's.
#[allow(clippy::manual_async_fn, reason = "an `async fn` would keep its by-value arguments twice")]
pub fn read_reply(
    mut response: reqwest::Response,
    bounds: ReplyBounds,
) -> impl Future<Output = Result<Vec<u8>, TransportError>> + Send {
    async move {
        if response.content_length().is_some_and(|declared| declared > bounds.bytes() as u64) {
            return Err(bounds.too_long());
        }
        read_into(&mut response, bounds.bytes()).await.map_err(|error| match error {
            BodyError::TooLong => bounds.too_long(),
            BodyError::Read(error) => error,
        })
    }
}

/// Reads a whole body, refusing one longer than `limit` bytes at the read that crosses it. The
/// buffer grows with what arrives (a declared length is trusted only up to the limit).
///
/// # Errors
///
/// [`BodyError::TooLong`] past the limit, [`BodyError::Read`] when reading fails.
#[allow(clippy::manual_async_fn, reason = "an `async fn` would keep its by-value arguments twice")]
pub fn read_body(
    mut response: reqwest::Response,
    limit: usize,
) -> impl Future<Output = Result<Vec<u8>, BodyError>> + Send {
    async move { read_into(&mut response, limit).await }
}

/// [`read_body`] on a response the caller keeps.
async fn read_into(response: &mut reqwest::Response, limit: usize) -> Result<Vec<u8>, BodyError> {
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
