//! Arbitrary argument JSON into guarded tools of several input types, through every public path
//! (`invoke_json`, `Scope::invoke` by name, typed `invoke`), checked call by call against the
//! reference [`GuardModel`].
//!
//! # Invariants checked
//!
//! - Binding agrees with serde_json, but for the documented number semantics: text that
//!   serde_json binds to `T` once its integer-valued numbers are written plainly (an object, or
//!   blank text read as `{}`) binds to the same value, floats within two units in the last place
//!   (binding rounds correctly, serde_json without `float_roundtrip` may not); binding refuses
//!   only floats serde_json takes to infinity, and binds where serde_json refuses only for
//!   integer keys spelled otherwise than plainly. Anything else is a typed [`BindError`] that
//!   names the tool, fits [`MAX_MESSAGE_LEN`], and moves nothing.
//! - No binding error quotes the arguments: no message, `Display`, `Debug` or model message
//!   holds the `SECRET-…` strings the cases plant in keys and values.
//! - The signature of a bound value is the tool's name and the reference canonical form of its
//!   serde_json text (read with exact numbers), and `loopbound::canonical::signature` gives
//!   exactly that.
//! - Every decision, counter, stop reason and event equals the model's; a body runs exactly when
//!   the guard admits its call; no signature is admitted more often than the repetition limit.
//! - Nothing panics.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use arbitrary::Arbitrary;
use loopbound::tool::ToolSetBuilder;
use loopbound::tool::{BindError, BindErrorKind, MAX_MESSAGE_LEN};
use loopbound::{GuardedTool, Limits, Scope, Stop, ToolBuilder, ToolError, ToolSet};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::guard_model::{GuardModel, assert_log_shape};
use super::json_mirror::{JsonMirror, MAX_MIRROR_DEPTH, SECRET};
use super::reference;

/// Integers of several widths, one optional.
#[derive(Arbitrary, Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
pub struct Ints {
    /// A signed integer.
    pub a: i64,
    /// A byte.
    pub b: u8,
    /// A wide optional integer.
    pub c: Option<i128>,
}

/// Optional fields.
#[derive(Arbitrary, Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
pub struct Optional {
    /// An id.
    pub id: u32,
    /// An optional note.
    pub note: Option<String>,
    /// An optional flag.
    pub flag: Option<bool>,
}

/// Nested vectors.
#[derive(Arbitrary, Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
pub struct Nested {
    /// Rows of numbers.
    pub rows: Vec<Vec<i32>>,
    /// Labels.
    pub tags: Vec<String>,
}

/// An enum of every variant shape.
#[derive(Arbitrary, Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
pub enum Shape {
    /// A unit variant.
    Unit,
    /// A newtype variant.
    New(i64),
    /// A tuple variant.
    Tup(u8, u8),
    /// A struct variant.
    Rec {
        /// A number.
        x: i32,
        /// An optional label.
        y: Option<String>,
    },
}

/// Enums, one optional.
#[derive(Arbitrary, Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
pub struct Choice {
    /// The shape picked.
    pub pick: Shape,
    /// Another, optional.
    pub also: Option<Shape>,
}

/// Strings, a char and maps with string and integer keys, fields declared out of order.
#[derive(Arbitrary, Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
pub struct Texts {
    /// A string.
    pub s: String,
    /// A map with string keys.
    pub m: BTreeMap<String, u16>,
    /// A map with integer keys.
    pub k: BTreeMap<u32, bool>,
    /// A character.
    pub c: char,
}

/// Floats.
#[derive(Arbitrary, Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
pub struct Floats {
    /// A double.
    pub x: f64,
    /// A single.
    pub y: f32,
}

/// How a value bound by loopbound compares with serde_json's binding of the same text.
pub trait Agrees: PartialEq {
    /// Equal, floats within two units in the last place.
    fn agrees(&self, serde: &Self) -> bool {
        self == serde
    }

    /// Whether serde_json's value holds a float beyond the range of its type (serde_json casts
    /// an `f64` to an `f32` and may round a decimal past `f64::MAX`, binding refuses both).
    fn out_of_range(&self) -> bool {
        false
    }
}

impl Agrees for Ints {}
impl Agrees for Optional {}
impl Agrees for Nested {}
impl Agrees for Choice {}
impl Agrees for Texts {}

