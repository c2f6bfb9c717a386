//! Object keys handed to the input type: as strings, or read as the number or boolean the
//! key's type asks for (a map with integer keys).
//!
//! # Invariants
//!
//! - A key is a JSON string. When the type asks for a number, the key's whole decoded text must
//!   be one JSON number token, read by value like any number (`"42"`, `"4.2e1"` and `"42.0"`
//!   are the integer 42); when it asks for a boolean, `"true"` or `"false"`. Anything else is
//!   a type error that says a string was found.

use serde::de::{self, Visitor};

use super::de::{Deserializer, UnitVariant, Want, visit_number};
use super::error::{Category, Error};
use super::read::{Reader, Text};

type Result<T, E = Error> = std::result::Result<T, E>;

/// Deserializes the key whose opening quote is at the cursor.
pub(super) struct KeyDeserializer<'a, 'de> {
    de: &'a mut Deserializer<'de>,
}

impl<'a, 'de> KeyDeserializer<'a, 'de> {
    pub(super) fn new(de: &'a mut Deserializer<'de>) -> Self {
        Self { de }
    }

    fn number<V: Visitor<'de>>(self, want: Want, visitor: V) -> Result<V::Value> {
        let text = self.de.read.string(&mut self.de.scratch).map_err(Error::syntax)?;
        let content = text.as_str();
        let mut reader = Reader::new(content);
        match content.as_bytes().first() {
            Some(b'-' | b'0'..=b'9') => match reader.number() {
                Ok(token) if reader.position() == content.len() => visit_number(token, want, visitor),
                _ => Err(Error::invalid_type_of(Category::String, &visitor)),
            },
            _ => Err(Error::invalid_type_of(Category::String, &visitor)),
        }
    }
}

macro_rules! numbers {
    ($($method:ident => $want:expr),*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
            self.number($want, visitor)
        }
    )*};
}

impl<'de> de::Deserializer<'de> for KeyDeserializer<'_, 'de> {
    type Error = Error;

    #[inline]
    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.de.read.string(&mut self.de.scratch).map_err(Error::syntax)? {
            Text::Borrowed(text) => visitor.visit_borrowed_str(text),
            Text::Copied(text) => visitor.visit_str(text),
        }
    }

    numbers!(
        deserialize_i8 => Want::Int64, deserialize_i16 => Want::Int64, deserialize_i32 => Want::Int64,
        deserialize_i64 => Want::Int64, deserialize_u8 => Want::Int64, deserialize_u16 => Want::Int64,
        deserialize_u32 => Want::Int64, deserialize_u64 => Want::Int64, deserialize_i128 => Want::Int128,
        deserialize_u128 => Want::Int128, deserialize_f32 => Want::F32, deserialize_f64 => Want::F64
    );

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.de.read.string(&mut self.de.scratch).map_err(Error::syntax)?.as_str() {
            "true" => visitor.visit_bool(true),
            "false" => visitor.visit_bool(false),
            _ => Err(Error::invalid_type_of(Category::String, &visitor)),
        }
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.de.read.string(&mut self.de.scratch).map_err(Error::syntax)? {
            Text::Borrowed(text) => visitor.visit_borrowed_bytes(text.as_bytes()),
            Text::Copied(text) => visitor.visit_bytes(text.as_bytes()),
        }
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_bytes(visitor)
    }

    /// A key is never null.
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        visitor.visit_enum(UnitVariant { de: self.de })
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.de.read.string(&mut self.de.scratch).map_err(Error::syntax)?;
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        char str string unit unit_struct seq tuple tuple_struct map struct identifier
    }
}
