//! Explicit configuration, shared by the provider transports: where settings are read from,
//! how a base URL, a timeout and a switch are checked, and why a configuration is refused.
//!
//! # Invariants
//!
//! - Nothing is guessed: a required variable that is unset or empty is [`ConfigError::Missing`];
//!   there is no default endpoint and no fallback to any provider.
//! - An empty or blank variable counts as unset; values are read trimmed.
//! - A base URL is `http` or `https`, has a host, and carries no user name, password, query or
//!   fragment (credentials belong in the API key's variable, never in a URL that may be
//!   printed).
//! - No error quotes an API key: [`ConfigError::InvalidApiKey`] names the variable only.

use std::fmt;
use std::time::Duration;

use loopbound::transport::TransportError;
use reqwest::Url;

use crate::key::ApiKey;

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
    /// The base URL is not usable.
    InvalidBaseUrl {
        /// The variable that names the base URL.
        variable: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The API key is not visible ASCII. The key is not quoted.
    InvalidApiKey {
        /// The variable it was read from; `None` for a key given in code.
        variable: Option<&'static str>,
    },
    /// A variable holds a value of the wrong form.
    Invalid {
        /// The variable's name.
        variable: &'static str,
        /// The value found.
        value: String,
        /// What it must be, e.g. `a positive whole number of seconds`.
        expected: &'static str,
    },
    /// The HTTP client could not be built.
    Client(String),
    /// `HttpVersion::Http2 { connections }` asks for more connections than
    /// [`HttpVersion::MAX_CONNECTIONS`]: each one is a client built up front, so a mistyped
    /// count is refused before any is built.
    TooManyConnections {
        /// The count asked for.
        requested: usize,
        /// The most allowed.
        max: usize,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Missing { variable } => write!(f, "{variable} is not set (or is empty)"),
            Self::NotUnicode { variable } => write!(f, "{variable} is not valid Unicode"),
            Self::InvalidBaseUrl { variable, reason } => {
                write!(f, "{variable} is not a usable base URL: {reason}")
            }
            Self::InvalidApiKey { variable } => {
                let name = variable.unwrap_or("the API key");
                write!(f, "{name} must be non-empty visible ASCII without spaces")
            }
            Self::Invalid { variable, value, expected } => {
                write!(f, "{variable} must be {expected}, not {value:?}")
            }
            Self::Client(message) => write!(f, "the HTTP client could not be built: {message}"),
            Self::TooManyConnections { requested, max } => {
                write!(f, "HTTP/2 over {requested} connections asks for more than the {max} allowed")
            }
        }
    }
}

impl std::error::Error for ConfigError {}

/// An unconfigured endpoint cannot be reached: as a transport error it is `Unavailable`, so a
/// host that runs anyway ends with `ProviderUnavailable`.
impl From<ConfigError> for TransportError {
    fn from(error: ConfigError) -> Self {
        Self::unavailable(format!("the endpoint is not configured: {error}"))
    }
}

/// What a timeout variable must hold.
const TIMEOUT: &str = "a positive whole number of seconds";
/// What a switch variable must hold.
const SWITCH: &str = "on or off";

/// Where settings are read from: the process environment, or a lookup of the host's own.
///
/// ```
/// use loopbound_provider::{ConfigError, Variables};
/// use std::time::Duration;
///
/// let pairs = [("MY_URL", " http://h/v1 "), ("MY_TIMEOUT", "30"), ("MY_EMPTY", "  ")];
/// let settings = Variables::lookup(|name| {
///     pairs.iter().find(|(key, _)| *key == name).map(|(_, value)| (*value).to_owned())
/// });
/// assert_eq!(settings.require("MY_URL")?, "http://h/v1");
/// assert_eq!(settings.get("MY_EMPTY")?, None);
/// assert_eq!(settings.timeout("MY_TIMEOUT")?, Some(Duration::from_secs(30)));
/// assert_eq!(settings.require("MY_MODEL"), Err(ConfigError::Missing { variable: "MY_MODEL" }));
/// # Ok::<(), ConfigError>(())
/// ```
pub struct Variables<'a> {
    read: Box<dyn Fn(&'static str) -> Result<Option<String>, ConfigError> + 'a>,
}

impl fmt::Debug for Variables<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Variables").finish_non_exhaustive()
    }
}

impl Variables<'static> {
    /// The process environment.
    #[must_use]
    pub fn env() -> Self {
        Self {
            read: Box::new(|variable| match std::env::var(variable) {
                Ok(value) => Ok(Some(value)),
                Err(std::env::VarError::NotPresent) => Ok(None),
                Err(std::env::VarError::NotUnicode(_)) => Err(ConfigError::NotUnicode { variable }),
            }),
        }
    }
}

