//! The serde `Deserializer` over JSON text: values are handed to the input type's visitors as
//! they are read, strings borrowed from the text when they hold no escape, with no
//! intermediate tree.
//!
//! # Invariants
//!
//! - Numbers are read by value (see [`number`](super::number)): an integer field takes any
//!   spelling of an integer (`42`, `42.0`, `4.2e1`), a float field the correctly rounded
//!   nearest float. `deserialize_any` hands an integer that fits 64 bits to `visit_u64` /
//!   `visit_i64` and anything else to `visit_f64`; with the `exact-numbers` feature, a number
//!   that no machine number holds exactly goes to serde_json's private number map instead, so
//!   that a `serde_json::Value` keeps its exact text.
//! - Every array and object the type reads counts one level; past
//!   [`MAX_DEPTH`](crate::canonical::MAX_DEPTH) the error is `TooDeep`, before any deeper
//!   recursion. Values the type ignores are skipped by [`Reader::skip_value`], at any depth,
//!   without recursion.
//! - An error that leaves a value gains that value's path segment on its way out; keys are
//!   named only when the type declares them (see [`path`](super::path)).

use serde::de::{self, DeserializeSeed, Expected, Unexpected, Visitor};

use super::error::{Category, Error, Problem, Syntax, SyntaxCode};
use super::key::KeyDeserializer;
use super::number::{self, Integer};
use super::path::Segment;
use super::read::{Reader, Text, Token};
use super::{RAW_VALUE_TOKEN, raw::RawText};
use crate::canonical::MAX_DEPTH;

type Result<T, E = Error> = std::result::Result<T, E>;

/// Reads one JSON value from text into a type.
#[derive(Debug)]
pub(crate) struct Deserializer<'de> {
    pub(super) read: Reader<'de>,
    text: &'de str,
    pub(super) scratch: String,
    depth: usize,
}

/// The kind of number a deserialize call asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Want {
    Any,
    /// An integer of at most 64 bits.
    Int64,
    /// An integer of up to 128 bits.
    Int128,
    F32,
    F64,
}

impl<'de> Deserializer<'de> {
    pub(crate) fn new(text: &'de str) -> Self {
        Self { read: Reader::new(text), text, scratch: String::new(), depth: 0 }
    }

    pub(super) fn syntax(&self, code: SyntaxCode) -> Error {
        Error::syntax(Syntax { code, at: self.read.position() })
    }

    /// The first byte of the next value; the end of the text is an error.
    #[inline]
    fn peek_value(&mut self) -> Result<u8> {
        self.read.peek().ok_or_else(|| self.syntax(SyntaxCode::Eof))
    }

    /// Opens one level of nesting.
    #[inline]
    fn enter(&mut self) -> Result<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH { Err(Error::too_deep()) } else { Ok(()) }
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    /// The error for a value of the wrong kind at the cursor: its category, or the syntax
    /// error if no value starts here.
    #[cold]
    fn type_error(&mut self, expected: &dyn Expected) -> Error {
        let category = match self.read.peek() {
            Some(b'"') => Category::String,
            Some(b'[') => Category::Array,
            Some(b'{') => Category::Object,
            Some(b't' | b'f') => Category::Bool,
            Some(b'n') => Category::Null,
            Some(b'-' | b'0'..=b'9') => match self.read.number() {
                Ok(token) if number::integer(token) == Integer::Fraction => Category::Float,
                Ok(_) => Category::Integer,
                Err(syntax) => return Error::syntax(syntax),
            },
            Some(_) => return self.syntax(SyntaxCode::ExpectedValue),
            None => return self.syntax(SyntaxCode::Eof),
        };
        Error::invalid_type_of(category, expected)
    }

    fn literal(&mut self, word: &'static [u8]) -> Result<()> {
        self.read.literal(word).map_err(Error::syntax)
    }

    /// The string at the cursor, to `visitor`.
    #[inline]
    fn string<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value> {
        match self.read.string(&mut self.scratch).map_err(Error::syntax)? {
            Text::Borrowed(text) => visitor.visit_borrowed_str(text),
            Text::Copied(text) => visitor.visit_str(text),
        }
    }

