//! `loopbound::canonical::signature(name, &t)` equals `name + ":"` + the reference canonical form
//! of serde_json's own text of `t` (read with exact numbers by the independent reference), for
//! arbitrary typed values (SPEC §5: the signature is the canonical JSON of the bound value
//! re-serialised). Core writes signatures straight from the typed value with its own serializer;
//! this checks it against serde_json's writer and the independent reference.
//!
//! And typed signatures are exact without any serde_json feature: every spelling of a number
//! bound to an `f64`, `i64`, `u64` or `u128` field gives one signature, different values
//! different signatures.

use std::collections::{BTreeMap, HashMap};

use loopbound::canonical::canonical_json;
use loopbound_proptests::config::with_cases;
use loopbound_proptests::harness::{read_value, reference};
use loopbound_proptests::numbers::{Num, Spelling, as_64_bit_integer, is_nearest_float_form, spelling};
use loopbound_proptests::regressions;
use proptest::prelude::*;
use proptest_derive::Arbitrary;
use serde::Serialize;

fn any_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => any::<f64>(),
        1 => prop::sample::select(vec![f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, 1e21, 1e-7, f64::MAX, f64::MIN_POSITIVE, 5e-324]),
    ]
}

fn any_f32() -> impl Strategy<Value = f32> {
    prop_oneof![
        4 => any::<f32>(),
        1 => prop::sample::select(vec![f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0, f32::MAX, 1e-45]),
    ]
}

/// Every variant shape, externally tagged (serde's default).
#[derive(Arbitrary, Clone, Debug, Serialize)]
enum External {
    Unit,
    Newtype(#[proptest(strategy = "any_f64()")] f64),
    Tuple(u8, String, Option<i16>),
    Struct { zed: Vec<u8>, alpha: Option<bool> },
}

/// Internally tagged: the tag is written before fields that sort before it.
#[derive(Arbitrary, Clone, Debug, Serialize)]
#[serde(tag = "type")]
enum Internal {
    Unit,
    Struct { zulu: i32, able: String },
    Newtype(Inner),
}

/// Adjacently tagged.
#[derive(Arbitrary, Clone, Debug, Serialize)]
#[serde(tag = "t", content = "c")]
enum Adjacent {
    Unit,
    Tuple(i64, u64),
    Struct { b: Option<char>, a: Vec<bool> },
}

/// Untagged.
#[derive(Arbitrary, Clone, Debug, Serialize)]
#[serde(untagged)]
enum Untagged {
    Int(i128),
    Text(String),
    Pair(u128, Option<i8>),
}

/// Fields declared out of order, renamed and skipped.
#[derive(Arbitrary, Clone, Debug, Serialize)]
struct Inner {
    zeta: u16,
    #[serde(rename = "Alpha")]
    alpha: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    maybe: Option<i64>,
    beta: (i32, char),
}

/// A value of every kind the brief names.
#[derive(Arbitrary, Clone, Debug, Serialize)]
struct Everything {
    zulu: Vec<Vec<Option<i16>>>,
    yankee: Option<Box<Inner>>,
    external: Vec<External>,
    internal: Internal,
    adjacent: Adjacent,
    untagged: Untagged,
    #[proptest(strategy = "prop::collection::btree_map(any::<String>(), any::<i32>(), 0..5)")]
    string_keys: BTreeMap<String, i32>,
    #[proptest(strategy = "prop::collection::hash_map(any::<String>(), any::<u8>(), 0..6)")]
    hashed_keys: HashMap<String, u8>,
    #[proptest(strategy = "prop::collection::btree_map(any::<i64>(), any::<Option<bool>>(), 0..5)")]
    integer_keys: BTreeMap<i64, Option<bool>>,
    #[proptest(strategy = "prop::collection::hash_map(any::<u128>(), any::<String>(), 0..4)")]
    wide_keys: HashMap<u128, String>,
    #[proptest(strategy = "prop::collection::btree_map(any::<i8>(), any::<u8>(), 0..3)")]
    small_keys: BTreeMap<i8, u8>,
    big: i128,
    ubig: u128,
    #[proptest(strategy = "any_f64()")]
    float: f64,
    #[proptest(strategy = "any_f32()")]
    single: f32,
    #[proptest(strategy = "prop::collection::vec(any_f64(), 0..4)")]
    floats: Vec<f64>,
    unit: (),
    text: String,
    letter: char,
    flag: bool,
    alpha: (u8, i64, Option<()>),
    /// Flattened entries are written through a map, out of order, and may repeat a field's
    /// name: serde_json keeps the last one, and so must the signature.
    #[serde(flatten)]
    #[proptest(
        strategy = "prop::collection::btree_map(\"zulu|flag|big|unit|text|[a-z]{1,6}\", any::<i8>(), 0..4)"
    )]
    flattened: BTreeMap<String, i8>,
}

/// The relation: name, colon, the reference canonical form of serde_json's text.
fn via_text<T: Serialize>(name: &str, value: &T) -> Option<String> {
    let text = serde_json::to_string(value).ok()?;
    Some(format!("{name}:{}", reference::canonical_text(&text)?))
}

