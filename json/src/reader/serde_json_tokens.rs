//! serde_json's private tokens, watched: the struct names serde_json itself passes to a serde
//! `Serializer` or `Deserializer` when it writes or reads a `RawValue` and (under
//! `arbitrary_precision`, this crate's `exact-numbers`) a `Number`, recorded by probes and
//! compared with the names the reader and the canonical writer recognise.
//!
//! The names are private to serde_json and may change in any release. If one does, the reader
//! binds a `RawValue` or an exact number as a plain struct (a typed error) and the writer signs
//! them as objects; these tests fail first, saying what to change. Run them with and without
//! `--features exact-numbers`.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, Visitor};
use serde::ser::{self, Impossible, Serialize};
use serde_json::value::RawValue;

use super::{RAW_VALUE_TOKEN, from_str};
use crate::canonical::signature;

/// What to do when serde_json's name and ours differ.
const ADVICE: &str = "serde_json renamed one of its private tokens: set RAW_VALUE_TOKEN or \
    NUMBER_TOKEN in json/src/reader/mod.rs to the name serde_json now uses (its src/raw.rs and \
    src/number.rs), read serde_json's changelog for any change in how the token's text travels, \
    then run `cargo test -p loopbound-json` with and without `--features exact-numbers`";

/// The probe's error: the value was not written as a struct.
#[derive(Debug)]
struct NotAStruct;

impl fmt::Display for NotAStruct {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the value was not serialized as a struct")
    }
}

impl std::error::Error for NotAStruct {}

impl ser::Error for NotAStruct {
    fn custom<T: fmt::Display>(_message: T) -> Self {
        Self
    }
}

/// A struct's name and its fields' names, as a serializer is told them.
#[derive(Debug, PartialEq, Eq)]
struct Shape {
    name: &'static str,
    fields: Vec<&'static str>,
}

/// A serializer that records the shape of a struct and refuses anything else.
#[derive(Debug)]
struct ShapeProbe;

/// Serializer methods that refuse their value.
macro_rules! refuse {
    ($($method:ident($($argument:ty),*);)*) => {
        $(fn $method(self, $(_: $argument),*) -> Result<Shape, NotAStruct> {
            Err(NotAStruct)
        })*
    };
}

impl ser::Serializer for ShapeProbe {
    type Ok = Shape;
    type Error = NotAStruct;
    type SerializeSeq = Impossible<Shape, NotAStruct>;
    type SerializeTuple = Impossible<Shape, NotAStruct>;
    type SerializeTupleStruct = Impossible<Shape, NotAStruct>;
    type SerializeTupleVariant = Impossible<Shape, NotAStruct>;
    type SerializeMap = Impossible<Shape, NotAStruct>;
    type SerializeStruct = Shape;
    type SerializeStructVariant = Impossible<Shape, NotAStruct>;

