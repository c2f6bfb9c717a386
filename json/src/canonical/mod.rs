//! Canonical JSON: one text per JSON value, used to compare tool arguments.
//!
//! Rules: object keys sorted by code point and written as JSON strings, no
//! whitespace; numbers by exact decimal value in one normal form (`42`, `42.0`, `4.2e1` and
//! `420e-1` are all `42`; `-0` is `0`); strings by decoded value; array order and `null`
//! significant; when an object gives a key twice, the last entry wins.
//!
//! One writer holds these rules (escaping, number normal form, key order, the duplicate-key
//! rule, the depth rule); three drivers feed it:
//!
//! - [`canonical_json`] walks a `serde_json::Value`, at any depth;
//! - [`signature`] serializes a typed value directly, with no intermediate `Value`;
//! - raw JSON text (serde_json's `RawValue`, and the exact number text serde_json keeps under
//!   `arbitrary_precision`) is read token by token, without serde_json's parser.
//!
//! # Numbers: what each mode guarantees
//!
//! - **Typed inputs, default features**: exact. Arguments are bound by loopbound's own reader,
//!   which reads numbers by value: any spelling of one decimal binds an integer field to the same
//!   integer and a float field to the same nearest float (correctly rounded), so every spelling
//!   of one value gives one signature, and different integers or floats give different ones. No
//!   serde_json feature is involved.
//! - **`serde_json::Value` inputs, default features**: a number is held as serde_json holds it
//!   without features, as an `i64`, a `u64` or an `f64`. Integers beyond 64 bits and decimals
//!   with more digits than an `f64` carries are rounded to the nearest `f64` when bound, so two
//!   such numbers that round to the same `f64` share a signature. A number beyond the `f64`
//!   range does not bind.
//! - **`serde_json::Value` inputs, `exact-numbers`**: every number keeps its exact decimal text,
//!   so different values never share a signature. The feature turns on serde_json's
//!   `arbitrary_precision` for the whole build, which changes serde_json elsewhere (numbers
//!   inside `#[serde(untagged)]` enums and `#[serde(flatten)]` fields deserialized by serde_json
//!   itself no longer fit primitive types); that is why it is opt-in.
//!
//! # Invariants
//!
//! - Total: every `serde_json::Value` has a form, computed without recursion limits that a deep
//!   value could overflow. A typed value or raw text nested deeper than [`MAX_DEPTH`] has no
//!   signature ([`SignatureError::TooDeep`]): serde recurses, so its driver must stop.
//! - Idempotent: the form, parsed and written again, gives the same text.
//! - Deterministic whatever serde_json's map order (sorted `BTreeMap`, or insertion order under
//!   `preserve_order`).
//! - The drivers agree: a typed value's signature is the form of the `Value` serde_json would
//!   make of it, whenever serde_json can represent it.

mod error;
mod escape;
mod key;
mod number;
mod raw;
mod serializer;
mod signature;
mod value;
mod writer;

use serde_json::Value;

pub use error::SignatureError;
pub(crate) use escape::write_json_string;
pub(crate) use number::write_number;
pub use serializer::signature;
pub use signature::Signature;
use value::write_canonical;

/// Deepest nesting of arrays and objects that arguments may have, bound or signed: serde_json's
/// own parse limit (it reads at most 127 levels), so that everything serde_json can parse
/// binds, and everything that binds has a signature.
pub const MAX_DEPTH: usize = 128;

/// Returns the canonical JSON text of `value`.
///
/// ```
/// use serde_json::json;
/// use loopbound_json::canonical::canonical_json;
///
/// let a = json!({"b": [1, 2.0, null], "a": "x"});
/// let b: serde_json::Value = serde_json::from_str(r#"{ "a" : "x", "b" : [1e0, 2, null] }"#).unwrap();
/// assert_eq!(canonical_json(&a), r#"{"a":"x","b":[1,2,null]}"#);
/// assert_eq!(canonical_json(&a), canonical_json(&b));
/// ```
#[must_use]
pub fn canonical_json(value: &Value) -> String {
    // serde_json's own writer starts at this size; most arguments fit without growing.
    let mut out = String::with_capacity(128);
    write_canonical(&mut out, value);
    out
}
