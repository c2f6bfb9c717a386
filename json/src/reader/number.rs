//! Number tokens read by value: every spelling of one decimal value gives the same integer or
//! float.
//!
//! # Invariants
//!
//! - [`integer`] reads the exact decimal value of a token: `42`, `42.0`, `4.2e1` and `420e-1`
//!   are the integer 42 and `-0` is 0; a value with a non-zero fraction is
//!   [`Integer::Fraction`]; an integer beyond 128 bits is [`Integer::TooLarge`], decided from
//!   the digit count and the exponent before any arithmetic, so a token like `1e999999999`
//!   costs no more than its length.
//! - [`float`] is Rust's correctly rounded parse (`str::parse::<f64>`): the nearest `f64` to
//!   the decimal value, the same for every spelling. Values beyond `f64::MAX` are `None`.

use super::read::Token;

/// The integer value of a number token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Integer {
    /// Zero or positive, up to `u64::MAX`.
    U64(u64),
    /// Negative, down to `i64::MIN`.
    I64(i64),
    /// Positive, beyond `u64::MAX`.
    U128(u128),
    /// Negative, beyond `i64::MIN`.
    I128(i128),
    /// An integer beyond `i128::MIN..=u128::MAX`.
    TooLarge,
    /// The value has a non-zero fraction.
    Fraction,
}

/// The integer value of `token`, which follows the JSON number grammar.
#[inline]
pub(crate) fn integer(token: Token<'_>) -> Integer {
    let text = token.text.as_bytes();
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    // The common case: plain digits that fit a u64 without a check (at most 19 digits).
    if token.plain && digits.len() <= 19 {
        let magnitude = digits.iter().fold(0u64, |acc, digit| acc * 10 + u64::from(digit - b'0'));
        return signed(negative, u128::from(magnitude));
    }
    general(negative, digits)
}

/// Any token: the significant digits and the power of ten that applies to them.
fn general(negative: bool, digits: &[u8]) -> Integer {
    let (mantissa, exponent) = match digits.iter().position(|&b| b == b'e' || b == b'E') {
        Some(at) => (&digits[..at], read_exponent(&digits[at + 1..])),
        None => (digits, 0),
    };
    let (int, frac) = match mantissa.iter().position(|&b| b == b'.') {
        Some(at) => (&mantissa[..at], &mantissa[at + 1..]),
        None => (mantissa, &mantissa[mantissa.len()..]),
    };
    let all = || int.iter().chain(frac);
    let Some(first) = all().position(|&d| d != b'0') else { return Integer::U64(0) };
    let total = int.len() + frac.len();
    let last = total - 1 - all().rev().position(|&d| d != b'0').unwrap_or(0);
    // The value is digits[first..=last] × 10^scale.
    let trailing_zeros = to_i64(total - 1 - last);
    let scale = exponent.saturating_sub(to_i64(frac.len())).saturating_add(trailing_zeros);
    if scale < 0 {
        return Integer::Fraction;
    }
    // 10^39 exceeds u128::MAX: more digits than 39 cannot fit.
    if to_i64(last - first + 1).saturating_add(scale) > 39 {
        return Integer::TooLarge;
    }
    let mut magnitude: u128 = 0;
    for &digit in all().skip(first).take(last - first + 1) {
        match magnitude.checked_mul(10).and_then(|m| m.checked_add(u128::from(digit - b'0'))) {
            Some(next) => magnitude = next,
            None => return Integer::TooLarge,
        }
    }
    // `scale` is at most 38 here.
    let power = 10u128.checked_pow(u32::try_from(scale).unwrap_or(u32::MAX));
    match power.and_then(|power| magnitude.checked_mul(power)) {
        Some(magnitude) => signed(negative, magnitude),
        None => Integer::TooLarge,
    }
}

/// The exponent's value, saturated far beyond any scale that matters.
fn read_exponent(text: &[u8]) -> i64 {
    const CAP: i64 = 1 << 40;
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, text),
    };
    let magnitude = digits
        .iter()
        .fold(0i64, |acc, digit| acc.saturating_mul(10).saturating_add(i64::from(digit - b'0')).min(CAP));
    if negative { -magnitude } else { magnitude }
}