impl<'a> Variables<'a> {
    /// The values `lookup` gives (for tests, and hosts with their own settings store).
    pub fn lookup(lookup: impl Fn(&str) -> Option<String> + 'a) -> Self {
        Self { read: Box::new(move |variable| Ok(lookup(variable))) }
    }

    /// The value of `variable`, trimmed; `None` when it is unset or blank.
    ///
    /// # Errors
    ///
    /// [`ConfigError::NotUnicode`].
    pub fn get(&self, variable: &'static str) -> Result<Option<String>, ConfigError> {
        let value = (self.read)(variable)?;
        Ok(value.map(|text| text.trim().to_owned()).filter(|text| !text.is_empty()))
    }

    /// The value of `variable`, which must be set.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Missing`] or [`ConfigError::NotUnicode`].
    pub fn require(&self, variable: &'static str) -> Result<String, ConfigError> {
        self.get(variable)?.ok_or(ConfigError::Missing { variable })
    }

    /// The value of `variable` read by `parse`, which says `expected` when it refuses it.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] when `parse` refuses the value.
    pub fn parsed<T>(
        &self,
        variable: &'static str,
        expected: &'static str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<Option<T>, ConfigError> {
        let Some(value) = self.get(variable)? else { return Ok(None) };
        match parse(&value) {
            Some(parsed) => Ok(Some(parsed)),
            None => Err(ConfigError::Invalid { variable, value, expected }),
        }
    }

    /// The API key in `variable`, if one is set.
    ///
    /// # Errors
    ///
    /// [`ConfigError::InvalidApiKey`] naming the variable, never quoting the key.
    pub fn api_key(&self, variable: &'static str) -> Result<Option<ApiKey>, ConfigError> {
        let Some(key) = self.get(variable)? else { return Ok(None) };
        ApiKey::new(key).map(Some).map_err(|_| ConfigError::InvalidApiKey { variable: Some(variable) })
    }

    /// A timeout in whole seconds, at least one.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] for anything but a positive whole number.
    pub fn timeout(&self, variable: &'static str) -> Result<Option<Duration>, ConfigError> {
        self.parsed(variable, TIMEOUT, |text| {
            text.parse::<u64>().ok().filter(|seconds| *seconds > 0).map(Duration::from_secs)
        })
    }

    /// A switch: `on`, `true`, `yes`, `1` or `off`, `false`, `no`, `0`, in any case.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] for anything else.
    pub fn switch(&self, variable: &'static str) -> Result<Option<bool>, ConfigError> {
        self.parsed(variable, SWITCH, |text| match text.to_ascii_lowercase().as_str() {
            "1" | "on" | "true" | "yes" => Some(true),
            "0" | "off" | "false" | "no" => Some(false),
            _ => None,
        })
    }
}

/// A lookup of fixed `pairs` of variable and value, for [`Variables::lookup`] and the
/// configurations' `from_lookup` (hosts with fixed settings, and tests).
///
/// ```
/// let lookup = loopbound_provider::config::pairs(&[("MY_MODEL", "small")]);
/// assert_eq!((lookup("MY_MODEL").as_deref(), lookup("OTHER")), (Some("small"), None));
/// ```
pub fn pairs<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    |name| pairs.iter().find(|(variable, _)| *variable == name).map(|(_, value)| (*value).to_owned())
}

/// Checks a base URL: `http` or `https`, a host, no credentials, query or fragment. `variable`
/// names where it comes from, `key_variable` where credentials belong instead.
///
/// ```
/// use loopbound_provider::config::base_url;
///
/// assert_eq!(base_url("http://127.0.0.1:8080/v1", "URL", "KEY")?.as_str(), "http://127.0.0.1:8080/v1");
/// let refused = base_url("http://user:pw@host/v1", "URL", "KEY").unwrap_err();
/// assert_eq!(refused.to_string(), "URL is not a usable base URL: credentials in the URL are refused; set KEY instead");
/// # Ok::<(), loopbound_provider::ConfigError>(())
/// ```
///
/// # Errors
///
/// [`ConfigError::InvalidBaseUrl`] with the reason.
pub fn base_url(text: &str, variable: &'static str, key_variable: &str) -> Result<Url, ConfigError> {
    let invalid = |reason: String| ConfigError::InvalidBaseUrl { variable, reason };
    let url = Url::parse(text).map_err(|error| invalid(error.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid("the scheme must be http or https".to_owned()));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid(format!("credentials in the URL are refused; set {key_variable} instead")));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(invalid("the URL must not have a query or a fragment".to_owned()));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(invalid("the URL has no host".to_owned()));
    }
    Ok(url)
}

