//! The typed driver of the canonical writer: signatures, written straight from the bound value
//! by a serde `Serializer`, with no intermediate `serde_json::Value` and no JSON text round trip.
//!
//! # Invariants
//!
//! - For every `T: Serialize`, `signature(name, t)` equals `name + ":" +
//!   canonical_json(serde_json::to_value(t))` whenever serde_json can represent `t`: the same
//!   key order, number normal form, string escaping, duplicate-key rule and enum layout
//!   (externally tagged), all from the shared [`writer`](super::writer).
//! - Each array or object written counts one level, as in the JSON text (an externally tagged
//!   struct or tuple variant is two: the tag's object and its content); past
//!   [`MAX_DEPTH`](super::MAX_DEPTH) the result is [`SignatureError::TooDeep`], never a stack
//!   overflow. Raw JSON text inside the value counts its own levels on top.
//! - A one-entry object costs no allocation besides the output; a larger one, one vector of its
//!   keys' offsets (plus the map keys' own text).

use std::borrow::Cow;

use serde::ser::{self, Serialize};

use super::error::SignatureError;
use super::key::KeyText;
use super::signature::Signature;
use super::writer::{
    Entries, Scratch, nest, write_bool, write_float, write_integer, write_null, write_wide_integer,
};
use super::{raw, write_json_string, write_number};
use crate::reader::{NUMBER_TOKEN, RAW_VALUE_TOKEN};

/// Returns the signature of `value` for tool `name`: `name + ":" + canonical JSON of value`,
/// written directly from the typed value. This is the key the repetition limit counts.
///
/// ```
/// #[derive(serde::Serialize)]
/// struct Ticket { input: i64 }
/// let signature = loopbound_json::canonical::signature("read_ticket", &Ticket { input: 42 })?;
/// assert_eq!(signature.as_str(), r#"read_ticket:{"input":42}"#);
/// # Ok::<(), loopbound_json::canonical::SignatureError>(())
/// ```
///
/// # Errors
///
/// A [`SignatureError`] if `value` cannot be written as JSON (its `Serialize` failed, a map key
/// is not a string) or nests deeper than [`MAX_DEPTH`](super::MAX_DEPTH).
pub fn signature<T: Serialize + ?Sized>(name: &str, value: &T) -> Result<Signature, SignatureError> {
    let mut output = Output { text: String::with_capacity(name.len() + 24), ..Output::default() };
    output.text.push_str(name);
    output.text.push(':');
    value.serialize(Canonical { out: &mut output, depth: 0 })?;
    Ok(Signature::from_parts(output.text, name.len()))
}

type Result<T, E = SignatureError> = std::result::Result<T, E>;

/// What one signature is written into: the text, the objects' shared scratch, and a map key
/// waiting for its value.
#[derive(Debug, Default)]
pub(crate) struct Output {
    text: String,
    scratch: Scratch<Key>,
    pending_key: Option<String>,
}

/// Writes one value's canonical text at the end of the output; `depth` containers are open
/// around it.
struct Canonical<'a> {
    out: &'a mut Output,
    depth: usize,
}

impl Canonical<'_> {
    /// Opens `{"variant":` for the externally tagged enum layout: one level.
    fn open_variant(self, variant: &str) -> Result<Self> {
        let depth = nest(self.depth)?;
        let text = &mut self.out.text;
        text.push('{');
        write_json_string(text, variant);
        text.push(':');
        Ok(Self { depth, ..self })
    }
}

macro_rules! integers {
    ($write:ident: $($method:ident: $ty:ty),*) => {$(
        fn $method(self, value: $ty) -> Result<()> {
            $write(&mut self.out.text, value);
            Ok(())
        }
    )*};
}

impl<'a> ser::Serializer for Canonical<'a> {
    type Ok = ();
    type Error = SignatureError;
    type SerializeSeq = Seq<'a>;
    type SerializeTuple = Seq<'a>;
    type SerializeTupleStruct = Seq<'a>;
    type SerializeTupleVariant = Seq<'a>;
    type SerializeMap = Object<'a>;
    type SerializeStruct = Struct<'a>;
    type SerializeStructVariant = Object<'a>;

