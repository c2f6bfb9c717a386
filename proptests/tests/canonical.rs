//! Properties of `loopbound::canonical::canonical_json` (SPEC §5), against the independent reference in
//! `testkit/src/fuzz/reference.rs`.
//!
//! Numbers are generated as (sign, digit string, exponent) and spelled in many ways by this file
//! (integer, decimal point anywhere, trailing zeros, `e`/`E`, `+`, zero-padded exponents, `-0`,
//! exponents such as ±999999999999999999999); the expected form is computed from the generated
//! value itself, never from core's code.
//!
//! Documents are read into `serde_json::Value`s by loopbound's own reader (the binding of a
//! tool whose input holds a `Value`). What a `Value` can hold depends on the mode: by default, an
//! `i64`, a `u64` or an `f64`, so the default properties draw numbers that an `f64` holds
//! exactly (at most 15 significant digits) or check that longer ones take the form of their
//! nearest `f64`; with `exact-numbers` (`cargo test -p loopbound-proptests --features
//! exact-numbers`), any number, which keeps its exact value.

use loopbound::canonical::canonical_json;
use loopbound_proptests::config::with_cases;
#[cfg(feature = "exact-numbers")]
use loopbound_proptests::harness::reference;
use loopbound_proptests::harness::{check_canonical, read_value};
use loopbound_proptests::numbers::{Num, Spelling, exponent, spelling};
#[cfg(not(feature = "exact-numbers"))]
use loopbound_proptests::numbers::{as_64_bit_integer, is_nearest_float_form};
use loopbound_proptests::regressions;
use proptest::prelude::*;
use serde_json::Value;

/// `text` read by loopbound's reader; with exact numbers, serde_json's parser must agree.
fn parse(text: &str) -> Value {
    let value = read_value(text).unwrap_or_else(|error| panic!("{text} does not read: {error}"));
    #[cfg(feature = "exact-numbers")]
    {
        let parsed: Value = serde_json::from_str(text).unwrap_or_else(|error| panic!("{text}: {error}"));
        assert_eq!(canonical_json(&parsed), canonical_json(&value), "serde_json reads {text} otherwise");
    }
    value
}

fn form_of(text: &str) -> String {
    canonical_json(&parse(text))
}

/// Numbers for documents: any number with exact numbers, else numbers an `f64` holds exactly.
fn doc_num() -> BoxedStrategy<Num> {
    #[cfg(feature = "exact-numbers")]
    return loopbound_proptests::numbers::num().boxed();
    #[cfg(not(feature = "exact-numbers"))]
    return float_exact_num().boxed();
}

/// Numbers of at most 15 significant digits whose leading digit's power lies within ±250: each
/// is the shortest text of its nearest `f64`, so a `Value` holds it exactly in any mode.
#[cfg(not(feature = "exact-numbers"))]
fn float_exact_num() -> impl Strategy<Value = Num> {
    (any::<bool>(), "0{0,3}[0-9]{1,15}", -250i128..235).prop_map(|(negative, digits, exponent)| Num {
        negative,
        digits,
        exponent,
    })
}

/// A JSON document whose numbers are generated values, so that it can be written many ways.
#[derive(Clone, Debug)]
enum Doc {
    Null,
    Bool(bool),
    Num(Num),
    Str(String),
    Arr(Vec<Doc>),
    Obj(Vec<(String, Doc)>),
}

fn doc() -> impl Strategy<Value = Doc> {
    let leaf = prop_oneof![
        Just(Doc::Null),
        any::<bool>().prop_map(Doc::Bool),
        doc_num().prop_map(Doc::Num),
        any::<String>().prop_map(Doc::Str),
        "[ a-zA-Z\u{e9}\u{301}\u{1F600}\\\\\"\n\t\u{0}]{0,8}".prop_map(Doc::Str),
    ];
    leaf.prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Doc::Arr),
            prop::collection::btree_map("[a-cA-C\u{e9}]{0,3}|\\PC{0,4}", inner, 0..6)
                .prop_map(|map| Doc::Obj(map.into_iter().collect())),
        ]
    })
}

/// Writing choices drawn from a seed: a small deterministic generator (splitmix64).
struct Choices(u64);

