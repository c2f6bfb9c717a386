//! JSON numbers compared by value, whatever their spelling: `1`, `1.0` and `1e0` are equal.
//!
//! # Invariants
//!
//! - Integers compare exactly with integers and with floats (no rounding through `f64`).
//! - `multipleOf` is exact on integers; on fractions it is decided in `f64` with a relative
//!   tolerance of 1e-9, so `0.3` is a multiple of `0.1`.

use std::cmp::Ordering;

use serde_json::{Number, Value};

/// A number as an exact integer or a float.
#[derive(Clone, Copy)]
enum Exact {
    Int(i128),
    Float(f64),
}

fn exact(number: &Number) -> Exact {
    if let Some(int) = number.as_i64() {
        Exact::Int(i128::from(int))
    } else if let Some(int) = number.as_u64() {
        Exact::Int(i128::from(int))
    } else {
        Exact::Float(number.as_f64().unwrap_or(f64::NAN))
    }
}

/// 2^127, the first float past `i128`'s range.
const TWO_127: f64 = 170_141_183_460_469_231_731_687_303_715_884_105_728.0;

/// Compares an integer with a float, exactly. `None` for NaN.
fn int_float(int: i128, float: f64) -> Option<Ordering> {
    if float.is_nan() {
        return None;
    }
    if float >= TWO_127 {
        return Some(Ordering::Less);
    }
    if float < -TWO_127 {
        return Some(Ordering::Greater);
    }
    let whole = float.trunc();
    #[allow(clippy::cast_possible_truncation, reason = "whole is integral and within i128's range")]
    let whole_int = whole as i128;
    Some(int.cmp(&whole_int).then_with(|| 0.0_f64.partial_cmp(&(float - whole)).unwrap_or(Ordering::Equal)))
}

/// Compares two numbers by value; NaN (which JSON cannot hold) compares equal to nothing and
/// is ordered last.
pub(crate) fn compare(a: &Number, b: &Number) -> Ordering {
    compare_exact(exact(a), exact(b)).unwrap_or(Ordering::Greater)
}

fn compare_exact(a: Exact, b: Exact) -> Option<Ordering> {
    match (a, b) {
        (Exact::Int(a), Exact::Int(b)) => Some(a.cmp(&b)),
        (Exact::Float(a), Exact::Float(b)) => a.partial_cmp(&b),
        (Exact::Int(a), Exact::Float(b)) => int_float(a, b),
        (Exact::Float(a), Exact::Int(b)) => int_float(b, a).map(Ordering::reverse),
    }
}

pub(crate) fn is_finite(number: &Number) -> bool {
    match exact(number) {
        Exact::Int(_) => true,
        Exact::Float(float) => float.is_finite(),
    }
}

pub(crate) fn is_positive(number: &Number) -> bool {
    match exact(number) {
        Exact::Int(int) => int > 0,
        Exact::Float(float) => float.is_finite() && float > 0.0,
    }
}

/// Whether the number has no fractional part (JSON Schema's `integer`).
pub(crate) fn is_integer(number: &Number) -> bool {
    match exact(number) {
        Exact::Int(_) => true,
        Exact::Float(float) => float.is_finite() && float.fract() == 0.0,
    }
}

/// Whether `value` is a multiple of `divisor` (which is positive).
pub(crate) fn is_multiple(value: &Number, divisor: &Number) -> bool {
    match (exact(value), exact(divisor)) {
        (Exact::Int(value), Exact::Int(divisor)) => divisor != 0 && value % divisor == 0,
        (value, divisor) => {
            let (value, divisor) = (as_float(value), as_float(divisor));
            let quotient = value / divisor;
            quotient.is_finite() && (quotient - quotient.round()).abs() <= 1e-9 * quotient.abs().max(1.0)
        }
    }
}

#[allow(clippy::cast_precision_loss, reason = "only for multipleOf on fractions, documented as approximate")]
fn as_float(number: Exact) -> f64 {
    match number {
        Exact::Int(int) => int as f64,
        Exact::Float(float) => float,
    }
}

/// JSON equality with numbers compared by value.
pub(crate) fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(a), Value::Number(b)) => compare_exact(exact(a), exact(b)) == Some(Ordering::Equal),
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| json_equal(a, b))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len() && a.iter().all(|(key, a)| b.get(key).is_some_and(|b| json_equal(a, b)))
        }
        (a, b) => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn n(value: Value) -> Number {
        match value {
            Value::Number(number) => number,
            other => panic!("not a number: {other}"),
        }
    }

    #[test]
    fn spellings_of_one_number_are_equal() {
        assert!(json_equal(&json!(1), &json!(1.0)));
        assert!(json_equal(&json!([1, {"a": 2}]), &json!([1.0, {"a": 2e0}])));
        assert!(!json_equal(&json!(1), &json!(1.5)));
        assert!(!json_equal(&json!(1), &json!("1")));
    }

    #[test]
    fn integers_and_floats_compare_exactly() {
        // 2^53 + 1 is not a float: rounding through f64 would call these equal.
        let big = n(json!(9_007_199_254_740_993_u64));
        assert_eq!(compare(&big, &n(json!(9_007_199_254_740_992.0))), Ordering::Greater);
        assert_eq!(compare(&n(json!(-1)), &n(json!(-0.5))), Ordering::Less);
        assert_eq!(compare(&n(json!(3)), &n(json!(2.5))), Ordering::Greater);
        assert_eq!(compare(&n(json!(u64::MAX)), &n(json!(1e300))), Ordering::Less);
    }

    #[test]
    fn multiples() {
        assert!(is_multiple(&n(json!(12)), &n(json!(4))));
        assert!(!is_multiple(&n(json!(13)), &n(json!(4))));
        assert!(is_multiple(&n(json!(0.3)), &n(json!(0.1))));
        assert!(!is_multiple(&n(json!(0.35)), &n(json!(0.1))));
        assert!(is_integer(&n(json!(2.0))));
        assert!(!is_integer(&n(json!(2.5))));
    }
}
