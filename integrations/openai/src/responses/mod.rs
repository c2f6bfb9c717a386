//! The OpenAI Responses API (`POST {base}/responses`), as a second API of this crate beside chat
//! completions: the same [`Config`] (base URL, model, key, timeout, HTTP version, the same
//! `LOOPBOUND_*` variables), the same bearer key, the same error objects; a host switches by
//! changing one constructor, [`ResponsesTransport::new`] for
//! [`OpenAiTransport::new`](crate::OpenAiTransport).
//!
//! # Invariants
//!
//! - The request is this API's (`request::request_body`): stateless (`store: false`, the whole
//!   conversation each time), the run's output cap as `max_output_tokens`. The chat-only settings
//!   of [`Config`] (usage in streams, the cap's field name) do not apply: a response always
//!   reports its usage, and the cap has one field. Of the sampling options, `temperature` and
//!   `top_p` are sent; the API has no stop sequences and no seed, so a run that sets either is
//!   refused before anything is sent ([`Api::check`]).
//! - Replies read as `events::ResponsesApi`: whole (one `response` object) or streamed (its
//!   events, ended by `response.completed`). Sending, statuses, bounds, redaction and
//!   cancellation are the shared [`HttpTransport`]'s, as for every transport: one call is one
//!   request, no retry, no redirect.

pub mod events;
pub mod reply;
pub mod request;

use loopbound::transport::{ChatOptions, ChatRequest, TransportError};
use loopbound_provider::errors::unsupported_option;
use loopbound_provider::{Api, ConfigError, Connection, Endpoint, HttpTransport, KeyHeader};
use reqwest::header::HeaderMap;

use crate::config::Config;

/// The path below the base URL that requests are posted to.
pub(crate) const PATH: &str = "responses";

/// The OpenAI Responses API, as the shared [`HttpTransport`] speaks it.
#[derive(Debug)]
pub struct Responses;

impl Api for Responses {
    const NAME: &'static str = "ResponsesTransport";
    /// `openai`: the conventions name the API so, whatever serves it.
    const PROVIDER: &'static str = "openai";
    type Config = Config;
    type Protocol = events::ResponsesApi;

    fn from_env() -> Result<Config, ConfigError> {
        Config::from_env()
    }

    fn connection(config: &Config) -> &Connection {
        config.connection()
    }

    fn endpoint(config: &Config) -> Result<Endpoint, ConfigError> {
        Endpoint::connect(config.connection(), PATH, KeyHeader::Bearer, HeaderMap::new())
    }

    /// Refuses stop sequences and a seed: the Responses API has neither field, and dropping
    /// them would run the model otherwise than the host asked.
    fn check(_: &Config, options: &ChatOptions) -> Result<(), TransportError> {
        if !options.stop_sequences().is_empty() {
            return Err(unsupported_option(
                Self::NAME,
                "stop_sequences",
                "the Responses API has no stop sequences",
            ));
        }
        if options.seed().is_some() {
            return Err(unsupported_option(Self::NAME, "seed", "the Responses API has no seed"));
        }
        Ok(())
    }

    fn body(config: &Config, request: &ChatRequest<'_>, stream: bool) -> Vec<u8> {
        request::request_body(config.connection().model(), request, stream)
    }
}

/// A transport over the OpenAI Responses API: `ResponsesTransport::new(config)` or
/// `ResponsesTransport::from_env()` (see [`Config::from_env`]), with the configuration the chat
/// transport takes.
///
/// ```no_run
/// use loopbound::{Message, Runner, Scope, ToolSet};
/// use loopbound_openai::{Config, ResponsesTransport};
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let transport = ResponsesTransport::new(Config::new("http://127.0.0.1:8080/v1", "smollm2")?)?;
/// assert_eq!(transport.config().responses_endpoint().as_str(), "http://127.0.0.1:8080/v1/responses");
/// let runtime = Runner::new(&ToolSet::default(), transport).streaming(true);
/// let scope = Scope::builder().build()?;
/// let outcome = runtime.run(&scope, &mut vec![Message::user("Say hello.")], |_| true).await?;
/// println!("{} {:?}", outcome.status(), outcome.text());
/// # Ok(())
/// # }
/// ```
pub type ResponsesTransport = HttpTransport<Responses>;
