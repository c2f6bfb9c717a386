//! The normal form of a JSON number: one spelling per exact decimal value.
//!
//! A number is read from its JSON text as sign, significant digits and a decimal exponent of
//! any size; nothing is converted to a binary float, so nothing is rounded.
//!
//! # Invariants
//!
//! - Two texts get the same form iff they denote the same decimal value: `42`, `42.0`, `4.2e1`
//!   and `420e-1` give `42`; `-0`, `0.0` and `0e99` give `0`.
//! - The form is valid JSON. With `D` the significant digits (no leading or trailing zeros) and
//!   `x` the power of ten of the leading digit, it is written plainly when `-7 < x < 21`
//!   (`420`, `4.25`, `0.00001`) and as `d.ddde<x>` otherwise (`1e21`, `1.5e-7`).
//! - Exponents of any length are exact: they are added to as decimal digit strings when they do
//!   not fit a machine integer.
//! - Writing the form of a form gives the same form (idempotence).

/// Appends the normal form of the JSON number `text` to `out`.
///
/// `text` is expected to follow the JSON number grammar, as every number that serde_json holds
/// does. Text outside the grammar cannot be normalised and is appended unchanged.
pub(crate) fn write_number(out: &mut String, text: &str) {
    match Parts::parse(text) {
        Some(parts) if parts.is_plain_normal() => {
            // `-0` is the one plain text that is not its own form.
            if parts.int == "0" && parts.frac.is_empty() { out.push('0') } else { out.push_str(text) }
        }
        Some(parts) => parts.write(out),
        None => out.push_str(text),
    }
}

/// A number's text split at the JSON grammar's boundaries.
struct Parts<'a> {
    negative: bool,
    int: &'a str,
    frac: &'a str,
    exp_negative: bool,
    exp: &'a [u8],
}

impl<'a> Parts<'a> {
    fn parse(text: &'a str) -> Option<Self> {
        let mut rest = text.as_bytes();
        let negative = rest.first() == Some(&b'-');
        if negative {
            rest = &rest[1..];
        }
        let int_len = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        if int_len == 0 {
            return None;
        }
        // The integer and fraction parts are kept as text: every boundary here follows an ASCII
        // byte, so it is a char boundary, and the digits are written out without conversion.
        let int_start = usize::from(negative);
        let int = text.get(int_start..int_start + int_len)?;
        rest = &rest[int_len..];
        let mut frac = "";
        if rest.first() == Some(&b'.') {
            let len = rest[1..].iter().take_while(|b| b.is_ascii_digit()).count();
            if len == 0 {
                return None;
            }
            let frac_start = int_start + int_len + 1;
            frac = text.get(frac_start..frac_start + len)?;
            rest = &rest[1 + len..];
        }
        let mut exp_negative = false;
        let mut exp: &[u8] = &[];
        if let Some((b'e' | b'E', after)) = rest.split_first() {
            let after = match after.split_first() {
                Some((b'-', digits)) => {
                    exp_negative = true;
                    digits
                }
                Some((b'+', digits)) => digits,
                _ => after,
            };
            let len = after.iter().take_while(|b| b.is_ascii_digit()).count();
            if len == 0 {
                return None;
            }
            exp = &after[..len];
            rest = &after[len..];
        }
        if !rest.is_empty() {
            return None;
        }
        Some(Self { negative, int, frac, exp_negative, exp })
    }

    /// Whether the text is already its normal form (but for the sign of `-0`), checked without
    /// computing it: no exponent; an integer part of at most 21 digits without a leading zero, or
    /// `0`; a fraction part, if any, that does not end with `0`; and after `0.`, at most five
    /// zeros before the first significant digit. Then the leading digit's power of ten `x` lies
    /// in `-7 < x < 21`, where the form is written plainly, digit for digit as in the text.
    fn is_plain_normal(&self) -> bool {
        let (int, frac) = (self.int.as_bytes(), self.frac.as_bytes());
        if !self.exp.is_empty() || int.len() > 21 || frac.last() == Some(&b'0') {
            return false;
        }
        match int {
            [b'0'] => frac.is_empty() || frac.iter().take_while(|&&b| b == b'0').count() <= 5,
            [b'0', ..] => false,
            _ => true,
        }
    }

    /// Appends digits `from..to` of the integer part followed by the fraction part.
    fn push_digits(&self, out: &mut String, from: usize, to: usize) {
        let split = self.int.len();
        if let Some(digits) = self.int.get(from.min(split)..to.min(split)) {
            out.push_str(digits);
        }
        if let Some(digits) = self.frac.get(from.max(split) - split..to.max(split) - split) {
            out.push_str(digits);
        }
    }

