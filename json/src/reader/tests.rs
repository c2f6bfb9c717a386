//! The reader against serde_json on well-formed input, and its own rules where they differ:
//! numbers by value, typed errors with paths and without values, one depth limit.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::{Class, Problem};
use super::{Deserializer, from_str};
use crate::canonical::MAX_DEPTH;

#[derive(Debug, PartialEq, Deserialize, Serialize)]
struct Ticket {
    input: i64,
}

#[derive(Debug, PartialEq, Deserialize, Serialize)]
enum Shape {
    Unit,
    Circle { radius: u32 },
    Square(u32),
    Pair(u8, String),
}

#[derive(Debug, PartialEq, Deserialize, Serialize)]
struct Draw {
    shapes: Vec<Shape>,
    label: Option<String>,
    #[serde(default)]
    tags: BTreeMap<String, u16>,
    ids: Option<BTreeMap<u32, bool>>,
    pair: Option<(i8, char)>,
    unit: Option<()>,
}

#[derive(Debug, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
enum Either {
    N(u64),
    F(f64),
    S(String),
}

#[derive(Debug, PartialEq, Deserialize, Serialize)]
struct Flat {
    name: String,
    #[serde(flatten)]
    rest: Inner,
}

#[derive(Debug, PartialEq, Deserialize, Serialize)]
struct Inner {
    count: u32,
    either: Either,
}

#[derive(Debug, PartialEq, Deserialize)]
#[serde(tag = "type")]
enum Tagged {
    Move { x: i32 },
    Stop,
}

fn ours<T: DeserializeOwned>(text: &str) -> Result<T, super::Error> {
    from_str(text)
}

/// Ours and serde_json bind `text` to the same value.
fn agrees<T: DeserializeOwned + PartialEq + Debug>(text: &str) {
    let expected: T =
        serde_json::from_str(text).unwrap_or_else(|error| panic!("{text}: serde_json: {error}"));
    assert_eq!(ours::<T>(text).as_ref().ok(), Some(&expected), "{text}");
}

/// The class and message ours gives `text` for `T`.
fn refused<T: DeserializeOwned + Debug>(text: &str) -> (Class, String) {
    match ours::<T>(text) {
        Ok(value) => panic!("{text} bound to {value:?}"),
        Err(error) => {
            let described = error.describe(text);
            (described.class, described.message)
        }
    }
}

