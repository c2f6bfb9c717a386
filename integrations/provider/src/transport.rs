//! A transport over one provider's HTTP API: what is the provider's own (its configuration, its
//! request body, its protocol) comes from an [`Api`]; everything else is the [`Endpoint`]'s.
//!
//! # Invariants
//!
//! - One model call is one request built by [`Api::body`] and sent by the endpoint the API built
//!   from its configuration ([`Api::endpoint`]), read with the API's [`Protocol`]: whole or
//!   streamed, within the request's bounds, redacted, cancelled with the run.
//! - The transport's `Debug` shows the API's name and its configuration (whose own `Debug` hides
//!   the key), nothing of the client.
//! - A request whose options the API cannot send ([`Api::check`]) is refused before anything is
//!   sent, at the call as at [`Transport::check_options`].
//! - The transport names the configured model, for prices and for telemetry alike
//!   ([`Transport::model`]), and its provider as telemetry names it
//!   ([`Api::PROVIDER`]).

use std::fmt;
use std::marker::PhantomData;

use futures_core::Stream;
use futures_util::future::Either;
use loopbound::transport::{ChatOptions, ChatRequest, ModelReply, ReplyChunk, Transport, TransportError};

use crate::config::{ConfigError, Connection};
use crate::endpoint::Endpoint;
use crate::events::Protocol;

/// A provider's HTTP API, as a [`HttpTransport`] needs it.
pub trait Api: Send + Sync + 'static {
    /// The name of the provider's transport, for `Debug` (e.g. `OpenAiTransport`).
    const NAME: &'static str;
    /// The provider, as telemetry names it (`gen_ai.provider.name`, e.g. `openai`).
    const PROVIDER: &'static str;
    /// The provider's configuration.
    type Config: fmt::Debug + Send + Sync;
    /// How the provider's replies read, whole and streamed.
    type Protocol: Protocol;

    /// The configuration, read from the process environment.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the variable that is missing or invalid.
    fn from_env() -> Result<Self::Config, ConfigError>;

    /// The connection `config` holds: its base URL, model, key and timeout.
    fn connection(config: &Self::Config) -> &Connection;

    /// The endpoint `config` describes: its URL, its headers (the key among them), its timeout,
    /// and a redactor of its key.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] if the endpoint cannot be built.
    fn endpoint(config: &Self::Config) -> Result<Endpoint, ConfigError>;

    /// Whether the API can send `options`: an error of kind
    /// [`Unsupported`](loopbound::transport::TransportErrorKind::Unsupported) naming the first
    /// option it has no field for, or whose value it refuses. The default accepts everything.
    ///
    /// # Errors
    ///
    /// A [`TransportError`] of kind `Unsupported`.
    fn check(config: &Self::Config, options: &ChatOptions) -> Result<(), TransportError> {
        let _ = (config, options);
        Ok(())
    }

    /// The body of one request, streamed or not (its options already [checked](Self::check)).
    fn body(config: &Self::Config, request: &ChatRequest<'_>, stream: bool) -> Vec<u8>;
}

/// A [`Transport`] over the HTTP API `A`.
pub struct HttpTransport<A: Api> {
    config: A::Config,
    endpoint: Endpoint,
    api: PhantomData<A>,
}

impl<A: Api> fmt::Debug for HttpTransport<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(A::NAME).field("config", &self.config).finish_non_exhaustive()
    }
}

impl<A: Api> HttpTransport<A> {
    /// A transport for `config`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::TooManyConnections`] for HTTP/2 over more than
    /// [`HttpVersion::MAX_CONNECTIONS`](crate::HttpVersion::MAX_CONNECTIONS) connections;
    /// [`ConfigError::Client`] if the HTTP client cannot be built (no TLS backend).
    pub fn new(config: A::Config) -> Result<Self, ConfigError> {
        let endpoint = A::endpoint(&config)?;
        Ok(Self { config, endpoint, api: PhantomData })
    }

    /// A transport configured by the process environment.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the variable that is missing or invalid.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::new(A::from_env()?)
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &A::Config {
        &self.config
    }
}

impl<A: Api> Transport for HttpTransport<A> {
    /// The configured model: the id a host's price table names it by.
    fn model(&self) -> Option<&str> {
        Some(A::connection(&self.config).model())
    }

    // The endpoint's future itself, not one more `async` layer around it (which would keep the
    // request a second time while the call waits).
    fn complete<'a>(
        &'a self,
        request: ChatRequest<'a>,
    ) -> impl Future<Output = Result<ModelReply, TransportError>> + Send + 'a {
        if let Err(refused) = A::check(&self.config, request.options) {
            return Either::Left(std::future::ready(Err(refused)));
        }
        let body = A::body(&self.config, &request, false);
        Either::Right(self.endpoint.complete::<A::Protocol>(request, body))
    }

    async fn stream<'a>(
        &'a self,
        request: ChatRequest<'a>,
    ) -> Result<impl Stream<Item = Result<ReplyChunk, TransportError>> + Send + 'a, TransportError> {
        A::check(&self.config, request.options)?;
        let body = A::body(&self.config, &request, true);
        self.endpoint.stream::<A::Protocol>(request, body).await
    }

    fn provider_name(&self) -> &str {
        A::PROVIDER
    }

    fn check_options(&self, options: &ChatOptions) -> Result<(), TransportError> {
        A::check(&self.config, options)
    }
}
