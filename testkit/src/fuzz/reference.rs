//! An independent reference for loopbound's canonical JSON, written from the contract (SPEC §5)
//! and the number format that `json/src/canonical/number.rs` documents, without reusing any of
//! core's code.
//!
//! # Invariants
//!
//! - A number's value is read as sign, significant digits and the power of ten of its leading
//!   digit; that power is kept as a signed decimal digit string, so exponents of any length are
//!   exact and nothing is ever rounded.
//! - The normal text is plain when the leading digit's power `x` satisfies `-7 < x < 21`
//!   (`420`, `4.25`, `0.000001`) and `d.ddde<x>` otherwise; zero (and `-0`) is `0`.
//! - Strings and keys are written with serde_json's own escaping, keys sorted by code point
//!   (the byte order of UTF-8), no whitespace anywhere.

use std::cmp::Ordering;

use serde_json::Value;

/// A signed integer of any size, as little-endian decimal digits without trailing zeros
/// (zero is the empty magnitude and is never negative).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BigInt {
    negative: bool,
    magnitude: Vec<u8>,
}

impl BigInt {
    /// Reads optional sign and decimal digits (leading zeros allowed).
    pub fn from_digits(negative: bool, digits: &str) -> Self {
        let magnitude: Vec<u8> = digits.bytes().rev().map(|b| b - b'0').collect();
        Self::normalised(negative, magnitude)
    }

    /// The value `value`.
    pub fn from_i128(value: i128) -> Self {
        Self::from_digits(value < 0, &value.unsigned_abs().to_string())
    }

    fn normalised(negative: bool, mut magnitude: Vec<u8>) -> Self {
        while magnitude.last() == Some(&0) {
            magnitude.pop();
        }
        let negative = negative && !magnitude.is_empty();
        Self { negative, magnitude }
    }

    /// Whether the value is zero.
    pub fn is_zero(&self) -> bool {
        self.magnitude.is_empty()
    }

    /// The value if it fits an `i64`.
    pub fn to_i64(&self) -> Option<i64> {
        if self.magnitude.len() > 18 {
            return None;
        }
        let magnitude = self.magnitude.iter().rev().fold(0i64, |acc, &d| acc * 10 + i64::from(d));
        Some(if self.negative { -magnitude } else { magnitude })
    }

    /// `self + other`.
    #[must_use]
    pub fn add(&self, other: &Self) -> Self {
        if self.negative == other.negative {
            return Self::normalised(self.negative, add_magnitudes(&self.magnitude, &other.magnitude));
        }
        match compare_magnitudes(&self.magnitude, &other.magnitude) {
            Ordering::Equal => Self::default(),
            Ordering::Greater => {
                Self::normalised(self.negative, sub_magnitudes(&self.magnitude, &other.magnitude))
            }
            Ordering::Less => {
                Self::normalised(other.negative, sub_magnitudes(&other.magnitude, &self.magnitude))
            }
        }
    }
}

impl std::fmt::Display for BigInt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_zero() {
            return f.write_str("0");
        }
        if self.negative {
            f.write_str("-")?;
        }
        let digits: String = self.magnitude.iter().rev().map(|&d| char::from(b'0' + d)).collect();
        f.write_str(&digits)
    }
}

fn compare_magnitudes(a: &[u8], b: &[u8]) -> Ordering {
    a.len().cmp(&b.len()).then_with(|| a.iter().rev().cmp(b.iter().rev()))
}

fn add_magnitudes(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut sum = Vec::with_capacity(a.len().max(b.len()) + 1);
    let mut carry = 0;
    for index in 0..a.len().max(b.len()) {
        let digit = a.get(index).copied().unwrap_or(0) + b.get(index).copied().unwrap_or(0) + carry;
        sum.push(digit % 10);
        carry = digit / 10;
    }
    if carry > 0 {
        sum.push(carry);
    }
    sum
}

/// `a - b` for `a >= b`.
fn sub_magnitudes(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut difference = Vec::with_capacity(a.len());
    let mut borrow = 0;
    for (index, &digit) in a.iter().enumerate() {
        let take = b.get(index).copied().unwrap_or(0) + borrow;
        if digit >= take {
            difference.push(digit - take);
            borrow = 0;
        } else {
            difference.push(digit + 10 - take);
            borrow = 1;
        }
    }
    difference
}