#[test]
fn binds_what_serde_json_binds() {
    agrees::<Ticket>(r#"{"input":42}"#);
    agrees::<Ticket>(" {\n\t\"input\" : -7 , \"ignored\": [1, {\"a\": [null]}], \"x\": \"\\u00e9\" } ");
    agrees::<Draw>(
        r#"{"shapes":["Unit",{"Circle":{"radius":2}},{"Square":3},{"Pair":[1,"x\ny"]},{"Unit":null}],
            "label":"a \"quoted\" \\ label \ud83d\ude00","tags":{"b":2,"a":1},"ids":{"7":true,"1":false},
            "pair":[-3,"é"],"unit":null}"#,
    );
    agrees::<Draw>(r#"{"shapes":[],"label":null,"ids":null,"pair":null}"#);
    // serde_json under `arbitrary_precision` (`exact-numbers`) no longer reads numbers in
    // untagged enums and flattened fields; binding still does.
    #[cfg(not(feature = "exact-numbers"))]
    {
        agrees::<Flat>(r#"{"count":3,"name":"n","either":5}"#);
        agrees::<Flat>(r#"{"either":"s","name":"n","count":3}"#);
        agrees::<Vec<Either>>(r#"[1, -1.5, "x", 18446744073709551615]"#);
    }
    let flat = Flat { name: "n".into(), rest: Inner { count: 3, either: Either::N(5) } };
    assert_eq!(ours::<Flat>(r#"{"count":3,"name":"n","either":5}"#).ok(), Some(flat));
    let eithers = vec![Either::N(1), Either::F(-1.5), Either::S("x".into()), Either::N(u64::MAX)];
    assert_eq!(ours::<Vec<Either>>(r#"[1, -1.5, "x", 18446744073709551615]"#).ok(), Some(eithers));
    agrees::<Tagged>(r#"{"x":-1,"type":"Move"}"#);
    agrees::<Tagged>(r#"{"type":"Stop"}"#);
    agrees::<Value>(r#"{"a":[1,-2,3.5,"s",true,false,null,{}],"b":{"c":[]}}"#);
    agrees::<HashMap<String, Vec<Option<f64>>>>(r#"{"x":[1.5,null,-0.25,1e10],"y":[]}"#);
    agrees::<(u8, i16, u32, i64, u64, i128, u128, f32, f64, bool, char, String)>(
        r#"[255,-32768,4294967295,-9223372036854775808,18446744073709551615,
            -170141183460469231731687303715884105728,340282366920938463463374607431768211455,
            0.5,-2.5,true,"c","s"]"#,
    );
    // serde_json reads a struct from an array of its fields too.
    agrees::<Ticket>("[5]");
}

#[test]
fn strings_are_borrowed_when_they_hold_no_escape() {
    let mut de = Deserializer::new(r#""plain""#);
    assert_eq!(<&str>::deserialize(&mut de).ok(), Some("plain"));
    let mut de = Deserializer::new(r#""a\nb""#);
    assert!(<&str>::deserialize(&mut de).is_err(), "an escaped string cannot be borrowed");
    let mut de = Deserializer::new(r#""a\nb""#);
    assert_eq!(<std::borrow::Cow<'_, str>>::deserialize(&mut de).ok().as_deref(), Some("a\nb"));
}

#[test]
fn every_spelling_of_an_integer_binds_to_that_integer() {
    for text in ["42", "42.0", "4.2e1", "4.2E+1", "420e-1", "0.42e2", "42.000e0"] {
        assert_eq!(
            ours::<Ticket>(&format!(r#"{{"input":{text}}}"#)).ok(),
            Some(Ticket { input: 42 }),
            "{text}"
        );
        assert_eq!(ours::<u8>(text).ok(), Some(42), "{text}");
        assert_eq!(ours::<u128>(text).ok(), Some(42), "{text}");
        assert_eq!(ours::<f64>(text).ok(), Some(42.0), "{text}");
    }
    assert_eq!(ours::<i64>("-0").ok(), Some(0));
    assert_eq!(ours::<i64>("-0.0e3").ok(), Some(0));
    assert_eq!(ours::<i64>("-4.2e1").ok(), Some(-42));
    assert_eq!(ours::<u128>("3.4e38").ok(), Some(34 * 10u128.pow(37)));
    assert_eq!(ours::<i128>("-1e30").ok(), Some(-(10i128.pow(30))));
}

#[test]
fn floats_are_the_nearest_for_every_spelling() {
    // Two spellings of one decimal, which serde_json without `float_roundtrip` reads as two
    // different floats.
    assert_eq!(ours::<f64>("60000e22").ok(), Some(6e26));
    assert_eq!(ours::<f64>("6000e23").ok(), Some(6e26));
    assert_eq!(ours::<f64>("0.1").ok(), Some(0.1));
    assert_eq!(ours::<f32>("0.1").ok(), Some(0.1_f32));
    assert_eq!(ours::<f64>("1e-400").ok(), Some(0.0));
    assert_eq!(ours::<f64>("-0").ok().map(f64::is_sign_negative), Some(true));
}

#[test]
fn numbers_out_of_a_fields_reach_are_mismatches() {
    type Refuse = fn(&str) -> (Class, String);
    let cases: [(&str, Refuse, &str); 8] = [
        ("42.5", refused::<i64>, "invalid type: a number with a fraction, expected i64"),
        ("1e-1", refused::<u8>, "invalid type: a number with a fraction, expected u8"),
        ("300", refused::<u8>, "invalid value: an integer, expected u8"),
        ("-1", refused::<u32>, "invalid value: an integer, expected u32"),
        ("99999999999999999999999", refused::<i64>, "number out of range, expected i64"),
        ("1e400", refused::<i64>, "number out of range, expected i64"),
        ("1e400", refused::<f64>, "number out of range, expected f64"),
        ("1e39", refused::<f32>, "number out of range, expected f32"),
    ];
    for (text, refuse, message) in cases {
        assert_eq!(refuse(text), (Class::Mismatch, message.to_owned()), "{text}");
    }
    assert_eq!(refused::<u128>("1e39").1, "number out of range, expected u128");
}

#[test]
fn any_takes_64_bit_integers_and_floats_otherwise() {
    assert_eq!(
        ours::<Value>("[42, 42.0, 4.2e1, -0, -7, 1.5]").ok(),
        Some(serde_json::json!([42, 42, 42, 0, -7, 1.5]))
    );
    assert_eq!(ours::<Either>("42.0").ok(), Some(Either::N(42)));
    assert_eq!(ours::<Either>("42.5").ok(), Some(Either::F(42.5)));
    #[cfg(not(feature = "exact-numbers"))]
    {
        assert_eq!(
            ours::<Value>("18446744073709551616").ok(),
            Some(serde_json::json!(18_446_744_073_709_551_616.0))
        );
        assert_eq!(
            refused::<Value>("1e400"),
            (Class::Mismatch, "number out of range, expected any valid JSON value".to_owned())
        );
    }
    #[cfg(feature = "exact-numbers")]
    {
        let exact =
            |text: &str| ours::<Value>(text).ok().map(|value| crate::canonical::canonical_json(&value));
        assert_eq!(exact("18446744073709551616").as_deref(), Some("18446744073709551616"));
        assert_eq!(exact("1e400").as_deref(), Some("1e400"));
        assert_eq!(exact("0.1000000000000000000000001").as_deref(), Some("0.1000000000000000000000001"));
        assert_eq!(exact("[0.10, 2.5e0]").as_deref(), Some("[0.1,2.5]"));
    }
}

#[test]
fn errors_name_the_path_and_the_expected_type_never_the_value() {
    const SECRET: &str = "SECRET-PIN-4242";
    let (class, shown) = refused::<Ticket>(&format!(r#"{{"input":"{SECRET}"}}"#));
    assert_eq!((class, shown.as_str()), (Class::Mismatch, "input: invalid type: a string, expected i64"));
    let cases = [
        (
            format!(r#"{{"shapes":["Unit",{{"Circle":{{"radius":"{SECRET}"}}}}]}}"#),
            "shapes[1].Circle.radius: invalid type: a string, expected u32",
        ),
        (
            format!(r#"{{"shapes":[{{"{SECRET}":1}}]}}"#),
            "shapes[0]: unknown variant, expected one of `Unit`, `Circle`, `Square`, `Pair`",
        ),
        (
            format!(r#"{{"shapes":["{SECRET}"]}}"#),
            "shapes[0]: unknown variant, expected one of `Unit`, `Circle`, `Square`, `Pair`",
        ),
        (
            format!(r#"{{"shapes":[],"tags":{{"{SECRET}":"{SECRET}"}}}}"#),
            "tags[<key>]: invalid type: a string, expected u16",
        ),
        (
            format!(r#"{{"shapes":[],"ids":{{"{SECRET}":true}}}}"#),
            "ids[<key>]: invalid type: a string, expected u32",
        ),
        (
            format!(r#"{{"shapes":[],"pair":[1,"{SECRET}"]}}"#),
            "pair[1]: invalid value: a string, expected a character",
        ),
        (
            format!(r#"{{"shapes":[{{"Pair":[1,"{SECRET}",3]}}]}}"#),
            "shapes[0].Pair: more elements than the input type reads",
        ),
        (r#"{"label":"x"}"#.to_owned(), "missing field `shapes`"),
        (r#"{"shapes":[{"Circle":{}}]}"#.to_owned(), "shapes[0].Circle: missing field `radius`"),
        (r#"{"shapes":[],"shapes":[]}"#.to_owned(), "duplicate field `shapes`"),
    ];
    for (text, message) in cases {
        let (class, shown) = refused::<Draw>(&text);
        assert_eq!((class, shown.as_str()), (Class::Mismatch, message), "{text}");
        let error = ours::<Draw>(&text).err().unwrap_or_else(super::Error::too_deep);
        for shown in [shown, error.to_string(), format!("{error:?}")] {
            assert!(!shown.contains(SECRET) && !shown.contains("4242"), "{shown}");
        }
    }
}

#[test]
fn a_types_own_refusal_is_kept_without_its_message() {
    #[derive(Debug)]
    struct Email;
    impl<'de> Deserialize<'de> for Email {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            let text = String::deserialize(deserializer)?;
            Err(serde::de::Error::custom(format!("not an email: {text}")))
        }
    }
    #[derive(Debug, Deserialize)]
    struct Contact {
        #[allow(dead_code, reason = "the field is only deserialized")]
        email: Email,
    }
    let (class, message) = refused::<Contact>(r#"{"email":"SECRET"}"#);
    assert_eq!(
        (class, message.as_str()),
        (Class::Mismatch, "email: invalid value: refused by the input type's own validation")
    );
}

#[test]
fn text_that_is_not_json_is_invalid_json_whatever_the_type_found_first() {
    let cases = [
        (r#"{"input":42"#, "invalid JSON at line 1 column 12: the text ends before the value does"),
        (r#"{"input":42}}"#, "invalid JSON at line 1 column 13: text after the value"),
        ("{input:42}", "invalid JSON at line 1 column 2: an object key must be a string"),
        // The type error comes first, but the text is not JSON.
        (r#"{"input":"42"#, "invalid JSON at line 1 column 13: the text ends before the value does"),
        ("{\"input\":\"x\",\n \"y\": [1,]}", "invalid JSON at line 2 column 10: expected a value"),
        (r#"{"input":01}"#, "input: invalid JSON at line 1 column 11: invalid number"),
        (r#"{"input":tru}"#, "invalid JSON at line 1 column 10: expected `true`, `false` or `null`"),
    ];
    for (text, message) in cases {
        assert_eq!(refused::<Ticket>(text), (Class::InvalidJson, message.to_owned()), "{text}");
    }
    // An unpaired surrogate is within the grammar, but not text: invalid where a string is read.
    let surrogate = r#"{"label":"\ud800","shapes":[]}"#;
    let message = "label: invalid JSON at line 1 column 17: a \\u escape is an unpaired surrogate";
    assert_eq!(refused::<Draw>(surrogate), (Class::InvalidJson, message.to_owned()));
    assert_eq!(ours::<Ticket>(r#"{"ignored":"\ud800","input":1}"#).ok(), Some(Ticket { input: 1 }));
}

#[test]
fn one_depth_limit_for_what_the_type_reads_none_for_what_it_ignores() {
    #[derive(Debug, Deserialize)]
    struct Payload {
        #[allow(dead_code, reason = "the field is only deserialized")]
        data: Value,
    }
    let nested = |levels: usize| format!("{}{}", "[".repeat(levels), "]".repeat(levels));
    // The argument object is one level.
    assert!(ours::<Payload>(&format!(r#"{{"data":{}}}"#, nested(MAX_DEPTH - 1))).is_ok());
    let (class, message) = refused::<Payload>(&format!(r#"{{"data":{}}}"#, nested(MAX_DEPTH)));
    assert_eq!(class, Class::TooDeep);
    assert!(message.ends_with(": arrays and objects nest deeper than 128 levels"), "{message}");
    assert!(message.starts_with("data[0][0]"), "{message}");
    assert_eq!(refused::<Payload>(&format!(r#"{{"data":{}}}"#, nested(100_000))).0, Class::TooDeep);
    let ignored = format!(r#"{{"ignored":{},"input":1}}"#, nested(100_000));
    assert_eq!(ours::<Ticket>(&ignored).ok(), Some(Ticket { input: 1 }));
    let unclosed = format!(r#"{{"ignored":{},"input":1}}"#, "[".repeat(100_000));
    assert_eq!(refused::<Ticket>(&unclosed).0, Class::InvalidJson);
}

#[test]
fn in_maps_and_values_the_last_duplicate_key_wins() {
    assert_eq!(
        ours::<BTreeMap<String, u8>>(r#"{"a":1,"b":2,"a":3}"#).ok(),
        Some([("a".to_owned(), 3), ("b".to_owned(), 2)].into())
    );
    assert_eq!(ours::<Value>(r#"{"a":1,"a":[2]}"#).ok(), Some(serde_json::json!({"a":[2]})));
    assert_eq!(
        refused::<Ticket>(r#"{"input":1,"input":2}"#),
        (Class::Mismatch, "duplicate field `input`".to_owned())
    );
}

#[test]
fn integer_keys_are_read_by_value_too() {
    let map = ours::<BTreeMap<u32, bool>>(r#"{"1":true,"2.0":false,"3e0":true,"-0":false}"#).ok();
    assert_eq!(map, Some([(0, false), (1, true), (2, false), (3, true)].into()));
    assert_eq!(refused::<BTreeMap<u32, bool>>(r#"{" 1":true}"#).0, Class::Mismatch);
    assert_eq!(
        refused::<BTreeMap<u32, bool>>(r#"{"-1":true}"#).1,
        "[<key>]: invalid value: an integer, expected u32"
    );
    assert_eq!(
        ours::<BTreeMap<bool, u8>>(r#"{"true":1,"false":0}"#).ok(),
        Some([(false, 0), (true, 1)].into())
    );
}

#[test]
fn a_raw_value_gets_the_text_of_its_value() {
    /// What serde_json's `RawValue` asks of a deserializer, without its feature.
    #[derive(Debug, PartialEq)]
    struct Raw(String);
    impl<'de> Deserialize<'de> for Raw {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct Visit;
            impl<'de> serde::de::Visitor<'de> for Visit {
                type Value = Raw;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("raw JSON")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Raw, A::Error> {
                    let key: Option<String> = map.next_key()?;
                    assert_eq!(key.as_deref(), Some(super::RAW_VALUE_TOKEN));
                    Ok(Raw(map.next_value()?))
                }
            }
            deserializer.deserialize_newtype_struct(super::RAW_VALUE_TOKEN, Visit)
        }
    }
    #[derive(Debug, PartialEq, Deserialize)]
    struct Holder {
        raw: Raw,
        after: u8,
    }
    let text = r#"{"raw": {"b" : [1e400, "x"] } , "after": 1}"#;
    assert_eq!(
        ours::<Holder>(text).ok(),
        Some(Holder { raw: Raw(r#"{"b" : [1e400, "x"] }"#.to_owned()), after: 1 })
    );
    let deep = format!(r#"{{"raw":{}{},"after":1}}"#, "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
    assert_eq!(refused::<Holder>(&deep).0, Class::TooDeep);
}

#[test]
fn problems_are_typed() {
    assert!(matches!(
        ours::<Ticket>("{}").err().map(|e| e.problem().clone()),
        Some(Problem::MissingField("input"))
    ));
    assert!(matches!(
        ours::<(u8, u8)>("[1]").err().map(|e| e.problem().clone()),
        Some(Problem::InvalidLength { len: 1, .. })
    ));
}
