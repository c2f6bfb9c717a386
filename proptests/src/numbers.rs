//! Numbers generated as (sign, digit string, exponent), spelled many ways, with their expected
//! canonical text computed from the generated value.
//!
//! # Invariants
//!
//! - Every spelling [`Num::spell`] writes follows the JSON grammar and denotes exactly the
//!   generated value: the decimal point moves, zeros are added and the exponent compensates,
//!   all in exact integer arithmetic.
//! - [`Num::expected`] is derived from the value (digits and exponent), never from core's code.

use crate::harness::reference::{BigInt, Decimal};
use proptest::prelude::*;

/// A number as generated: `(-1)^negative × digits × 10^exponent`, digits possibly padded.
#[derive(Clone, Debug)]
pub struct Num {
    /// Below zero.
    pub negative: bool,
    /// Digits, possibly with leading and trailing zeros.
    pub digits: String,
    /// Power of ten applied to `digits`.
    pub exponent: i128,
}

impl Num {
    /// The expected normal text, from the value.
    pub fn expected(&self) -> String {
        let significant = self.digits.trim_start_matches('0');
        let trimmed = significant.trim_end_matches('0');
        if trimmed.is_empty() {
            return "0".to_owned();
        }
        let trailing = i128::try_from(significant.len() - trimmed.len()).unwrap_or(0);
        let lead = self.exponent + trailing + i128::try_from(trimmed.len()).unwrap_or(0) - 1;
        Decimal::NonZero {
            negative: self.negative,
            digits: trimmed.to_owned(),
            exponent: BigInt::from_i128(lead),
        }
        .normal_text()
    }

    /// Whether two generated numbers have the same value.
    pub fn same_value(&self, other: &Self) -> bool {
        self.expected() == other.expected()
    }

    /// One JSON spelling of the value.
    pub fn spell(&self, how: &Spelling) -> String {
        let significant = self.digits.trim_start_matches('0');
        let mut out = String::new();
        if self.negative {
            out.push('-');
        }
        if significant.is_empty() {
            // Zero: any sign, any fraction of zeros, any exponent.
            out.push('0');
            if how.fraction > 0 {
                out.push('.');
                out.push_str(&"0".repeat(how.fraction));
            }
            if !how.omit_zero_exponent {
                out.push_str(&how.exponent_text(self.exponent));
            }
            return out;
        }
        let mantissa = format!("{significant}{}", "0".repeat(how.extra_zeros));
        let fraction = how.fraction;
        let written = self.exponent - i128::try_from(how.extra_zeros).unwrap_or(0)
            + i128::try_from(fraction).unwrap_or(0);
        if fraction == 0 {
            out.push_str(&mantissa);
        } else if fraction < mantissa.len() {
            let (int, frac) = mantissa.split_at(mantissa.len() - fraction);
            out.push_str(&format!("{int}.{frac}"));
        } else {
            out.push_str(&format!("0.{}{mantissa}", "0".repeat(fraction - mantissa.len())));
        }
        if written != 0 || !how.omit_zero_exponent {
            out.push_str(&how.exponent_text(written));
        }
        out
    }
}

/// The integer `n` is, when it is a 64-bit integer (`i64` or `u64`): what a default-mode
/// `serde_json::Value` holds exactly.
pub fn as_64_bit_integer(n: &Num) -> Option<String> {
    let integer = Decimal::parse(&n.expected()).and_then(|d| d.integer_text(20))?;
    (integer.parse::<u64>().is_ok() || integer.parse::<i64>().is_ok()).then_some(integer)
}

/// Whether `form` is a form of the `f64` nearest to `n`'s value (Rust's correctly rounded
/// `str::parse`): a number in normal form that reads back as exactly that `f64`, with as few
/// significant digits as the shortest round-trip text. When two shortest texts lie equally close
/// (600000000000000.25 is between `…0.2` and `…0.3`), either is a form; the writer picks one,
/// the same every time.
pub fn is_nearest_float_form(form: &str, n: &Num) -> bool {
    let significant = |text: &str| match Decimal::parse(text) {
        Some(Decimal::NonZero { digits, .. }) => Some(digits.len()),
        Some(Decimal::Zero) => Some(0),
        None => None,
    };
    let Ok(nearest) = n.expected().parse::<f64>() else { return false };
    let normal = Decimal::parse(form).map(|decimal| decimal.normal_text());
    normal.as_deref() == Some(form)
        && form.parse::<f64>().ok() == Some(nearest)
        && significant(form) == significant(&nearest.to_string())
}

/// How to spell a number.
#[derive(Clone, Debug)]
pub struct Spelling {
    /// Digits after the decimal point.
    pub fraction: usize,
    /// Trailing zeros added to the digits (and taken off the exponent).
    pub extra_zeros: usize,
    /// `E` rather than `e`.
    pub upper: bool,
    /// `+` before a non-negative exponent.
    pub plus: bool,
    /// Zeros before the exponent's digits.
    pub padding: usize,
    /// No exponent part when it is zero.
    pub omit_zero_exponent: bool,
}

impl Spelling {
    fn exponent_text(&self, exponent: i128) -> String {
        let sign = if exponent < 0 {
            "-"
        } else if self.plus {
            "+"
        } else {
            ""
        };
        let e = if self.upper { 'E' } else { 'e' };
        format!("{e}{sign}{}{}", "0".repeat(self.padding), exponent.unsigned_abs())
    }
}

/// Exponents: small ones, around 10^18 (where machine integers end), and huge ones.
pub fn exponent() -> impl Strategy<Value = i128> {
    const E18: i128 = 1_000_000_000_000_000_000;
    prop_oneof![
        4 => -30i128..30,
        1 => (-E18 - 60)..(-E18 + 60),
        1 => (E18 - 60)..(E18 + 60),
        1 => Just(999_999_999_999_999_999_999i128),
        1 => Just(-999_999_999_999_999_999_999i128),
        1 => -10i128.pow(36)..10i128.pow(36),
    ]
}

/// A number of up to 45 digits with any exponent.
pub fn num() -> impl Strategy<Value = Num> {
    (any::<bool>(), "[0-9]{1,45}", exponent()).prop_map(|(negative, digits, exponent)| Num {
        negative,
        digits,
        exponent,
    })
}

/// Any way to spell a number.
pub fn spelling() -> impl Strategy<Value = Spelling> {
    (0usize..50, 0usize..6, any::<bool>(), any::<bool>(), 0usize..4, any::<bool>()).prop_map(
        |(fraction, extra_zeros, upper, plus, padding, omit_zero_exponent)| Spelling {
            fraction,
            extra_zeros,
            upper,
            plus,
            padding,
            omit_zero_exponent,
        },
    )
}