fn check<T: Serialize + std::fmt::Debug>(name: &str, value: &T) -> Result<(), TestCaseError> {
    let signature =
        loopbound::canonical::signature(name, value).ok().map(loopbound::canonical::Signature::into_string);
    prop_assert_eq!(&signature, &via_text(name, value), "{:?}", value);
    // Where a `Value` holds the text exactly, the `Value` walk gives the same form.
    if let (Some(signature), Ok(text)) = (&signature, serde_json::to_string(value))
        && let Ok(parsed) = read_value(&text)
        && reference::canonical(&parsed) == signature[name.len() + 1..]
    {
        prop_assert_eq!(&format!("{name}:{}", canonical_json(&parsed)), signature);
    }
    Ok(())
}

proptest! {
    #![proptest_config(with_cases(256, regressions!("signature")))]

    #[test]
    fn the_signature_of_a_typed_value_is_the_canonical_form_of_its_json(
        name in "[a-z_]{1,12}|\\PC{0,6}", value in any::<Everything>()
    ) {
        check(&name, &value)?;
    }

    #[test]
    fn the_signature_of_each_enum_shape_is_the_canonical_form_of_its_json(
        external in any::<External>(),
        internal in any::<Internal>(),
        adjacent in any::<Adjacent>(),
        untagged in any::<Untagged>(),
    ) {
        check("e", &external)?;
        check("i", &internal)?;
        check("a", &adjacent)?;
        check("u", &untagged)?;
    }

    #[test]
    fn the_signature_of_floats_of_every_class_is_the_canonical_form_of_their_json(
        x in any_f64(), y in any_f32()
    ) {
        check("f", &(x, y))?;
        let keys: BTreeMap<String, f64> = [(String::from("k"), x)].into_iter().collect();
        check("k", &keys)?;
    }

    /// Float map keys: serde_json writes finite ones as strings in its own float format and
    /// refuses the others; the signature must agree either way (see `proptests/README.md`,
    /// "What these properties found in core").
    #[test]
    fn float_map_keys_sign_as_serde_json_writes_them(key in any_f64(), single in any_f32()) {
        check("fk", &FloatKey(key))?;
        check("fk", &FloatKey(f64::from(single)))?;
    }
}

/// A tool input holding a float.
#[derive(Debug, serde::Deserialize, Serialize, schemars::JsonSchema)]
struct FloatInput {
    x: f64,
}

/// A tool input holding a signed integer.
#[derive(Debug, serde::Deserialize, Serialize, schemars::JsonSchema)]
struct SignedInput {
    x: i64,
}

/// A tool input holding an unsigned integer.
#[derive(Debug, serde::Deserialize, Serialize, schemars::JsonSchema)]
struct UnsignedInput {
    x: u64,
}

/// A tool input holding a wide unsigned integer.
#[derive(Debug, serde::Deserialize, Serialize, schemars::JsonSchema)]
struct WideInput {
    x: u128,
}

/// A tool input holding any JSON value.
#[derive(Debug, serde::Deserialize, Serialize, schemars::JsonSchema)]
struct ValueInput {
    x: serde_json::Value,
}

/// The signature a tool gives to arguments `text`, or `None` when they do not bind.
fn bound_signature<T>(tool: &loopbound::GuardedTool<T>, text: &str) -> Option<String>
where
    T: serde::de::DeserializeOwned + Serialize + Send + 'static,
{
    let value = tool.bind(text).ok()?;
    loopbound::canonical::signature(tool.name(), &value)
        .ok()
        .map(loopbound::canonical::Signature::into_string)
}