    /// The number at the cursor, to `visitor`.
    #[inline]
    fn number<V: Visitor<'de>>(&mut self, want: Want, visitor: V) -> Result<V::Value> {
        let token = self.read.number().map_err(Error::syntax)?;
        visit_number(token, want, visitor)
    }

    /// The array at the cursor, to `visitor`.
    fn seq<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value> {
        self.read.bump();
        self.enter()?;
        let value = visitor.visit_seq(Elements { de: self, index: 0 })?;
        self.close(b']')?;
        self.leave();
        Ok(value)
    }

    /// The object at the cursor, to `visitor`; `fields` are the names the type declares.
    #[inline]
    fn map<V: Visitor<'de>>(&mut self, fields: &'static [&'static str], visitor: V) -> Result<V::Value> {
        self.read.bump();
        self.enter()?;
        let value = visitor.visit_map(Entries { de: self, first: true, fields, key_at: 0 })?;
        self.close(b'}')?;
        self.leave();
        Ok(value)
    }

    /// Consumes the end of a container the visitor has finished reading. Anything else is more
    /// than the type reads (or, if the text is not JSON, found to be so by the caller).
    #[inline]
    fn close(&mut self, end: u8) -> Result<()> {
        match self.read.peek() {
            Some(byte) if byte == end => {
                self.read.bump();
                Ok(())
            }
            Some(_) => Err(Error::new(Problem::TooMany)),
            None => Err(self.syntax(SyntaxCode::Eof)),
        }
    }

    /// The raw text of the value at the cursor, for serde_json's `RawValue`.
    fn raw<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value> {
        self.read.peek();
        let start = self.read.position();
        self.read.skip_value(Some(MAX_DEPTH - self.depth)).map_err(Error::syntax)?;
        let text = self.text.get(start..self.read.position()).unwrap_or_default();
        visitor.visit_map(RawText::new(RAW_VALUE_TOKEN, text))
    }
}

/// Hands a number token to `visitor` as the kind `want` asks for.
#[inline]
pub(super) fn visit_number<'de, V: Visitor<'de>>(
    token: Token<'_>,
    want: Want,
    visitor: V,
) -> Result<V::Value> {
    match want {
        Want::Int64 | Want::Int128 => match number::integer(token) {
            Integer::U64(value) => visitor.visit_u64(value),
            Integer::I64(value) => visitor.visit_i64(value),
            Integer::U128(value) if want == Want::Int128 => visitor.visit_u128(value),
            Integer::I128(value) if want == Want::Int128 => visitor.visit_i128(value),
            Integer::U128(_) | Integer::I128(_) | Integer::TooLarge => Err(Error::out_of_range(&visitor)),
            Integer::Fraction => Err(Error::invalid_type_of(Category::Float, &visitor)),
        },
        Want::F64 => match number::float(token) {
            Some(value) => visitor.visit_f64(value),
            None => Err(Error::out_of_range(&visitor)),
        },
        Want::F32 => match number::float32(token) {
            Some(value) => visitor.visit_f32(value),
            None => Err(Error::out_of_range(&visitor)),
        },
        Want::Any => any_number(token, visitor),
    }
}

/// A number for `deserialize_any`: a 64-bit integer when it is one, else the nearest float.
#[cfg(not(feature = "exact-numbers"))]
fn any_number<'de, V: Visitor<'de>>(token: Token<'_>, visitor: V) -> Result<V::Value> {
    match number::integer(token) {
        Integer::U64(value) => visitor.visit_u64(value),
        Integer::I64(value) => visitor.visit_i64(value),
        _ => match number::float(token) {
            Some(value) => visitor.visit_f64(value),
            None => Err(Error::out_of_range(&visitor)),
        },
    }
}

/// A number for `deserialize_any`, kept exact: an integer of up to 128 bits, else a float that
/// holds exactly the token's decimal value, else serde_json's private number map, which carries
/// the token's text into a `serde_json::Value`.
#[cfg(feature = "exact-numbers")]
fn any_number<'de, V: Visitor<'de>>(token: Token<'_>, visitor: V) -> Result<V::Value> {
    match number::integer(token) {
        Integer::U64(value) => visitor.visit_u64(value),
        Integer::I64(value) => visitor.visit_i64(value),
        Integer::U128(value) => visitor.visit_u128(value),
        Integer::I128(value) => visitor.visit_i128(value),
        Integer::TooLarge | Integer::Fraction => match number::float(token) {
            Some(value) if float_is_exact(token, value) => visitor.visit_f64(value),
            _ => visitor.visit_map(RawText::new(super::NUMBER_TOKEN, token.text)),
        },
    }
}

/// Whether `value`'s shortest text denotes the token's decimal value.
#[cfg(feature = "exact-numbers")]
fn float_is_exact(token: Token<'_>, value: f64) -> bool {
    let (mut written, mut shortest) = (String::new(), String::new());
    crate::canonical::write_number(&mut written, token.text);
    crate::canonical::write_number(&mut shortest, ryu::Buffer::new().format_finite(value));
    written == shortest
}

