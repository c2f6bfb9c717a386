//! Explicit configuration of the endpoint: base URL, model, optional API key and timeout, and
//! how requests name their output cap and ask for usage in streams.
//!
//! # Invariants
//!
//! - Nothing is guessed: the base URL and the model must be given, by environment
//!   ([`Config::from_env`]) or in code ([`Config::new`]). There is no default endpoint and no
//!   fallback to any cloud provider.
//! - The API key is held in an [`ApiKey`], whose `Debug` and `Display` print `[redacted]`; no
//!   error of this module quotes it.
//! - The base URL is `http` or `https`, carries no user name, password, query or fragment
//!   (credentials belong in `LOOPBOUND_OPENAI_API_KEY`, never in a URL that may be printed).

use std::fmt;
use std::time::Duration;

use loopbound_provider::config::{Connection, Names};
use loopbound_provider::{ApiKey, ConfigError, HttpVersion, Variables};
use reqwest::Url;

/// Environment variable holding the endpoint's base URL, e.g. `http://127.0.0.1:8080/v1`.
pub const ENV_BASE_URL: &str = "LOOPBOUND_OPENAI_BASE_URL";
/// Environment variable holding the model name sent with every request.
pub const ENV_MODEL: &str = "LOOPBOUND_OPENAI_MODEL";
/// Optional environment variable holding the API key, sent as `Authorization: Bearer …`.
pub const ENV_API_KEY: &str = "LOOPBOUND_OPENAI_API_KEY";
/// Optional environment variable holding the per-request timeout in whole seconds.
pub const ENV_TIMEOUT_SECS: &str = "LOOPBOUND_OPENAI_TIMEOUT_SECS";
/// Optional environment variable: `off` stops asking for usage figures in streams
/// (`stream_options`), for servers that reject the field. Default `on`.
pub const ENV_STREAM_USAGE: &str = "LOOPBOUND_OPENAI_STREAM_USAGE";
/// Optional environment variable naming the field the output cap is sent in:
/// `max_completion_tokens` (the default, what OpenAI's chat completions expect) or `max_tokens`
/// (for servers that know only the older field).
pub const ENV_OUTPUT_CAP_FIELD: &str = "LOOPBOUND_OPENAI_OUTPUT_CAP_FIELD";

/// The request field that carries the run's output cap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OutputCapField {
    /// `max_completion_tokens`: OpenAI's current field (its reasoning models refuse the older
    /// one).
    #[default]
    MaxCompletionTokens,
    /// `max_tokens`: the older field, which some OpenAI-compatible servers still require.
    MaxTokens,
}

impl OutputCapField {
    /// The field's name, as sent and as [`ENV_OUTPUT_CAP_FIELD`] names it.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::MaxCompletionTokens => "max_completion_tokens",
            Self::MaxTokens => "max_tokens",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        [Self::MaxCompletionTokens, Self::MaxTokens]
            .into_iter()
            .find(|field| text.eq_ignore_ascii_case(field.name()))
    }
}

/// The variables of the connection.
const NAMES: Names =
    Names { base_url: ENV_BASE_URL, model: ENV_MODEL, api_key: ENV_API_KEY, timeout: ENV_TIMEOUT_SECS };

/// Where and how to reach an OpenAI-compatible endpoint.
#[derive(Clone, PartialEq, Eq)]
pub struct Config {
    connection: Connection,
    stream_usage: bool,
    output_cap_field: OutputCapField,
}

impl Config {
    /// A configuration for the endpoint at `base_url` (the part before `/chat/completions`)
    /// and `model`, without an API key or timeout, asking for usage in streams and sending the
    /// output cap as `max_completion_tokens`.
    ///
    /// ```
    /// let config = loopbound_openai::Config::new("http://127.0.0.1:8080/v1", "smollm2")?;
    /// assert_eq!(config.endpoint().as_str(), "http://127.0.0.1:8080/v1/chat/completions");
    /// # Ok::<(), loopbound_openai::ConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`ConfigError::InvalidBaseUrl`] or [`ConfigError::Missing`] for an empty model.
    pub fn new(base_url: &str, model: impl Into<String>) -> Result<Self, ConfigError> {
        Ok(Self::around(Connection::new(base_url, model, &NAMES)?))
    }