impl Choices {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % below.max(1)
    }

    fn index(&mut self, below: usize) -> usize {
        usize::try_from(self.next(u64::try_from(below).unwrap_or(u64::MAX))).unwrap_or(0)
    }

    fn space(&mut self, out: &mut String) {
        for _ in 0..self.next(3) {
            out.push([' ', '\n', '\t', '\r'][self.index(4)]);
        }
    }

    fn spelling(&mut self) -> Spelling {
        Spelling {
            fraction: self.index(30),
            extra_zeros: self.index(5),
            upper: self.next(2) == 0,
            plus: self.next(2) == 0,
            padding: self.index(3),
            omit_zero_exponent: self.next(2) == 0,
        }
    }

    /// A JSON string literal of `value`, each character escaped or not at random.
    fn string(&mut self, value: &str, out: &mut String) {
        out.push('"');
        for c in value.chars() {
            let short = match c {
                '"' => Some("\\\""),
                '\\' => Some("\\\\"),
                '\n' => Some("\\n"),
                '\t' => Some("\\t"),
                '\r' => Some("\\r"),
                '\u{8}' => Some("\\b"),
                '\u{c}' => Some("\\f"),
                '/' => Some(if self.next(2) == 0 { "\\/" } else { "/" }),
                _ => None,
            };
            let must_escape = c < ' ' || c == '"' || c == '\\';
            if self.next(3) == 0 || (must_escape && short.is_none()) {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let hex = format!("{unit:04x}");
                    out.push_str("\\u");
                    out.push_str(&if self.next(2) == 0 { hex.to_uppercase() } else { hex });
                }
            } else if let Some(escape) = short {
                out.push_str(escape);
            } else {
                out.push(c);
            }
        }
        out.push('"');
    }

    fn write(&mut self, doc: &Doc, out: &mut String) {
        self.space(out);
        match doc {
            Doc::Null => out.push_str("null"),
            Doc::Bool(flag) => out.push_str(if *flag { "true" } else { "false" }),
            Doc::Num(num) => {
                let how = self.spelling();
                out.push_str(&num.spell(&how));
            }
            Doc::Str(text) => self.string(text, out),
            Doc::Arr(items) => {
                out.push('[');
                for (index, item) in items.iter().enumerate() {
                    if index > 0 {
                        out.push(',');
                    }
                    self.write(item, out);
                }
                self.space(out);
                out.push(']');
            }
            Doc::Obj(entries) => {
                let mut order: Vec<&(String, Doc)> = entries.iter().collect();
                for index in (1..order.len()).rev() {
                    order.swap(index, self.index(index + 1));
                }
                out.push('{');
                for (index, (key, value)) in order.into_iter().enumerate() {
                    if index > 0 {
                        out.push(',');
                    }
                    self.space(out);
                    self.string(key, out);
                    self.space(out);
                    out.push(':');
                    self.write(value, out);
                }
                self.space(out);
                out.push('}');
            }
        }
        self.space(out);
    }
}

/// The expected canonical form of a document, from its generated values.
fn expected(doc: &Doc) -> String {
    match doc {
        Doc::Null => "null".to_owned(),
        Doc::Bool(flag) => flag.to_string(),
        Doc::Num(num) => num.expected(),
        Doc::Str(text) => serde_json::to_string(text).unwrap_or_default(),
        Doc::Arr(items) => format!("[{}]", items.iter().map(expected).collect::<Vec<_>>().join(",")),
        Doc::Obj(entries) => {
            let mut sorted: Vec<&(String, Doc)> = entries.iter().collect();
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            let body: Vec<String> = sorted
                .into_iter()
                .map(|(key, value)| {
                    format!("{}:{}", serde_json::to_string(key).unwrap_or_default(), expected(value))
                })
                .collect();
            format!("{{{}}}", body.join(","))
        }
    }
}

fn text_of(doc: &Doc, seed: u64) -> String {
    let mut out = String::new();
    Choices(seed).write(doc, &mut out);
    out
}

