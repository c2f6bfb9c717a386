//! The `serde_json::Value` driver of the canonical writer: a walk over a value that is total,
//! whatever its depth.
//!
//! # Invariants
//!
//! - Every `Value` has a form: the first [`RECURSION_LIMIT`] levels are written by bounded
//!   recursion, which needs no allocation; deeper containers are walked with a stack on the
//!   heap (one frame per open container), so depth is bounded by memory, never by the
//!   thread's stack.
//! - Keys are fed to the output in code-point order: a map that does not yield them sorted
//!   (serde_json's `preserve_order`, detected once) is sorted first. A map cannot hold a key
//!   twice.
//! - Scalars are written by the shared [`writer`](super::writer), so a value's form is the one
//!   the typed serializer gives the same data.

use serde_json::{Map, Value};

use super::write_json_string;
use super::writer::{write_bool, write_null};

/// One open array or object of the walk, with the items it has still to write.
struct Frame<'a> {
    items: Items<'a>,
    /// Nothing written inside the container yet, so the next item needs no comma.
    first: bool,
}

/// The remaining items of an open container.
enum Items<'a> {
    Array(std::slice::Iter<'a, Value>),
    /// An object whose map yields its keys in code-point order (always, unless serde_json's
    /// `preserve_order` is on).
    Object(serde_json::map::Iter<'a>),
    /// An object whose entries had to be sorted first.
    Sorted(std::vec::IntoIter<(&'a String, &'a Value)>),
}

impl<'a> Frame<'a> {
    fn object(map: &'a Map<String, Value>) -> Self {
        let sorted = maps_are_sorted() || map.keys().zip(map.keys().skip(1)).all(|(a, b)| a < b);
        let items = if sorted {
            Items::Object(map.iter())
        } else {
            let mut entries: Vec<(&'a String, &'a Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            Items::Sorted(entries.into_iter())
        };
        Self { items, first: true }
    }

    /// The next item, with its key for objects; `None` when the container is done.
    fn next(&mut self) -> Option<(Option<&'a str>, &'a Value)> {
        match &mut self.items {
            Items::Array(items) => items.next().map(|value| (None, value)),
            Items::Object(entries) => entries.next().map(|(key, value)| (Some(key.as_str()), value)),
            Items::Sorted(entries) => entries.next().map(|(key, value)| (Some(key.as_str()), value)),
        }
    }

    /// Writes what precedes the next item: a comma unless it is the first, and its key.
    fn separate(&mut self, out: &mut String, key: Option<&str>) {
        if !self.first {
            out.push(',');
        }
        self.first = false;
        if let Some(key) = key {
            write_json_string(out, key);
            out.push(':');
        }
    }

    fn close(&self) -> char {
        match self.items {
            Items::Array(_) => ']',
            Items::Object(_) | Items::Sorted(_) => '}',
        }
    }
}

/// Whether serde_json's maps yield their keys in code-point order: they do (a `BTreeMap`) unless
/// serde_json's `preserve_order` is on somewhere in the build (insertion order). Asked once.
fn maps_are_sorted() -> bool {
    static SORTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SORTED.get_or_init(|| {
        let mut map = Map::new();
        map.insert("b".to_owned(), Value::Null);
        map.insert("a".to_owned(), Value::Null);
        map.keys().map(String::as_str).eq(["a", "b"])
    })
}

/// Containers nested deeper than this are written by the heap-stack walk, [`write_deep`].
const RECURSION_LIMIT: u32 = 32;

/// Appends the canonical JSON text of `value` to `out`. The first [`RECURSION_LIMIT`] levels of
/// nesting are written by bounded recursion, which needs no allocation; anything deeper goes to
/// [`write_deep`], whose depth is bounded by memory, not by the stack.
pub(crate) fn write_canonical(out: &mut String, value: &Value) {
    write_shallow(out, value, 0);
}

fn write_shallow(out: &mut String, value: &Value, depth: u32) {
    match value {
        Value::Array(_) | Value::Object(_) if depth >= RECURSION_LIMIT => write_deep(out, value),
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_shallow(out, item, depth + 1);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            let mut entries = Frame::object(map);
            while let Some((key, item)) = entries.next() {
                entries.separate(out, key);
                write_shallow(out, item, depth + 1);
            }
            out.push('}');
        }
        scalar => write_scalar(out, scalar),
    }
}

/// Appends a value that is neither an array nor an object.
fn write_scalar(out: &mut String, value: &Value) {
    match value {
        Value::Null => write_null(out),
        Value::Bool(flag) => write_bool(out, *flag),
        Value::Number(number) => write_json_number(out, number),
        Value::String(text) => write_json_string(out, text),
        Value::Array(_) | Value::Object(_) => write_deep(out, value),
    }
}

/// Appends the canonical JSON text of `value` to `out` without recursion: the walk keeps one
/// frame per open container on the heap.
fn write_deep(out: &mut String, value: &Value) {
    let mut stack: Vec<Frame<'_>> = Vec::new();
    let mut current = value;
    'values: loop {
        match current {
            Value::Array(items) => {
                out.push('[');
                stack.push(Frame { items: Items::Array(items.iter()), first: true });
            }
            Value::Object(map) => {
                out.push('{');
                stack.push(Frame::object(map));
            }
            scalar => write_scalar(out, scalar),
        }
        // Move on to the next item of the innermost open container, closing finished ones.
        while let Some(frame) = stack.last_mut() {
            if let Some((key, item)) = frame.next() {
                frame.separate(out, key);
                current = item;
                continue 'values;
            }
            out.push(frame.close());
            stack.pop();
        }
        return;
    }
}

