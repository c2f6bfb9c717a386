//! Explicit configuration of the endpoint: base URL, model, optional API key, timeout, the
//! default output cap, the API version and the tool choice.
//!
//! # Invariants
//!
//! - Nothing is guessed: the base URL and the model must be given, by environment
//!   ([`Config::from_env`]) or in code ([`Config::new`]). There is no default endpoint and no
//!   fallback to any cloud provider, Anthropic's included.
//! - The API key is held in an [`ApiKey`], whose `Debug` and `Display` print `[redacted]`; no
//!   error of this module quotes it.
//! - The base URL is `http` or `https`, carries no user name, password, query or fragment
//!   (credentials belong in `LOOPBOUND_ANTHROPIC_API_KEY`, never in a URL that may be printed).
//! - The default output cap is at least one token and the API version is visible ASCII, so
//!   every request this configuration makes is well formed.

use std::fmt;
use std::time::Duration;

use loopbound_provider::config::{Connection, Names};
use loopbound_provider::{ApiKey, ConfigError, HttpVersion, Variables};
use reqwest::Url;

/// Environment variable holding the endpoint's base URL, e.g. `http://127.0.0.1:8080/v1`
/// (requests go to `{base}/messages`).
pub const ENV_BASE_URL: &str = "LOOPBOUND_ANTHROPIC_BASE_URL";
/// Environment variable holding the model name sent with every request.
pub const ENV_MODEL: &str = "LOOPBOUND_ANTHROPIC_MODEL";
/// Optional environment variable holding the API key, sent as `x-api-key`.
pub const ENV_API_KEY: &str = "LOOPBOUND_ANTHROPIC_API_KEY";
/// Optional environment variable holding the per-request timeout in whole seconds.
pub const ENV_TIMEOUT_SECS: &str = "LOOPBOUND_ANTHROPIC_TIMEOUT_SECS";
/// Optional environment variable holding the output cap (`max_tokens`) sent when the run sets
/// none ([`DEFAULT_MAX_TOKENS`] without it).
pub const ENV_MAX_TOKENS: &str = "LOOPBOUND_ANTHROPIC_MAX_TOKENS";
/// Optional environment variable holding the `anthropic-version` header ([`DEFAULT_VERSION`]
/// without it).
pub const ENV_VERSION: &str = "LOOPBOUND_ANTHROPIC_VERSION";
/// Optional environment variable holding the tool choice: `auto` (the default), `any` or `none`.
pub const ENV_TOOL_CHOICE: &str = "LOOPBOUND_ANTHROPIC_TOOL_CHOICE";

/// The output cap sent when neither the run (`ChatOptions::max_output_tokens`) nor the
/// configuration sets one: the API requires a cap on every request.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;
/// The `anthropic-version` header sent unless configured otherwise.
pub const DEFAULT_VERSION: &str = "2023-06-01";

/// What the version must be: it travels in a header.
pub(crate) const VISIBLE: &str = "visible ASCII without spaces";

/// Whether and how the model must use the tools it is offered (sent as `tool_choice` whenever
/// tools are).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ToolChoice {
    /// The model decides (`{"type":"auto"}`).
    #[default]
    Auto,
    /// The model must call one of the tools (`{"type":"any"}`).
    Any,
    /// The model must not call a tool (`{"type":"none"}`).
    None,
}

impl ToolChoice {
    /// The name the API (and [`ENV_TOOL_CHOICE`]) gives this choice.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Any => "any",
            Self::None => "none",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        [Self::Auto, Self::Any, Self::None]
            .into_iter()
            .find(|choice| text.eq_ignore_ascii_case(choice.name()))
    }
}

/// The variables of the connection.
const NAMES: Names =
    Names { base_url: ENV_BASE_URL, model: ENV_MODEL, api_key: ENV_API_KEY, timeout: ENV_TIMEOUT_SECS };

/// Where and how to reach an Anthropic Messages API endpoint.
#[derive(Clone, PartialEq, Eq)]
pub struct Config {
    connection: Connection,
    max_tokens: u32,
    version: String,
    tool_choice: ToolChoice,
}

impl Config {
    /// A configuration for the endpoint at `base_url` (the part before `/messages`) and `model`,
    /// without an API key or timeout, with the default output cap, version and tool choice.
    ///
    /// ```
    /// let config = loopbound_anthropic::Config::new("http://127.0.0.1:8080/v1", "claude-test")?;
    /// assert_eq!(config.endpoint().as_str(), "http://127.0.0.1:8080/v1/messages");
    /// assert_eq!((config.max_tokens(), config.version()), (4096, "2023-06-01"));
    /// # Ok::<(), loopbound_anthropic::ConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`ConfigError::InvalidBaseUrl`] or [`ConfigError::Missing`] for an empty model.
    pub fn new(base_url: &str, model: impl Into<String>) -> Result<Self, ConfigError> {
        Ok(Self::around(Connection::new(base_url, model, &NAMES)?))
    }