impl Agrees for Floats {
    fn agrees(&self, serde: &Self) -> bool {
        ulps_apart(self.x.to_bits(), serde.x.to_bits(), 63) <= 2
            && ulps_apart(u64::from(self.y.to_bits()), u64::from(serde.y.to_bits()), 31) <= 2
    }

    fn out_of_range(&self) -> bool {
        !self.x.is_finite() || !self.y.is_finite() || self.x.abs() == f64::MAX
    }
}

/// How many floats lie between two of the same width, given their bits and the sign bit's
/// position (different signs count as far apart, but for zeros).
pub(crate) fn ulps_apart(a: u64, b: u64, sign: u32) -> u64 {
    let magnitude = |bits: u64| bits & !(1 << sign);
    if (a >> sign) != (b >> sign) {
        return if magnitude(a) == 0 && magnitude(b) == 0 { 0 } else { u64::MAX };
    }
    magnitude(a).abs_diff(magnitude(b))
}

/// One fuzz case: limits, grants, and a sequence of calls.
#[derive(Arbitrary, Clone, Debug)]
pub struct BindCase {
    /// Tool-call limit, taken modulo 8.
    pub tool_limit: u8,
    /// Repetition limit minus one, taken modulo 3.
    pub repetitions: u8,
    /// Model-call limit minus one, taken modulo 4.
    pub model_limit: u8,
    /// Which tools' capabilities are granted (bit i for tool i).
    pub granted: u8,
    /// The calls, in order.
    pub calls: Vec<BindCall>,
}

/// How a call reaches the tool.
#[derive(Arbitrary, Clone, Copy, Debug)]
pub enum Path {
    /// `GuardedTool::invoke_json`.
    Json,
    /// `Scope::invoke` by name.
    ByName,
    /// `GuardedTool::bind`, then the typed `GuardedTool::invoke`.
    Typed,
}

/// A well-typed input of one of the tools, so that calls bind and reach the guard often.
#[derive(Arbitrary, Clone, Debug)]
pub enum TypedInput {
    /// For `ints`.
    Ints(Ints),
    /// For `optional`.
    Optional(Optional),
    /// For `nested`.
    Nested(Nested),
    /// For `choice`.
    Choice(Choice),
    /// For `texts`.
    Texts(Texts),
    /// For `floats`.
    Floats(Floats),
}

impl TypedInput {
    /// The tool index and serde_json's text of the input, pretty-printed when `spaced`.
    fn call(&self, spaced: bool) -> (u8, String) {
        match self {
            Self::Ints(input) => (0, json(input, spaced)),
            Self::Optional(input) => (1, json(input, spaced)),
            Self::Nested(input) => (2, json(input, spaced)),
            Self::Choice(input) => (3, json(input, spaced)),
            Self::Texts(input) => (4, json(input, spaced)),
            Self::Floats(input) => (5, json(input, spaced)),
        }
    }
}

/// serde_json's text of `value`, compact or pretty.
fn json<T: Serialize>(value: &T, spaced: bool) -> String {
    let text = if spaced { serde_json::to_string_pretty(value) } else { serde_json::to_string(value) };
    text.unwrap_or_else(|error| panic!("serialising an input: {error}"))
}

/// One step of a case.
#[derive(Arbitrary, Clone, Debug)]
pub enum BindCall {
    /// A well-typed input, written by serde_json.
    Typed {
        /// The input; it picks the tool.
        input: TypedInput,
        /// Pretty-printed rather than compact.
        spaced: bool,
        /// The path taken.
        path: Path,
        /// Whether the body returns an error.
        fail: bool,
    },
    /// The same text as an earlier call, to the same tool by the same path.
    Repeat {
        /// How far back, modulo the number of earlier calls.
        back: u8,
    },
    /// Raw argument text.
    Text {
        /// Tool index, modulo the number of tools.
        tool: u8,
        /// The argument text.
        text: String,
        /// The path taken.
        path: Path,
        /// Whether the body returns an error.
        fail: bool,
    },
    /// A structured document written as JSON text.
    Mirror {
        /// Tool index, modulo the number of tools.
        tool: u8,
        /// The document.
        value: JsonMirror,
        /// The path taken.
        path: Path,
        /// Whether the body returns an error.
        fail: bool,
    },
    /// An object whose field `zz` nests arrays `depth` levels deep.
    Deep {
        /// Tool index, modulo the number of tools.
        tool: u8,
        /// Nesting depth.
        depth: u8,
    },
    /// A call by a name that may not be registered.
    ByName {
        /// The name.
        name: String,
        /// The arguments.
        value: JsonMirror,
    },
    /// One model-call admission.
    AdmitModel,
    /// The caller cancels.
    Cancel,
}

