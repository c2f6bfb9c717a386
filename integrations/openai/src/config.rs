//! Explicit configuration of the endpoint: base URL, model, optional API key and timeout.
//!
//! # Invariants
//!
//! - Nothing is guessed: the base URL and the model must be given, by environment
//!   ([`Config::from_env`]) or in code ([`Config::new`]). There is no default endpoint and no
//!   fallback to any cloud provider.
//! - The API key is held in an [`ApiKey`], whose `Debug` and `Display` print `[redacted]`; no
//!   error of this module quotes it.
//! - The base URL is `http` or `https`, carries no user name, password, query or fragment
//!   (credentials belong in `LOOPBOUND_API_KEY`, never in a URL that may be printed).

use std::fmt;
use std::time::Duration;

use reqwest::Url;

/// Environment variable holding the endpoint's base URL, e.g. `http://127.0.0.1:8080/v1`.
pub const ENV_BASE_URL: &str = "LOOPBOUND_BASE_URL";
/// Environment variable holding the model name sent with every request.
pub const ENV_MODEL: &str = "LOOPBOUND_MODEL";
/// Optional environment variable holding the API key, sent as `Authorization: Bearer …`.
pub const ENV_API_KEY: &str = "LOOPBOUND_API_KEY";
/// Optional environment variable holding the per-request timeout in whole seconds.
pub const ENV_TIMEOUT_SECS: &str = "LOOPBOUND_TIMEOUT_SECS";
/// Optional environment variable: `off` stops asking for usage figures in streams
/// (`stream_options`), for servers that reject the field. Default `on`.
pub const ENV_STREAM_USAGE: &str = "LOOPBOUND_STREAM_USAGE";

/// Text printed in place of a secret.
pub const REDACTED: &str = "[redacted]";

/// A secret API key. It prints as `[redacted]` and is only read to build the request header.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps `key`, which must be non-empty visible ASCII (it travels in an HTTP header).
    ///
    /// # Errors
    ///
    /// [`ConfigError::InvalidApiKey`], which does not quote the key.
    pub fn new(key: impl Into<String>) -> Result<Self, ConfigError> {
        let key = key.into();
        if key.is_empty() || !key.bytes().all(|byte| byte.is_ascii_graphic()) {
            return Err(ConfigError::InvalidApiKey);
        }
        Ok(Self(key))
    }

    /// The key itself, for the `Authorization` header and for redaction.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

/// Where and how to reach an OpenAI-compatible endpoint.
#[derive(Clone, PartialEq, Eq)]
pub struct Config {
    base_url: Url,
    model: String,
    api_key: Option<ApiKey>,
    timeout: Option<Duration>,
    stream_usage: bool,
}

impl Config {
    /// A configuration for the endpoint at `base_url` (the part before `/chat/completions`)
    /// and `model`, without an API key or timeout.
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
        let model = model.into();
        if model.trim().is_empty() {
            return Err(ConfigError::Missing { variable: ENV_MODEL });
        }
        Ok(Self {
            base_url: parse_base_url(base_url)?,
            model,
            api_key: None,
            timeout: None,
            stream_usage: true,
        })
    }

    /// Reads the configuration from the process environment: `LOOPBOUND_BASE_URL` and
    /// `LOOPBOUND_MODEL` (required), `LOOPBOUND_API_KEY`, `LOOPBOUND_TIMEOUT_SECS` and
    /// `LOOPBOUND_STREAM_USAGE` (optional). An empty variable counts as unset.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the variable that is missing or invalid.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_source(|variable| match std::env::var(variable) {
            Ok(value) => Ok(Some(value)),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => Err(ConfigError::NotUnicode { variable }),
        })
    }

    /// As [`from_env`](Self::from_env), reading variables through `lookup` instead of the
    /// process environment (for tests and hosts with their own settings store).
    ///
    /// ```
    /// use loopbound_openai::{Config, ConfigError};
    ///
    /// let missing = Config::from_lookup(|_| None).unwrap_err();
    /// assert_eq!(missing, ConfigError::Missing { variable: "LOOPBOUND_BASE_URL" });
    /// ```
    ///
    /// # Errors
    ///
    /// As [`from_env`](Self::from_env).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Self::from_source(|variable| Ok(lookup(variable)))
    }

    fn from_source(
        read: impl Fn(&'static str) -> Result<Option<String>, ConfigError>,
    ) -> Result<Self, ConfigError> {
        let get = |variable| read(variable).map(|value| value.filter(|text| !text.trim().is_empty()));
        let base_url = get(ENV_BASE_URL)?.ok_or(ConfigError::Missing { variable: ENV_BASE_URL })?;
        let model = get(ENV_MODEL)?.ok_or(ConfigError::Missing { variable: ENV_MODEL })?;
        let mut config = Self::new(base_url.trim(), model.trim())?;
        if let Some(key) = get(ENV_API_KEY)? {
            config.api_key = Some(ApiKey::new(key.trim())?);
        }
        if let Some(value) = get(ENV_TIMEOUT_SECS)? {
            config.timeout = Some(parse_timeout(&value)?);
        }
        if let Some(value) = get(ENV_STREAM_USAGE)? {
            config.stream_usage = parse_switch(&value)?;
        }
        Ok(config)
    }

    /// This configuration with an API key, sent as `Authorization: Bearer <key>`.
    #[must_use]
    pub fn with_api_key(mut self, key: ApiKey) -> Self {
        self.api_key = Some(key);
        self
    }

    /// This configuration with a per-request timeout (connection, then whole response).
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Whether streamed requests ask for usage figures with `stream_options` (default yes).
    #[must_use]
    pub fn with_stream_usage(mut self, ask: bool) -> Self {
        self.stream_usage = ask;
        self
    }

    /// The base URL, e.g. `http://127.0.0.1:8080/v1`.
    #[must_use]
    pub fn base_url(&self) -> &Url {
        &self.base_url
    }

    /// The URL requests are posted to: the base URL followed by `/chat/completions`.
    #[must_use]
    pub fn endpoint(&self) -> Url {
        let mut endpoint = self.base_url.clone();
        let path = format!("{}/chat/completions", self.base_url.path().trim_end_matches('/'));
        endpoint.set_path(&path);
        endpoint
    }

    /// The model name sent with every request.
    #[must_use]
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The API key, if one is configured.
    #[must_use]
    pub fn api_key(&self) -> Option<&ApiKey> {
        self.api_key.as_ref()
    }

    /// The per-request timeout, if one is configured.
    #[must_use]
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// Whether streamed requests ask for usage figures.
    #[must_use]
    pub fn stream_usage(&self) -> bool {
        self.stream_usage
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("base_url", &self.base_url.as_str())
            .field("model", &self.model)
            .field("api_key", &self.api_key)
            .field("timeout", &self.timeout)
            .field("stream_usage", &self.stream_usage)
            .finish()
    }
}