/// The exact value of a JSON number: zero, or sign, significant digits (no leading or trailing
/// zero) and the power of ten of the leading digit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decimal {
    /// Zero, whatever its sign or spelling.
    Zero,
    /// A non-zero value.
    NonZero {
        /// Whether the value is below zero.
        negative: bool,
        /// Significant digits, first and last non-zero.
        digits: String,
        /// Power of ten of the first digit.
        exponent: BigInt,
    },
}

impl Decimal {
    /// Reads a number that follows the JSON grammar; `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        let (negative, rest) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (mantissa, written) = match rest.find(['e', 'E']) {
            Some(at) => {
                let exponent = &rest[at + 1..];
                let (exp_negative, digits) = match exponent.as_bytes().first() {
                    Some(b'-') => (true, &exponent[1..]),
                    Some(b'+') => (false, &exponent[1..]),
                    _ => (false, exponent),
                };
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                (&rest[..at], BigInt::from_digits(exp_negative, digits))
            }
            None => (rest, BigInt::default()),
        };
        let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let valid_int = int == "0" || (!int.is_empty() && !int.starts_with('0'));
        let valid_frac = !mantissa.contains('.') || !frac.is_empty();
        if !valid_int || !valid_frac || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
            return None;
        }
        let all = format!("{int}{frac}");
        let Some(first) = all.find(|c| c != '0') else {
            return Some(Self::Zero);
        };
        let last = all.rfind(|c| c != '0').unwrap_or(first);
        let lead_power = i128::try_from(int.len()).ok()? - 1 - i128::try_from(first).ok()?;
        Some(Self::NonZero {
            negative,
            digits: all[first..=last].to_owned(),
            exponent: written.add(&BigInt::from_i128(lead_power)),
        })
    }

    /// The normal text of this value.
    pub fn normal_text(&self) -> String {
        let Self::NonZero { negative, digits, exponent } = self else {
            return "0".to_owned();
        };
        let mut out = String::new();
        if *negative {
            out.push('-');
        }
        match exponent.to_i64().filter(|x| -7 < *x && *x < 21) {
            Some(x) if x >= 0 => {
                let whole = usize::try_from(x).unwrap_or(0) + 1;
                if digits.len() <= whole {
                    out.push_str(digits);
                    out.push_str(&"0".repeat(whole - digits.len()));
                } else {
                    out.push_str(&digits[..whole]);
                    out.push('.');
                    out.push_str(&digits[whole..]);
                }
            }
            Some(x) => {
                out.push_str("0.");
                out.push_str(&"0".repeat(usize::try_from(-x - 1).unwrap_or(0)));
                out.push_str(digits);
            }
            None => {
                out.push_str(&digits[..1]);
                if digits.len() > 1 {
                    out.push('.');
                    out.push_str(&digits[1..]);
                }
                out.push('e');
                out.push_str(&exponent.to_string());
            }
        }
        out
    }
}

impl Decimal {
    /// The value's plain integer digits (`-42`, `1000`), when it is an integer of at most
    /// `max_digits` digits.
    pub fn integer_text(&self, max_digits: usize) -> Option<String> {
        let Self::NonZero { negative, digits, exponent } = self else {
            return Some("0".to_owned());
        };
        let power = usize::try_from(exponent.to_i64()?).ok()?;
        if power + 1 < digits.len() || power >= max_digits {
            return None;
        }
        let sign = if *negative { "-" } else { "" };
        Some(format!("{sign}{digits}{}", "0".repeat(power + 1 - digits.len())))
    }
}

