//! The host's labels on a run: a few short key-value pairs (a tenant, a user), written when the
//! run is created, by which a host lists its runs.
//!
//! # Invariants
//!
//! - At most [`MAX_LABELS`] labels, one value per key; a key is 1 to [`MAX_LABEL_KEY_LEN`]
//!   bytes of `a-z 0-9 _ . -`, a value 1 to [`MAX_LABEL_VALUE_LEN`] bytes without a control
//!   character. Anything else is refused with [`JournalError::InvalidLabel`] before anything is
//!   written, and a stored label outside these bounds is [`Corrupt`](JournalError::Corrupt).
//! - Labels name the run for the host; they are not arguments and not secrets. They appear in
//!   listings and in the record, never in events.

use std::collections::BTreeMap;
use std::fmt;

use super::error::JournalError;
use super::row::LabelRow;

/// Most labels one run carries.
pub const MAX_LABELS: usize = 8;
/// Longest label key, in bytes.
pub const MAX_LABEL_KEY_LEN: usize = 32;
/// Longest label value, in bytes.
pub const MAX_LABEL_VALUE_LEN: usize = 128;

/// The labels of one run, by key.
///
/// ```
/// use loopbound::journal::Labels;
///
/// let labels = Labels::new().with("tenant", "acme")?.with("user", "u-17")?;
/// assert_eq!(labels.get("tenant"), Some("acme"));
/// assert_eq!(labels.to_string(), "tenant=acme user=u-17");
/// assert!(Labels::new().with("Tenant", "acme").is_err());
/// # Ok::<(), loopbound::journal::JournalError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Labels(BTreeMap<String, String>);

/// Whether `key` may be a label's key.
pub(crate) fn valid_key(key: &str) -> bool {
    (1..=MAX_LABEL_KEY_LEN).contains(&key.len())
        && key
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'.' | b'-'))
}

/// Whether `value` may be a label's value.
pub(crate) fn valid_value(value: &str) -> bool {
    (1..=MAX_LABEL_VALUE_LEN).contains(&value.len()) && !value.chars().any(char::is_control)
}

impl Labels {
    /// No label.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// These labels with `key` set to `value` (replacing its value, if any).
    ///
    /// # Errors
    ///
    /// [`JournalError::InvalidLabel`] for a key or value out of bounds, or a label beyond
    /// [`MAX_LABELS`].
    pub fn with(mut self, key: &str, value: &str) -> Result<Self, JournalError> {
        self.insert(key, value)?;
        Ok(self)
    }

    /// Sets `key` to `value`.
    ///
    /// # Errors
    ///
    /// As [`with`](Self::with); nothing changes then.
    pub fn insert(&mut self, key: &str, value: &str) -> Result<(), JournalError> {
        let full = self.0.len() >= MAX_LABELS && !self.0.contains_key(key);
        if !valid_key(key) || !valid_value(value) || full {
            return Err(JournalError::InvalidLabel);
        }
        self.0.insert(key.to_owned(), value.to_owned());
        Ok(())
    }

    /// The value of `key`.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// Every label, by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(key, value)| (key.as_str(), value.as_str()))
    }

    /// How many labels there are.
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there is none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The labels as a backend stores them.
    pub(crate) fn to_rows(&self) -> Vec<LabelRow> {
        self.iter().map(|(key, value)| LabelRow { key: key.to_owned(), value: value.to_owned() }).collect()
    }

    /// The labels a backend stored, checked.
    pub(crate) fn from_rows(rows: &[LabelRow]) -> Result<Self, JournalError> {
        let mut labels = Self::new();
        for row in rows {
            if labels.0.contains_key(&row.key) || labels.insert(&row.key, &row.value).is_err() {
                return Err(JournalError::Corrupt("the run's labels".to_owned()));
            }
        }
        Ok(labels)
    }
}

impl fmt::Display for Labels {
    /// `key=value` pairs by key, separated by spaces.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, (key, value)) in self.iter().enumerate() {
            if index > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{key}={value}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_refused_and_nothing_changes() {
        let mut labels = Labels::new();
        for (key, value) in [
            ("", "v"),
            ("k", ""),
            ("K", "v"),
            ("a b", "v"),
            ("k", "line\nbreak"),
            (&"k".repeat(33), "v"),
            ("k", &"v".repeat(129)),
        ] {
            assert_eq!(labels.insert(key, value), Err(JournalError::InvalidLabel), "{key:?}={value:?}");
        }
        assert!(labels.is_empty());
        for n in 0..MAX_LABELS {
            labels.insert(&format!("k{n}"), "v").unwrap();
        }
        assert_eq!(labels.insert("one-more", "v"), Err(JournalError::InvalidLabel));
        assert_eq!(labels.insert("k0", "replaced"), Ok(()), "an existing key is replaced, not added");
        assert_eq!((labels.len(), labels.get("k0")), (MAX_LABELS, Some("replaced")));
        labels.insert(&"k".repeat(32), "x").unwrap_err();
    }

    #[test]
    fn rows_round_trip_and_a_repeated_key_is_corrupt() {
        let labels = Labels::new().with("user", "u-1").unwrap().with("tenant", "é.acme").unwrap();
        assert_eq!(Labels::from_rows(&labels.to_rows()), Ok(labels));
        let twice = [
            LabelRow { key: "k".into(), value: "a".into() },
            LabelRow { key: "k".into(), value: "b".into() },
        ];
        assert!(matches!(Labels::from_rows(&twice), Err(JournalError::Corrupt(_))));
    }
}
