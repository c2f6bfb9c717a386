//! The one canonical writer: how each part of a JSON value is written, whichever driver walks
//! the value (the `serde_json::Value` walk, the typed serializer, raw JSON text).
//!
//! # Invariants
//!
//! - Scalars: `null`, `true`, `false`; strings escaped by [`write_json_string`]; every number
//!   in the normal form of [`write_number`] (integers of up to 64 bits are already in it as
//!   itoa writes them); a non-finite float, which JSON cannot hold, is `null`, as serde_json
//!   writes it.
//! - Objects ([`Entries`]): keys in code-point order (the byte order of UTF-8); when a key comes
//!   twice, the last entry wins, as when serde_json builds a map from it. Entries are written
//!   as they come; only an object whose keys did not come in strictly increasing order is
//!   rewritten at its close.
//! - Depth ([`nest`]): a driver that recurses refuses nesting past [`MAX_DEPTH`] containers.

use super::error::SignatureError;
use super::{MAX_DEPTH, write_json_string, write_number};

/// The depth inside one more container, or [`SignatureError::TooDeep`] past [`MAX_DEPTH`].
#[inline]
pub(crate) fn nest(depth: usize) -> Result<usize, SignatureError> {
    if depth < MAX_DEPTH { Ok(depth + 1) } else { Err(SignatureError::TooDeep { limit: MAX_DEPTH }) }
}

pub(crate) fn write_null(out: &mut String) {
    out.push_str("null");
}

pub(crate) fn write_bool(out: &mut String, value: bool) {
    out.push_str(if value { "true" } else { "false" });
}

/// An integer of up to 64 bits: itoa writes it without leading zeros or `-0`, which is the
/// normal form.
#[inline]
pub(crate) fn write_integer<I: itoa::Integer>(out: &mut String, value: I) {
    out.push_str(itoa::Buffer::new().format(value));
}

/// A 128-bit integer, which may need the exponent form (from 10^21 on).
pub(crate) fn write_wide_integer<I: itoa::Integer>(out: &mut String, value: I) {
    write_number(out, itoa::Buffer::new().format(value));
}

/// A float: its shortest round-trip text in normal form, or `null` when not finite. A float
/// that holds a small integer exactly is that integer, written as itoa writes it.
#[inline]
pub(crate) fn write_float<F: ryu::Float + Finite>(out: &mut String, value: F) {
    if let Some(integer) = value.small_integer() {
        write_integer(out, integer);
    } else if value.finite() {
        write_number(out, ryu::Buffer::new().format_finite(value));
    } else {
        write_null(out);
    }
}

/// Floats that can say whether they are finite, and which integer they hold exactly.
pub(crate) trait Finite: Copy {
    fn finite(self) -> bool;

    /// The integer the float is, when it is one below 2^mantissa-bits in magnitude (2^24 for
    /// `f32`, 2^53 for `f64`): every integer there has its own float, so the float's shortest
    /// round-trip text is the integer's digits. Beyond, a shorter text may round to the same
    /// float (the `f32` 1073741952 is written `1073742000`).
    fn small_integer(self) -> Option<i64>;
}

impl Finite for f32 {
    fn finite(self) -> bool {
        self.is_finite()
    }

    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_precision_loss,
        clippy::float_cmp,
        reason = "below 2^24 in magnitude, the cast to an integer and back is exact for integers"
    )]
    fn small_integer(self) -> Option<i64> {
        const LIMIT: f32 = 16_777_216.0;
        let integer = self as i64;
        (self.abs() < LIMIT && integer as f32 == self).then_some(integer)
    }
}

impl Finite for f64 {
    fn finite(self) -> bool {
        self.is_finite()
    }

    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_precision_loss,
        clippy::float_cmp,
        reason = "below 2^53 in magnitude, the cast to an integer and back is exact for integers"
    )]
    fn small_integer(self) -> Option<i64> {
        const LIMIT: f64 = 9_007_199_254_740_992.0;
        let integer = self as i64;
        (self.abs() < LIMIT && integer as f64 == self).then_some(integer)
    }
}

/// Room shared by the objects of one write: the keys and offsets of the entries of every open
/// object, as a stack (an object's entries sit above its parent's and go when it closes), and a
/// buffer to reorder one object's text. Both are reused from object to object, so that an
/// object costs no allocation once the first ones have grown them.
#[derive(Debug)]
pub(crate) struct Scratch<K> {
    /// Key, start offset and (once the object closes) end offset of each earlier entry.
    entries: Vec<(K, usize, usize)>,
    text: String,
}

impl<K> Default for Scratch<K> {
    fn default() -> Self {
        Self { entries: Vec::new(), text: String::new() }
    }
}

/// An open object: where its entries are kept in the [`Scratch`], and its last entry.
#[derive(Debug)]
pub(crate) struct Entries<K> {
    /// Where this object's earlier entries start in the scratch stack.
    base: usize,
    /// The last entry's key and start offset, kept here so that a one-entry object never
    /// touches the scratch.
    last: Option<(K, usize)>,
    /// Every key so far came after the one before it.
    in_order: bool,
}

impl<K: AsRef<str>> Entries<K> {
    /// Writes `{` and opens an object.
    pub(crate) fn open(out: &mut String, scratch: &Scratch<K>) -> Self {
        out.push('{');
        Self { base: scratch.entries.len(), last: None, in_order: true }
    }