/// JSON `text` with every integer-valued number token outside strings rewritten as its plain
/// digits (`42.0`, `4.2e1` → `42`; `-0` → `0`), for up to 40 digits; other text unchanged. The
/// flag says whether some string that is an object key is an integer-valued number token
/// written otherwise than plainly (`"1.0"`, `"-0"`): binding reads such a key by value for an
/// integer-keyed map, serde_json does not.
pub fn plain_integers(text: &str) -> (String, bool) {
    let bytes = text.as_bytes();
    let (mut out, mut odd_key, mut at) = (String::with_capacity(text.len()), false, 0);
    while let Some(&byte) = bytes.get(at) {
        match byte {
            b'"' => {
                let end = string_end(bytes, at);
                let token = text.get(at..end).unwrap_or_default();
                out.push_str(token);
                let after = bytes.get(end..).unwrap_or_default();
                let is_key = after.iter().find(|b| !b" \t\n\r".contains(b)) == Some(&b':');
                if is_key
                    && let Ok(content) = serde_json::from_str::<String>(token)
                    && let Some(plain) = Decimal::parse(&content).and_then(|d| d.integer_text(40))
                {
                    odd_key |= plain != content;
                }
                at = end;
            }
            b'-' | b'0'..=b'9' => {
                let len = bytes[at..].iter().take_while(|b| b"+-.eE0123456789".contains(b)).count();
                let token = text.get(at..at + len).unwrap_or_default();
                match Decimal::parse(token).and_then(|decimal| decimal.integer_text(40)) {
                    Some(plain) => out.push_str(&plain),
                    None => out.push_str(token),
                }
                at += len;
            }
            _ => {
                let len = text.get(at..).and_then(|rest| rest.chars().next()).map_or(1, char::len_utf8);
                out.push_str(text.get(at..at + len).unwrap_or_default());
                at += len;
            }
        }
    }
    (out, odd_key)
}

/// The offset after the string token starting at `at` (or the end of the text).
fn string_end(bytes: &[u8], at: usize) -> usize {
    let mut index = at + 1;
    while let Some(&byte) = bytes.get(index) {
        index += 1;
        match byte {
            b'\\' => index += 1,
            b'"' => return index,
            _ => {}
        }
    }
    bytes.len()
}

/// The reference canonical text of `value` (recursive: callers keep values shallow, as
/// serde_json's parser does with its 128-level limit).
pub fn canonical(value: &Value) -> String {
    let mut out = String::new();
    write(&mut out, value);
    out
}

fn write(out: &mut String, value: &Value) {
    match value {
        Value::Null | Value::Bool(_) | Value::String(_) => {
            out.push_str(&serde_json::to_string(value).unwrap_or_default());
        }
        Value::Number(number) => {
            let text = number.to_string();
            match Decimal::parse(&text) {
                Some(decimal) => out.push_str(&decimal.normal_text()),
                None => panic!("serde_json holds a number outside the JSON grammar: {text}"),
            }
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_by(|a, b| a.chars().cmp(b.chars()));
            out.push('{');
            for (index, key) in keys.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(key).unwrap_or_default());
                out.push(':');
                write(out, &map[key]);
            }
            out.push('}');
        }
    }
}

/// The reference canonical text of the JSON `text`, read directly from the text so that every
/// number keeps its exact value whatever serde_json's features (recursive: callers keep text
/// shallow). `None` if `text` is not one JSON value. A key given twice keeps its last value.
pub fn canonical_text(text: &str) -> Option<String> {
    let mut parser = TextParser { text, pos: 0 };
    let form = parser.value()?;
    parser.space();
    (parser.pos == text.len()).then_some(form)
}

/// A recursive-descent reader of JSON text that writes canonical text as it goes.
struct TextParser<'a> {
    text: &'a str,
    pos: usize,
}