    integers!(
        write_integer: serialize_i8: i8, serialize_i16: i16, serialize_i32: i32, serialize_i64: i64,
        serialize_u8: u8, serialize_u16: u16, serialize_u32: u32, serialize_u64: u64
    );
    integers!(write_wide_integer: serialize_i128: i128, serialize_u128: u128);

    fn serialize_bool(self, value: bool) -> Result<()> {
        write_bool(&mut self.out.text, value);
        Ok(())
    }

    fn serialize_f32(self, value: f32) -> Result<()> {
        write_float(&mut self.out.text, value);
        Ok(())
    }

    fn serialize_f64(self, value: f64) -> Result<()> {
        write_float(&mut self.out.text, value);
        Ok(())
    }

    fn serialize_char(self, value: char) -> Result<()> {
        write_json_string(&mut self.out.text, value.encode_utf8(&mut [0; 4]));
        Ok(())
    }

    fn serialize_str(self, value: &str) -> Result<()> {
        write_json_string(&mut self.out.text, value);
        Ok(())
    }

    fn serialize_bytes(self, value: &[u8]) -> Result<()> {
        nest(self.depth)?;
        let text = &mut self.out.text;
        text.push('[');
        for (index, byte) in value.iter().enumerate() {
            if index > 0 {
                text.push(',');
            }
            write_integer(text, *byte);
        }
        text.push(']');
        Ok(())
    }

    fn serialize_none(self) -> Result<()> {
        self.serialize_unit()
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<()> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<()> {
        write_null(&mut self.out.text);
        Ok(())
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result<()> {
        self.serialize_unit()
    }

    fn serialize_unit_variant(self, _name: &'static str, _index: u32, variant: &'static str) -> Result<()> {
        self.serialize_str(variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _name: &'static str, value: &T) -> Result<()> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<()> {
        let Canonical { out, depth } = self.open_variant(variant)?;
        value.serialize(Canonical { out: &mut *out, depth })?;
        out.text.push('}');
        Ok(())
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<Seq<'a>> {
        Seq::open(self, "]")
    }

    fn serialize_tuple(self, len: usize) -> Result<Seq<'a>> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> Result<Seq<'a>> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Seq<'a>> {
        Seq::open(self.open_variant(variant)?, "]}")
    }

    fn serialize_map(self, _len: Option<usize>) -> Result<Object<'a>> {
        Object::open(self, false)
    }

    fn serialize_struct(self, name: &'static str, len: usize) -> Result<Struct<'a>> {
        match name {
            NUMBER_TOKEN => Ok(Struct::Number(&mut self.out.text)),
            RAW_VALUE_TOKEN => Ok(Struct::Raw(&mut self.out.text, self.depth)),
            _ => self.serialize_map(Some(len)).map(Struct::Object),
        }
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Object<'a>> {
        Object::open(self.open_variant(variant)?, true)
    }
}

/// Arrays, tuples and tuple variants.
#[derive(Debug)]
pub(crate) struct Seq<'a> {
    out: &'a mut Output,
    /// The depth of the elements.
    depth: usize,
    first: bool,
    close: &'static str,
}

impl<'a> Seq<'a> {
    fn open(at: Canonical<'a>, close: &'static str) -> Result<Self> {
        let Canonical { out, depth } = at;
        let depth = nest(depth)?;
        out.text.push('[');
        Ok(Self { out, depth, first: true, close })
    }

    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        if !self.first {
            self.out.text.push(',');
        }
        self.first = false;
        value.serialize(Canonical { out: &mut *self.out, depth: self.depth })
    }

    fn close(self) {
        self.out.text.push_str(self.close);
    }
}

macro_rules! seq_impls {
    ($($trait:ident :: $method:ident),*) => {$(
        impl ser::$trait for Seq<'_> {
            type Ok = ();
            type Error = SignatureError;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
                self.element(value)
            }
            fn end(self) -> Result<()> {
                self.close();
                Ok(())
            }
        }
    )*};
}

seq_impls!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

/// An object key: a struct field's name, or a map key written as a string.
type Key = Cow<'static, str>;

