//! Transports: the model clients the runtime talks to.
//!
//! A [`Transport`] answers one request with a whole reply ([`Transport::complete`]) or with a
//! stream of chunks ([`Transport::stream`]). It knows nothing of budgets: the runtime borrows it
//! as a [`Budgeted`] transport that counts every call of either kind against the request's scope
//! before it is sent, and drops the call's future when the scope stops.

mod bounds;
mod budget;
mod message;
mod stream;

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use futures_core::Stream;

pub use bounds::ReplyBounds;
pub use budget::{Budgeted, CallError};
pub use message::{ChatOptions, ChatRequest, Message, ModelReply, ToolCall, ToolDefinition, Usage};
pub use stream::{ChunkStream, ReplyAssembler, ReplyChunk, ToolCallDelta};

/// A model client.
///
/// Implementations may be written with `async fn`. A transport that cannot stream natively
/// keeps the default [`stream`](Transport::stream), which yields its whole reply as one chunk.
pub trait Transport: Send + Sync {
    /// Sends `request` and returns the whole reply.
    fn complete(
        &self,
        request: ChatRequest<'_>,
    ) -> impl Future<Output = Result<ModelReply, TransportError>> + Send;

    /// Sends `request` and returns the reply as a stream of chunks.
    fn stream(
        &self,
        request: ChatRequest<'_>,
    ) -> impl Future<
        Output = Result<impl Stream<Item = Result<ReplyChunk, TransportError>> + Send, TransportError>,
    > + Send {
        async move { self.complete(request).await.map(ChunkStream::whole) }
    }
}

impl<T: Transport> Transport for &T {
    fn complete(
        &self,
        request: ChatRequest<'_>,
    ) -> impl Future<Output = Result<ModelReply, TransportError>> + Send {
        (**self).complete(request)
    }

    fn stream(
        &self,
        request: ChatRequest<'_>,
    ) -> impl Future<
        Output = Result<impl Stream<Item = Result<ReplyChunk, TransportError>> + Send, TransportError>,
    > + Send {
        (**self).stream(request)
    }
}

impl<T: Transport> Transport for Arc<T> {
    fn complete(
        &self,
        request: ChatRequest<'_>,
    ) -> impl Future<Output = Result<ModelReply, TransportError>> + Send {
        (**self).complete(request)
    }

    fn stream(
        &self,
        request: ChatRequest<'_>,
    ) -> impl Future<
        Output = Result<impl Stream<Item = Result<ReplyChunk, TransportError>> + Send, TransportError>,
    > + Send {
        (**self).stream(request)
    }
}

/// Why a transport call failed.
///
/// [`Unavailable`](Self::Unavailable) ends a run with the status `ProviderUnavailable`; every
/// other kind is a provider error, reported as an error of the run rather than a status.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransportError {
    /// The provider could not be reached or could not serve now: connection refused, DNS or TLS
    /// failure, timeout, HTTP 5xx, rate limiting.
    Unavailable(String),
    /// The provider refused the credentials (HTTP 401 or 403).
    Authentication(String),
    /// The provider answered with a body that could not be understood, or a truncated stream.
    Malformed(String),
    /// The transport reported a cancellation that neither the caller nor the scope asked for.
    Cancelled,
    /// The reply asked for more tool calls than [`ReplyBounds::calls`]. The model budget turns it
    /// into the `TooManyCalls` halt; a transport returns it as soon as it sees one call too many.
    TooManyCalls {
        /// The bound that was crossed.
        limit: u32,
    },
    /// Any other error reported by the provider.
    Other(String),
}

impl TransportError {
    /// Whether this error means the provider could not be reached.
    #[must_use]
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::Unavailable(_))
    }
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unavailable(message) => write!(f, "provider unavailable: {message}"),
            Self::Authentication(message) => write!(f, "provider refused authentication: {message}"),
            Self::Malformed(message) => write!(f, "malformed provider response: {message}"),
            Self::Cancelled => f.write_str("the provider cancelled the call on its own"),
            Self::TooManyCalls { limit } => {
                write!(f, "the reply asked for more than {limit} tool calls and was refused whole")
            }
            Self::Other(message) => write!(f, "provider error: {message}"),
        }
    }
}

impl std::error::Error for TransportError {}