/// Capabilities of the tools, in tool order.
const CAPABILITIES: [&str; 6] =
    ["ints.use", "optional.use", "nested.use", "choice.use", "texts.use", "floats.use"];

type Invocation<'a> = Pin<Box<dyn Future<Output = Result<String, ToolError>> + 'a>>;

/// A registered tool seen through its input type's reference checks.
trait Probe {
    fn name(&self) -> &str;
    fn runs(&self) -> u32;
    /// Binds `text`, checking core against serde_json; returns the reference signature.
    fn bind(&self, text: &str) -> Result<String, BindError>;
    fn invoke<'a>(&'a self, set: &'a ToolSet, scope: &'a Scope, text: &'a str, path: Path) -> Invocation<'a>;
}

struct Probed<T> {
    tool: GuardedTool<T>,
    runs: Arc<AtomicU32>,
}

/// Body runs per reference signature, over every tool of a case.
type Starts = Arc<Mutex<BTreeMap<String, u32>>>;

fn register<T>(
    set: &mut ToolSetBuilder<()>,
    name: &'static str,
    capability: &str,
    shared: &(Arc<AtomicBool>, Starts),
) -> Box<dyn Probe>
where
    T: DeserializeOwned + Serialize + JsonSchema + Agrees + Debug + Send + 'static,
{
    let runs = Arc::new(AtomicU32::new(0));
    let (counter, fail, starts) = (Arc::clone(&runs), Arc::clone(&shared.0), Arc::clone(&shared.1));
    let tool = ToolBuilder::new(name, capability)
        .build(move |input: T, _call| {
            counter.fetch_add(1, Ordering::SeqCst);
            let signature = reference_signature(name, &input);
            *starts
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .entry(signature)
                .or_default() += 1;
            let fail = fail.load(Ordering::SeqCst);
            async move { if fail { Err("the body refused") } else { Ok("done") } }
        })
        .unwrap_or_else(|error| panic!("registering {name}: {error}"));
    *set = std::mem::take(set).add(&tool);
    Box::new(Probed { tool, runs })
}

/// What binding must make of `text` as arguments: serde_json's binding once integer-valued
/// numbers are written plainly (binding reads numbers by value: `42.0` is the integer 42).
/// `None` when it is not an object.
pub fn reference_binding<T: DeserializeOwned>(text: &str) -> Option<Result<T, serde_json::Error>> {
    serde_binding(&reference::plain_integers(text).0)
}

/// What serde_json alone makes of `text` as arguments: `None` when it is not an object.
pub fn serde_binding<T: DeserializeOwned>(text: &str) -> Option<Result<T, serde_json::Error>> {
    let trimmed = text.trim_matches([' ', '\t', '\n', '\r']);
    if trimmed.is_empty() {
        return Some(serde_json::from_str("{}"));
    }
    trimmed.starts_with('{').then(|| serde_json::from_str(text))
}

/// The reference signature: name, colon, reference canonical form of serde_json's text, read
/// with exact numbers.
pub fn reference_signature<T: Serialize>(name: &str, value: &T) -> String {
    let text =
        serde_json::to_string(value).unwrap_or_else(|error| panic!("serialising a bound value: {error}"));
    let form = reference::canonical_text(&text).unwrap_or_else(|| panic!("serde_json wrote {text}"));
    format!("{name}:{form}")
}

/// Checks that nothing shown of a binding error quotes the arguments' planted secrets.
pub fn assert_unquoted(error: &BindError) {
    let tool_error = ToolError::Bind(error.clone());
    let shown = [
        error.message().to_owned(),
        error.path().to_owned(),
        error.to_string(),
        format!("{error:?}"),
        tool_error.to_string(),
        format!("{tool_error:?}"),
        tool_error.model_message().unwrap_or_default(),
    ];
    for text in shown {
        assert!(!text.contains(SECRET), "a binding error quotes the arguments: {text}");
    }
}