    /// Starts an entry: a comma unless it is the first, the key and a colon. The caller writes
    /// the value next.
    #[inline]
    pub(crate) fn key(&mut self, out: &mut String, scratch: &mut Scratch<K>, key: K) {
        if let Some((last, start)) = self.last.take() {
            if last.as_ref() >= key.as_ref() {
                self.in_order = false;
            }
            scratch.entries.push((last, start, 0));
            out.push(',');
        }
        let start = out.len();
        write_json_string(out, key.as_ref());
        out.push(':');
        self.last = Some((key, start));
    }

    /// Puts the entries in key order, keeping the last of each key, and writes `}`.
    pub(crate) fn close(self, out: &mut String, scratch: &mut Scratch<K>) {
        if !self.in_order
            && let Some((last, start)) = self.last
        {
            scratch.entries.push((last, start, 0));
            let Scratch { entries, text } = scratch;
            reorder(out, entries.get_mut(self.base..).unwrap_or_default(), text);
        }
        scratch.entries.truncate(self.base);
        out.push('}');
    }
}

/// Rewrites the entries `entries` (key and start offset, in the order written, the last one
/// running to the end of `out`) in key order, the last entry of each key winning.
fn reorder<K: AsRef<str>>(out: &mut String, entries: &mut [(K, usize, usize)], text: &mut String) {
    let Some(&(_, start, _)) = entries.first() else { return };
    // Entry i runs from its start to the comma before entry i + 1, or to the end.
    let mut end = out.len();
    for entry in entries.iter_mut().rev() {
        entry.2 = end;
        end = entry.1.saturating_sub(1);
    }
    // A stable sort keeps the entries of one key in the order they came; the last one wins.
    entries.sort_by(|a, b| a.0.as_ref().cmp(b.0.as_ref()));
    text.clear();
    for (index, (key, from, to)) in entries.iter().enumerate() {
        if entries.get(index + 1).is_some_and(|(next, ..)| next.as_ref() == key.as_ref()) {
            continue;
        }
        if !text.is_empty() {
            text.push(',');
        }
        text.push_str(out.get(*from..*to).unwrap_or_default());
    }
    out.truncate(start);
    out.push_str(text);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(entries: &[(&str, &str)]) -> String {
        let mut scratch = Scratch::default();
        let mut out = String::from("[");
        let mut object = Entries::open(&mut out, &scratch);
        for (key, value) in entries {
            object.key(&mut out, &mut scratch, *key);
            out.push_str(value);
        }
        object.close(&mut out, &mut scratch);
        out.push(']');
        assert!(scratch.entries.is_empty(), "a closed object leaves nothing in the scratch");
        out
    }

    #[test]
    fn entries_come_out_sorted_with_the_last_duplicate_winning() {
        assert_eq!(object(&[]), "[{}]");
        assert_eq!(object(&[("b", "1")]), r#"[{"b":1}]"#);
        assert_eq!(object(&[("a", "1"), ("b", "2")]), r#"[{"a":1,"b":2}]"#);
        assert_eq!(object(&[("b", "1"), ("a", "[2,3]"), ("c", "{}")]), r#"[{"a":[2,3],"b":1,"c":{}}]"#);
        assert_eq!(object(&[("b", "1"), ("a", "2"), ("b", "3")]), r#"[{"a":2,"b":3}]"#);
        assert_eq!(object(&[("a", "1"), ("a", "2")]), r#"[{"a":2}]"#);
    }

    #[test]
    fn nested_objects_share_the_scratch_as_a_stack() {
        let mut scratch = Scratch::default();
        let mut out = String::new();
        let mut outer = Entries::open(&mut out, &scratch);
        outer.key(&mut out, &mut scratch, "z");
        out.push('1');
        outer.key(&mut out, &mut scratch, "m");
        let mut inner = Entries::open(&mut out, &scratch);
        for key in ["y", "x", "w"] {
            inner.key(&mut out, &mut scratch, key);
            out.push('2');
        }
        inner.close(&mut out, &mut scratch);
        outer.key(&mut out, &mut scratch, "a");
        out.push_str("[3]");
        outer.close(&mut out, &mut scratch);
        assert_eq!(out, r#"{"a":[3],"m":{"w":2,"x":2,"y":2},"z":1}"#);
        assert!(scratch.entries.is_empty());
    }

    #[test]
    fn the_depth_rule_allows_exactly_max_depth_levels() {
        assert_eq!(nest(0), Ok(1));
        assert_eq!(nest(MAX_DEPTH - 1), Ok(MAX_DEPTH));
        assert_eq!(nest(MAX_DEPTH), Err(SignatureError::TooDeep { limit: MAX_DEPTH }));
    }

    #[test]
    fn floats_are_normal_and_non_finite_ones_null() {
        let written = |value: f64| {
            let mut out = String::new();
            write_float(&mut out, value);
            out
        };
        assert_eq!(written(42.0), "42");
        assert_eq!(written(-42.0), "-42");
        assert_eq!(written(-0.0), "0");
        assert_eq!(written(9_007_199_254_740_991.0), "9007199254740991");
        assert_eq!(written(9_007_199_254_740_992.0), "9007199254740992");
        assert_eq!(written(1e20), "100000000000000000000");
        assert_eq!(written(1e21), "1e21");
        assert_eq!(written(1.5e-7), "1.5e-7");
        assert_eq!(written(f64::NAN), "null");
        assert_eq!(written(f64::NEG_INFINITY), "null");
        let single = |value: f32| {
            let mut out = String::new();
            write_float(&mut out, value);
            out
        };
        assert_eq!(single(0.1), "0.1");
        assert_eq!(single(16_777_215.0), "16777215");
        assert_eq!(single(1_073_741_952.0), "1073742000");
        assert_eq!(single(-3.0), "-3");
    }
}