impl TextParser<'_> {
    fn space(&mut self) {
        while self.text.as_bytes().get(self.pos).is_some_and(|b| b" \t\n\r".contains(b)) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        self.space();
        (self.text.as_bytes().get(self.pos) == Some(&byte)).then(|| self.pos += 1)
    }

    fn value(&mut self) -> Option<String> {
        self.space();
        let rest = self.text.get(self.pos..)?;
        match rest.as_bytes().first()? {
            b'{' => {
                self.pos += 1;
                let mut entries = std::collections::BTreeMap::new();
                if self.eat(b'}').is_none() {
                    loop {
                        self.space();
                        let key = self.string()?;
                        self.eat(b':')?;
                        entries.insert(key, self.value()?);
                        if self.eat(b',').is_none() {
                            self.eat(b'}')?;
                            break;
                        }
                    }
                }
                let body: Vec<String> = entries
                    .iter()
                    .map(|(key, value)| format!("{}:{value}", serde_json::to_string(key).unwrap_or_default()))
                    .collect();
                Some(format!("{{{}}}", body.join(",")))
            }
            b'[' => {
                self.pos += 1;
                let mut items = Vec::new();
                if self.eat(b']').is_none() {
                    loop {
                        items.push(self.value()?);
                        if self.eat(b',').is_none() {
                            self.eat(b']')?;
                            break;
                        }
                    }
                }
                Some(format!("[{}]", items.join(",")))
            }
            b'"' => serde_json::to_string(&self.string()?).ok(),
            _ => {
                for word in ["null", "true", "false"] {
                    if rest.starts_with(word) {
                        self.pos += word.len();
                        return Some(word.to_owned());
                    }
                }
                let len = rest.bytes().take_while(|b| b"+-.eE0123456789".contains(b)).count();
                self.pos += len;
                Decimal::parse(rest.get(..len)?).map(|decimal| decimal.normal_text())
            }
        }
    }

    /// A string token at the cursor, decoded by serde_json.
    fn string(&mut self) -> Option<String> {
        let rest = self.text.get(self.pos..)?;
        if !rest.starts_with('"') {
            return None;
        }
        let mut escaped = false;
        let end = rest.char_indices().skip(1).find_map(|(index, c)| {
            let closes = c == '"' && !escaped;
            escaped = c == '\\' && !escaped;
            closes.then_some(index)
        })?;
        self.pos += end + 1;
        serde_json::from_str(rest.get(..=end)?).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normal(text: &str) -> String {
        Decimal::parse(text).map(|d| d.normal_text()).unwrap_or_default()
    }

    #[test]
    fn integers_are_made_plain_outside_strings() {
        let (text, odd_key) = plain_integers(r#"{"a":[4.2e1,-0,1.5,1e400,"4.2e1",42.0e0],"1":7e0}"#);
        assert_eq!(text, r#"{"a":[42,0,1.5,1e400,"4.2e1",42],"1":7}"#);
        assert!(!odd_key);
        assert_eq!(
            plain_integers(r#"{"k":{"1.0":true,"é":1}}"#),
            (r#"{"k":{"1.0":true,"é":1}}"#.to_owned(), true)
        );
        assert!(plain_integers(r#"{"-0":1}"#).1);
        assert_eq!(plain_integers(r#"["1.0", "\"", 3.00]"#), (r#"["1.0", "\"", 3]"#.to_owned(), false));
    }

    #[test]
    fn the_text_reference_keeps_numbers_exact_and_the_last_duplicate() {
        let text = r#" { "b" : [ 4.2e1, -0, 1e400, 123456789012345678901234567890, "\u0041" ], "a" : {}, "b" : [true, null, false] } "#;
        assert_eq!(canonical_text(text).as_deref(), Some(r#"{"a":{},"b":[true,null,false]}"#));
        assert_eq!(
            canonical_text("[4.2e1,-0,1e400,1234567890123456789012345678901]").as_deref(),
            Some("[42,0,1e400,1.234567890123456789012345678901e30]")
        );
        assert_eq!(canonical_text(r#"{"k":"\"\\"}"#).as_deref(), Some(r#"{"k":"\"\\"}"#));
        for bad in ["", "[1,]", "{\"a\" 1}", "[1] 2", "01", "[", "{1:2}"] {
            assert_eq!(canonical_text(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_reference_reads_the_documented_examples() {
        assert_eq!(normal("42"), "42");
        assert_eq!(normal("4.2e1"), "42");
        assert_eq!(normal("420e-1"), "42");
        assert_eq!(normal("-0.0e5"), "0");
        assert_eq!(normal("1e21"), "1e21");
        assert_eq!(normal("100000000000000000000"), "100000000000000000000");
        assert_eq!(normal("0.00000015"), "1.5e-7");
        assert_eq!(normal("0.000001"), "0.000001");
        assert_eq!(normal("10e999999999999999999"), "1e1000000000000000000");
        assert_eq!(normal("-0.5E-999999999999999999999"), "-5e-1000000000000000000000");
        assert_eq!(Decimal::parse("01"), None);
        assert_eq!(Decimal::parse("1."), None);
        assert_eq!(Decimal::parse("1e"), None);
    }
}