impl<T> Probe for Probed<T>
where
    T: DeserializeOwned + Serialize + Agrees + Debug + Send + 'static,
{
    fn name(&self) -> &str {
        self.tool.name()
    }

    fn runs(&self) -> u32 {
        self.runs.load(Ordering::SeqCst)
    }

    fn bind(&self, text: &str) -> Result<String, BindError> {
        let bound = self.tool.bind(text);
        let (plain, odd_key) = reference::plain_integers(text);
        match (serde_binding::<T>(&plain), &bound) {
            (Some(Ok(expected)), Ok(value)) => {
                assert!(
                    value.agrees(&expected),
                    "bind of {text:?}: serde_json gives {expected:?}, core {value:?}"
                );
            }
            (Some(Ok(expected)), Err(error)) if expected.out_of_range() => {
                assert_eq!(error.kind(), BindErrorKind::Mismatch, "{text:?}");
            }
            (Some(Err(_)), Ok(value)) if odd_key => {
                let again = serde_json::to_string(value).ok().and_then(|text| serde_binding::<T>(&text));
                assert!(
                    matches!(&again, Some(Ok(again)) if value.agrees(again)),
                    "{value:?} does not round-trip"
                );
            }
            (Some(Err(_)), Err(error)) => {
                assert!(!matches!(error.kind(), BindErrorKind::NotAnObject | BindErrorKind::Unsignable));
            }
            (None, Err(error)) => assert_eq!(error.kind(), BindErrorKind::NotAnObject),
            (expected, actual) => panic!("bind of {text:?}: serde_json gives {expected:?}, core {actual:?}"),
        }
        let value = bound.inspect_err(|error| {
            assert_eq!(error.tool(), self.name(), "a binding error names its tool");
            assert!(error.message().len() <= MAX_MESSAGE_LEN, "binding message too long");
            assert_unquoted(error);
        })?;
        let expected = reference_signature(self.name(), &value);
        assert_eq!(
            loopbound::canonical::signature(self.name(), &value)
                .map(loopbound::canonical::Signature::into_string),
            Ok(expected.clone()),
            "signature of {value:?}"
        );
        Ok(expected)
    }

    fn invoke<'a>(&'a self, set: &'a ToolSet, scope: &'a Scope, text: &'a str, path: Path) -> Invocation<'a> {
        Box::pin(async move {
            match path {
                Path::Json => self.tool.invoke_json(scope, text).await,
                Path::ByName => set.invoke(scope, self.name(), text).await,
                Path::Typed => match self.tool.bind(text) {
                    Ok(value) => self.tool.invoke(scope, value).await,
                    Err(error) => Err(ToolError::Bind(error)),
                },
            }
        })
    }
}

/// The tools of one case, their scope and the model.
struct Bench {
    set: ToolSet,
    scope: Scope,
    caller: CancellationToken,
    tools: Vec<Box<dyn Probe>>,
    granted: Vec<bool>,
    fail: Arc<AtomicBool>,
    starts: Starts,
    model: GuardModel,
    /// Earlier calls: tool index, argument text and path.
    history: Vec<(u8, String, Path)>,
}

impl Bench {
    fn new(case: &BindCase) -> Self {
        let (tool_limit, repetitions) = (u32::from(case.tool_limit % 8), u32::from(case.repetitions % 3) + 1);
        let model_limit = u32::from(case.model_limit % 4) + 1;
        let limits = Limits::default()
            .with_tool_calls(tool_limit)
            .with_repetitions(repetitions)
            .with_model_calls(model_limit);
        let granted: Vec<bool> = (0..CAPABILITIES.len()).map(|bit| case.granted & (1 << bit) != 0).collect();
        let caller = CancellationToken::new();
        let scope = super::scope_with(
            CAPABILITIES.iter().zip(&granted).filter(|(_, on)| **on).map(|(c, _)| *c),
            limits,
            &caller,
        );
        let shared = (Arc::new(AtomicBool::new(false)), Starts::default());
        let mut set = ToolSet::builder();
        let tools = vec![
            register::<Ints>(&mut set, "ints", CAPABILITIES[0], &shared),
            register::<Optional>(&mut set, "optional", CAPABILITIES[1], &shared),
            register::<Nested>(&mut set, "nested", CAPABILITIES[2], &shared),
            register::<Choice>(&mut set, "choice", CAPABILITIES[3], &shared),
            register::<Texts>(&mut set, "texts", CAPABILITIES[4], &shared),
            register::<Floats>(&mut set, "floats", CAPABILITIES[5], &shared),
        ];
        let model = GuardModel::new(model_limit, tool_limit, repetitions);
        let (fail, starts) = shared;
        let set = set.build().unwrap_or_else(|error| panic!("distinct names: {error}"));
        Self { set, scope, caller, tools, granted, fail, starts, model, history: Vec::new() }
    }