#[cfg(feature = "exact-numbers")]
proptest! {
    #![proptest_config(with_cases(256, regressions!("canonical")))]

    #[test]
    fn every_spelling_of_a_number_has_the_reference_form(
        n in loopbound_proptests::numbers::num(), a in spelling(), b in spelling()
    ) {
        let expected = n.expected();
        for how in [&a, &b] {
            let text = n.spell(how);
            prop_assert_eq!(&form_of(&text), &expected, "spelling {}", text);
            prop_assert_eq!(form_of(&format!("[{text}]")), format!("[{expected}]"));
            prop_assert_eq!(reference::Decimal::parse(&text).map(|d| d.normal_text()), Some(expected.clone()));
        }
    }

    #[test]
    fn numbers_differing_in_one_digit_have_different_forms(
        n in (any::<bool>(), "[1-9][0-9]{0,59}", exponent())
            .prop_map(|(negative, digits, exponent)| Num { negative, digits, exponent }),
        position in any::<prop::sample::Index>(),
        bump in 1u8..10,
        how in spelling(),
    ) {
        let mut digits = n.digits.clone().into_bytes();
        let at = position.index(digits.len());
        digits[at] = b'0' + (digits[at] - b'0' + bump) % 10;
        let other = Num { digits: String::from_utf8(digits).unwrap_or_default(), ..n.clone() };
        let (a, b) = (form_of(&n.spell(&how)), form_of(&other.spell(&how)));
        prop_assert_eq!(&a, &n.expected());
        prop_assert_eq!(&b, &other.expected());
        prop_assert_ne!(a, b, "digit {} of {} changed", at, n.digits);
    }
}

#[cfg(not(feature = "exact-numbers"))]
proptest! {
    #![proptest_config(with_cases(256, regressions!("canonical_default")))]

    /// Without exact numbers: numbers an `f64` holds exactly keep their form in every spelling.
    #[test]
    fn every_spelling_of_a_float_exact_number_has_the_reference_form(
        n in float_exact_num(), a in spelling(), b in spelling()
    ) {
        let expected = n.expected();
        for how in [&a, &b] {
            let text = n.spell(how);
            prop_assert_eq!(&form_of(&text), &expected, "spelling {}", text);
            prop_assert_eq!(form_of(&format!("[{text}]")), format!("[{expected}]"));
        }
    }

    /// Without exact numbers: a number an `f64` does not hold (up to 30 digits) takes the form
    /// of its nearest `f64` in every spelling, and a 64-bit integer stays exact.
    #[test]
    fn every_spelling_of_a_long_number_has_the_form_of_its_nearest_float(
        n in (any::<bool>(), "[0-9]{1,30}", -250i128..230)
            .prop_map(|(negative, digits, exponent)| Num { negative, digits, exponent }),
        a in spelling(),
        b in spelling(),
    ) {
        let form = form_of(&n.spell(&a));
        match as_64_bit_integer(&n) {
            Some(_) => prop_assert_eq!(&form, &n.expected()),
            None => prop_assert!(is_nearest_float_form(&form, &n), "{} for {:?}", form, n),
        }
        prop_assert_eq!(form_of(&n.spell(&b)), form, "spelling {}", n.spell(&b));
    }

    /// Without exact numbers: 64-bit integers in any spelling are exact, and differ when they do.
    #[test]
    fn every_spelling_of_a_64_bit_integer_is_exact(
        value in prop_oneof![any::<i64>().prop_map(i128::from), any::<u64>().prop_map(i128::from)],
        bump in 1i128..1000,
        a in spelling(),
    ) {
        let spelled = |v: i128| Num { negative: v < 0, digits: v.unsigned_abs().to_string(), exponent: 0 }.spell(&a);
        prop_assert_eq!(form_of(&spelled(value)), value.to_string());
        let other = if value > 0 { value - bump } else { value + bump };
        prop_assert_ne!(form_of(&spelled(value)), form_of(&spelled(other)));
    }

    /// Without exact numbers: numbers of up to 15 digits differing in one digit differ.
    #[test]
    fn float_exact_numbers_differing_in_one_digit_have_different_forms(
        n in (any::<bool>(), "[1-9][0-9]{0,14}", -250i128..235)
            .prop_map(|(negative, digits, exponent)| Num { negative, digits, exponent }),
        position in any::<prop::sample::Index>(),
        bump in 1u8..10,
        how in spelling(),
    ) {
        let mut digits = n.digits.clone().into_bytes();
        let at = position.index(digits.len());
        digits[at] = b'0' + (digits[at] - b'0' + bump) % 10;
        let other = Num { digits: String::from_utf8(digits).unwrap_or_default(), ..n.clone() };
        let (a, b) = (form_of(&n.spell(&how)), form_of(&other.spell(&how)));
        prop_assert_eq!(&a, &n.expected());
        prop_assert_eq!(&b, &other.expected());
        prop_assert_ne!(a, b, "digit {} of {} changed", at, n.digits);
    }
}

