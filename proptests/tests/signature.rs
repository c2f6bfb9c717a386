//! `loopbound::canonical::signature(name, &t)` equals `name + ":" + canonical_json` of serde_json's own text
//! of `t`, re-parsed, for arbitrary typed values (SPEC §5: the signature is the canonical JSON of
//! the bound value re-serialised). Core writes signatures straight from the typed value with its
//! own serializer; this checks it against serde_json's path, and the result against the
//! independent reference form.

use std::collections::{BTreeMap, HashMap};

use loopbound::canonical::canonical_json;
use loopbound_proptests::config::with_cases;
use loopbound_proptests::harness::reference;
use loopbound_proptests::numbers::{Num, Spelling, spelling};
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

/// The brief's relation: name, colon, canonical form of serde_json's text re-parsed.
fn via_text<T: Serialize>(name: &str, value: &T) -> Option<String> {
    let text = serde_json::to_string(value).ok()?;
    let parsed: serde_json::Value = serde_json::from_str(&text).ok()?;
    Some(format!("{name}:{}", canonical_json(&parsed)))
}

fn check<T: Serialize + std::fmt::Debug>(name: &str, value: &T) -> Result<(), TestCaseError> {
    let signature = loopbound::canonical::signature(name, value).ok();
    prop_assert_eq!(&signature, &via_text(name, value), "{:?}", value);
    if let Some(signature) = signature {
        let parsed: serde_json::Value =
            serde_json::from_str(&serde_json::to_string(value).unwrap_or_default()).unwrap_or_default();
        prop_assert_eq!(signature, format!("{name}:{}", reference::canonical(&parsed)));
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
    loopbound::canonical::signature(tool.name(), &value).ok()
}

proptest! {
    #![proptest_config(with_cases(256, regressions!("signature_binding")))]

    /// SPEC §5: `42`, `42.0`, `4.2e1` and `420e-1` are one call once bound. Bound to a JSON
    /// value, numbers compare by exact value: spellings of one value share a signature and
    /// different values do not.
    #[test]
    fn every_spelling_of_a_number_bound_to_a_json_value_has_one_signature(
        n in bindable(), other in bindable(), a in spelling(), b in spelling()
    ) {
        let value = tool::<ValueInput>("value");
        let value_a = bound_signature(&value, &arguments(&n, &a));
        prop_assert_eq!(&value_a, &Some(format!(r#"value:{{"x":{}}}"#, n.expected())));
        prop_assert_eq!(&value_a, &bound_signature(&value, &arguments(&n, &b)));
        let value_other = bound_signature(&value, &arguments(&other, &b));
        prop_assert_eq!(value_a == value_other, n.same_value(&other));
    }

    /// The same for a float input: every spelling of one decimal value must bind to the same
    /// `f64`, hence one signature (see `proptests/README.md`, "What these properties found in
    /// core").
    #[test]
    fn every_spelling_of_a_number_bound_to_a_float_has_one_signature(
        n in bindable(), a in spelling(), b in spelling()
    ) {
        let float = tool::<FloatInput>("float");
        let float_a = bound_signature(&float, &arguments(&n, &a));
        prop_assert!(float_a.is_some(), "{} must bind to a float", arguments(&n, &a));
        prop_assert_eq!(float_a, bound_signature(&float, &arguments(&n, &b)), "{} vs {}", arguments(&n, &a), arguments(&n, &b));
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