fn to_i64(value: usize) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// The integer of this sign and magnitude, in the narrowest variant that holds it.
fn signed(negative: bool, magnitude: u128) -> Integer {
    if magnitude == 0 {
        return Integer::U64(0);
    }
    if !negative {
        return match u64::try_from(magnitude) {
            Ok(small) => Integer::U64(small),
            Err(_) => Integer::U128(magnitude),
        };
    }
    if magnitude <= u128::from(i64::MIN.unsigned_abs()) {
        // -magnitude fits an i64, so it fits an i128 and converts back.
        return Integer::I64(i64::try_from(-i128::try_from(magnitude).unwrap_or(0)).unwrap_or(i64::MIN));
    }
    match i128::try_from(magnitude) {
        Ok(value) => Integer::I128(-value),
        Err(_) if magnitude == i128::MIN.unsigned_abs() => Integer::I128(i128::MIN),
        Err(_) => Integer::TooLarge,
    }
}

/// The nearest `f64` to the token's value, or `None` beyond `f64`'s range.
#[inline]
pub(crate) fn float(token: Token<'_>) -> Option<f64> {
    token.text.parse::<f64>().ok().filter(|value| value.is_finite())
}

/// The nearest `f32` to the token's value (rounded once, from the decimal), or `None` beyond
/// `f32`'s range.
pub(crate) fn float32(token: Token<'_>) -> Option<f32> {
    token.text.parse::<f32>().ok().filter(|value| value.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::read::Reader;

    fn read(text: &str) -> Integer {
        let token = Reader::new(text).number().unwrap_or(Token { text: "0", plain: true });
        assert_eq!(token.text, text, "the whole text is one token");
        integer(token)
    }

    #[test]
    fn every_spelling_of_an_integer_is_that_integer() {
        for text in ["42", "42.0", "4.2e1", "4.2E+1", "420e-1", "0.042e3", "42.000", "4200e-2"] {
            assert_eq!(read(text), Integer::U64(42), "{text}");
        }
        for text in ["0", "-0", "0.0", "-0.0e5", "0e999999999999999999999"] {
            assert_eq!(read(text), Integer::U64(0), "{text}");
        }
        assert_eq!(read("-42e0"), Integer::I64(-42));
        assert_eq!(read("1e3"), Integer::U64(1000));
    }

    #[test]
    fn each_width_has_its_variant() {
        assert_eq!(read("18446744073709551615"), Integer::U64(u64::MAX));
        assert_eq!(read("18446744073709551616"), Integer::U128(1 << 64));
        assert_eq!(read("-9223372036854775808"), Integer::I64(i64::MIN));
        assert_eq!(read("-9223372036854775809"), Integer::I128(i128::from(i64::MIN) - 1));
        assert_eq!(read("340282366920938463463374607431768211455"), Integer::U128(u128::MAX));
        assert_eq!(read("340282366920938463463374607431768211456"), Integer::TooLarge);
        assert_eq!(read("-170141183460469231731687303715884105728"), Integer::I128(i128::MIN));
        assert_eq!(read("-170141183460469231731687303715884105729"), Integer::TooLarge);
        assert_eq!(read("3.4e38"), Integer::U128(34 * 10u128.pow(37)));
        assert_eq!(read("1e39"), Integer::TooLarge);
        assert_eq!(read("1e99999999999999999999999"), Integer::TooLarge);
        assert_eq!(read("99999999999999999999999"), Integer::U128(99_999_999_999_999_999_999_999));
    }

    #[test]
    fn fractions_are_not_integers() {
        for text in ["42.5", "4.25e1", "1e-1", "0.1", "-0.5", "1e-99999999999999999999"] {
            assert_eq!(read(text), Integer::Fraction, "{text}");
        }
    }

    #[test]
    fn floats_round_once_to_the_nearest() {
        let token = |text| Token { text, plain: false };
        assert_eq!(float(token("60000e22")), float(token("6000e23")));
        assert_eq!(float(token("60000e22")), Some(6e26));
        assert_eq!(float(token("1e400")), None);
        assert_eq!(float(token("-1e400")), None);
        assert_eq!(float(token("1e-400")), Some(0.0));
        assert_eq!(float32(token("1e39")), None);
        assert_eq!(float32(token("0.1")), Some(0.1_f32));
    }
}