proptest! {
    #![proptest_config(with_cases(256, regressions!("canonical_any_mode")))]

    #[test]
    fn negative_zero_and_every_zero_spelling_is_zero(
        negative in any::<bool>(), zeros in "0{1,5}", e in exponent(), how in spelling()
    ) {
        let text = Num { negative, digits: zeros, exponent: e }.spell(&how);
        prop_assert_eq!(form_of(&text), "0", "spelling {}", text);
    }

    #[test]
    fn forms_are_equal_exactly_when_values_are(
        a in (any::<bool>(), prop::sample::select(vec!["1", "10", "100", "5", "50", "15", "0"]), -3i128..3),
        b in (any::<bool>(), prop::sample::select(vec!["1", "10", "100", "5", "50", "15", "0"]), -3i128..3),
        how_a in spelling(),
        how_b in spelling(),
    ) {
        let a = Num { negative: a.0, digits: a.1.to_owned(), exponent: a.2 };
        let b = Num { negative: b.0, digits: b.1.to_owned(), exponent: b.2 };
        let same = form_of(&a.spell(&how_a)) == form_of(&b.spell(&how_b));
        prop_assert_eq!(same, a.same_value(&b), "{:?} vs {:?}", a, b);
    }

    #[test]
    fn the_form_is_the_reference_and_is_idempotent_and_reparses_equal(d in doc(), seed in any::<u64>()) {
        let value = parse(&text_of(&d, seed));
        prop_assert_eq!(canonical_json(&value), expected(&d));
        check_canonical(&value);
    }

    #[test]
    fn the_form_ignores_key_order_whitespace_escapes_and_number_spelling(
        d in doc(), first in any::<u64>(), second in any::<u64>()
    ) {
        let (a, b) = (text_of(&d, first), text_of(&d, second));
        prop_assert_eq!(form_of(&a), form_of(&b), "{} vs {}", a, b);
    }

    #[test]
    fn different_strings_have_different_forms(
        s in "\\PC{0,12}|[a-zA-Z \u{e9}\u{301}\u{200b}]{0,8}",
        change in 0usize..6,
    ) {
        let t = match change {
            0 => s.to_uppercase(),
            1 => s.to_lowercase(),
            2 => format!(" {s}"),
            3 => format!("{s}\u{200b}"),
            4 => s.replace('\u{e9}', "e\u{301}"),
            _ => s.trim().to_owned(),
        };
        let (a, b) = (canonical_json(&Value::String(s.clone())), canonical_json(&Value::String(t.clone())));
        prop_assert_eq!(a == b, s == t, "{:?} vs {:?}", s, t);
        prop_assert_eq!(canonical_json(&Value::String(s.clone())), serde_json::to_string(&s).unwrap_or_default());
    }

    #[test]
    fn array_order_is_significant(items in prop::collection::vec(doc(), 0..6), seed in any::<u64>()) {
        let mut shuffled = items.clone();
        let mut choices = Choices(seed);
        for index in (1..shuffled.len()).rev() {
            shuffled.swap(index, choices.index(index + 1));
        }
        let (a, b) = (Doc::Arr(items), Doc::Arr(shuffled));
        let forms_equal = form_of(&text_of(&a, seed)) == form_of(&text_of(&b, seed));
        prop_assert_eq!(forms_equal, expected(&a) == expected(&b));
    }

    #[test]
    fn null_is_distinct_from_absence_and_from_every_value(key in "[a-z]{1,3}", d in doc()) {
        let with_null = Doc::Obj(vec![(key.clone(), Doc::Null)]);
        let absent = Doc::Obj(vec![]);
        let with_value = Doc::Obj(vec![(key, d.clone())]);
        let forms: Vec<String> = [&with_null, &absent, &with_value].iter().map(|doc| form_of(&text_of(doc, 7))).collect();
        prop_assert_ne!(&forms[0], &forms[1]);
        prop_assert_ne!(&forms[1], &forms[2]);
        prop_assert_eq!(forms[0] == forms[2], matches!(d, Doc::Null));
        prop_assert_ne!(form_of("null"), form_of(&text_of(&Doc::Arr(vec![Doc::Null]), 3)));
    }
}
