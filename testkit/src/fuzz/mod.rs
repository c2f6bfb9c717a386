//! The fuzz targets' checks, as plain functions of bytes.
//!
//! Nothing here names libFuzzer: each target in `fuzz/fuzz_targets/` is one line that calls a
//! function of this module, and `loopbound-proptests` replays every file of
//! `fuzz/seeds/<target>/` and `fuzz/regressions/<target>/` through the same functions under
//! plain `cargo test` on stable. A broken invariant panics with a message that names it.
//!
//! Structured inputs (`BindCase`, `RunCase`) are `arbitrary`-derived; JSON documents inside them
//! are mirrors written out with an explicit depth cap.

pub mod anthropic_case;
pub mod bind_case;
pub mod guard_model;
pub mod journal_case;
pub mod json_mirror;
pub mod json_read;
pub mod mcp_case;
pub mod openai_case;
pub mod progress_case;
pub mod reference;
pub mod responses_case;
pub mod run_case;
pub mod stream_case;

use arbitrary::{Arbitrary, Unstructured};
use serde_json::Value;

/// Target `canonical`: bytes that are UTF-8 JSON get a canonical form that equals the reference,
/// is valid JSON whose re-parse is the same value, is idempotent, and is the signature's
/// argument part.
pub fn canonical(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(value) = serde_json::from_str::<Value>(text) else { return };
    check_canonical(&value);
}

/// The checks of [`canonical`] on one value.
pub fn check_canonical(value: &Value) {
    let form = loopbound::canonical::canonical_json(value);
    assert_eq!(form, reference::canonical(value), "the canonical form differs from the reference");
    assert_eq!(
        reference::canonical_text(&form).as_deref(),
        Some(form.as_str()),
        "the form is not its own form"
    );
    let reparsed = read_value(&form)
        .unwrap_or_else(|error| panic!("the canonical form {form} does not read back: {error}"));
    assert_eq!(loopbound::canonical::canonical_json(&reparsed), form, "the canonical form is not idempotent");
    assert_eq!(reference::canonical(&reparsed), form, "the form's re-parse is not the same value");
    assert_eq!(
        loopbound::canonical::signature("t", value).map(loopbound::canonical::Signature::into_string),
        Ok(format!("t:{form}")),
        "signature of a Value"
    );
}

/// A tool input holding any JSON value.
#[derive(Debug, serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
pub struct ValueArg {
    /// The value.
    pub x: Value,
}

/// JSON `text` read into a `serde_json::Value` by loopbound's own reader, as the arguments
/// `{"x": text}` of a tool whose input holds a `Value` (one level more than `text`). Numbers are
/// read as binding reads them: correctly rounded, and exact under `exact-numbers`.
///
/// # Errors
///
/// The binding error, if the arguments do not bind.
pub fn read_value(text: &str) -> Result<Value, loopbound::tool::BindError> {
    static TOOL: std::sync::OnceLock<loopbound::GuardedTool<ValueArg>> = std::sync::OnceLock::new();
    let tool = TOOL.get_or_init(|| {
        loopbound::tool::ToolBuilder::new("value", "value.read")
            .build(|_: ValueArg, _| async { Ok::<_, String>("") })
            .unwrap_or_else(|error| panic!("building the value tool: {error}"))
    });
    tool.bind(&format!(r#"{{"x":{text}}}"#)).map(|arg| arg.x)
}

/// Target `json_read`: bytes that are UTF-8 read by `loopbound-json`'s reader into a `Value`
/// and by serde_json's, compared (see [`json_read`]).
pub fn json_read(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        json_read::check(text);
    }
}

/// Target `bind_guard`: an arbitrary [`bind_case::BindCase`].
pub fn bind_guard(data: &[u8]) {
    if let Ok(case) = bind_case::BindCase::arbitrary_take_rest(Unstructured::new(data)) {
        let _ = bind_case::check(&case);
    }
}

/// Target `openai_parse`: an arbitrary [`openai_case::OpenAiCase`], a body and its cuts, through
/// the live transport's decoders.
pub fn openai_parse(data: &[u8]) {
    if let Ok(case) = openai_case::OpenAiCase::arbitrary_take_rest(Unstructured::new(data)) {
        openai_case::check(&case);
    }
}

/// Target `anthropic_parse`: an arbitrary [`anthropic_case::AnthropicCase`], a body and its
/// cuts, through the Anthropic transport's decoders.
pub fn anthropic_parse(data: &[u8]) {
    if let Ok(case) = anthropic_case::AnthropicCase::arbitrary_take_rest(Unstructured::new(data)) {
        anthropic_case::check(&case);
    }
}

/// Target `responses_parse`: an arbitrary [`responses_case::ResponsesCase`], a body and its
/// cuts, through the Responses transport's decoders.
pub fn responses_parse(data: &[u8]) {
    if let Ok(case) = responses_case::ResponsesCase::arbitrary_take_rest(Unstructured::new(data)) {
        responses_case::check(&case);
    }
}

/// Target `mcp_arguments`: an arbitrary [`mcp_case::McpCase`], an MCP tool's schema and the
/// model's arguments through compilation, binding and the check before the guard.
pub fn mcp_arguments(data: &[u8]) {
    if let Ok(case) = mcp_case::McpCase::arbitrary_take_rest(Unstructured::new(data)) {
        mcp_case::check(&case);
    }
}

/// Target `journal_rows`: an arbitrary [`journal_case::JournalCase`], rows of real journaled
/// runs corrupted field by field, decoded and resumed.
pub fn journal_rows(data: &[u8]) {
    if let Ok(case) = journal_case::JournalCase::arbitrary_take_rest(Unstructured::new(data)) {
        journal_case::check(&case);
    }
}

/// Target `progress`: an arbitrary [`progress_case::ProgressCase`] (a progress policy and a
/// trace of calls) against a reference model of every progress check.
pub fn progress(data: &[u8]) {
    if let Some(case) = progress_case::ProgressCase::read(data) {
        progress_case::check(&case);
    }
}

/// Target `run`: an arbitrary [`run_case::RunCase`].
pub fn run(data: &[u8]) {
    if let Ok(case) = run_case::RunCase::arbitrary_take_rest(Unstructured::new(data)) {
        run_case::check(&case);
    }
}

/// A current-thread runtime with timers and tokio's clock paused: time advances only when every
/// task waits, straight to the next timer, so deadlines fire exactly and instantly.
pub fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap_or_else(|error| panic!("building a runtime: {error}"))
}

/// A scope with these capabilities, limits and caller token. The limits must be valid.
pub fn scope_with<I, S>(
    capabilities: I,
    limits: loopbound::Limits,
    caller: &tokio_util::sync::CancellationToken,
) -> loopbound::Scope
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    loopbound::Scope::builder()
        .grants(capabilities)
        .limits(limits)
        .caller(caller.clone())
        .build()
        .unwrap_or_else(|error| panic!("valid limits were refused: {error}"))
}
