//! The JSON reader: text bound straight into a serde type (for loopbound, tool arguments into
//! a tool's input type), with typed errors that never hold the text's values.
//!
//! - [`read`]: the scanner (whitespace, literals, strings, number tokens, values skipped);
//! - [`number`]: number tokens read by value;
//! - [`de`](Deserializer): the serde `Deserializer`; [`key`]: object keys; [`raw`]: serde_json's
//!   private text carriers;
//! - [`error`](Error): problems, with their [`path`].
//!
//! # Invariants
//!
//! - The text is one JSON value (RFC 8259) and nothing else but whitespace.
//! - Binding needs no serde_json feature: numbers are read by value (any spelling of one
//!   decimal binds to the same integer or float), whatever features the rest of the build turns
//!   on for serde_json.
//! - An error's class is decided by the text first: if the text is not JSON, the error is the
//!   first grammar error, whatever the type found before it. Only for JSON text is an error a
//!   mismatch with the type, or nesting deeper than
//!   [`MAX_DEPTH`](crate::canonical::MAX_DEPTH).

mod de;
mod error;
mod key;
pub(crate) mod number;
mod path;
mod raw;
pub(crate) mod read;

use serde::de::DeserializeOwned;

pub(crate) use de::Deserializer;
pub(crate) use error::SyntaxCode;
pub use error::{Class, Described, Error};
use read::Reader;

/// The struct name serde_json gives a number's exact text under `arbitrary_precision`: private
/// to serde_json, and watched by the tests of `serde_json_tokens`.
pub(crate) const NUMBER_TOKEN: &str = "$serde_json::private::Number";
/// The struct name serde_json gives a `RawValue`'s text: private to serde_json, and watched by
/// the tests of `serde_json_tokens`.
pub(crate) const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// Binds JSON `text` to `T`.
///
/// The text must be one JSON value (RFC 8259), with nothing else but whitespace around it.
/// Numbers are read by value, whatever their spelling; arrays and objects may nest at most
/// [`MAX_DEPTH`](crate::canonical::MAX_DEPTH) levels.
///
/// # Errors
///
/// An [`Error`] if the text is not JSON (the first grammar error, whatever the type found
/// before it), nests too deep, or does not fit `T`. It holds no value of the text; see
/// [`Error::describe`].
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, Error> {
    let mut de = Deserializer::new(text);
    let bound =
        T::deserialize(&mut de).and_then(|value| de.read.end().map(|()| value).map_err(Error::syntax));
    bound.map_err(|error| if error.is_syntax() { error } else { first_syntax_error(text).unwrap_or(error) })
}

/// The first grammar error of `text`, if it is not one JSON value.
#[cold]
fn first_syntax_error(text: &str) -> Option<Error> {
    let mut reader = Reader::new(text);
    reader.skip_value(None).and_then(|()| reader.end()).err().map(Error::syntax)
}

#[cfg(test)]
mod serde_json_tokens;
#[cfg(test)]
mod tests;
