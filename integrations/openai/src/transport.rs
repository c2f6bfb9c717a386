//! The HTTP transport: one `POST {base}/chat/completions` per model call.
//!
//! # Invariants
//!
//! - The request body is this API's ([`request_body`]); sending it, mapping the status, bounds,
//!   redaction and cancellation are the shared [`Endpoint`]'s: one call is one HTTP request, no
//!   retry and no redirect; every reply is read within the request's bounds; everything the
//!   provider sends back is redacted before it leaves.
//! - The API key is sent only as a sensitive `Authorization: Bearer …` header; the transport's
//!   `Debug` shows the configuration (key redacted) and nothing of the client.

use std::fmt;

use futures_core::Stream;
use loopbound::transport::{ChatRequest, ModelReply, ReplyChunk, Transport, TransportError};
use loopbound_provider::{ConfigError, Endpoint, Redactor};
use reqwest::header::{self, HeaderMap};

use crate::chunks::ChatCompletions;
use crate::config::Config;
use crate::wire::{Mode, request_body};

/// An OpenAI-compatible chat-completions transport.
///
/// ```no_run
/// use loopbound::{Message, Runtime, Scope, ToolSet};
/// use loopbound_openai::OpenAiTransport;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// // LOOPBOUND_BASE_URL=http://127.0.0.1:8080/v1 LOOPBOUND_MODEL=smollm2
/// let transport = OpenAiTransport::from_env()?;
/// let runtime = Runtime::harness(&ToolSet::default(), transport).streaming(true);
/// let scope = Scope::builder().build()?;
/// let outcome = runtime.run(&scope, &mut vec![Message::user("Say hello.")], |_| true).await?;
/// println!("{} {:?}", outcome.status(), outcome.text());
/// # Ok(())
/// # }
/// ```
pub struct OpenAiTransport {
    config: Config,
    endpoint: Endpoint,
}

impl fmt::Debug for OpenAiTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiTransport").field("config", &self.config).finish_non_exhaustive()
    }
}

impl OpenAiTransport {
    /// A transport for `config`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Client`] if the HTTP client cannot be built (no TLS backend).
    pub fn new(config: Config) -> Result<Self, ConfigError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = config.api_key() {
            headers.insert(header::AUTHORIZATION, key.header(Some("Bearer"))?);
        }
        let redactor = Redactor::new(config.api_key().cloned());
        let endpoint = Endpoint::new(config.endpoint(), headers, config.timeout(), redactor)?;
        Ok(Self { config, endpoint })
    }

    /// A transport configured by the environment (see [`Config::from_env`]).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the variable that is missing or invalid.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::new(Config::from_env()?)
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &Config {
        &self.config
    }
}

impl Transport for OpenAiTransport {
    async fn complete<'a>(&'a self, request: ChatRequest<'a>) -> Result<ModelReply, TransportError> {
        let body = request_body(self.config.model(), &request, Mode::Whole);
        self.endpoint.complete::<ChatCompletions>(request, body).await
    }

    async fn stream<'a>(
        &'a self,
        request: ChatRequest<'a>,
    ) -> Result<impl Stream<Item = Result<ReplyChunk, TransportError>> + Send + 'a, TransportError> {
        let body =
            request_body(self.config.model(), &request, Mode::Stream { usage: self.config.stream_usage() });
        self.endpoint.stream::<ChatCompletions>(request, body).await
    }
}