/// The variables a provider reads its [`Connection`] from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Names {
    /// The base URL's variable.
    pub base_url: &'static str,
    /// The model's variable.
    pub model: &'static str,
    /// The API key's variable.
    pub api_key: &'static str,
    /// The timeout's variable.
    pub timeout: &'static str,
}

/// Where and how to reach one provider's endpoint: its base URL, the model, an optional API key
/// and an optional timeout. What every provider's configuration holds; each adds its own.
///
/// ```
/// use loopbound_provider::config::{Connection, Names};
///
/// let names = Names { base_url: "URL", model: "MODEL", api_key: "KEY", timeout: "TIMEOUT" };
/// let connection = Connection::new("http://127.0.0.1:8080/v1", "small", &names)?;
/// assert_eq!(connection.endpoint("messages").as_str(), "http://127.0.0.1:8080/v1/messages");
/// assert_eq!(Connection::new("http://h/v1", " ", &names).unwrap_err().to_string(), "MODEL is not set (or is empty)");
/// # Ok::<(), loopbound_provider::ConfigError>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Connection {
    base_url: Url,
    model: String,
    api_key: Option<ApiKey>,
    timeout: Option<Duration>,
    http: HttpVersion,
    direct: bool,
}

/// The HTTP version a connection speaks, and over how many connections its requests spread.
///
/// HTTP/1.1 (the default) holds one connection per request in flight, each with its own
/// buffers and task: a service with thousands of calls waiting holds thousands of sockets.
/// HTTP/2 carries many requests on one connection. A server limits the requests in flight on
/// one HTTP/2 connection (`SETTINGS_MAX_CONCURRENT_STREAMS`, often 100 to 256), and the client
/// never opens a second connection to get past that limit: requests beyond it wait. So
/// `Http2 { connections }` opens that many connections and sends each request on the next one
/// in turn; choose `connections` ≥ the calls you expect in flight ÷ the provider's limit, at
/// most [`HttpVersion::MAX_CONNECTIONS`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum HttpVersion {
    /// HTTP/1.1 only: one connection for each request in flight, reused once its response has
    /// been read to its end. For `http://`, hyper's connections are driven directly, without
    /// the pooled client's per-request layers (unless the environment names a proxy).
    #[default]
    Http1,
    /// HTTP/2 over `connections` connections, requests spread over them in turn: negotiated
    /// by TLS (ALPN) for `https://`, spoken without negotiation ("prior knowledge") for
    /// `http://`, so a cleartext server must speak HTTP/2. Cleartext connections are driven
    /// directly, without the pooled client's per-request layers (unless the environment names
    /// a proxy): a call in flight keeps about 8 KB less (a connection that closes is opened
    /// again by the next request).
    Http2 {
        /// How many connections the requests spread over.
        connections: std::num::NonZeroUsize,
    },
}

impl HttpVersion {
    /// The most connections `Http2 { connections }` may ask for. Each carries many calls at
    /// once (a provider typically allows 100 or more streams on one), so this is room for
    /// thousands of calls in flight; a count above it is a [`ConfigError::TooManyConnections`]
    /// when the transport is built.
    pub const MAX_CONNECTIONS: usize = 64;
}

impl Connection {
    /// A connection to the endpoint at `base_url` for `model`, without a key or timeout; `names`
    /// are the variables errors name.
    ///
    /// # Errors
    ///
    /// [`ConfigError::InvalidBaseUrl`], or [`ConfigError::Missing`] for an empty model.
    pub fn new(base_url: &str, model: impl Into<String>, names: &Names) -> Result<Self, ConfigError> {
        let model = model.into();
        if model.trim().is_empty() {
            return Err(ConfigError::Missing { variable: names.model });
        }
        let base_url = self::base_url(base_url, names.base_url, names.api_key)?;
        Ok(Self { base_url, model, api_key: None, timeout: None, http: HttpVersion::Http1, direct: true })
    }

    /// The connection the variables `names` hold in `settings`: the base URL and the model are
    /// required, the key and the timeout optional.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the variable that is missing or invalid.
    pub fn read(settings: &Variables<'_>, names: &Names) -> Result<Self, ConfigError> {
        let base_url = settings.require(names.base_url)?;
        let model = settings.require(names.model)?;
        let mut connection = Self::new(&base_url, model, names)?;
        connection.api_key = settings.api_key(names.api_key)?;
        connection.timeout = settings.timeout(names.timeout)?;
        Ok(connection)
    }

    /// Sets the API key.
    pub fn set_api_key(&mut self, key: ApiKey) {
        self.api_key = Some(key);
    }