/// The number in a signature `name:{"x":number}`.
fn bound_number<'a>(signature: &'a str, name: &str) -> &'a str {
    signature
        .strip_prefix(name)
        .and_then(|rest| rest.strip_prefix(r#":{"x":"#))
        .and_then(|rest| rest.strip_suffix('}'))
        .unwrap_or_default()
}

/// Whether a `serde_json::Value` bound from `n` holds it as it must: exactly with
/// `exact-numbers`; else a 64-bit integer exactly and anything else as its nearest `f64`.
fn value_holds(form: &str, n: &Num) -> bool {
    if cfg!(feature = "exact-numbers") {
        return form == n.expected();
    }
    match as_64_bit_integer(n) {
        Some(_) => form == n.expected(),
        None => is_nearest_float_form(form, n),
    }
}

proptest! {
    #![proptest_config(with_cases(256, regressions!("signature_binding")))]

    /// SPEC §5: `42`, `42.0`, `4.2e1` and `420e-1` are one call once bound. Bound to a JSON
    /// value, numbers compare as the value holds them: by exact value with `exact-numbers`, else
    /// as 64-bit integers or nearest floats. Spellings of one value share a signature.
    #[test]
    fn every_spelling_of_a_number_bound_to_a_json_value_has_one_signature(
        n in bindable(), other in bindable(), a in spelling(), b in spelling()
    ) {
        let value = tool::<ValueInput>("value");
        let value_a = bound_signature(&value, &arguments(&n, &a)).unwrap_or_default();
        prop_assert!(value_holds(bound_number(&value_a, "value"), &n), "{} for {:?}", value_a, n);
        prop_assert_eq!(&Some(value_a.clone()), &bound_signature(&value, &arguments(&n, &b)));
        let value_other = bound_signature(&value, &arguments(&other, &b)).unwrap_or_default();
        prop_assert!(value_holds(bound_number(&value_other, "value"), &other), "{} for {:?}", value_other, other);
        if cfg!(feature = "exact-numbers") {
            prop_assert_eq!(value_a == value_other, n.same_value(&other));
        }
    }

    /// Every spelling of one decimal value binds a float field to its nearest `f64`, hence one
    /// signature (see `proptests/README.md`, "What these properties found in core"); different
    /// floats give different signatures.
    #[test]
    fn every_spelling_of_a_number_bound_to_a_float_has_one_signature(
        n in bindable(), other in bindable(), a in spelling(), b in spelling()
    ) {
        let float = tool::<FloatInput>("float");
        let expected = bound_signature(&float, &arguments(&n, &a));
        let form = expected.as_deref().map(|signature| bound_number(signature, "float"));
        prop_assert!(form.is_some_and(|form| is_nearest_float_form(form, &n)), "{:?} for {:?}", expected, n);
        prop_assert_eq!(&bound_signature(&float, &arguments(&n, &b)), &expected, "{}", arguments(&n, &b));
        let other_signature = bound_signature(&float, &arguments(&other, &a));
        let nearest = |n: &Num| n.expected().parse::<f64>().unwrap_or(f64::NAN);
        prop_assert_eq!(expected == other_signature, nearest(&n) == nearest(&other));
    }

    /// Every spelling of an integer binds an `i64`, `u64` or `u128` field to that integer, hence
    /// one exact signature; different integers give different signatures.
    #[test]
    fn every_spelling_of_an_integer_bound_to_an_integer_field_has_one_exact_signature(
        signed in any::<i64>(),
        unsigned in any::<u64>(),
        wide in any::<u128>(),
        bump in 1u8..=255,
        a in spelling(),
        b in spelling(),
    ) {
        fn spelled(negative: bool, magnitude: u128, how: &Spelling) -> String {
            arguments(&Num { negative, digits: magnitude.to_string(), exponent: 0 }, how)
        }
        let signed_tool = tool::<SignedInput>("i");
        let unsigned_tool = tool::<UnsignedInput>("u");
        let wide_tool = tool::<WideInput>("w");
        for how in [&a, &b] {
            let text = spelled(signed < 0, u128::from(signed.unsigned_abs()), how);
            prop_assert_eq!(bound_signature(&signed_tool, &text), Some(format!(r#"i:{{"x":{signed}}}"#)), "{}", text);
            let text = spelled(false, u128::from(unsigned), how);
            prop_assert_eq!(bound_signature(&unsigned_tool, &text), Some(format!(r#"u:{{"x":{unsigned}}}"#)), "{}", text);
            let text = spelled(false, wide, how);
            let form = reference::Decimal::parse(&wide.to_string()).map(|d| d.normal_text()).unwrap_or_default();
            prop_assert_eq!(bound_signature(&wide_tool, &text), Some(format!(r#"w:{{"x":{form}}}"#)), "{}", text);
        }
        let other = wide.wrapping_add(u128::from(bump));
        prop_assert_ne!(
            bound_signature(&wide_tool, &spelled(false, wide, &a)),
            bound_signature(&wide_tool, &spelled(false, other, &b))
        );
        let other = signed.wrapping_add(i64::from(bump));
        prop_assert_ne!(
            bound_signature(&signed_tool, &spelled(signed < 0, u128::from(signed.unsigned_abs()), &a)),
            bound_signature(&signed_tool, &spelled(other < 0, u128::from(other.unsigned_abs()), &b))
        );
    }
}

/// Numbers of up to 30 digits within a float's range.
fn bindable() -> impl Strategy<Value = Num> {
    (any::<bool>(), "[0-9]{1,30}", -40i128..40).prop_map(|(negative, digits, exponent)| Num {
        negative,
        digits,
        exponent,
    })
}

/// `{"x": <n spelled as how>}`.
fn arguments(n: &Num, how: &Spelling) -> String {
    format!(r#"{{"x":{}}}"#, n.spell(how))
}

/// A tool of input `T` (binding needs no scope and no capability).
fn tool<T>(name: &str) -> loopbound::GuardedTool<T>
where
    T: serde::de::DeserializeOwned + Serialize + schemars::JsonSchema + Send + 'static,
{
    loopbound::tool::ToolBuilder::new(name, "none")
        .build(|_: T, _| async { Ok::<_, String>("") })
        .unwrap_or_else(|error| panic!("{error}"))
}

/// A map whose one key is a float.
#[derive(Debug)]
struct FloatKey(f64);

impl Serialize for FloatKey {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry(&self.0, &true)?;
        map.end()
    }
}