macro_rules! numbers {
    ($($method:ident => $want:expr),*) => {$(
        #[inline]
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
            match self.peek_value()? {
                b'-' | b'0'..=b'9' => self.number($want, visitor),
                _ => Err(self.type_error(&visitor)),
            }
        }
    )*};
}

impl<'de> de::Deserializer<'de> for &mut Deserializer<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.peek_value()? {
            b'n' => {
                self.literal(b"null")?;
                visitor.visit_unit()
            }
            b't' => {
                self.literal(b"true")?;
                visitor.visit_bool(true)
            }
            b'f' => {
                self.literal(b"false")?;
                visitor.visit_bool(false)
            }
            b'"' => self.string(visitor),
            b'[' => self.seq(visitor),
            b'{' => self.map(&[], visitor),
            b'-' | b'0'..=b'9' => self.number(Want::Any, visitor),
            _ => Err(self.syntax(SyntaxCode::ExpectedValue)),
        }
    }

    numbers!(
        deserialize_i8 => Want::Int64, deserialize_i16 => Want::Int64, deserialize_i32 => Want::Int64,
        deserialize_i64 => Want::Int64, deserialize_u8 => Want::Int64, deserialize_u16 => Want::Int64,
        deserialize_u32 => Want::Int64, deserialize_u64 => Want::Int64, deserialize_i128 => Want::Int128,
        deserialize_u128 => Want::Int128, deserialize_f32 => Want::F32, deserialize_f64 => Want::F64
    );

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.peek_value()? {
            b't' => {
                self.literal(b"true")?;
                visitor.visit_bool(true)
            }
            b'f' => {
                self.literal(b"false")?;
                visitor.visit_bool(false)
            }
            _ => Err(self.type_error(&visitor)),
        }
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_str(visitor)
    }

    #[inline]
    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.peek_value()? {
            b'"' => self.string(visitor),
            _ => Err(self.type_error(&visitor)),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.peek_value()? {
            b'"' => match self.read.string(&mut self.scratch).map_err(Error::syntax)? {
                Text::Borrowed(text) => visitor.visit_borrowed_bytes(text.as_bytes()),
                Text::Copied(text) => visitor.visit_bytes(text.as_bytes()),
            },
            b'[' => self.seq(visitor),
            _ => Err(self.type_error(&visitor)),
        }
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.peek_value()? {
            b'n' => {
                self.literal(b"null")?;
                visitor.visit_none()
            }
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.peek_value()? {
            b'n' => {
                self.literal(b"null")?;
                visitor.visit_unit()
            }
            _ => Err(self.type_error(&visitor)),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(self, _name: &'static str, visitor: V) -> Result<V::Value> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, name: &'static str, visitor: V) -> Result<V::Value> {
        if name == RAW_VALUE_TOKEN {
            return self.raw(visitor);
        }
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.peek_value()? {
            b'[' => self.seq(visitor),
            _ => Err(self.type_error(&visitor)),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.peek_value()? {
            b'{' => self.map(&[], visitor),
            _ => Err(self.type_error(&visitor)),
        }
    }

    #[inline]
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        match self.peek_value()? {
            b'{' => self.map(fields, visitor),
            // serde_json reads a struct from an array of its fields too.
            b'[' => self.seq(visitor),
            _ => Err(self.type_error(&visitor)),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        match self.peek_value()? {
            b'"' => visitor.visit_enum(UnitVariant { de: self }),
            b'{' => {
                self.read.bump();
                if self.read.peek() == Some(b'}') {
                    return Err(Error::invalid_type_of(Category::Object, &visitor));
                }
                self.enter()?;
                let key_at = self.read.position();
                let value = visitor.visit_enum(Variant { de: &mut *self, variants, key_at })?;
                self.close(b'}')?;
                self.leave();
                Ok(value)
            }
            _ => Err(self.type_error(&visitor)),
        }
    }

    #[inline]
    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_str(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.read.skip_value(None).map_err(Error::syntax)?;
        visitor.visit_unit()
    }
}

/// The elements of an array.
struct Elements<'a, 'de> {
    de: &'a mut Deserializer<'de>,
    index: usize,
}

impl<'de> de::SeqAccess<'de> for Elements<'_, 'de> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        match self.de.read.peek() {
            Some(b']') => return Ok(None),
            Some(b',') if self.index > 0 => self.de.read.bump(),
            Some(_) if self.index == 0 => {}
            Some(_) => return Err(self.de.syntax(SyntaxCode::ExpectedCommaOrBracket)),
            None => return Err(self.de.syntax(SyntaxCode::Eof)),
        }
        let index = self.index;
        self.index += 1;
        seed.deserialize(&mut *self.de).map(Some).map_err(|error| error.within(Segment::Index(index)))
    }
}

/// The entries of an object.
struct Entries<'a, 'de> {
    de: &'a mut Deserializer<'de>,
    first: bool,
    /// The field names the type declares (none for a map).
    fields: &'static [&'static str],
    /// Where the current key's string starts.
    key_at: usize,
}

