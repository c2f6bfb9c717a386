//! Transports: the model clients the runtime talks to.
//!
//! A [`Transport`] answers one request with a whole reply ([`Transport::complete`]) or with a
//! stream of chunks ([`Transport::stream`]). It knows nothing of budgets: the runtime borrows it
//! as a [`Budgeted`](crate::Budgeted) transport that counts every call of either kind against the request's scope
//! before it is sent, and drops the call's future when the scope stops.

mod bounds;
mod boxed;
mod error;
mod message;
mod options;
mod stream;

use std::future::Future;
use std::sync::Arc;

use futures_core::Stream;

pub use bounds::ReplyBounds;
pub use boxed::BoxTransport;
pub use error::{TransportError, TransportErrorKind};
pub use message::{ChatRequest, Message, ModelReply, ToolCall, ToolDefinition, Usage};
pub use options::{ChatOptions, OptionError};
pub use stream::{ChunkStream, ReplyAssembler, ReplyChunk, ToolCallDelta};

/// A model client.
///
/// Implementations may be written with `async fn` (`async fn complete<'a>(&'a self, request:
/// ChatRequest<'a>) -> …`). A transport that cannot stream natively keeps the default
/// [`stream`](Transport::stream), which yields its whole reply as one chunk. The call's future
/// and its stream may borrow both the transport and the request, for one lifetime `'a`, which is
/// what lets [`BoxTransport`] erase any transport's type.
pub trait Transport: Send + Sync {
    /// The id of the model this transport asks for: the name the host's price table
    /// ([`Prices`](crate::spend::Prices)) prices it by, and telemetry's `gen_ai.request.model`;
    /// `None` when it cannot say (a run under a cost budget then refuses to start).
    fn model(&self) -> Option<&str> {
        None
    }

    /// Sends `request` and returns the whole reply.
    fn complete<'a>(
        &'a self,
        request: ChatRequest<'a>,
    ) -> impl Future<Output = Result<ModelReply, TransportError>> + Send + 'a;

    /// Sends `request` and returns the reply as a stream of chunks.
    fn stream<'a>(
        &'a self,
        request: ChatRequest<'a>,
    ) -> impl Future<
        Output = Result<impl Stream<Item = Result<ReplyChunk, TransportError>> + Send + 'a, TransportError>,
    > + Send
    + 'a {
        async move { self.complete(request).await.map(ChunkStream::whole) }
    }

    /// The provider, as telemetry names it (`gen_ai.provider.name`: `openai`, `anthropic`, or a
    /// name of the transport's own); `_OTHER` unless the transport says.
    #[allow(
        clippy::unnecessary_literal_bound,
        reason = "a transport may name its provider from its own configuration"
    )]
    fn provider_name(&self) -> &str {
        "_OTHER"
    }

    /// Whether this transport can send `options` as they are: an error of kind
    /// [`Unsupported`](TransportErrorKind::Unsupported) naming the first option it cannot
    /// send (a seed to an API without one, say), else `Ok`. The runtime asks before a run
    /// starts, so that a run whose options a provider cannot honour never sends anything; a
    /// transport should refuse the same options at the call too, for a host that calls it
    /// directly. The default accepts everything.
    ///
    /// # Errors
    ///
    /// A [`TransportError`] of kind [`Unsupported`](TransportErrorKind::Unsupported).
    fn check_options(&self, options: &ChatOptions) -> Result<(), TransportError> {
        let _ = options;
        Ok(())
    }
}

impl<T: Transport> Transport for &T {
    fn model(&self) -> Option<&str> {
        (**self).model()
    }

    fn complete<'a>(
        &'a self,
        request: ChatRequest<'a>,
    ) -> impl Future<Output = Result<ModelReply, TransportError>> + Send + 'a {
        (**self).complete(request)
    }

    fn stream<'a>(
        &'a self,
        request: ChatRequest<'a>,
    ) -> impl Future<
        Output = Result<impl Stream<Item = Result<ReplyChunk, TransportError>> + Send + 'a, TransportError>,
    > + Send
    + 'a {
        (**self).stream(request)
    }

    fn provider_name(&self) -> &str {
        (**self).provider_name()
    }

    fn check_options(&self, options: &ChatOptions) -> Result<(), TransportError> {
        (**self).check_options(options)
    }
}

impl<T: Transport> Transport for Arc<T> {
    fn model(&self) -> Option<&str> {
        (**self).model()
    }

    fn complete<'a>(
        &'a self,
        request: ChatRequest<'a>,
    ) -> impl Future<Output = Result<ModelReply, TransportError>> + Send + 'a {
        (**self).complete(request)
    }

    fn stream<'a>(
        &'a self,
        request: ChatRequest<'a>,
    ) -> impl Future<
        Output = Result<impl Stream<Item = Result<ReplyChunk, TransportError>> + Send + 'a, TransportError>,
    > + Send
    + 'a {
        (**self).stream(request)
    }

    fn provider_name(&self) -> &str {
        (**self).provider_name()
    }

    fn check_options(&self, options: &ChatOptions) -> Result<(), TransportError> {
        (**self).check_options(options)
    }
}