/// Objects: maps, structs and struct variants, written through the shared [`Entries`].
#[derive(Debug)]
pub(crate) struct Object<'a> {
    out: &'a mut Output,
    /// The depth of the values.
    depth: usize,
    entries: Entries<Key>,
    /// A struct variant: the tag's object closes too.
    in_variant: bool,
}

impl<'a> Object<'a> {
    fn open(at: Canonical<'a>, in_variant: bool) -> Result<Self> {
        let Canonical { out, depth } = at;
        let depth = nest(depth)?;
        let entries = Entries::open(&mut out.text, &out.scratch);
        Ok(Self { out, depth, entries, in_variant })
    }

    fn entry<T: Serialize + ?Sized>(&mut self, key: Key, value: &T) -> Result<()> {
        let Output { text, scratch, .. } = &mut *self.out;
        self.entries.key(text, scratch, key);
        value.serialize(Canonical { out: &mut *self.out, depth: self.depth })
    }

    fn close(self) {
        let Output { text, scratch, .. } = self.out;
        self.entries.close(text, scratch);
        if self.in_variant {
            text.push('}');
        }
    }
}

impl ser::SerializeMap for Object<'_> {
    type Ok = ();
    type Error = SignatureError;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<()> {
        self.out.pending_key = Some(key.serialize(KeyText)?);
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        let key = self
            .out
            .pending_key
            .take()
            .ok_or_else(|| ser::Error::custom("a map value came before its key"))?;
        self.entry(Cow::Owned(key), value)
    }

    fn end(self) -> Result<()> {
        self.close();
        Ok(())
    }
}

impl ser::SerializeStructVariant for Object<'_> {
    type Ok = ();
    type Error = SignatureError;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<()> {
        self.entry(Cow::Borrowed(key), value)
    }

    fn end(self) -> Result<()> {
        self.close();
        Ok(())
    }
}

