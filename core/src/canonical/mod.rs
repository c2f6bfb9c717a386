//! Canonical JSON: one text per JSON value, used to compare tool arguments.
//!
//! Rules (SPEC §5): object keys sorted by code point and written as JSON strings, no
//! whitespace; numbers by exact decimal value in one normal form ([`number`]); strings by decoded
//! value ([`escape`]); array order and `null` significant.
//!
//! # Invariants
//!
//! - Total: every `serde_json::Value` has a form. The walk keeps its own stack on the heap, so
//!   depth is bounded by memory, never by the thread's stack.
//! - Idempotent: the form, parsed and written again, gives the same text.
//! - Deterministic whatever serde_json's map order (sorted `BTreeMap`, or insertion order under
//!   `preserve_order`): keys are sorted here when the map does not already yield them sorted.

mod escape;
mod number;
mod serializer;

use serde_json::{Map, Value};

pub(crate) use escape::write_json_string;
pub(crate) use number::write_number;
pub(crate) use serializer::{SignatureError, signature};

/// Returns the canonical JSON text of `value`.
///
/// ```
/// use serde_json::json;
/// use loopbound::canonical_json;
///
/// let a = json!({"b": [1, 2.0, null], "a": "x"});
/// let b: serde_json::Value = serde_json::from_str(r#"{ "a" : "x", "b" : [1e0, 2, null] }"#).unwrap();
/// assert_eq!(canonical_json(&a), r#"{"a":"x","b":[1,2,null]}"#);
/// assert_eq!(canonical_json(&a), canonical_json(&b));
/// ```
#[must_use]
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(&mut out, value);
    out
}

/// One step of the explicit walk.
enum Task<'a> {
    Value(&'a Value),
    Key(&'a str),
    Punct(char),
}

/// Appends the canonical JSON text of `value` to `out`, without recursion.
pub(crate) fn write_canonical(out: &mut String, value: &Value) {
    let mut tasks = vec![Task::Value(value)];
    while let Some(task) = tasks.pop() {
        match task {
            Task::Punct(byte) => out.push(byte),
            Task::Key(key) => write_json_string(out, key),
            Task::Value(value) => match value {
                Value::Null => out.push_str("null"),
                Value::Bool(true) => out.push_str("true"),
                Value::Bool(false) => out.push_str("false"),
                Value::Number(number) => write_json_number(out, number),
                Value::String(text) => write_json_string(out, text),
                Value::Array(items) => {
                    out.push('[');
                    tasks.push(Task::Punct(']'));
                    for (index, item) in items.iter().enumerate().rev() {
                        tasks.push(Task::Value(item));
                        if index > 0 {
                            tasks.push(Task::Punct(','));
                        }
                    }
                }
                Value::Object(map) => {
                    out.push('{');
                    tasks.push(Task::Punct('}'));
                    push_entries(&mut tasks, map);
                }
            },
        }
    }
}

/// Pushes the tasks of an object's entries so that they pop in key order.
fn push_entries<'a>(tasks: &mut Vec<Task<'a>>, map: &'a Map<String, Value>) {
    let sorted = map.keys().zip(map.keys().skip(1)).all(|(a, b)| a < b);
    let mut push = |index: usize, key: &'a str, value: &'a Value| {
        tasks.push(Task::Value(value));
        tasks.push(Task::Punct(':'));
        tasks.push(Task::Key(key));
        if index > 0 {
            tasks.push(Task::Punct(','));
        }
    };
    if sorted {
        let count = map.len();
        for (offset, (key, value)) in map.iter().rev().enumerate() {
            push(count - 1 - offset, key, value);
        }
    } else {
        let mut entries: Vec<(&'a String, &'a Value)> = map.iter().collect();
        entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
        for (index, (key, value)) in entries.into_iter().enumerate().rev() {
            push(index, key, value);
        }
    }
}

/// Appends the normal form of a serde_json number.
fn write_json_number(out: &mut String, number: &serde_json::Number) {
    #[cfg(feature = "exact-numbers")]
    write_number(out, number.as_str());
    #[cfg(not(feature = "exact-numbers"))]
    {
        if let Some(unsigned) = number.as_u64() {
            out.push_str(itoa::Buffer::new().format(unsigned));
        } else if let Some(signed) = number.as_i64() {
            out.push_str(itoa::Buffer::new().format(signed));
        } else if let Some(float) = number.as_f64() {
            write_number(out, ryu::Buffer::new().format_finite(float));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
