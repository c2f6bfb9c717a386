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

/// A float: its shortest round-trip text in normal form, or `null` when not finite.
#[inline]
pub(crate) fn write_float<F: ryu::Float + Finite>(out: &mut String, value: F) {
    if value.finite() {
        write_number(out, ryu::Buffer::new().format_finite(value));
    } else {
        write_null(out);
    }
}

/// Floats that can say whether they are finite.
pub(crate) trait Finite: Copy {
    fn finite(self) -> bool;
}

impl Finite for f32 {
    fn finite(self) -> bool {
        self.is_finite()
    }
}

impl Finite for f64 {
    fn finite(self) -> bool {
        self.is_finite()
    }
}

/// An open object: its entries' keys and where each starts in the output.
#[derive(Debug)]
pub(crate) struct Entries<K> {
    /// Keys and start offsets of the entries before the last one.
    earlier: Vec<(K, usize)>,
    /// The last entry's key and start offset.
    last: Option<(K, usize)>,
    /// Every key so far came after the one before it.
    in_order: bool,
}

impl<K: AsRef<str>> Entries<K> {
    /// Writes `{` and opens an object.
    pub(crate) fn open(out: &mut String) -> Self {
        out.push('{');
        Self { earlier: Vec::new(), last: None, in_order: true }
    }

    /// Starts an entry: a comma unless it is the first, the key and a colon. The caller writes
    /// the value next.
    #[inline]
    pub(crate) fn key(&mut self, out: &mut String, key: K) {
        if let Some(last) = self.last.take() {
            if last.0.as_ref() >= key.as_ref() {
                self.in_order = false;
            }
            self.earlier.push(last);
            out.push(',');
        }
        let start = out.len();
        write_json_string(out, key.as_ref());
        out.push(':');
        self.last = Some((key, start));
    }

    /// Puts the entries in key order, keeping the last of each key, and writes `}`.
    pub(crate) fn close(self, out: &mut String) {
        let Self { mut earlier, last, in_order } = self;
        if !in_order && let Some(last) = last {
            earlier.push(last);
            reorder(out, &earlier);
        }
        out.push('}');
    }
}

/// Rewrites the entries `entries` (key and start offset, in the order written, running to the
/// end of `out`) in key order, the last entry of each key winning.
fn reorder<K: AsRef<str>>(out: &mut String, entries: &[(K, usize)]) {
    let Some(&(_, start)) = entries.first() else { return };
    let end = out.len();
    // Entry i spans from its start to the comma before entry i + 1, or to the end.
    let mut spans: Vec<(&str, std::ops::Range<usize>)> = entries
        .iter()
        .enumerate()
        .map(|(index, (key, from))| {
            let to = entries.get(index + 1).map_or(end, |(_, next)| next - 1);
            (key.as_ref(), *from..to)
        })
        .collect();
    // A stable sort keeps the entries of one key in the order they came; the last one wins.
    spans.sort_by(|a, b| a.0.cmp(b.0));
    let mut written = 0;
    for (index, (key, range)) in spans.iter().enumerate() {
        if spans.get(index + 1).is_some_and(|(next, _)| next == key) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn object(entries: &[(&str, &str)]) -> String {
        let mut out = String::from("[");
        let mut object = Entries::open(&mut out);
        for (key, value) in entries {
            object.key(&mut out, *key);
            out.push_str(value);
        }
        object.close(&mut out);
        out.push(']');
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
        assert_eq!(written(-0.0), "0");
        assert_eq!(written(1e21), "1e21");
        assert_eq!(written(1.5e-7), "1.5e-7");
        assert_eq!(written(f64::NAN), "null");
        assert_eq!(written(f64::NEG_INFINITY), "null");
        let mut out = String::new();
        write_float(&mut out, 0.1_f32);
        assert_eq!(out, "0.1");
    }
}
