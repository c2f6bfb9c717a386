//! The raw-text driver of the canonical writer: JSON text (a serde_json `RawValue`) written in
//! canonical form token by token, with loopbound's own scanner rather than serde_json's parser.
//!
//! # Invariants
//!
//! - Numbers keep their exact text (normalised by the shared writer), with or without any
//!   serde_json feature: raw text is never converted to `f64`.
//! - The text must be exactly one JSON value; its containers count towards the same
//!   [`MAX_DEPTH`](super::MAX_DEPTH) as the typed value around it.
//! - Strings must decode to Unicode text (no unpaired surrogate escape): a canonical string is
//!   written from its decoded value.

use std::borrow::Cow;

use super::error::SignatureError;
use super::writer::{Entries, Scratch, nest, write_bool, write_null};
use super::{write_json_string, write_number};
use crate::reader::SyntaxCode;
use crate::reader::read::{Reader, Text};

/// Appends the canonical form of the JSON `text`, found inside `depth` containers.
pub(crate) fn write_raw(out: &mut String, text: &str, depth: usize) -> Result<(), SignatureError> {
    let mut reader = Reader::new(text);
    let mut room = Room { strings: String::new(), objects: Scratch::default() };
    write_value(out, &mut reader, &mut room, depth)?;
    reader.end().map_err(|_| SignatureError::InvalidRawJson)
}

/// What the walk reuses: a buffer to decode strings into, and the objects' scratch.
struct Room<'t> {
    strings: String,
    objects: Scratch<Cow<'t, str>>,
}

/// Writes the value at the cursor; recursion is bounded by [`nest`].
fn write_value<'t>(
    out: &mut String,
    reader: &mut Reader<'t>,
    room: &mut Room<'t>,
    depth: usize,
) -> Result<(), SignatureError> {
    let invalid = |_| SignatureError::InvalidRawJson;
    match reader.peek() {
        Some(b'{') => {
            reader.bump();
            let depth = nest(depth)?;
            let mut entries = Entries::open(out, &room.objects);
            if reader.peek() == Some(b'}') {
                reader.bump();
            } else {
                loop {
                    if reader.peek() != Some(b'"') {
                        return Err(SignatureError::InvalidRawJson);
                    }
                    let key = match reader.string(&mut room.strings).map_err(invalid)? {
                        Text::Borrowed(key) => Cow::Borrowed(key),
                        Text::Copied(key) => Cow::Owned(key.to_owned()),
                    };
                    reader.expect(b':', SyntaxCode::ExpectedColon).map_err(invalid)?;
                    entries.key(out, &mut room.objects, key);
                    write_value(out, reader, room, depth)?;
                    match reader.peek() {
                        Some(b',') => reader.bump(),
                        Some(b'}') => {
                            reader.bump();
                            break;
                        }
                        _ => return Err(SignatureError::InvalidRawJson),
                    }
                }
            }
            entries.close(out, &mut room.objects);
        }
        Some(b'[') => {
            reader.bump();
            let depth = nest(depth)?;
            out.push('[');
            if reader.peek() == Some(b']') {
                reader.bump();
            } else {
                loop {
                    write_value(out, reader, room, depth)?;
                    match reader.peek() {
                        Some(b',') => {
                            reader.bump();
                            out.push(',');
                        }
                        Some(b']') => {
                            reader.bump();
                            break;
                        }
                        _ => return Err(SignatureError::InvalidRawJson),
                    }
                }
            }
            out.push(']');
        }
        Some(b'"') => write_json_string(out, reader.string(&mut room.strings).map_err(invalid)?.as_str()),
        Some(b'n') => {
            reader.literal(b"null").map_err(invalid)?;
            write_null(out);
        }
        Some(b't') => {
            reader.literal(b"true").map_err(invalid)?;
            write_bool(out, true);
        }
        Some(b'f') => {
            reader.literal(b"false").map_err(invalid)?;
            write_bool(out, false);
        }
        Some(b'-' | b'0'..=b'9') => write_number(out, reader.number().map_err(invalid)?.text),
        _ => return Err(SignatureError::InvalidRawJson),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::MAX_DEPTH;

    fn form(text: &str) -> Result<String, SignatureError> {
        let mut out = String::new();
        write_raw(&mut out, text, 0).map(|()| out)
    }

    #[test]
    fn raw_text_gets_the_canonical_form_with_exact_numbers() {
        assert_eq!(
            form(r#" { "b" : [ 4.2e1 , -0 , 1e400 , 123456789012345678901234567890 ] , "a" : "\u0041\n" , "b" : null } "#)
                .as_deref(),
            Ok(r#"{"a":"A\n","b":null}"#)
        );
        assert_eq!(
            form("[4.2e1,-0,1e400,123456789012345678901234567890,true,false,{}]").as_deref(),
            Ok("[42,0,1e400,1.2345678901234567890123456789e29,true,false,{}]")
        );
    }

    #[test]
    fn raw_text_that_is_not_one_json_value_is_refused() {
        for text in ["", "[1,]", "{\"a\" 1}", "[1] 2", "\"\\ud800\"", "nul", "{1:2}"] {
            assert_eq!(form(text), Err(SignatureError::InvalidRawJson), "{text}");
        }
    }

    #[test]
    fn raw_text_counts_towards_the_depth_limit() {
        let nested = |levels: usize| format!("{}{}", "[".repeat(levels), "]".repeat(levels));
        let mut out = String::new();
        assert_eq!(write_raw(&mut out, &nested(3), MAX_DEPTH - 3), Ok(()));
        assert_eq!(
            write_raw(&mut out, &nested(4), MAX_DEPTH - 3),
            Err(SignatureError::TooDeep { limit: MAX_DEPTH })
        );
    }
}
