//! loopbound's JSON codec: a reader that binds JSON text straight to a serde type, and a
//! canonical JSON writer. It stands to loopbound as serde_json stands to serde: the guard
//! compares tool calls by the canonical text of their bound arguments, and this crate is where
//! both ends of that comparison are made.
//!
//! - [`from_str`] binds one JSON text to any `DeserializeOwned` type. Its [`Error`] is typed
//!   ([`Class`]: not JSON, too deep, or a mismatch with the type) and never holds a value of the
//!   input: it names the path (field and variant names, array indices), what the type expected
//!   and what kind of value was found.
//! - [`canonical`] writes one text per JSON value ([`canonical::canonical_json`]) and the
//!   signature of a typed value ([`canonical::signature`]), without an intermediate
//!   `serde_json::Value`.
//!
//! # Invariants
//!
//! - Bad input is an error, never a panic, and nesting deeper than [`canonical::MAX_DEPTH`] is a
//!   typed error on both sides, never a stack overflow.
//! - The reader reads numbers by value: every spelling of one decimal binds an integer field to
//!   the same integer and a float field to the same correctly rounded `f64`, whatever features
//!   the rest of the build turns on for serde_json.
//! - The reader and the writer agree: text the reader binds to a type has a signature, and
//!   every spelling of one JSON value has one canonical text.
//! - serde_json's own parser is never used. Its private tokens are: a `RawValue`'s text and,
//!   under `arbitrary_precision`, a `Number`'s exact text travel through serde as a struct with
//!   a reserved name. A test of this crate records the names serde_json itself passes when it
//!   serializes and deserializes those types, and fails, saying what to change, if a release of
//!   serde_json renames them.
//!
//! # Features
//!
//! - `exact-numbers` (off by default): turns on serde_json's `arbitrary_precision`, so that a
//!   `serde_json::Value` keeps every number's exact text, read by [`from_str`] and written by
//!   [`canonical`]. It changes serde_json for the whole build; see [`canonical`] for what each
//!   mode guarantees.
//!
//! ```
//! #[derive(serde::Deserialize, serde::Serialize)]
//! struct Ticket { input: i64 }
//!
//! let ticket: Ticket = loopbound_json::from_str(r#"{"input": 4.2e1}"#)?;
//! let signature = loopbound_json::canonical::signature("read_ticket", &ticket)?;
//! assert_eq!(signature.as_str(), r#"read_ticket:{"input":42}"#);
//!
//! let refused = loopbound_json::from_str::<Ticket>(r#"{"input": "PIN-4242"}"#).err().unwrap();
//! let described = refused.describe(r#"{"input": "PIN-4242"}"#);
//! assert_eq!(described.class, loopbound_json::Class::Mismatch);
//! assert_eq!(described.message, "input: invalid type: a string, expected i64");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![warn(clippy::pedantic)]
// Module names prefix most types; repeating them in item names reads well here.
#![allow(clippy::module_name_repetitions)]

pub mod canonical;
mod reader;

pub use reader::{Class, Described, Error, from_str};
