//! Why a transport call failed: a kind a host matches on, a message in the transport's own words,
//! and the underlying error (an HTTP client's, an I/O error) as its source.
//!
//! # Invariants
//!
//! - The kind classifies; the message is never parsed. Two errors are equal when their kinds and
//!   messages are, whatever their sources.
//! - `Display` writes the kind's words and the message, never the source's text: an error chain
//!   walked with `source()` prints each message once.
//! - A transport puts no secret in a message or a source: an API key is redacted from what it
//!   writes, and a source is an error that holds neither the key nor a request's body (an HTTP
//!   client's error without its URL, say).

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;

/// What kind of failure a [`TransportError`] is.
///
/// [`Unavailable`](Self::Unavailable) ends a run with the status `ProviderUnavailable`;
/// [`Unsupported`](Self::Unsupported) is a configuration error of the run
/// (`RunError::Unsupported`); every other kind is a provider error, reported as an error of the
/// run rather than a status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransportErrorKind {
    /// The provider could not be reached or could not serve now: connection refused, DNS or TLS
    /// failure, timeout, HTTP 5xx, overload, rate limiting.
    Unavailable,
    /// The provider refused the credentials (HTTP 401 or 403).
    Authentication,
    /// The provider answered with a body that could not be understood, or a truncated stream.
    Malformed,
    /// The transport reported a cancellation that neither the caller nor the scope asked for.
    Cancelled,
    /// The reply asked for more tool calls than the reply bound
    /// ([`ReplyBounds::calls`](super::ReplyBounds::calls)). The model budget turns it into the
    /// `TooManyCalls` halt; a transport returns it as soon as it sees one call too many.
    TooManyCalls {
        /// The bound that was crossed.
        limit: u32,
    },
    /// The request set an option the transport cannot send (a seed to an API that has none, a
    /// temperature above the provider's range): refused before anything was sent.
    Unsupported,
    /// Any other error reported by the provider.
    Other,
}

/// Why a transport call failed.
///
/// ```
/// use loopbound::transport::{TransportError, TransportErrorKind};
///
/// let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
/// let error = TransportError::unavailable("could not connect to the endpoint").with_source(io);
/// assert_eq!(error.kind(), TransportErrorKind::Unavailable);
/// assert_eq!(error.to_string(), "provider unavailable: could not connect to the endpoint");
/// assert_eq!(std::error::Error::source(&error).map(ToString::to_string).as_deref(), Some("refused"));
/// ```
#[derive(Clone)]
pub struct TransportError {
    kind: TransportErrorKind,
    message: Box<str>,
    source: Option<Arc<dyn StdError + Send + Sync + 'static>>,
}

impl TransportError {
    /// An error of `kind` with `message`.
    pub fn new(kind: TransportErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into().into_boxed_str(), source: None }
    }

    /// The provider could not be reached or could not serve now.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(TransportErrorKind::Unavailable, message)
    }

    /// The provider refused the credentials.
    pub fn authentication(message: impl Into<String>) -> Self {
        Self::new(TransportErrorKind::Authentication, message)
    }

    /// The provider's reply could not be understood.
    pub fn malformed(message: impl Into<String>) -> Self {
        Self::new(TransportErrorKind::Malformed, message)
    }

    /// The transport cancelled the call on its own.
    #[must_use]
    pub fn cancelled() -> Self {
        Self::new(TransportErrorKind::Cancelled, "")
    }

    /// The reply asked for more than `limit` tool calls.
    #[must_use]
    pub fn too_many_calls(limit: u32) -> Self {
        Self::new(TransportErrorKind::TooManyCalls { limit }, "")
    }

    /// The transport cannot send an option the request set; `message` names the option and the
    /// transport.
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(TransportErrorKind::Unsupported, message)
    }

    /// Any other error the provider reported.
    pub fn other(message: impl Into<String>) -> Self {
        Self::new(TransportErrorKind::Other, message)
    }

    /// This error, caused by `source` (which must hold no secret: see the module's invariants).
    #[must_use]
    pub fn with_source(mut self, source: impl StdError + Send + Sync + 'static) -> Self {
        self.source = Some(Arc::new(source));
        self
    }

    /// This error with its message replaced (a redacting pass, say); the kind and source stay.
    #[must_use]
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into().into_boxed_str();
        self
    }

    /// What kind of failure this is.
    #[must_use]
    pub fn kind(&self) -> TransportErrorKind {
        self.kind
    }

    /// The transport's own words about it (empty for a cancellation or a reply bound).
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether the provider could not be reached or could not serve now.
    #[must_use]
    pub fn is_unavailable(&self) -> bool {
        self.kind == TransportErrorKind::Unavailable
    }
}

impl PartialEq for TransportError {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && self.message == other.message
    }
}

impl Eq for TransportError {}

impl fmt::Debug for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TransportError")
            .field("kind", &self.kind)
            .field("message", &self.message)
            .field("source", &self.source.is_some())
            .finish()
    }
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let message = &self.message;
        match self.kind {
            TransportErrorKind::Unavailable => write!(f, "provider unavailable: {message}"),
            TransportErrorKind::Authentication => write!(f, "provider refused authentication: {message}"),
            TransportErrorKind::Malformed => write!(f, "malformed provider response: {message}"),
            TransportErrorKind::Cancelled => f.write_str("the provider cancelled the call on its own"),
            TransportErrorKind::TooManyCalls { limit } => {
                write!(f, "the reply asked for more than {limit} tool calls and was refused whole")
            }
            TransportErrorKind::Unsupported => write!(f, "unsupported request option: {message}"),
            TransportErrorKind::Other => write!(f, "provider error: {message}"),
        }
    }
}

impl StdError for TransportError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source.as_deref().map(|source| source as &(dyn StdError + 'static))
    }
}
