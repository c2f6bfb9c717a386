//! The API key: a secret that prints as `[redacted]` and is read only to build a request header
//! and the [`Redactor`](crate::Redactor).
//!
//! # Invariants
//!
//! - A key is non-empty visible ASCII (no space, no control character), so it fits in an HTTP
//!   header and every run of its characters is made of whole characters of any text.
//! - `Debug` and `Display` print [`REDACTED`]; no error of this crate quotes a key.
//! - The header built from a key is marked sensitive, so HTTP stacks that log headers leave it
//!   out.

use std::fmt;

use reqwest::header::HeaderValue;

use crate::config::ConfigError;

/// Text printed in place of a secret.
pub const REDACTED: &str = "[redacted]";

/// A secret API key. It prints as `[redacted]`.
///
/// ```
/// use loopbound_provider::ApiKey;
///
/// let key = ApiKey::new("sk-0123456789")?;
/// assert_eq!(format!("{key} {key:?}"), "[redacted] [redacted]");
/// assert!(ApiKey::new("two words").is_err());
/// # Ok::<(), loopbound_provider::ConfigError>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps `key`, which must be non-empty visible ASCII (it travels in an HTTP header).
    ///
    /// # Errors
    ///
    /// [`ConfigError::InvalidApiKey`] (without a variable), which does not quote the key.
    pub fn new(key: impl Into<String>) -> Result<Self, ConfigError> {
        let key = key.into();
        if key.is_empty() || !key.bytes().all(|byte| byte.is_ascii_graphic()) {
            return Err(ConfigError::InvalidApiKey { variable: None });
        }
        Ok(Self(key))
    }

    /// The key itself. Only for a request header and for redaction: never print it.
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The key as a sensitive header value, after `scheme` and a space when one is given
    /// (`Bearer <key>`), or alone.
    ///
    /// # Errors
    ///
    /// [`ConfigError::InvalidApiKey`] if the value is not a valid header (it always is: the key
    /// is visible ASCII).
    pub fn header(&self, scheme: Option<&str>) -> Result<HeaderValue, ConfigError> {
        let text = match scheme {
            Some(scheme) => format!("{scheme} {}", self.0),
            None => self.0.clone(),
        };
        let mut value =
            HeaderValue::try_from(text).map_err(|_| ConfigError::InvalidApiKey { variable: None })?;
        value.set_sensitive(true);
        Ok(value)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_visible_ascii_and_their_header_is_sensitive() {
        for bad in ["", "a b", "tab\there", "é-key", "line\n"] {
            assert_eq!(ApiKey::new(bad), Err(ConfigError::InvalidApiKey { variable: None }), "{bad:?}");
        }
        let key = ApiKey::new("sk-123").unwrap();
        let bearer = key.header(Some("Bearer")).unwrap();
        assert_eq!(bearer.to_str().unwrap(), "Bearer sk-123");
        assert!(bearer.is_sensitive());
        assert_eq!(key.header(None).unwrap().to_str().unwrap(), "sk-123");
        assert!(!format!("{bearer:?}").contains("sk-123"), "a sensitive header's Debug hides it");
    }
}