    fn write(&self, out: &mut String) {
        let (int, frac) = (self.int.as_bytes(), self.frac.as_bytes());
        let nonzero = |digit: &u8| *digit != b'0';
        let first =
            int.iter().position(nonzero).or_else(|| frac.iter().position(nonzero).map(|i| int.len() + i));
        let Some(first) = first else {
            out.push('0');
            return;
        };
        let last = frac
            .iter()
            .rposition(nonzero)
            .map(|i| int.len() + i)
            .or_else(|| int.iter().rposition(nonzero))
            .unwrap_or(first);
        let significant = last - first + 1;
        // Power of ten of the leading significant digit, before the written exponent.
        let shift = i128::try_from(self.int.len()).unwrap_or(i128::MAX)
            - 1
            - i128::try_from(first).unwrap_or(i128::MAX);

        if self.negative {
            out.push('-');
        }
        match Exponent::read(self.exp_negative, self.exp) {
            Exponent::Small(written) => {
                let x = written + shift;
                self.write_with_small_exponent(out, first, significant, x);
            }
            Exponent::Large { negative, digits } => {
                self.write_mantissa(out, first, significant);
                out.push('e');
                if negative {
                    out.push('-');
                }
                // `shift` is bounded by the text's length, far below the written exponent's
                // magnitude (at least 10^18), so the sum keeps the written exponent's sign.
                let shift_toward_zero = if negative { shift > 0 } else { shift < 0 };
                let magnitude = shift.unsigned_abs();
                let adjusted = if shift_toward_zero {
                    decimal_sub(digits, magnitude)
                } else {
                    decimal_add(digits, magnitude)
                };
                out.extend(adjusted.iter().map(|&b| char::from(b)));
            }
        }
    }

    fn write_with_small_exponent(&self, out: &mut String, first: usize, significant: usize, x: i128) {
        if (0..21).contains(&x) {
            // x < 21, so it fits usize.
            let int_digits = usize::try_from(x).unwrap_or(0) + 1;
            if significant <= int_digits {
                self.push_digits(out, first, first + significant);
                out.extend(std::iter::repeat_n('0', int_digits - significant));
            } else {
                self.push_digits(out, first, first + int_digits);
                out.push('.');
                self.push_digits(out, first + int_digits, first + significant);
            }
        } else if (-6..0).contains(&x) {
            out.push_str("0.");
            let zeros = usize::try_from(-x - 1).unwrap_or(0);
            out.extend(std::iter::repeat_n('0', zeros));
            self.push_digits(out, first, first + significant);
        } else {
            self.write_mantissa(out, first, significant);
            out.push('e');
            let mut buffer = itoa::Buffer::new();
            out.push_str(buffer.format(x));
        }
    }

    fn write_mantissa(&self, out: &mut String, first: usize, significant: usize) {
        self.push_digits(out, first, first + 1);
        if significant > 1 {
            out.push('.');
            self.push_digits(out, first + 1, first + significant);
        }
    }
}

/// The written exponent: a machine integer when it fits, else its decimal digits.
enum Exponent<'a> {
    Small(i128),
    Large { negative: bool, digits: &'a [u8] },
}

impl<'a> Exponent<'a> {
    fn read(negative: bool, digits: &'a [u8]) -> Self {
        let start = digits.iter().position(|&b| b != b'0').unwrap_or(digits.len());
        let digits = &digits[start..];
        if digits.len() <= 18 {
            let magnitude = digits.iter().fold(0i128, |acc, &b| acc * 10 + i128::from(b - b'0'));
            Self::Small(if negative { -magnitude } else { magnitude })
        } else {
            Self::Large { negative, digits }
        }
    }
}

/// `digits + amount`, for a decimal digit string without leading zeros.
fn decimal_add(digits: &[u8], mut amount: u128) -> Vec<u8> {
    let mut reversed: Vec<u8> = digits.iter().rev().map(|b| b - b'0').collect();
    let mut carry = 0u8;
    let mut index = 0;
    while amount > 0 || carry > 0 {
        if index == reversed.len() {
            reversed.push(0);
        }
        // `amount % 10` is below 10, so the cast cannot truncate.
        let sum = reversed[index] + carry + u8::try_from(amount % 10).unwrap_or(0);
        reversed[index] = sum % 10;
        carry = sum / 10;
        amount /= 10;
        index += 1;
    }
    reversed.iter().rev().map(|d| d + b'0').collect()
}

