//! Signatures: a tool's name and the canonical JSON of its *bound* input, written straight from
//! the typed value by a serde `Serializer`, with no intermediate `serde_json::Value` and no JSON
//! text round trip.
//!
//! # Invariants
//!
//! - For every `T: Serialize`, `signature(name, t)` equals `name + ":" +
//!   canonical_json(serde_json::to_value(t))` whenever serde_json can represent `t`: the same
//!   key order, number normal form, string escaping and enum layout (externally tagged).
//! - Object keys are sorted by code point; when a map yields the same key twice, the last entry
//!   wins, as when serde_json builds a `Value` from it.
//! - Nesting deeper than [`MAX_DEPTH`] is an error, never a stack overflow.
//! - A one-entry object costs no allocation besides the output; a larger one, one vector of its
//!   keys' offsets (plus the map keys' own text).

use std::fmt;

use serde::ser::{self, Serialize};

use super::{write_canonical, write_json_string, write_number};

/// Deepest nesting of arrays and objects a signature accepts.
pub(crate) const MAX_DEPTH: u32 = 256;

/// The struct name serde_json uses to carry a number's text under `arbitrary_precision`.
const NUMBER_TOKEN: &str = "$serde_json::private::Number";
/// The struct name serde_json uses to carry a `RawValue`'s text.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// Returns the signature of `value` for tool `name`: `name + ":" + canonical JSON of value`,
/// written directly from the typed value. This is the key the repetition limit counts.
///
/// ```
/// #[derive(serde::Serialize)]
/// struct Ticket { input: i64 }
/// assert_eq!(loopbound::canonical::signature("read_ticket", &Ticket { input: 42 })?, r#"read_ticket:{"input":42}"#);
/// # Ok::<(), loopbound::canonical::SignatureError>(())
/// ```
///
/// # Errors
///
/// A [`SignatureError`] if `value` cannot be written as JSON (its `Serialize` failed, a map key
/// is not a string) or nests too deep.
pub fn signature<T: Serialize + ?Sized>(name: &str, value: &T) -> Result<String, SignatureError> {
    let mut out = String::with_capacity(name.len() + 24);
    out.push_str(name);
    out.push(':');
    value.serialize(Canonical { out: &mut out, depth: 0 })?;
    Ok(out)
}

/// Why a value has no signature.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignatureError {
    /// The value nests deeper than the writer accepts.
    TooDeep {
        /// The deepest nesting accepted.
        limit: u32,
    },
    /// A map key is not a string, a number, a boolean or a unit variant.
    KeyNotAString,
    /// The value's own `Serialize` implementation failed, with this message.
    Custom(String),
}

impl fmt::Display for SignatureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooDeep { limit } => write!(f, "the value nests deeper than {limit} levels"),
            Self::KeyNotAString => {
                f.write_str("a map key must be a string, a number, a boolean or a unit variant")
            }
            Self::Custom(message) => write!(f, "the value could not be serialized: {message}"),
        }
    }
}

impl std::error::Error for SignatureError {}

impl ser::Error for SignatureError {
    fn custom<M: fmt::Display>(message: M) -> Self {
        Self::Custom(message.to_string())
    }
}

impl SignatureError {
    fn too_deep() -> Self {
        Self::TooDeep { limit: MAX_DEPTH }
    }

    fn key_not_a_string() -> Self {
        Self::KeyNotAString
    }
}

type Result<T, E = SignatureError> = std::result::Result<T, E>;

/// Writes one value's canonical text at the end of `out`.
struct Canonical<'a> {
    out: &'a mut String,
    depth: u32,
}

impl<'a> Canonical<'a> {
    fn nested(self) -> Result<(&'a mut String, u32)> {
        let depth = self.depth + 1;
        if depth > MAX_DEPTH {
            return Err(SignatureError::too_deep());
        }
        Ok((self.out, depth))
    }

    fn float(self, finite: Option<&str>) {
        match finite {
            Some(text) => write_number(self.out, text),
            None => self.out.push_str("null"),
        }
    }

    /// Opens `{"variant":` for the externally tagged enum layout.
    fn open_variant(self, variant: &str) -> Result<(&'a mut String, u32)> {
        let (out, depth) = self.nested()?;
        out.push('{');
        write_json_string(out, variant);
        out.push(':');
        Ok((out, depth))
    }
}