    /// Sets the per-request timeout (connection, then whole response).
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = Some(timeout);
    }

    /// Sets the HTTP version and how many connections requests spread over.
    pub fn set_http(&mut self, http: HttpVersion) {
        self.http = http;
    }

    /// The HTTP version requests are sent with.
    #[must_use]
    pub fn http(&self) -> HttpVersion {
        self.http
    }

    /// Sets whether `http://` requests go on the connections this crate drives itself (the
    /// default, `true`) or through `reqwest`'s pooled client (`false`), as `https://` requests
    /// and requests through a proxy named in the environment always do.
    ///
    /// The direct connections keep less per call in flight (at 10,000 waiting calls over
    /// HTTP/1.1, about 26.5 KiB against 34 KiB, and a third less CPU; see the performance page);
    /// the pooled client is the fallback for a server the direct path does not suit.
    pub fn set_direct(&mut self, direct: bool) {
        self.direct = direct;
    }

    /// Whether `http://` requests go on the connections this crate drives itself (see
    /// [`Connection::set_direct`]).
    #[must_use]
    pub fn direct(&self) -> bool {
        self.direct
    }

    /// The base URL.
    #[must_use]
    pub fn base_url(&self) -> &Url {
        &self.base_url
    }

    /// The base URL with `path` appended (e.g. `chat/completions`).
    #[must_use]
    pub fn endpoint(&self, path: &str) -> Url {
        endpoint(&self.base_url, path)
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
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("base_url", &self.base_url.as_str())
            .field("model", &self.model)
            .field("api_key", &self.api_key)
            .field("timeout", &self.timeout)
            .field("http", &self.http)
            .field("direct", &self.direct)
            .finish()
    }
}

/// `base` with `path` (e.g. `messages`) appended to its path, one slash between them.
#[must_use]
pub fn endpoint(base: &Url, path: &str) -> Url {
    let mut endpoint = base.clone();
    endpoint.set_path(&format!("{}/{path}", base.path().trim_end_matches('/')));
    endpoint
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings<'a>(fixed: &'a [(&'a str, &'a str)]) -> Variables<'a> {
        Variables::lookup(pairs(fixed))
    }

    #[test]
    fn timeouts_and_switches_are_checked_and_their_errors_quote_the_value() {
        for value in ["0", "-1", "1.5", "soon"] {
            assert_eq!(
                settings(&[("T", value)]).timeout("T"),
                Err(ConfigError::Invalid { variable: "T", value: value.to_owned(), expected: TIMEOUT })
            );
        }
        assert_eq!(settings(&[("T", " 7 ")]).timeout("T"), Ok(Some(Duration::from_secs(7))));
        assert_eq!(settings(&[("S", "OFF")]).switch("S"), Ok(Some(false)));
        assert_eq!(settings(&[("S", "yes")]).switch("S"), Ok(Some(true)));
        let error = settings(&[("S", "maybe")]).switch("S").unwrap_err();
        assert_eq!(error.to_string(), "S must be on or off, not \"maybe\"");
    }

    #[test]
    fn a_bad_key_names_its_variable_and_never_quotes_the_key() {
        let secret = "sk-very-secret-value with space";
        let error = settings(&[("K", secret)]).api_key("K").unwrap_err();
        assert_eq!(error, ConfigError::InvalidApiKey { variable: Some("K") });
        let text = format!("{error} {error:?}");
        assert!(!text.contains("sk-very"), "{text}");
        assert_eq!(error.to_string(), "K must be non-empty visible ASCII without spaces");
    }

    #[test]
    fn unusable_base_urls_are_refused_with_a_reason() {
        for (url, reason) in [
            ("localhost:8080/v1", "the scheme must be http or https"),
            ("ftp://host/v1", "the scheme must be http or https"),
            ("http://user:pw@host/v1", "credentials in the URL are refused; set K instead"),
            ("http://host/v1?key=1", "the URL must not have a query or a fragment"),
            ("not a url", "relative URL without a base"),
        ] {
            assert_eq!(
                base_url(url, "U", "K"),
                Err(ConfigError::InvalidBaseUrl { variable: "U", reason: reason.to_owned() }),
                "{url}"
            );
        }
    }

    #[test]
    fn endpoints_join_the_base_path_with_one_slash() {
        let base = |text| base_url(text, "U", "K").unwrap();
        assert_eq!(endpoint(&base("http://h/v1/"), "messages").as_str(), "http://h/v1/messages");
        assert_eq!(endpoint(&base("http://h:1"), "chat/completions").as_str(), "http://h:1/chat/completions");
    }

    #[test]
    fn an_unconfigured_endpoint_is_an_unavailable_provider() {
        let error: TransportError = ConfigError::Missing { variable: "U" }.into();
        assert_eq!(
            error,
            TransportError::unavailable("the endpoint is not configured: U is not set (or is empty)")
        );
    }
}