    refuse! {
        serialize_bool(bool);
        serialize_i8(i8);
        serialize_i16(i16);
        serialize_i32(i32);
        serialize_i64(i64);
        serialize_u8(u8);
        serialize_u16(u16);
        serialize_u32(u32);
        serialize_u64(u64);
        serialize_f32(f32);
        serialize_f64(f64);
        serialize_char(char);
        serialize_str(&str);
        serialize_bytes(&[u8]);
        serialize_none();
        serialize_unit();
        serialize_unit_struct(&'static str);
        serialize_unit_variant(&'static str, u32, &'static str);
    }

    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<Shape, NotAStruct> {
        Err(NotAStruct)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: &T,
    ) -> Result<Shape, NotAStruct> {
        Err(NotAStruct)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<Shape, NotAStruct> {
        Err(NotAStruct)
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, NotAStruct> {
        Err(NotAStruct)
    }

    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, NotAStruct> {
        Err(NotAStruct)
    }

    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, NotAStruct> {
        Err(NotAStruct)
    }

    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, NotAStruct> {
        Err(NotAStruct)
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, NotAStruct> {
        Err(NotAStruct)
    }

    fn serialize_struct(self, name: &'static str, _: usize) -> Result<Shape, NotAStruct> {
        Ok(Shape { name, fields: Vec::new() })
    }

    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, NotAStruct> {
        Err(NotAStruct)
    }
}

impl ser::SerializeStruct for Shape {
    type Ok = Shape;
    type Error = NotAStruct;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, _: &T) -> Result<(), NotAStruct> {
        self.fields.push(key);
        Ok(())
    }

    fn end(self) -> Result<Shape, NotAStruct> {
        Ok(self)
    }
}

/// A deserializer that records the name of the newtype struct it is asked for, then refuses.
#[derive(Debug)]
struct NewtypeProbe<'n> {
    asked: &'n Cell<Option<&'static str>>,
}

impl<'de> de::Deserializer<'de> for NewtypeProbe<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("the probe answers newtype structs only"))
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        _: V,
    ) -> Result<V::Value, Self::Error> {
        self.asked.set(Some(name));
        Err(de::Error::custom("the probe records the name and reads nothing"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct seq tuple tuple_struct map struct enum identifier ignored_any
    }
}

/// The raw value `[1, 2]`.
fn raw_list() -> Box<RawValue> {
    RawValue::from_string("[1, 2]".to_owned()).unwrap_or_else(|error| panic!("`[1, 2]` is JSON: {error}"))
}

#[test]
fn serde_json_serializes_a_raw_value_under_the_raw_value_token() {
    let shape = raw_list().serialize(ShapeProbe).unwrap_or_else(|NotAStruct| {
        panic!("serde_json no longer serializes a RawValue as a one-field struct; {ADVICE}")
    });
    assert_eq!(shape, Shape { name: RAW_VALUE_TOKEN, fields: vec![RAW_VALUE_TOKEN] }, "{ADVICE}");
}

#[test]
fn serde_json_deserializes_a_raw_value_as_the_raw_value_token() {
    let asked = Cell::new(None);
    let refused = <Box<RawValue> as serde::Deserialize>::deserialize(NewtypeProbe { asked: &asked });
    assert!(refused.is_err(), "the probe reads nothing, so no RawValue can be made");
    assert_eq!(asked.get(), Some(RAW_VALUE_TOKEN), "{ADVICE}");
}

#[test]
fn a_raw_value_binds_to_its_text_and_signs_as_its_canonical_form() {
    let bound: Box<RawValue> = from_str(" [1, 2] ").unwrap_or_else(|error| panic!("{error}; {ADVICE}"));
    assert_eq!(bound.get(), "[1, 2]", "{ADVICE}");
    let signed = signature("t", &raw_list()).unwrap_or_else(|error| panic!("{error}; {ADVICE}"));
    assert_eq!(signed.as_str(), "t:[1,2]", "{ADVICE}");
}

#[cfg(feature = "exact-numbers")]
mod exact_numbers {
    use std::str::FromStr;

    use serde::Serialize;
    use serde_json::Number;

    use super::{ADVICE, NotAStruct, Shape, ShapeProbe};
    use crate::canonical::signature;
    use crate::reader::{NUMBER_TOKEN, from_str};

    #[test]
    fn serde_json_serializes_an_exact_number_under_the_number_token() {
        let number = Number::from_str("1e400").unwrap_or_else(|error| panic!("1e400 is a number: {error}"));
        let shape = number.serialize(ShapeProbe).unwrap_or_else(|NotAStruct| {
            panic!("serde_json no longer serializes an exact Number as a one-field struct; {ADVICE}")
        });
        assert_eq!(shape, Shape { name: NUMBER_TOKEN, fields: vec![NUMBER_TOKEN] }, "{ADVICE}");
    }

    #[test]
    fn an_exact_number_binds_and_signs_with_its_exact_value() {
        let bound: Number =
            from_str("100000000000000000000000000001e-2").unwrap_or_else(|error| panic!("{error}; {ADVICE}"));
        assert_eq!(bound.to_string(), "100000000000000000000000000001e-2", "{ADVICE}");
        let signed = signature("t", &bound).unwrap_or_else(|error| panic!("{error}; {ADVICE}"));
        assert_eq!(signed.as_str(), "t:1.00000000000000000000000000001e27", "{ADVICE}");
    }
}

#[cfg(not(feature = "exact-numbers"))]
#[test]
fn without_exact_numbers_serde_json_serializes_a_number_as_a_plain_number() {
    let number = serde_json::Number::from(42_u8);
    assert!(
        matches!(number.serialize(ShapeProbe), Err(NotAStruct)),
        "a Number is written as a struct although the build does not turn on arbitrary_precision"
    );
}