    /// The default settings around `connection`.
    fn around(connection: Connection) -> Self {
        Self {
            connection,
            max_tokens: DEFAULT_MAX_TOKENS,
            version: DEFAULT_VERSION.to_owned(),
            tool_choice: ToolChoice::Auto,
        }
    }

    /// Reads the configuration from the process environment: `LOOPBOUND_ANTHROPIC_BASE_URL` and
    /// `LOOPBOUND_ANTHROPIC_MODEL` (required), `LOOPBOUND_ANTHROPIC_API_KEY`,
    /// `LOOPBOUND_ANTHROPIC_TIMEOUT_SECS`, `LOOPBOUND_ANTHROPIC_MAX_TOKENS`,
    /// `LOOPBOUND_ANTHROPIC_VERSION` and `LOOPBOUND_ANTHROPIC_TOOL_CHOICE` (optional). An empty
    /// variable counts as unset; the OpenAI transport's `LOOPBOUND_*` variables are not read.
    ///
    /// ```
    /// use loopbound_anthropic::{Config, ConfigError};
    ///
    /// let missing = Config::from_lookup(|_| None).unwrap_err();
    /// assert_eq!(missing, ConfigError::Missing { variable: "LOOPBOUND_ANTHROPIC_BASE_URL" });
    /// ```
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the variable that is missing or invalid.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::read(&Variables::env())
    }

    /// As [`from_env`](Self::from_env), from `lookup` instead of the process environment.
    ///
    /// # Errors
    ///
    /// As [`from_env`](Self::from_env).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Self::read(&Variables::lookup(lookup))
    }

    fn read(settings: &Variables<'_>) -> Result<Self, ConfigError> {
        let mut config = Self::around(Connection::read(settings, &NAMES)?);
        let positive = |text: &str| text.parse::<u32>().ok().filter(|tokens| *tokens > 0);
        if let Some(tokens) =
            settings.parsed(ENV_MAX_TOKENS, "a positive whole number of tokens", positive)?
        {
            config.max_tokens = tokens;
        }
        let visible = |text: &str| text.bytes().all(|byte| byte.is_ascii_graphic()).then(|| text.to_owned());
        if let Some(version) = settings.parsed(ENV_VERSION, VISIBLE, visible)? {
            config.version = version;
        }
        if let Some(choice) = settings.parsed(ENV_TOOL_CHOICE, "auto, any or none", ToolChoice::parse)? {
            config.tool_choice = choice;
        }
        Ok(config)
    }

    /// This configuration with an API key, sent as `x-api-key`.
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

    /// This configuration with `tokens` as the output cap of a request whose run sets none.
    /// Zero is raised to one: the API refuses a cap of zero.
    #[must_use]
    pub fn with_max_tokens(mut self, tokens: u32) -> Self {
        self.max_tokens = tokens.max(1);
        self
    }

    /// This configuration with a tool choice.
    #[must_use]
    pub fn with_tool_choice(mut self, choice: ToolChoice) -> Self {
        self.tool_choice = choice;
        self
    }

    /// The base URL, the model, the API key and the timeout.
    #[must_use]
    pub fn connection(&self) -> &Connection {
        &self.connection
    }

    /// The URL requests are posted to: the base URL followed by `/messages`.
    #[must_use]
    pub fn endpoint(&self) -> Url {
        self.connection.endpoint("messages")
    }

    /// The output cap sent when the run sets none.
    #[must_use]
    pub fn max_tokens(&self) -> u32 {
        self.max_tokens
    }

    /// The `anthropic-version` header.
    #[must_use]
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The tool choice sent with the tools.
    #[must_use]
    pub fn tool_choice(&self) -> ToolChoice {
        self.tool_choice
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("connection", &self.connection)
            .field("max_tokens", &self.max_tokens)
            .field("version", &self.version)
            .field("tool_choice", &self.tool_choice)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use loopbound_provider::REDACTED;
    use loopbound_provider::config::pairs as lookup;

    use super::*;

    const REQUIRED: [(&str, &str); 2] = [(ENV_BASE_URL, "http://127.0.0.1:9/v1"), (ENV_MODEL, "m")];

    fn with(extra: (&str, &str)) -> Result<Config, ConfigError> {
        Config::from_lookup(lookup(&[REQUIRED[0], REQUIRED[1], extra]))
    }

    #[test]
    fn each_missing_required_variable_is_named_and_the_openai_variables_are_not_read() {
        assert_eq!(Config::from_lookup(lookup(&[])), Err(ConfigError::Missing { variable: ENV_BASE_URL }));
        let openai =
            [("LOOPBOUND_OPENAI_BASE_URL", "http://127.0.0.1:9/v1"), ("LOOPBOUND_OPENAI_MODEL", "m")];
        assert_eq!(
            Config::from_lookup(lookup(&openai)),
            Err(ConfigError::Missing { variable: ENV_BASE_URL })
        );
        assert_eq!(
            Config::from_lookup(lookup(&[REQUIRED[0]])),
            Err(ConfigError::Missing { variable: ENV_MODEL })
        );
    }

    #[test]
    fn a_full_environment_is_read_exactly() {
        let config = Config::from_lookup(lookup(&[
            (ENV_BASE_URL, "https://models.example/v1/"),
            (ENV_MODEL, "claude-small"),
            (ENV_API_KEY, "sk-ant-test-123"),
            (ENV_TIMEOUT_SECS, "30"),
            (ENV_MAX_TOKENS, "1200"),
            (ENV_VERSION, "2024-01-01"),
            (ENV_TOOL_CHOICE, "ANY"),
        ]))
        .unwrap();
        assert_eq!(config.endpoint().as_str(), "https://models.example/v1/messages");
        assert_eq!(config.connection().model(), "claude-small");
        assert_eq!(config.connection().api_key().map(ApiKey::expose), Some("sk-ant-test-123"));
        assert_eq!(config.connection().timeout(), Some(Duration::from_secs(30)));
        assert_eq!(config.max_tokens(), 1200);
        assert_eq!(config.version(), "2024-01-01");
        assert_eq!(config.tool_choice(), ToolChoice::Any);
    }

    #[test]
    fn optional_variables_default_to_no_key_no_timeout_and_the_documented_values() {
        let config = with((ENV_API_KEY, "")).unwrap();
        assert_eq!(config.connection().api_key(), None);
        assert_eq!(config.connection().timeout(), None);
        assert_eq!(config.max_tokens(), DEFAULT_MAX_TOKENS);
        assert_eq!(config.version(), DEFAULT_VERSION);
        assert_eq!(config.tool_choice(), ToolChoice::Auto);
    }

    #[test]
    fn bad_values_are_refused_naming_their_variable() {
        for value in ["0", "-5", "1.5", "many", "4294967296"] {
            assert_eq!(
                with((ENV_MAX_TOKENS, value)),
                Err(ConfigError::Invalid {
                    variable: ENV_MAX_TOKENS,
                    value: value.to_owned(),
                    expected: "a positive whole number of tokens"
                })
            );
        }
        assert_eq!(
            with((ENV_TOOL_CHOICE, "required")).unwrap_err().to_string(),
            "LOOPBOUND_ANTHROPIC_TOOL_CHOICE must be auto, any or none, not \"required\""
        );
        assert_eq!(
            with((ENV_VERSION, "2023 06 01")).unwrap_err().to_string(),
            "LOOPBOUND_ANTHROPIC_VERSION must be visible ASCII without spaces, not \"2023 06 01\""
        );
        assert_eq!(
            with((ENV_TIMEOUT_SECS, "0")).unwrap_err().to_string(),
            "LOOPBOUND_ANTHROPIC_TIMEOUT_SECS must be a positive whole number of seconds, not \"0\""
        );
        assert_eq!(
            Config::new("http://user:pw@h/v1", "m").unwrap_err().to_string(),
            "LOOPBOUND_ANTHROPIC_BASE_URL is not a usable base URL: credentials in the URL are refused; \
             set LOOPBOUND_ANTHROPIC_API_KEY instead"
        );
    }

    #[test]
    fn the_api_key_never_shows_in_debug_display_or_errors() {
        let secret = "sk-ant-very-secret-value";
        let config = Config::new("http://h/v1", "m").unwrap().with_api_key(ApiKey::new(secret).unwrap());
        let key = config.connection().api_key();
        let debug = format!("{config:?} {key:?} {}", key.unwrap());
        assert!(!debug.contains(secret), "{debug}");
        assert!(debug.contains(REDACTED));
        let error = with((ENV_API_KEY, &format!("{secret} with space"))).unwrap_err();
        assert_eq!(error, ConfigError::InvalidApiKey { variable: Some(ENV_API_KEY) });
        assert!(!format!("{error} {error:?}").contains(secret));
    }

    #[test]
    fn a_zero_cap_given_in_code_is_raised_to_one() {
        assert_eq!(Config::new("http://h/v1", "m").unwrap().with_max_tokens(0).max_tokens(), 1);
    }
}