    async fn call(&mut self, index: u8, text: &str, path: Path, fail: bool) {
        self.history.push((index, text.to_owned(), path));
        let index = usize::from(index) % self.tools.len();
        self.fail.store(fail, Ordering::SeqCst);
        let probe = &self.tools[index];
        let runs_before = probe.runs();
        let expected = probe.bind(text);
        let actual = probe.invoke(&self.set, &self.scope, text, path).await;
        let name = probe.name().to_owned();
        let admitted = match expected {
            Err(error) => match actual {
                Err(ToolError::Bind(actual)) => {
                    assert_eq!(actual, error, "{name}: binding error differs");
                    false
                }
                other => panic!("{name}: {text:?} does not bind, yet the call gave {other:?}"),
            },
            Ok(signature) => {
                let decision = self.model.admit_tool(&name, self.granted[index], &signature);
                match (&decision, actual) {
                    (Ok(_), Ok(output)) if !fail => assert_eq!(output, "done"),
                    (Ok(_), Err(ToolError::Failed { tool, .. })) if fail => assert_eq!(&*tool, name),
                    (Err(stop), Err(ToolError::Stopped(actual))) => assert_eq!(actual, *stop, "{name}: stop"),
                    (expected, actual) => panic!("{name} {text:?}: expected {expected:?}, got {actual:?}"),
                }
                decision.is_ok()
            }
        };
        assert_eq!(
            self.tools[index].runs() - runs_before,
            u32::from(admitted),
            "{name}: a body runs exactly when its call is admitted"
        );
        self.model.assert_matches(&self.scope, &format!("{name} {text:?}"));
    }

    async fn by_name(&mut self, name: &str, text: &str) {
        if let Some(index) = self.tools.iter().position(|probe| probe.name() == name) {
            return self.call(u8::try_from(index).unwrap_or(0), text, Path::ByName, false).await;
        }
        match self.set.invoke(&self.scope, name, text).await {
            Err(ToolError::NotFound { name: reported }) => {
                assert!(reported.len() <= MAX_MESSAGE_LEN && name.starts_with(&reported));
            }
            other => panic!("unknown tool {name:?} gave {other:?}"),
        }
        self.model.assert_matches(&self.scope, &format!("unknown tool {name:?}"));
    }

    fn admit_model(&mut self) {
        assert_eq!(self.scope.admit_model(), self.model.admit_model(), "model admission");
        self.model.assert_matches(&self.scope, "a model admission");
    }

    fn cancel(&mut self) {
        self.caller.cancel();
        self.model.caller_cancelled = true;
        assert_eq!(self.scope.check(), Err(Stop::Cancelled));
        self.model.assert_matches(&self.scope, "the caller's cancellation");
    }

    fn finish(&self) {
        let tool_events = assert_log_shape(&self.scope.events());
        assert_eq!(tool_events, self.scope.tool_calls(), "one ToolCall event per admitted call");
        let runs: u32 = self.tools.iter().map(|probe| probe.runs()).sum();
        assert_eq!(runs, self.scope.tool_calls(), "bodies run once per admitted call");
        let starts = self.starts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for (signature, count) in starts.iter() {
            assert!(*count <= self.model.repetitions, "{signature} ran {count} times");
        }
        assert_eq!(*starts, self.model.per_signature, "bodies ran once per admitted signature");
    }
}