/// A struct: an object, or one of serde_json's private carriers of number and raw JSON text.
#[derive(Debug)]
pub(crate) enum Struct<'a> {
    Object(Object<'a>),
    /// A number's exact text (serde_json's `arbitrary_precision`).
    Number(&'a mut String),
    /// A `RawValue`'s text, inside this many containers.
    Raw(&'a mut String, usize),
}

impl ser::SerializeStruct for Struct<'_> {
    type Ok = ();
    type Error = SignatureError;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<()> {
        match self {
            Self::Object(object) => object.entry(Cow::Borrowed(key), value),
            Self::Number(out) => {
                write_number(out, &value.serialize(KeyText)?);
                Ok(())
            }
            Self::Raw(out, depth) => raw::write_raw(out, &value.serialize(KeyText)?, *depth),
        }
    }

    fn end(self) -> Result<()> {
        match self {
            Self::Object(object) => object.close(),
            Self::Number(_) | Self::Raw(..) => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use serde::Serialize;
    use serde_json::json;

    use super::signature;
    use crate::canonical::canonical_json;
    use crate::canonical::{MAX_DEPTH, Signature};

    /// The reference: serde_json's text, parsed back to a `Value`, then canonicalised.
    fn via_text<T: Serialize>(name: &str, value: &T) -> String {
        let text = serde_json::to_string(value).unwrap_or_default();
        let parsed: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        format!("{name}:{}", canonical_json(&parsed))
    }

    fn check<T: Serialize>(value: &T) {
        assert_eq!(signature("t", value).ok().map(Signature::into_string), Some(via_text("t", value)));
    }

    #[derive(Serialize)]
    struct Input {
        input: i64,
    }

    #[derive(Serialize)]
    struct OutOfOrder {
        zeta: Vec<u8>,
        alpha: Option<String>,
        mid: (i32, f64),
        beta: Nested,
        a: bool,
    }

    #[derive(Serialize)]
    struct Nested {
        y: f32,
        x: u128,
    }

    #[derive(Serialize)]
    enum Shape {
        Unit,
        Newtype(i8),
        Tuple(u8, String),
        Struct { b: i16, a: char },
    }

    #[test]
    fn a_one_field_input_is_name_colon_object() {
        assert_eq!(
            signature("read_ticket", &Input { input: 42 }).ok().map(Signature::into_string).as_deref(),
            Some(r#"read_ticket:{"input":42}"#)
        );
    }

    #[test]
    fn agrees_with_the_value_walk_on_structs_enums_and_maps() {
        check(&OutOfOrder {
            zeta: vec![1, 2],
            alpha: Some("é\n\"".into()),
            mid: (-3, 0.1),
            // Without exact numbers, serde_json reads integers beyond 64 bits back as floats.
            beta: Nested { y: 0.1, x: if cfg!(feature = "exact-numbers") { u128::MAX } else { 999 } },
            a: true,
        });
        check(&vec![
            Shape::Unit,
            Shape::Newtype(-1),
            Shape::Tuple(2, "x".into()),
            Shape::Struct { b: 3, a: 'q' },
        ]);
        let map: HashMap<String, i32> = (0..20).map(|i| (format!("k{i}"), i)).collect();
        check(&map);
        let int_keys: BTreeMap<i32, &str> = [(10, "ten"), (9, "nine"), (-1, "minus")].into_iter().collect();
        check(&int_keys);
        check(&json!({"z": [1.5, {"b": null, "a": 1e21}], "a": "A"}));
        check(&(f64::NAN, f64::INFINITY, 1e-7, 4.2e1, -0.0));
    }

    #[test]
    fn integers_of_every_width_are_written_in_normal_form() {
        let values = (i64::MIN, u64::MAX, 0_i8, -1_i32, u16::MAX, 10_u128.pow(21), i128::MIN, 999_u128);
        // Without exact numbers, the reference walk reads 128-bit integers back as f64.
        #[cfg(feature = "exact-numbers")]
        check(&values);
        assert_eq!(
            signature("t", &values).ok().map(Signature::into_string).as_deref(),
            Some(
                "t:[-9223372036854775808,18446744073709551615,0,-1,65535,1e21,\
                 -1.70141183460469231731687303715884105728e38,999]"
            )
        );
    }

    #[test]
    fn the_last_duplicate_key_wins() {
        struct Dupes;
        impl Serialize for Dupes {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeMap;
                let mut map = serializer.serialize_map(None)?;
                map.serialize_entry("b", &1)?;
                map.serialize_entry("a", &2)?;
                map.serialize_entry("b", &3)?;
                map.end()
            }
        }
        assert_eq!(
            signature("t", &Dupes).ok().map(Signature::into_string).as_deref(),
            Some(r#"t:{"a":2,"b":3}"#)
        );
        check(&Dupes);
    }

    #[test]
    fn map_keys_sort_by_their_value_not_by_their_escaped_text() {
        // "\n" (0x0a) escapes to `\n` and "\u{1}" to `\u0001`: as text `\n` < `\u0001`, as
        // values 0x01 < 0x0a.
        struct Keys;
        impl Serialize for Keys {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeMap;
                let mut map = serializer.serialize_map(None)?;
                map.serialize_entry("a\n", &1)?;
                map.serialize_entry("a\u{1}", &2)?;
                map.serialize_entry("a", &[3, 4])?;
                map.end()
            }
        }
        assert_eq!(
            signature("t", &Keys).ok().map(Signature::into_string).as_deref(),
            Some(r#"t:{"a":[3,4],"a\u0001":2,"a\n":1}"#)
        );
        check(&Keys);
    }

    #[test]
    fn nesting_beyond_the_cap_is_an_error() {
        let mut value = json!(1);
        for _ in 0..=MAX_DEPTH {
            value = json!([value]);
        }
        assert!(signature("t", &value).is_err());
        let mut shallow = json!(1);
        for _ in 0..MAX_DEPTH {
            shallow = json!([shallow]);
        }
        assert!(signature("t", &shallow).is_ok());
    }

    #[test]
    fn non_string_keys_that_json_cannot_hold_are_errors() {
        let map: BTreeMap<Vec<u8>, i32> = [(vec![1], 1)].into_iter().collect();
        assert!(signature("t", &map).is_err());
    }
}
