//! The HTTP transport: one `POST {base}/chat/completions` per model call.
//!
//! # Invariants
//!
//! - The request body is this API's ([`request_body`]) and its replies read as
//!   [`ChatCompletions`]; sending, the status, bounds, redaction and cancellation are the shared
//!   [`HttpTransport`]'s: one call is one HTTP request, no retry and no redirect; every reply is
//!   read within the request's bounds; everything the provider sends back is redacted.
//! - The API key is sent only as a sensitive `Authorization: Bearer …` header.

use loopbound::transport::ChatRequest;
use loopbound_provider::{Api, ConfigError, Connection, Endpoint, HttpTransport, KeyHeader};
use reqwest::header::HeaderMap;

use crate::chunks::ChatCompletions;
use crate::config::Config;
use crate::wire::{Mode, request_body};

/// The OpenAI-compatible chat-completions API, as the shared [`HttpTransport`] speaks it.
#[derive(Debug)]
pub struct OpenAi;

impl Api for OpenAi {
    const NAME: &'static str = "OpenAiTransport";
    /// `openai`: the conventions name every OpenAI-compatible API so, whatever serves it.
    const PROVIDER: &'static str = "openai";
    type Config = Config;
    type Protocol = ChatCompletions;

    fn from_env() -> Result<Config, ConfigError> {
        Config::from_env()
    }

    fn connection(config: &Config) -> &Connection {
        config.connection()
    }

    fn endpoint(config: &Config) -> Result<Endpoint, ConfigError> {
        Endpoint::connect(config.connection(), "chat/completions", KeyHeader::Bearer, HeaderMap::new())
    }

    fn body(config: &Config, request: &ChatRequest<'_>, stream: bool) -> Vec<u8> {
        let mode = if stream { Mode::Stream { usage: config.stream_usage() } } else { Mode::Whole };
        request_body(config.connection().model(), config.output_cap_field(), request, mode)
    }
}

/// An OpenAI-compatible chat-completions transport: `OpenAiTransport::new(config)` or
/// `OpenAiTransport::from_env()` (see [`Config::from_env`]).
///
/// ```no_run
/// use loopbound::{Message, Runner, Scope, ToolSet};
/// use loopbound_openai::OpenAiTransport;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// // LOOPBOUND_OPENAI_BASE_URL=http://127.0.0.1:8080/v1 LOOPBOUND_OPENAI_MODEL=smollm2
/// let transport = OpenAiTransport::from_env()?;
/// let runtime = Runner::new(&ToolSet::default(), transport).streaming(true);
/// let scope = Scope::builder().build()?;
/// let outcome = runtime.run(&scope, &mut vec![Message::user("Say hello.")], |_| true).await?;
/// println!("{} {:?}", outcome.status(), outcome.text());
/// # Ok(())
/// # }
/// ```
pub type OpenAiTransport = HttpTransport<OpenAi>;