/// Checks one case; panics on the first broken invariant. Returns the final model, whose stop
/// and counters classify the case when picking seeds.
pub fn check(case: &BindCase) -> GuardModel {
    let runtime = super::paused_runtime();
    runtime.block_on(async move {
        let mut bench = Bench::new(case);
        for call in &case.calls {
            match call {
                BindCall::Text { tool, text, path, fail } => bench.call(*tool, text, *path, *fail).await,
                BindCall::Mirror { tool, value, path, fail } => {
                    bench.call(*tool, &value.to_text(MAX_MIRROR_DEPTH), *path, *fail).await;
                }
                BindCall::Deep { tool, depth } => {
                    let depth = usize::from(*depth);
                    let text = format!(r#"{{"zz":{}1{}}}"#, "[".repeat(depth), "]".repeat(depth));
                    bench.call(*tool, &text, Path::Json, false).await;
                }
                BindCall::ByName { name, value } => {
                    bench.by_name(name, &value.to_text(MAX_MIRROR_DEPTH)).await
                }
                BindCall::Typed { input, spaced, path, fail } => {
                    let (tool, text) = input.call(*spaced);
                    bench.call(tool, &text, *path, *fail).await;
                }
                BindCall::Repeat { back } => {
                    if !bench.history.is_empty() {
                        let len = bench.history.len();
                        let (tool, text, path) = bench.history[len - 1 - usize::from(*back) % len].clone();
                        bench.call(tool, &text, path, false).await;
                    }
                }
                BindCall::AdmitModel => bench.admit_model(),
                BindCall::Cancel => bench.cancel(),
            }
        }
        bench.finish();
        bench.model
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fuzz::json_mirror::{KNOWN_NAMES, TextMirror};

    /// A secret where every tool reads something: as each field's value, as a key of every
    /// object, as a variant name and as an array element.
    fn secret_documents() -> Vec<JsonMirror> {
        let secret = |n| JsonMirror::Str(TextMirror::Secret(n));
        let known = |index| TextMirror::Known(index);
        let mut documents = Vec::new();
        for (index, name) in KNOWN_NAMES.iter().enumerate() {
            let index = u8::try_from(index).unwrap_or(0);
            documents.push(JsonMirror::Object(vec![(known(index), secret(1))]));
            documents.push(JsonMirror::Object(vec![(known(index), JsonMirror::Array(vec![secret(2)]))]));
            documents.push(JsonMirror::Object(vec![(
                known(index),
                JsonMirror::Object(vec![(TextMirror::Secret(3), secret(4))]),
            )]));
            assert!(!name.contains(SECRET));
        }
        documents.push(JsonMirror::Object(vec![(TextMirror::Secret(5), secret(6))]));
        documents.push(JsonMirror::Object(vec![(
            known(14),
            JsonMirror::Object(vec![(TextMirror::Secret(7), JsonMirror::Null)]),
        )]));
        documents
    }

    /// Binds every document to `T`: it fails exactly where the reference fails, and no error
    /// quotes a secret. Returns how many failed.
    fn refusals<T>(documents: &[JsonMirror]) -> usize
    where
        T: DeserializeOwned + Serialize + JsonSchema + Agrees + Debug + Send + 'static,
    {
        let tool = loopbound::tool::ToolBuilder::new("probe", "probe.use")
            .build(|_: T, _: loopbound::ToolContext| async { Ok::<_, String>("") })
            .unwrap_or_else(|error| panic!("{error}"));
        let mut refused = 0;
        for document in documents {
            let text = document.to_text(MAX_MIRROR_DEPTH);
            let expected_error = !matches!(reference_binding::<T>(&text), Some(Ok(_)));
            match tool.bind(&text) {
                Ok(value) => assert!(!expected_error, "{text} bound to {value:?}"),
                Err(error) => {
                    assert!(expected_error, "{text}: {error}");
                    assert_unquoted(&error);
                    refused += 1;
                }
            }
        }
        refused
    }

    #[test]
    fn no_binding_error_of_any_tool_quotes_a_planted_secret() {
        let documents = secret_documents();
        let refused = [
            refusals::<Ints>(&documents),
            refusals::<Optional>(&documents),
            refusals::<Nested>(&documents),
            refusals::<Choice>(&documents),
            refusals::<Texts>(&documents),
            refusals::<Floats>(&documents),
        ];
        // No document holds every required field of a tool, and `Optional` needs `id`.
        assert_eq!(refused, [documents.len(); 6]);
    }

    #[test]
    fn the_fuzz_check_runs_secret_documents_through_every_path() {
        let calls = secret_documents()
            .into_iter()
            .flat_map(|value| {
                (0..6).map(move |tool| BindCall::Mirror {
                    tool,
                    value: value.clone(),
                    path: Path::Json,
                    fail: false,
                })
            })
            .collect();
        let case = BindCase { tool_limit: 7, repetitions: 2, model_limit: 3, granted: 0xff, calls };
        assert_eq!(check(&case).tool_calls, 0, "no secret-bearing document binds");
    }
}