fn parse_base_url(text: &str) -> Result<Url, ConfigError> {
    let invalid = |reason: &str| ConfigError::InvalidBaseUrl { reason: reason.to_owned() };
    let url = Url::parse(text).map_err(|error| invalid(&error.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid("the scheme must be http or https"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid("credentials in the URL are refused; set LOOPBOUND_API_KEY instead"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(invalid("the URL must not have a query or a fragment"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(invalid("the URL has no host"));
    }
    Ok(url)
}

fn parse_timeout(text: &str) -> Result<Duration, ConfigError> {
    match text.trim().parse::<u64>() {
        Ok(seconds) if seconds > 0 => Ok(Duration::from_secs(seconds)),
        _ => Err(ConfigError::InvalidTimeout { value: text.to_owned() }),
    }
}

fn parse_switch(text: &str) -> Result<bool, ConfigError> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "on" | "true" | "yes" => Ok(true),
        "0" | "off" | "false" | "no" => Ok(false),
        _ => Err(ConfigError::InvalidStreamUsage { value: text.to_owned() }),
    }
}

/// Why no usable configuration could be made. Every message names the variable at fault and
/// never quotes the API key.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// A required variable is not set, or is empty.
    Missing {
        /// The variable's name.
        variable: &'static str,
    },
    /// A variable holds text that is not valid Unicode.
    NotUnicode {
        /// The variable's name.
        variable: &'static str,
    },
    /// `LOOPBOUND_BASE_URL` is not a usable URL.
    InvalidBaseUrl {
        /// What is wrong with it.
        reason: String,
    },
    /// `LOOPBOUND_API_KEY` is not visible ASCII. The key is not quoted.
    InvalidApiKey,
    /// `LOOPBOUND_TIMEOUT_SECS` is not a positive whole number of seconds.
    InvalidTimeout {
        /// The value found.
        value: String,
    },
    /// `LOOPBOUND_STREAM_USAGE` is neither on nor off.
    InvalidStreamUsage {
        /// The value found.
        value: String,
    },
    /// The HTTP client could not be built.
    Client(String),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Missing { variable } => write!(f, "{variable} is not set (or is empty)"),
            Self::NotUnicode { variable } => write!(f, "{variable} is not valid Unicode"),
            Self::InvalidBaseUrl { reason } => write!(f, "{ENV_BASE_URL} is not a usable base URL: {reason}"),
            Self::InvalidApiKey => {
                write!(f, "{ENV_API_KEY} must be non-empty visible ASCII without spaces")
            }
            Self::InvalidTimeout { value } => {
                write!(f, "{ENV_TIMEOUT_SECS} must be a positive whole number of seconds, not {value:?}")
            }
            Self::InvalidStreamUsage { value } => {
                write!(f, "{ENV_STREAM_USAGE} must be on or off, not {value:?}")
            }
            Self::Client(message) => write!(f, "the HTTP client could not be built: {message}"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// An unconfigured endpoint cannot be reached: as a transport error it is `Unavailable`, so a
/// host that runs anyway ends with `ProviderUnavailable`.
impl From<ConfigError> for loopbound::transport::TransportError {
    fn from(error: ConfigError) -> Self {
        Self::unavailable(format!("the endpoint is not configured: {error}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        |name| pairs.iter().find(|(key, _)| *key == name).map(|(_, value)| (*value).to_owned())
    }

    #[test]
    fn each_missing_required_variable_is_named() {
        assert_eq!(Config::from_lookup(lookup(&[])), Err(ConfigError::Missing { variable: ENV_BASE_URL }));
        assert_eq!(
            Config::from_lookup(lookup(&[(ENV_BASE_URL, "http://127.0.0.1:1/v1"), (ENV_MODEL, "  ")])),
            Err(ConfigError::Missing { variable: ENV_MODEL })
        );
        let message = ConfigError::Missing { variable: ENV_MODEL }.to_string();
        assert_eq!(message, "LOOPBOUND_MODEL is not set (or is empty)");
    }

    #[test]
    fn a_full_environment_is_read_exactly() {
        let config = Config::from_lookup(lookup(&[
            (ENV_BASE_URL, "https://models.example/v1/"),
            (ENV_MODEL, "small"),
            (ENV_API_KEY, "sk-test-123"),
            (ENV_TIMEOUT_SECS, "30"),
            (ENV_STREAM_USAGE, "off"),
        ]))
        .unwrap();
        assert_eq!(config.endpoint().as_str(), "https://models.example/v1/chat/completions");
        assert_eq!(config.model(), "small");
        assert_eq!(config.api_key().map(ApiKey::expose), Some("sk-test-123"));
        assert_eq!(config.timeout(), Some(Duration::from_secs(30)));
        assert!(!config.stream_usage());
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
        assert_eq!(config.api_key(), None);
        assert_eq!(config.timeout(), None);
        assert!(config.stream_usage());
    }

    #[test]
    fn unusable_base_urls_are_refused_with_a_reason() {
        for (url, reason) in [
            ("localhost:8080/v1", "the scheme must be http or https"),
            ("ftp://host/v1", "the scheme must be http or https"),
            ("http://user:pw@host/v1", "credentials in the URL are refused; set LOOPBOUND_API_KEY instead"),
            ("http://host/v1?key=1", "the URL must not have a query or a fragment"),
        ] {
            assert_eq!(
                Config::new(url, "m"),
                Err(ConfigError::InvalidBaseUrl { reason: reason.to_owned() }),
                "{url}"
            );
        }
        assert_eq!(
            Config::new("not a url", "m"),
            Err(ConfigError::InvalidBaseUrl { reason: "relative URL without a base".to_owned() })
        );
    }

    #[test]
    fn bad_timeouts_and_switches_are_refused() {
        let base = [(ENV_BASE_URL, "http://h/v1"), (ENV_MODEL, "m")];
        for value in ["0", "-1", "1.5", "soon"] {
            let pairs = [base[0], base[1], (ENV_TIMEOUT_SECS, value)];
            assert_eq!(
                Config::from_lookup(lookup(&pairs)),
                Err(ConfigError::InvalidTimeout { value: value.to_owned() })
            );
        }
        let pairs = [base[0], base[1], (ENV_STREAM_USAGE, "maybe")];
        assert_eq!(
            Config::from_lookup(lookup(&pairs)),
            Err(ConfigError::InvalidStreamUsage { value: "maybe".to_owned() })
        );
    }

    #[test]
    fn the_api_key_never_shows_in_debug_display_or_errors() {
        let secret = "sk-very-secret-value";
        let config = Config::new("http://h/v1", "m").unwrap().with_api_key(ApiKey::new(secret).unwrap());
        let debug = format!("{config:?} {:?} {}", config.api_key(), config.api_key().unwrap());
        assert!(!debug.contains(secret), "{debug}");
        assert!(debug.contains(REDACTED));

        let bad = format!("{secret} with space");
        let error = Config::from_lookup(lookup(&[
            (ENV_BASE_URL, "http://h/v1"),
            (ENV_MODEL, "m"),
            (ENV_API_KEY, &bad),
        ]))
        .unwrap_err();
        assert_eq!(error, ConfigError::InvalidApiKey);
        let text = format!("{error} {error:?}");
        assert!(!text.contains(secret), "{text}");
    }

    #[test]
    fn an_unconfigured_endpoint_is_an_unavailable_provider() {
        let error: loopbound::transport::TransportError =
            ConfigError::Missing { variable: ENV_BASE_URL }.into();
        assert_eq!(
            error,
            loopbound::transport::TransportError::unavailable(
                "the endpoint is not configured: LOOPBOUND_BASE_URL is not set (or is empty)"
            )
        );
    }
}
