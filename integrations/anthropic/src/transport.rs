//! The HTTP transport: one `POST {base}/messages` per model call.
//!
//! # Invariants
//!
//! - The request body is this API's ([`request_body`]) and its replies read as
//!   [`MessagesApi`]; sending, the status, bounds, redaction and cancellation are the shared
//!   [`HttpTransport`]'s: one call is one HTTP request, no retry and no redirect; every reply is
//!   read within the request's bounds; everything the provider sends back is redacted.
//! - The API key is sent only as a sensitive `x-api-key` header, with `anthropic-version`.
//! - Every request carries an output cap: the run's (`ChatOptions::max_output_tokens`), else the
//!   configuration's default.
//! - A run's sampling options are sent or refused, never dropped: a seed, or a temperature above
//!   [`MAX_TEMPERATURE`], is refused before anything is sent.

use loopbound::transport::{ChatOptions, ChatRequest, TransportError};
use loopbound_provider::errors::unsupported_option;
use loopbound_provider::{Api, ConfigError, Connection, Endpoint, HttpTransport, KeyHeader};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::config::{Config, ENV_VERSION, VISIBLE};
use crate::events::MessagesApi;
use crate::wire::{Mode, Settings, request_body};

/// The highest temperature the Messages API accepts.
pub const MAX_TEMPERATURE: f64 = 1.0;

/// The Anthropic Messages API, as the shared [`HttpTransport`] speaks it.
#[derive(Debug)]
pub struct Anthropic;

impl Api for Anthropic {
    const NAME: &'static str = "AnthropicTransport";
    /// `anthropic`, as the telemetry conventions name the Messages API.
    const PROVIDER: &'static str = "anthropic";
    type Config = Config;
    type Protocol = MessagesApi;

    fn from_env() -> Result<Config, ConfigError> {
        Config::from_env()
    }

    fn connection(config: &Config) -> &Connection {
        config.connection()
    }

    fn endpoint(config: &Config) -> Result<Endpoint, ConfigError> {
        let version = HeaderValue::try_from(config.version()).map_err(|_| ConfigError::Invalid {
            variable: ENV_VERSION,
            value: config.version().to_owned(),
            expected: VISIBLE,
        })?;
        let mut headers = HeaderMap::new();
        headers.insert(HeaderName::from_static("anthropic-version"), version);
        Endpoint::connect(config.connection(), "messages", KeyHeader::Named("x-api-key"), headers)
    }

    /// Refuses a seed (the Messages API has none) and a temperature above 1 (its range is 0 to
    /// 1, narrower than the 0 to 2 that [`ChatOptions`] accepts): sending the one or dropping
    /// the other would run the model otherwise than the host asked.
    fn check(_: &Config, options: &ChatOptions) -> Result<(), TransportError> {
        if let Some(temperature) = options.temperature().filter(|&value| value > MAX_TEMPERATURE) {
            return Err(unsupported_option(
                Self::NAME,
                &format!("temperature {temperature}"),
                "the Messages API accepts a temperature from 0 to 1",
            ));
        }
        if options.seed().is_some() {
            return Err(unsupported_option(Self::NAME, "seed", "the Messages API has no seed"));
        }
        Ok(())
    }

    fn body(config: &Config, request: &ChatRequest<'_>, stream: bool) -> Vec<u8> {
        let settings = Settings {
            model: config.connection().model(),
            max_tokens: config.max_tokens(),
            tool_choice: config.tool_choice(),
        };
        request_body(settings, request, if stream { Mode::Stream } else { Mode::Whole })
    }
}

/// An Anthropic Messages API transport: `AnthropicTransport::new(config)` or
/// `AnthropicTransport::from_env()` (see [`Config::from_env`]).
///
/// ```no_run
/// use loopbound::{Message, Runner, Scope, ToolSet};
/// use loopbound_anthropic::AnthropicTransport;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// // LOOPBOUND_ANTHROPIC_BASE_URL=https://api.anthropic.com/v1 LOOPBOUND_ANTHROPIC_MODEL=claude-…
/// let transport = AnthropicTransport::from_env()?;
/// let runtime = Runner::new(&ToolSet::default(), transport).streaming(true);
/// let scope = Scope::builder().build()?;
/// let outcome = runtime.run(&scope, &mut vec![Message::user("Say hello.")], |_| true).await?;
/// println!("{} {:?}", outcome.status(), outcome.text());
/// # Ok(())
/// # }
/// ```
pub type AnthropicTransport = HttpTransport<Anthropic>;