/// `digits - amount`, for a decimal digit string without leading zeros that exceeds `amount`.
fn decimal_sub(digits: &[u8], mut amount: u128) -> Vec<u8> {
    let mut reversed: Vec<u8> = digits.iter().rev().map(|b| b - b'0').collect();
    let mut borrow = 0u8;
    let mut index = 0;
    while (amount > 0 || borrow > 0) && index < reversed.len() {
        let take = u8::try_from(amount % 10).unwrap_or(0) + borrow;
        if reversed[index] >= take {
            reversed[index] -= take;
            borrow = 0;
        } else {
            reversed[index] = reversed[index] + 10 - take;
            borrow = 1;
        }
        amount /= 10;
        index += 1;
    }
    while reversed.len() > 1 && reversed.last() == Some(&0) {
        reversed.pop();
    }
    reversed.iter().rev().map(|d| d + b'0').collect()
}

#[cfg(test)]
mod tests {
    use super::write_number;

    fn normal(text: &str) -> String {
        let mut out = String::new();
        write_number(&mut out, text);
        out
    }

    #[test]
    fn spellings_of_one_value_share_a_form() {
        for text in ["42", "42.0", "4.2e1", "4.2E+1", "420e-1", "0.042e3", "42.000", "0042"] {
            assert_eq!(normal(text), "42", "{text}");
        }
        for text in ["0", "-0", "0.0", "-0.000", "0e99", "0E-99999999999999999999999"] {
            assert_eq!(normal(text), "0", "{text}");
        }
    }

    #[test]
    fn plain_and_scientific_ranges() {
        assert_eq!(normal("100000000000000000000"), "100000000000000000000");
        assert_eq!(normal("1e20"), "100000000000000000000");
        assert_eq!(normal("1e21"), "1e21");
        assert_eq!(normal("1000000000000000000000"), "1e21");
        assert_eq!(normal("4.25"), "4.25");
        assert_eq!(normal("-4.25"), "-4.25");
        assert_eq!(normal("0.000001"), "0.000001");
        assert_eq!(normal("1e-7"), "1e-7");
        assert_eq!(normal("0.00000015"), "1.5e-7");
        assert_eq!(normal("123.456e-2"), "1.23456");
        assert_eq!(normal("-1.50E300"), "-1.5e300");
    }

    #[test]
    fn digits_beyond_any_float_are_kept() {
        let long = "1234567890123456789012345678901234567890";
        assert_eq!(normal(long), "1.23456789012345678901234567890123456789e39");
        assert_ne!(normal("0.1000000000000000000000000000001"), normal("0.1"));
        assert_ne!(normal("1e29"), normal("1.0000000000000000000000000000001e29"));
        assert_eq!(normal("1e29"), normal("1E29"));
    }

    #[test]
    fn huge_exponents_are_exact() {
        assert_eq!(normal("1e99999999999999999999"), "1e99999999999999999999");
        assert_eq!(normal("10e99999999999999999999"), "1e100000000000000000000");
        assert_eq!(normal("0.01e100000000000000000000"), "1e99999999999999999998");
        assert_eq!(normal("12.5e-99999999999999999999"), "1.25e-99999999999999999998");
        assert_eq!(normal("0.0125e-99999999999999999999"), "1.25e-100000000000000000001");
        assert_eq!(normal("5e-1000000000000000000000"), normal("50e-1000000000000000000001"));
        assert_eq!(normal("1e+000000000000000000000000000003"), "1000");
    }

    #[test]
    fn forms_are_fixed_points() {
        for text in ["42", "4.25", "1e21", "1.5e-7", "0.000001", "1e99999999999999999999", "-7"] {
            let once = normal(text);
            assert_eq!(normal(&once), once, "{text}");
        }
    }

    /// The general form, without the fast path for text that is already normal.
    fn general(text: &str) -> String {
        let mut out = String::new();
        if let Some(parts) = super::Parts::parse(text) {
            parts.write(&mut out);
        }
        out
    }

    #[test]
    fn the_plain_fast_path_writes_what_the_general_form_writes() {
        let texts = [
            "0",
            "-0",
            "7",
            "-7",
            "0.5",
            "-0.5",
            "12.5",
            "0.000001",
            "0.0000001",
            "0.00000015",
            "123456789012345678901",
            "1234567890123456789012",
            "123456789012345678901.5",
            "1234567890123456789012.5",
            "12.50",
            "00.5",
            "0.10",
        ];
        for text in texts {
            let mut fast = String::new();
            super::write_number(&mut fast, text);
            assert_eq!(fast, general(text), "{text}");
        }
        assert_eq!(normal("123456789012345678901.5"), "123456789012345678901.5");
        assert_eq!(normal("1234567890123456789012.5"), "1.2345678901234567890125e21");
    }

    #[test]
    fn text_outside_the_grammar_is_kept() {
        assert_eq!(normal("abc"), "abc");
        assert_eq!(normal("1."), "1.");
        assert_eq!(normal("1e"), "1e");
        assert_eq!(normal(""), "");
    }
}
