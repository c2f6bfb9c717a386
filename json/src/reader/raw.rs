//! serde_json's private one-entry maps that carry JSON text into its types: a number's exact
//! text into `serde_json::Number` (under `arbitrary_precision`) and a value's raw text into
//! `RawValue`.
//!
//! # Invariants
//!
//! - The map has exactly one entry, its key the marker serde_json's visitors look for and its
//!   value the text, handed to `visit_str` (the types that read it own their copy).

use serde::de::value::{BorrowedStrDeserializer, StrDeserializer};
use serde::de::{self, DeserializeSeed};

use super::error::Error;

/// A one-entry map `{marker: text}`.
#[derive(Debug)]
pub(super) struct RawText<'t> {
    marker: &'static str,
    text: Option<&'t str>,
}

impl<'t> RawText<'t> {
    pub(super) fn new(marker: &'static str, text: &'t str) -> Self {
        Self { marker, text: Some(text) }
    }
}

impl<'de> de::MapAccess<'de> for RawText<'_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Error> {
        if self.text.is_none() {
            return Ok(None);
        }
        seed.deserialize(BorrowedStrDeserializer::new(self.marker)).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        seed.deserialize(StrDeserializer::new(self.text.take().unwrap_or_default()))
    }
}