impl<'de> de::MapAccess<'de> for Entries<'_, 'de> {
    type Error = Error;

    #[inline]
    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        match self.de.read.peek() {
            Some(b'}') => return Ok(None),
            Some(b',') if !self.first => self.de.read.bump(),
            Some(_) if self.first => {}
            Some(_) => return Err(self.de.syntax(SyntaxCode::ExpectedCommaOrBrace)),
            None => return Err(self.de.syntax(SyntaxCode::Eof)),
        }
        self.first = false;
        match self.de.read.peek() {
            Some(b'"') => {}
            Some(_) => return Err(self.de.syntax(SyntaxCode::KeyMustBeString)),
            None => return Err(self.de.syntax(SyntaxCode::Eof)),
        }
        self.key_at = self.de.read.position();
        let key = seed
            .deserialize(KeyDeserializer::new(&mut *self.de))
            .map_err(|error| error.within(Segment::Key))?;
        self.de.read.expect(b':', SyntaxCode::ExpectedColon).map_err(Error::syntax)?;
        Ok(Some(key))
    }

    #[inline]
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        let (text, key_at, fields) = (self.de.text, self.key_at, self.fields);
        seed.deserialize(&mut *self.de)
            .map_err(|error| error.within(Segment::of_key(text, key_at, fields, false)))
    }
}

/// An enum written as `{"Variant": content}`.
struct Variant<'a, 'de> {
    de: &'a mut Deserializer<'de>,
    variants: &'static [&'static str],
    key_at: usize,
}

impl Variant<'_, '_> {
    fn segment(&self) -> Segment {
        Segment::of_key(self.de.text, self.key_at, self.variants, true)
    }
}

impl<'de> de::EnumAccess<'de> for Variant<'_, 'de> {
    type Error = Error;
    type Variant = Self;

    fn variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<(T::Value, Self)> {
        match self.de.read.peek() {
            Some(b'"') => {}
            Some(_) => return Err(self.de.syntax(SyntaxCode::KeyMustBeString)),
            None => return Err(self.de.syntax(SyntaxCode::Eof)),
        }
        let variant = seed.deserialize(KeyDeserializer::new(&mut *self.de))?;
        self.de.read.expect(b':', SyntaxCode::ExpectedColon).map_err(Error::syntax)?;
        Ok((variant, self))
    }
}

impl<'de> de::VariantAccess<'de> for Variant<'_, 'de> {
    type Error = Error;

    fn unit_variant(self) -> Result<()> {
        let segment = self.segment();
        de::Deserialize::deserialize(&mut *self.de).map_err(|error: Error| error.within(segment))
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value> {
        let segment = self.segment();
        seed.deserialize(&mut *self.de).map_err(|error| error.within(segment))
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value> {
        let segment = self.segment();
        de::Deserializer::deserialize_seq(&mut *self.de, visitor).map_err(|error| error.within(segment))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        let segment = self.segment();
        de::Deserializer::deserialize_struct(&mut *self.de, "", fields, visitor)
            .map_err(|error| error.within(segment))
    }
}

/// An enum written as the string `"Variant"`: a unit variant.
pub(super) struct UnitVariant<'a, 'de> {
    pub(super) de: &'a mut Deserializer<'de>,
}

impl<'de> de::EnumAccess<'de> for UnitVariant<'_, 'de> {
    type Error = Error;
    type Variant = Self;

    fn variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<(T::Value, Self)> {
        let variant = seed.deserialize(KeyDeserializer::new(&mut *self.de))?;
        Ok((variant, self))
    }
}

impl<'de> de::VariantAccess<'de> for UnitVariant<'_, 'de> {
    type Error = Error;

    fn unit_variant(self) -> Result<()> {
        Ok(())
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, _seed: T) -> Result<T::Value> {
        Err(de::Error::invalid_type(Unexpected::UnitVariant, &"newtype variant"))
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, _visitor: V) -> Result<V::Value> {
        Err(de::Error::invalid_type(Unexpected::UnitVariant, &"tuple variant"))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value> {
        Err(de::Error::invalid_type(Unexpected::UnitVariant, &"struct variant"))
    }
}