/// Integers of up to 64 bits have at most 20 digits, and itoa writes them without leading zeros
/// or `-0`: their text is already the normal form. 128-bit integers may need the exponent form
/// (from 10^21 on), so they go through [`write_number`].
macro_rules! integers {
    (plain: $($method:ident: $ty:ty),*) => {$(
        fn $method(self, value: $ty) -> Result<()> {
            self.out.push_str(itoa::Buffer::new().format(value));
            Ok(())
        }
    )*};
    (normalised: $($method:ident: $ty:ty),*) => {$(
        fn $method(self, value: $ty) -> Result<()> {
            write_number(self.out, itoa::Buffer::new().format(value));
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
        plain: serialize_i8: i8, serialize_i16: i16, serialize_i32: i32, serialize_i64: i64,
        serialize_u8: u8, serialize_u16: u16, serialize_u32: u32, serialize_u64: u64
    );
    integers!(normalised: serialize_i128: i128, serialize_u128: u128);

    fn serialize_bool(self, value: bool) -> Result<()> {
        self.out.push_str(if value { "true" } else { "false" });
        Ok(())
    }

    fn serialize_f32(self, value: f32) -> Result<()> {
        let mut buffer = ryu::Buffer::new();
        self.float(value.is_finite().then(|| buffer.format_finite(value)));
        Ok(())
    }

    fn serialize_f64(self, value: f64) -> Result<()> {
        let mut buffer = ryu::Buffer::new();
        self.float(value.is_finite().then(|| buffer.format_finite(value)));
        Ok(())
    }

    fn serialize_char(self, value: char) -> Result<()> {
        write_json_string(self.out, value.encode_utf8(&mut [0; 4]));
        Ok(())
    }

    fn serialize_str(self, value: &str) -> Result<()> {
        write_json_string(self.out, value);
        Ok(())
    }

    fn serialize_bytes(self, value: &[u8]) -> Result<()> {
        let (out, _) = self.nested()?;
        out.push('[');
        for (index, byte) in value.iter().enumerate() {
            if index > 0 {
                out.push(',');
            }
            out.push_str(itoa::Buffer::new().format(*byte));
        }
        out.push(']');
        Ok(())
    }

    fn serialize_none(self) -> Result<()> {
        self.serialize_unit()
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<()> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<()> {
        self.out.push_str("null");
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
        let (out, depth) = self.open_variant(variant)?;
        value.serialize(Canonical { out: &mut *out, depth })?;
        out.push('}');
        Ok(())
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<Seq<'a>> {
        let (out, depth) = self.nested()?;
        out.push('[');
        Ok(Seq { out, depth, first: true, close: "]" })
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
        let (out, depth) = self.open_variant(variant)?;
        out.push('[');
        Ok(Seq { out, depth, first: true, close: "]}" })
    }

    fn serialize_map(self, _len: Option<usize>) -> Result<Object<'a>> {
        let (out, depth) = self.nested()?;
        Ok(Object::open(out, depth, "}"))
    }

    fn serialize_struct(self, name: &'static str, len: usize) -> Result<Struct<'a>> {
        match name {
            NUMBER_TOKEN => Ok(Struct::Number(self.out)),
            RAW_VALUE_TOKEN => Ok(Struct::Raw(self.out)),
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
        let (out, depth) = self.open_variant(variant)?;
        Ok(Object::open(out, depth, "}}"))
    }
}

/// Arrays, tuples and tuple variants.
#[derive(Debug)]
pub(crate) struct Seq<'a> {
    out: &'a mut String,
    depth: u32,
    first: bool,
    close: &'static str,
}

impl Seq<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        if !self.first {
            self.out.push(',');
        }
        self.first = false;
        value.serialize(Canonical { out: &mut *self.out, depth: self.depth })
    }

    fn close(self) {
        self.out.push_str(self.close);
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
#[derive(Debug, Default)]
enum Key {
    #[default]
    None,
    Field(&'static str),
    Owned(String),
}

impl Key {
    fn as_str(&self) -> &str {
        match self {
            Self::None => "",
            Self::Field(name) => name,
            Self::Owned(name) => name,
        }
    }
}

/// Objects: maps, structs and struct variants. Entries are written as they come; if their keys
/// did not come in code-point order, [`Object::close`] rewrites the object's text in key order.
///
/// An object of one entry keeps nothing but that entry's key; from the second entry on, the keys
/// and offsets of the earlier entries are kept in one vector, so that a small object costs no
/// more than its output and one short-lived allocation.
#[derive(Debug)]
pub(crate) struct Object<'a> {
    out: &'a mut String,
    depth: u32,
    /// Keys and start offsets of the entries before the last one.
    earlier: Vec<(Key, usize)>,
    /// The last entry's key (`Key::None` before the first entry) and start offset.
    last: (Key, usize),
    in_order: bool,
    pending_key: Option<String>,
    close: &'static str,
}

impl<'a> Object<'a> {
    fn open(out: &'a mut String, depth: u32, close: &'static str) -> Self {
        out.push('{');
        let start = out.len();
        Self {
            out,
            depth,
            earlier: Vec::new(),
            last: (Key::None, start),
            in_order: true,
            pending_key: None,
            close,
        }
    }

    fn entry<T: Serialize + ?Sized>(&mut self, key: Key, value: &T) -> Result<()> {
        if !matches!(self.last.0, Key::None) {
            if self.last.0.as_str() >= key.as_str() {
                self.in_order = false;
            }
            self.earlier.push(std::mem::take(&mut self.last));
            self.out.push(',');
        }
        let start = self.out.len();
        write_json_string(self.out, key.as_str());
        self.out.push(':');
        value.serialize(Canonical { out: &mut *self.out, depth: self.depth })?;
        self.last = (key, start);
        Ok(())
    }

    fn close(self) {
        let Self { out, mut earlier, last, in_order, close, .. } = self;
        if !in_order {
            earlier.push(last);
            let start = earlier[0].1;
            let end = out.len();
            // Entry i spans from its start to the comma before entry i + 1, or to the end.
            let mut entries: Vec<(&str, std::ops::Range<usize>)> = earlier
                .iter()
                .enumerate()
                .map(|(index, (key, from))| {
                    let to = earlier.get(index + 1).map_or(end, |(_, next)| next - 1);
                    (key.as_str(), *from..to)
                })
                .collect();
            // A stable sort keeps entries of one key in the order they came; the last one wins.
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let mut written = 0;
            for (index, (key, range)) in entries.iter().enumerate() {
                if entries.get(index + 1).is_some_and(|(next, _)| next == key) {
                    continue;
                }
                if written > 0 {
                    out.push(',');
                }
                out.extend_from_within(range.clone());
                written += 1;
            }
            out.drain(start..end);
        }
        out.push_str(close);
    }
}

impl ser::SerializeMap for Object<'_> {
    type Ok = ();
    type Error = SignatureError;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<()> {
        self.pending_key = Some(key.serialize(KeyText)?);
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        let key =
            self.pending_key.take().ok_or_else(|| ser::Error::custom("a map value came before its key"))?;
        self.entry(Key::Owned(key), value)
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
        self.entry(Key::Field(key), value)
    }

    fn end(self) -> Result<()> {
        self.close();
        Ok(())
    }
}

/// A struct: an object, or one of serde_json's private carriers of number and raw JSON text.
#[derive(Debug)]
// The object variant carries its first entries inline to avoid an allocation per object; it is
// the common case and lives briefly on the stack.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Struct<'a> {
    Object(Object<'a>),
    Number(&'a mut String),
    Raw(&'a mut String),
}

impl ser::SerializeStruct for Struct<'_> {
    type Ok = ();
    type Error = SignatureError;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<()> {
        match self {
            Self::Object(object) => object.entry(Key::Field(key), value),
            Self::Number(out) => {
                let text = value.serialize(KeyText)?;
                write_number(out, &text);
                Ok(())
            }
            Self::Raw(out) => {
                let text = value.serialize(KeyText)?;
                let parsed: serde_json::Value = serde_json::from_str(&text).map_err(ser::Error::custom)?;
                write_canonical(out, &parsed);
                Ok(())
            }
        }
    }

    fn end(self) -> Result<()> {
        match self {
            Self::Object(object) => object.close(),
            Self::Number(_) | Self::Raw(_) => {}
        }
        Ok(())
    }
}

/// A finite float map key, spelled exactly as serde_json spells it: a key is text, compared as
/// written, so the spelling (`1e+21` rather than `1e21`) must be serde_json's own.
fn float_key(value: &impl Serialize, finite: bool) -> Result<String> {
    if finite {
        serde_json::to_string(value).map_err(ser::Error::custom)
    } else {
        Err(SignatureError::key_not_a_string())
    }
}

/// Serialises a map key to the string serde_json would use for it.
struct KeyText;

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
        Err(SignatureError::key_not_a_string())
    }
    fn serialize_none(self) -> Result<String> {
        Err(SignatureError::key_not_a_string())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<String> {
        Err(SignatureError::key_not_a_string())
    }
    fn serialize_unit(self) -> Result<String> {
        Err(SignatureError::key_not_a_string())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<String> {
        Err(SignatureError::key_not_a_string())
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<String> {
        Err(SignatureError::key_not_a_string())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq> {
        Err(SignatureError::key_not_a_string())
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple> {
        Err(SignatureError::key_not_a_string())
    }
    fn serialize_tuple_struct(self, _name: &'static str, _len: usize) -> Result<Self::SerializeTupleStruct> {
        Err(SignatureError::key_not_a_string())
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant> {
        Err(SignatureError::key_not_a_string())
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap> {
        Err(SignatureError::key_not_a_string())
    }
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Self::SerializeStruct> {
        Err(SignatureError::key_not_a_string())
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant> {
        Err(SignatureError::key_not_a_string())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use serde::Serialize;
    use serde_json::json;

    use super::{MAX_DEPTH, signature};
    use crate::canonical::canonical_json;

    /// The reference: serde_json's text, parsed back to a `Value`, then canonicalised.
    fn via_text<T: Serialize>(name: &str, value: &T) -> String {
        let text = serde_json::to_string(value).unwrap_or_default();
        let parsed: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        format!("{name}:{}", canonical_json(&parsed))
    }

    fn check<T: Serialize>(value: &T) {
        assert_eq!(signature("t", value).ok(), Some(via_text("t", value)));
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
            signature("read_ticket", &Input { input: 42 }).ok().as_deref(),
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
            signature("t", &values).ok().as_deref(),
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
        assert_eq!(signature("t", &Dupes).ok().as_deref(), Some(r#"t:{"a":2,"b":3}"#));
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
        assert_eq!(signature("t", &Keys).ok().as_deref(), Some(r#"t:{"a":[3,4],"a\u0001":2,"a\n":1}"#));
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