    /// Reads the configuration from the process environment: `LOOPBOUND_OPENAI_BASE_URL` and
    /// `LOOPBOUND_OPENAI_MODEL` (required), `LOOPBOUND_OPENAI_API_KEY`, `LOOPBOUND_OPENAI_TIMEOUT_SECS` and
    /// `LOOPBOUND_OPENAI_STREAM_USAGE` and `LOOPBOUND_OPENAI_OUTPUT_CAP_FIELD` (optional). An empty variable
    /// counts as unset.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the variable that is missing or invalid.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::read(&Variables::env())
    }

    /// As [`from_env`](Self::from_env), reading variables through `lookup` instead of the
    /// process environment (for tests and hosts with their own settings store).
    ///
    /// ```
    /// use loopbound_openai::{Config, ConfigError};
    ///
    /// let missing = Config::from_lookup(|_| None).unwrap_err();
    /// assert_eq!(missing, ConfigError::Missing { variable: "LOOPBOUND_OPENAI_BASE_URL" });
    /// ```
    ///
    /// # Errors
    ///
    /// As [`from_env`](Self::from_env).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Self::read(&Variables::lookup(lookup))
    }

    fn read(settings: &Variables<'_>) -> Result<Self, ConfigError> {
        let mut config = Self::around(Connection::read(settings, &NAMES)?);
        if let Some(ask) = settings.switch(ENV_STREAM_USAGE)? {
            config.stream_usage = ask;
        }
        let expected = "max_completion_tokens or max_tokens";
        if let Some(field) = settings.parsed(ENV_OUTPUT_CAP_FIELD, expected, OutputCapField::parse)? {
            config.output_cap_field = field;
        }
        Ok(config)
    }

    /// The defaults around `connection`.
    fn around(connection: Connection) -> Self {
        Self { connection, stream_usage: true, output_cap_field: OutputCapField::default() }
    }

    /// This configuration with an API key, sent as `Authorization: Bearer <key>`.
    #[must_use]
    pub fn with_api_key(mut self, key: ApiKey) -> Self {
        self.connection.set_api_key(key);
        self
    }

    /// This configuration with a per-request timeout (connection, then whole response).
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.connection.set_timeout(timeout);
        self
    }

    /// This configuration over HTTP/2 (`HttpVersion::Http2 { connections }`: many calls in
    /// flight on few connections) or HTTP/1.1 (the default: one connection per call in flight).
    #[must_use]
    pub fn with_http(mut self, http: HttpVersion) -> Self {
        self.connection.set_http(http);
        self
    }

    /// This configuration with `http://` requests sent on the connections the transport drives
    /// itself (`true`, the default: less memory and CPU per call in flight) or through
    /// `reqwest`'s pooled client (`false`), as `https://` requests always are. See
    /// [`Connection::set_direct`](loopbound_provider::Connection::set_direct).
    #[must_use]
    pub fn with_direct(mut self, direct: bool) -> Self {
        self.connection.set_direct(direct);
        self
    }

    /// Whether streamed requests ask for usage figures with `stream_options` (default yes).
    #[must_use]
    pub fn with_stream_usage(mut self, ask: bool) -> Self {
        self.stream_usage = ask;
        self
    }

    /// The field requests send the output cap in (default `max_completion_tokens`).
    #[must_use]
    pub fn with_output_cap_field(mut self, field: OutputCapField) -> Self {
        self.output_cap_field = field;
        self
    }

    /// The base URL, the model, the API key and the timeout.
    #[must_use]
    pub fn connection(&self) -> &Connection {
        &self.connection
    }

    /// The URL requests are posted to: the base URL followed by `/chat/completions`.
    #[must_use]
    pub fn endpoint(&self) -> Url {
        self.connection.endpoint("chat/completions")
    }

    /// The URL the Responses transport posts to: the base URL followed by `/responses`.
    ///
    /// ```
    /// let config = loopbound_openai::Config::new("http://127.0.0.1:8080/v1", "smollm2")?;
    /// assert_eq!(config.responses_endpoint().as_str(), "http://127.0.0.1:8080/v1/responses");
    /// # Ok::<(), loopbound_openai::ConfigError>(())
    /// ```
    #[must_use]
    pub fn responses_endpoint(&self) -> Url {
        self.connection.endpoint(crate::responses::PATH)
    }

    /// Whether streamed requests ask for usage figures.
    #[must_use]
    pub fn stream_usage(&self) -> bool {
        self.stream_usage
    }

    /// The field requests send the output cap in.
    #[must_use]
    pub fn output_cap_field(&self) -> OutputCapField {
        self.output_cap_field
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("connection", &self.connection)
            .field("stream_usage", &self.stream_usage)
            .field("output_cap_field", &self.output_cap_field)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use loopbound_provider::REDACTED;
    use loopbound_provider::config::pairs as lookup;

    use super::*;

    #[test]
    fn each_missing_required_variable_is_named() {
        assert_eq!(Config::from_lookup(lookup(&[])), Err(ConfigError::Missing { variable: ENV_BASE_URL }));
        assert_eq!(
            Config::from_lookup(lookup(&[(ENV_BASE_URL, "http://127.0.0.1:1/v1"), (ENV_MODEL, "  ")])),
            Err(ConfigError::Missing { variable: ENV_MODEL })
        );
        let message = ConfigError::Missing { variable: ENV_MODEL }.to_string();
        assert_eq!(message, "LOOPBOUND_OPENAI_MODEL is not set (or is empty)");
    }

    #[test]
    fn a_full_environment_is_read_exactly() {
        let config = Config::from_lookup(lookup(&[
            (ENV_BASE_URL, "https://models.example/v1/"),
            (ENV_MODEL, "small"),
            (ENV_API_KEY, "sk-test-123"),
            (ENV_TIMEOUT_SECS, "30"),
            (ENV_STREAM_USAGE, "off"),
            (ENV_OUTPUT_CAP_FIELD, "MAX_TOKENS"),
        ]))
        .unwrap();
        assert_eq!(config.endpoint().as_str(), "https://models.example/v1/chat/completions");
        assert_eq!(config.connection().model(), "small");
        assert_eq!(config.connection().api_key().map(ApiKey::expose), Some("sk-test-123"));
        assert_eq!(config.connection().timeout(), Some(Duration::from_secs(30)));
        assert!(!config.stream_usage());
        assert_eq!(config.output_cap_field(), OutputCapField::MaxTokens);
    }

    #[test]
    fn optional_variables_default_to_no_key_no_timeout_and_usage_on() {
        let config = Config::from_lookup(lookup(&[
            (ENV_BASE_URL, "http://127.0.0.1:8080"),
            (ENV_MODEL, "m"),
            (ENV_API_KEY, ""),
        ]))
        .unwrap();
        assert_eq!(config.endpoint().as_str(), "http://127.0.0.1:8080/chat/completions");
        assert_eq!(config.connection().api_key(), None);
        assert_eq!(config.connection().timeout(), None);
        assert!(config.stream_usage());
        assert_eq!(config.output_cap_field(), OutputCapField::MaxCompletionTokens);
        assert_eq!(Config::new("http://h/v1", "m").unwrap(), config_at("http://h/v1"));
    }

    fn config_at(base_url: &str) -> Config {
        Config::from_lookup(lookup(&[(ENV_BASE_URL, base_url), (ENV_MODEL, "m")])).unwrap()
    }

    #[test]
    fn an_unknown_output_cap_field_is_refused_with_the_choices() {
        let refused = Config::from_lookup(lookup(&[
            (ENV_BASE_URL, "http://h/v1"),
            (ENV_MODEL, "m"),
            (ENV_OUTPUT_CAP_FIELD, "n_predict"),
        ]));
        assert_eq!(
            refused.unwrap_err().to_string(),
            "LOOPBOUND_OPENAI_OUTPUT_CAP_FIELD must be max_completion_tokens or max_tokens, not \"n_predict\""
        );
    }

    #[test]
    fn unusable_base_urls_are_refused_with_a_reason() {
        for (url, reason) in [
            ("localhost:8080/v1", "the scheme must be http or https"),
            ("ftp://host/v1", "the scheme must be http or https"),
            (
                "http://user:pw@host/v1",
                "credentials in the URL are refused; set LOOPBOUND_OPENAI_API_KEY instead",
            ),
            ("http://host/v1?key=1", "the URL must not have a query or a fragment"),
        ] {
            assert_eq!(
                Config::new(url, "m"),
                Err(ConfigError::InvalidBaseUrl { variable: ENV_BASE_URL, reason: reason.to_owned() }),
                "{url}"
            );
        }
        assert_eq!(
            Config::new("not a url", "m"),
            Err(ConfigError::InvalidBaseUrl {
                variable: ENV_BASE_URL,
                reason: "relative URL without a base".to_owned()
            })
        );
    }

    #[test]
    fn bad_timeouts_and_switches_are_refused() {
        let base = [(ENV_BASE_URL, "http://h/v1"), (ENV_MODEL, "m")];
        for value in ["0", "-1", "1.5", "soon"] {
            let pairs = [base[0], base[1], (ENV_TIMEOUT_SECS, value)];
            assert_eq!(
                Config::from_lookup(lookup(&pairs)),
                Err(ConfigError::Invalid {
                    variable: ENV_TIMEOUT_SECS,
                    value: value.to_owned(),
                    expected: "a positive whole number of seconds"
                })
            );
        }
        let pairs = [base[0], base[1], (ENV_STREAM_USAGE, "maybe")];
        assert_eq!(
            Config::from_lookup(lookup(&pairs)),
            Err(ConfigError::Invalid {
                variable: ENV_STREAM_USAGE,
                value: "maybe".to_owned(),
                expected: "on or off"
            })
        );
    }

    #[test]
    fn the_api_key_never_shows_in_debug_display_or_errors() {
        let secret = "sk-very-secret-value";
        let config = Config::new("http://h/v1", "m").unwrap().with_api_key(ApiKey::new(secret).unwrap());
        let key = config.connection().api_key();
        let debug = format!("{config:?} {key:?} {}", key.unwrap());
        assert!(!debug.contains(secret), "{debug}");
        assert!(debug.contains(REDACTED));

        let bad = format!("{secret} with space");
        let error = Config::from_lookup(lookup(&[
            (ENV_BASE_URL, "http://h/v1"),
            (ENV_MODEL, "m"),
            (ENV_API_KEY, &bad),
        ]))
        .unwrap_err();
        assert_eq!(error, ConfigError::InvalidApiKey { variable: Some(ENV_API_KEY) });
        let text = format!("{error} {error:?}");
        assert!(!text.contains(secret), "{text}");
    }

    #[test]
    fn http2_over_more_connections_than_the_cap_is_refused_before_any_client_is_built() {
        let over = std::num::NonZeroUsize::new(HttpVersion::MAX_CONNECTIONS + 1).unwrap();
        let config =
            Config::new("http://h/v1", "m").unwrap().with_http(HttpVersion::Http2 { connections: over });
        let error = crate::OpenAiTransport::new(config).unwrap_err();
        assert_eq!(error, ConfigError::TooManyConnections { requested: 65, max: 64 });
        assert_eq!(error.to_string(), "HTTP/2 over 65 connections asks for more than the 64 allowed");
        let huge = std::num::NonZeroUsize::new(usize::MAX).unwrap();
        let config =
            Config::new("http://h/v1", "m").unwrap().with_http(HttpVersion::Http2 { connections: huge });
        assert_eq!(
            crate::OpenAiTransport::new(config).unwrap_err(),
            ConfigError::TooManyConnections { requested: usize::MAX, max: 64 }
        );
        let most = std::num::NonZeroUsize::new(HttpVersion::MAX_CONNECTIONS).unwrap();
        let config =
            Config::new("http://h/v1", "m").unwrap().with_http(HttpVersion::Http2 { connections: most });
        assert!(crate::OpenAiTransport::new(config).is_ok());
    }

    #[test]
    fn an_unconfigured_endpoint_is_an_unavailable_provider() {
        let error: loopbound::transport::TransportError =
            ConfigError::Missing { variable: ENV_BASE_URL }.into();
        assert_eq!(
            error,
            loopbound::transport::TransportError::unavailable(
                "the endpoint is not configured: LOOPBOUND_OPENAI_BASE_URL is not set (or is empty)"
            )
        );
    }
}
