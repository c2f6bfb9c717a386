//! The reader of `loopbound-json` against serde_json's, on any text: the check of the fuzz
//! target `json_read`.
//!
//! # Invariants checked
//!
//! - The reader never panics, whatever the text.
//! - What serde_json reads into a `Value`, the reader reads too, to the same value: the same
//!   canonical form, except that a float may be up to two units in the last place away, since
//!   serde_json's default float parsing is best-effort and the reader's correctly rounded; and
//!   a decimal past `f64::MAX`, which serde_json may round down to it and the reader refuses.
//! - What the reader accepts and serde_json refuses nests past serde_json's recursion limit.
//! - A value the reader accepts has a signature, its canonical form, which is its own form.
//! - A refusal holds no byte of the text: its message is a path of indices and `[<key>]`
//!   placeholders, then one of a fixed set of problems, with a syntax error's position as
//!   numbers; its `Display` likewise.

use loopbound_json::Class;
use serde_json::Value;

use super::bind_case::ulps_apart;

/// What a syntax error's message may say after its position.
const SYNTAX_PROBLEMS: [&str; 12] = [
    "the text ends before the value does",
    "expected a value",
    "expected `:`",
    "expected `,` or `]`",
    "expected `,` or `}`",
    "an object key must be a string",
    "expected `true`, `false` or `null`",
    "invalid number",
    "invalid escape in a string",
    "a \\u escape is an unpaired surrogate",
    "a control character in a string must be escaped",
    "text after the value",
];

/// The other problems reading into a `Value` can meet (a number beyond `f64`, without
/// `exact-numbers`).
const OTHER_PROBLEMS: [&str; 2] = ["arrays and objects nest deeper than 128 levels", OUT_OF_RANGE];

/// The refusal of a number beyond every `f64`.
const OUT_OF_RANGE: &str = "number out of range, expected any valid JSON value";

/// Checks the invariants of this module on `text`.
pub fn check(text: &str) {
    let ours = loopbound_json::from_str::<Value>(text);
    let theirs = serde_json::from_str::<Value>(text);
    match (ours, theirs) {
        (Ok(ours), Ok(theirs)) => {
            check_accepted(&ours);
            assert!(
                same_value(&ours, &theirs),
                "the reader and serde_json read different values: {} and {}",
                loopbound::canonical::canonical_json(&ours),
                loopbound::canonical::canonical_json(&theirs)
            );
        }
        (Ok(ours), Err(error)) => {
            check_accepted(&ours);
            assert!(
                error.to_string().starts_with("recursion limit exceeded"),
                "the reader accepts what serde_json refuses for another reason than depth: {error}"
            );
        }
        (Err(error), Ok(theirs)) => {
            let described = error.describe(text);
            assert!(
                described.message.ends_with(OUT_OF_RANGE) && holds_f64_max(&theirs),
                "the reader refuses JSON that serde_json reads: {described:?}"
            );
            check_refusal(text, &error);
        }
        (Err(error), Err(_)) => check_refusal(text, &error),
    }
}

/// A value the reader accepted has a signature, which is its canonical form, itself canonical.
fn check_accepted(value: &Value) {
    let form = loopbound::canonical::canonical_json(value);
    assert_eq!(
        loopbound::canonical::signature("t", value).map(loopbound::canonical::Signature::into_string),
        Ok(format!("t:{form}")),
        "the signature of a value the reader accepted"
    );
    assert_eq!(
        super::reference::canonical_text(&form).as_deref(),
        Some(form.as_str()),
        "the form is not its own form"
    );
}

/// Whether `a` and `b` are the same JSON value (numbers by canonical form, so `42` and `42.0`
/// are one value), a float of one allowed two units in the last place from the other's.
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same_value(a, b))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len() && a.iter().all(|(key, a)| b.get(key).is_some_and(|b| same_value(a, b)))
        }
        (Value::Number(x), Value::Number(y)) => {
            let same_form =
                loopbound::canonical::canonical_json(a) == loopbound::canonical::canonical_json(b);
            same_form
                || match (x.as_f64(), y.as_f64()) {
                    (Some(x), Some(y)) => ulps_apart(x.to_bits(), y.to_bits(), 63) <= 2,
                    _ => false,
                }
        }
        _ => a == b,
    }
}

/// Whether `value` holds `f64::MAX` or its negative.
fn holds_f64_max(value: &Value) -> bool {
    match value {
        Value::Number(number) => number.as_f64().is_some_and(|x| x.abs() == f64::MAX),
        Value::Array(items) => items.iter().any(holds_f64_max),
        Value::Object(entries) => entries.values().any(holds_f64_max),
        _ => false,
    }
}

/// A refusal's message and `Display` hold nothing of the text.
fn check_refusal(text: &str, error: &loopbound_json::Error) {
    let described = error.describe(text);
    let problem = if described.path.is_empty() {
        described.message.as_str()
    } else {
        described
            .message
            .strip_prefix(&format!("{}: ", described.path))
            .unwrap_or_else(|| panic!("the message does not start with its path: {described:?}"))
    };
    assert!(
        described.path.chars().all(|c| c.is_ascii_digit() || "[]<key>…".contains(c)),
        "the path holds more than indices and key placeholders: {described:?}"
    );
    match described.class {
        Class::InvalidJson => {
            let position = problem
                .strip_prefix("invalid JSON at line ")
                .unwrap_or_else(|| panic!("a syntax error without its position: {described:?}"));
            assert!(is_syntax_problem(position, " column "), "an unexpected syntax message: {described:?}");
            let shown = error.to_string();
            let at = shown
                .strip_prefix("invalid JSON at byte ")
                .unwrap_or_else(|| panic!("a syntax error shown without its offset: {shown}"));
            assert!(is_syntax_problem(at, ""), "an unexpected syntax error shown: {shown}");
        }
        _ => {
            assert!(OTHER_PROBLEMS.contains(&problem), "an unexpected refusal: {described:?}");
            assert!(
                OTHER_PROBLEMS.contains(&error.to_string().as_str()),
                "an unexpected refusal shown: {error}"
            );
        }
    }
}

/// Whether `rest` is `<digits><between><digits>: <a syntax problem>` (`between` empty for one
/// number).
fn is_syntax_problem(rest: &str, between: &str) -> bool {
    let Some((position, problem)) = rest.split_once(": ") else { return false };
    let numbers_only = if between.is_empty() {
        !position.is_empty() && position.bytes().all(|b| b.is_ascii_digit())
    } else {
        position.split_once(between).is_some_and(|(line, column)| {
            [line, column].iter().all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
    };
    numbers_only && SYNTAX_PROBLEMS.contains(&problem)
}
