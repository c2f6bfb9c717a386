//! Map keys of typed values, written as the strings serde_json would make of them.
//!
//! # Invariants
//!
//! - A key is text and is compared as written: strings as themselves; integers, booleans and
//!   unit variants as their text; finite floats spelled exactly as serde_json spells them
//!   (`1e+21`, not `1e21`). Any other key is [`SignatureError::KeyNotAString`].

use serde::ser::{self, Serialize};

use super::error::SignatureError;

type Result<T, E = SignatureError> = std::result::Result<T, E>;

/// A finite float map key, spelled exactly as serde_json spells it: a key is text, compared as
/// written, so the spelling (`1e+21` rather than `1e21`) must be serde_json's own.
fn float_key(value: &impl Serialize, finite: bool) -> Result<String> {
    if finite {
        serde_json::to_string(value).map_err(ser::Error::custom)
    } else {
        Err(SignatureError::KeyNotAString)
    }
}

/// Serialises a map key to the string serde_json would use for it.
pub(crate) struct KeyText;

impl ser::Serializer for KeyText {
    type Ok = String;
    type Error = SignatureError;
    type SerializeSeq = ser::Impossible<String, SignatureError>;
    type SerializeTuple = ser::Impossible<String, SignatureError>;
    type SerializeTupleStruct = ser::Impossible<String, SignatureError>;
    type SerializeTupleVariant = ser::Impossible<String, SignatureError>;
    type SerializeMap = ser::Impossible<String, SignatureError>;
    type SerializeStruct = ser::Impossible<String, SignatureError>;
    type SerializeStructVariant = ser::Impossible<String, SignatureError>;

    fn serialize_str(self, value: &str) -> Result<String> {
        Ok(value.to_owned())
    }
    fn serialize_char(self, value: char) -> Result<String> {
        Ok(value.to_string())
    }
    fn serialize_bool(self, value: bool) -> Result<String> {
        Ok(value.to_string())
    }
    fn serialize_i8(self, value: i8) -> Result<String> {
        Ok(itoa::Buffer::new().format(value).to_owned())
    }
    fn serialize_i16(self, value: i16) -> Result<String> {
        Ok(itoa::Buffer::new().format(value).to_owned())
    }
    fn serialize_i32(self, value: i32) -> Result<String> {
        Ok(itoa::Buffer::new().format(value).to_owned())
    }
    fn serialize_i64(self, value: i64) -> Result<String> {
        Ok(itoa::Buffer::new().format(value).to_owned())
    }
    fn serialize_i128(self, value: i128) -> Result<String> {
        Ok(itoa::Buffer::new().format(value).to_owned())
    }
    fn serialize_u8(self, value: u8) -> Result<String> {
        Ok(itoa::Buffer::new().format(value).to_owned())
    }
    fn serialize_u16(self, value: u16) -> Result<String> {
        Ok(itoa::Buffer::new().format(value).to_owned())
    }
    fn serialize_u32(self, value: u32) -> Result<String> {
        Ok(itoa::Buffer::new().format(value).to_owned())
    }
    fn serialize_u64(self, value: u64) -> Result<String> {
        Ok(itoa::Buffer::new().format(value).to_owned())
    }
    fn serialize_u128(self, value: u128) -> Result<String> {
        Ok(itoa::Buffer::new().format(value).to_owned())
    }
    fn serialize_f32(self, value: f32) -> Result<String> {
        float_key(&value, value.is_finite())
    }
    fn serialize_f64(self, value: f64) -> Result<String> {
        float_key(&value, value.is_finite())
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<String> {
        Ok(variant.to_owned())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<String> {
        value.serialize(self)
    }
    fn serialize_bytes(self, _value: &[u8]) -> Result<String> {
        Err(SignatureError::KeyNotAString)
    }
    fn serialize_none(self) -> Result<String> {
        Err(SignatureError::KeyNotAString)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<String> {
        Err(SignatureError::KeyNotAString)
    }
    fn serialize_unit(self) -> Result<String> {
        Err(SignatureError::KeyNotAString)
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<String> {
        Err(SignatureError::KeyNotAString)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<String> {
        Err(SignatureError::KeyNotAString)
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq> {
        Err(SignatureError::KeyNotAString)
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple> {
        Err(SignatureError::KeyNotAString)
    }
    fn serialize_tuple_struct(self, _name: &'static str, _len: usize) -> Result<Self::SerializeTupleStruct> {
        Err(SignatureError::KeyNotAString)
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant> {
        Err(SignatureError::KeyNotAString)
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap> {
        Err(SignatureError::KeyNotAString)
    }
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Self::SerializeStruct> {
        Err(SignatureError::KeyNotAString)
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant> {
        Err(SignatureError::KeyNotAString)
    }
}