/// Appends the normal form of a serde_json number: its exact text with `exact-numbers`, else
/// the integer or float it holds.
fn write_json_number(out: &mut String, number: &serde_json::Number) {
    #[cfg(feature = "exact-numbers")]
    super::write_number(out, number.as_str());
    #[cfg(not(feature = "exact-numbers"))]
    {
        if let Some(unsigned) = number.as_u64() {
            super::writer::write_integer(out, unsigned);
        } else if let Some(signed) = number.as_i64() {
            super::writer::write_integer(out, signed);
        } else if let Some(float) = number.as_f64() {
            super::writer::write_float(out, float);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::canonical_json;
    use serde_json::json;

    fn parse(text: &str) -> Value {
        serde_json::from_str(text).unwrap_or(Value::Null)
    }

    #[test]
    fn keys_sorted_and_no_whitespace() {
        let value = parse(r#"{ "b": 1, "a": { "d": [ 3, 2 ], "c": null }, "A": true }"#);
        assert_eq!(canonical_json(&value), r#"{"A":true,"a":{"c":null,"d":[3,2]},"b":1}"#);
    }

    #[test]
    fn keys_sort_by_code_point_not_by_locale() {
        let value = json!({"é": 1, "z": 2, "Z": 3, "\u{1F600}": 4, "\u{FFFF}": 5});
        assert_eq!(canonical_json(&value), "{\"Z\":3,\"z\":2,\"é\":1,\"\u{FFFF}\":5,\"\u{1F600}\":4}");
    }

    #[test]
    fn strings_compare_by_decoded_value_and_keep_case_and_space() {
        assert_eq!(canonical_json(&parse(r#""\u0041\/""#)), r#""A/""#);
        assert_ne!(canonical_json(&json!("Ticket")), canonical_json(&json!("ticket")));
        assert_ne!(canonical_json(&json!("a")), canonical_json(&json!(" a")));
    }

    #[test]
    fn arrays_keep_order_and_null_is_significant() {
        assert_ne!(canonical_json(&json!([1, 2])), canonical_json(&json!([2, 1])));
        assert_ne!(canonical_json(&json!({"a": null})), canonical_json(&json!({})));
        assert_eq!(canonical_json(&json!([])), "[]");
        assert_eq!(canonical_json(&json!({})), "{}");
    }

    #[cfg(feature = "exact-numbers")]
    #[test]
    fn numbers_compare_by_exact_value() {
        assert_eq!(canonical_json(&parse("[42, 42.0, 4.2e1, 420e-1, -0]")), "[42,42,42,42,0]");
        let a = parse("123456789012345678901234567890123");
        let b = parse("123456789012345678901234567890124");
        assert_ne!(canonical_json(&a), canonical_json(&b));
        assert_eq!(canonical_json(&parse("1e400")), canonical_json(&parse("10E399")));
    }

    #[test]
    fn form_is_idempotent() {
        let value = parse(r#"{"z":[1.50,{"y":"\n"}],"a":1e3}"#);
        let once = canonical_json(&value);
        assert_eq!(canonical_json(&parse(&once)), once);
    }

    /// Builds `[[[…]]]` with `depth` levels, then takes it apart without recursion, because
    /// serde_json's own `Drop` of such a value recurses.
    #[test]
    fn a_hundred_thousand_levels_do_not_overflow_the_stack() {
        const DEPTH: usize = 100_000;
        let mut value = json!({"leaf": 1});
        for _ in 0..DEPTH {
            value = Value::Array(vec![value]);
        }
        let text = canonical_json(&value);
        // Take the value apart before asserting: a failed assertion would otherwise drop it
        // recursively while unwinding.
        dismantle(value);
        let expected = format!("{}{}{}", "[".repeat(DEPTH), r#"{"leaf":1}"#, "]".repeat(DEPTH));
        assert!(text == expected, "canonical form of the deep value differs");
    }

    /// Levels around the recursion limit, where the walk moves from recursion to its heap stack.
    #[test]
    fn objects_and_arrays_across_the_recursion_limit() {
        let levels = 2 * RECURSION_LIMIT as usize + 3;
        let mut value = json!({"z": 1.50, "a": "\u{1}"});
        let mut expected = r#"{"a":"\u0001","z":1.5}"#.to_owned();
        for level in 0..levels {
            if level % 2 == 0 {
                value = Value::Array(vec![value, Value::Null]);
                expected = format!("[{expected},null]");
            } else {
                let mut map = Map::new();
                map.insert("y".to_owned(), value);
                map.insert("b".to_owned(), json!([]));
                value = Value::Object(map);
                expected = format!(r#"{{"b":[],"y":{expected}}}"#);
            }
        }
        assert_eq!(canonical_json(&value), expected);
    }

    fn dismantle(value: Value) {
        let mut stack = vec![value];
        while let Some(mut value) = stack.pop() {
            match &mut value {
                Value::Array(items) => stack.append(items),
                Value::Object(map) => stack.extend(std::mem::take(map).into_iter().map(|(_, v)| v)),
                _ => {}
            }
        }
    }
}
