//! A transport whose type is erased, for a host that picks its provider at run time.
//!
//! # Invariants
//!
//! - A [`BoxTransport`] behaves exactly as the transport it holds: each call is forwarded once,
//!   unchanged, and its result (or stream) is handed back as it comes.
//! - The only cost is one allocation per call for the future, and one per stream.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures_core::Stream;

use super::{ChatOptions, ChatRequest, ModelReply, ReplyChunk, Transport, TransportError};

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
type BoxStream<'a> = Pin<Box<dyn Stream<Item = Result<ReplyChunk, TransportError>> + Send + 'a>>;

/// The object-safe form of [`Transport`].
trait DynTransport: Send + Sync {
    fn model(&self) -> Option<&str>;
    fn complete<'a>(&'a self, request: ChatRequest<'a>) -> BoxFuture<'a, Result<ModelReply, TransportError>>;
    fn stream<'a>(&'a self, request: ChatRequest<'a>)
    -> BoxFuture<'a, Result<BoxStream<'a>, TransportError>>;
    fn provider_name(&self) -> &str;
    fn check_options(&self, options: &ChatOptions) -> Result<(), TransportError>;
}

impl<T: Transport> DynTransport for T {
    fn model(&self) -> Option<&str> {
        Transport::model(self)
    }

    fn complete<'a>(&'a self, request: ChatRequest<'a>) -> BoxFuture<'a, Result<ModelReply, TransportError>> {
        Box::pin(Transport::complete(self, request))
    }

    fn stream<'a>(
        &'a self,
        request: ChatRequest<'a>,
    ) -> BoxFuture<'a, Result<BoxStream<'a>, TransportError>> {
        Box::pin(async move {
            let stream = Transport::stream(self, request).await?;
            Ok(Box::pin(stream) as BoxStream<'a>)
        })
    }

    fn provider_name(&self) -> &str {
        Transport::provider_name(self)
    }

    fn check_options(&self, options: &ChatOptions) -> Result<(), TransportError> {
        Transport::check_options(self, options)
    }
}

/// Any [`Transport`], behind one type: a runtime built over a `BoxTransport` can talk to the
/// provider chosen by configuration (OpenAI-compatible, Anthropic, a scripted model in tests)
/// without being generic over it. Cloning shares the transport.
///
/// ```
/// use loopbound::scripted::{Step, sequence};
/// use loopbound::transport::{BoxTransport, ModelReply};
/// use loopbound::{Message, Runner, Scope, Status, ToolSet};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let live = std::env::var("MY_PROVIDER").is_ok();
/// let transport = if live {
///     unreachable!("a real provider's transport here")
/// } else {
///     BoxTransport::new(sequence(vec![Step::Reply(ModelReply::text("hello"))]))
/// };
/// let runtime = Runner::new(&ToolSet::default(), transport);
/// let scope = Scope::builder().build()?;
/// let outcome = runtime.run(&scope, &mut vec![Message::user("hi")], |_| true).await?;
/// assert_eq!(outcome.status(), Status::Completed);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct BoxTransport {
    inner: Arc<dyn DynTransport>,
}

impl BoxTransport {
    /// `transport`, with its type erased.
    pub fn new(transport: impl Transport + 'static) -> Self {
        Self { inner: Arc::new(transport) }
    }
}

impl fmt::Debug for BoxTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BoxTransport").finish_non_exhaustive()
    }
}

impl Transport for BoxTransport {
    fn model(&self) -> Option<&str> {
        self.inner.model()
    }

    fn complete<'a>(
        &'a self,
        request: ChatRequest<'a>,
    ) -> impl Future<Output = Result<ModelReply, TransportError>> + Send + 'a {
        self.inner.complete(request)
    }

    fn stream<'a>(
        &'a self,
        request: ChatRequest<'a>,
    ) -> impl Future<
        Output = Result<impl Stream<Item = Result<ReplyChunk, TransportError>> + Send + 'a, TransportError>,
    > + Send
    + 'a {
        self.inner.stream(request)
    }

    fn provider_name(&self) -> &str {
        self.inner.provider_name()
    }

    fn check_options(&self, options: &ChatOptions) -> Result<(), TransportError> {
        self.inner.check_options(options)
    }
}
