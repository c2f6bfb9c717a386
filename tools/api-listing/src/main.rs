//! Lists the public API of every published library crate of the workspace, one line per item,
//! into `api/<crate>.txt`, and fails when a committed listing is not current.
//!
//! ```text
//! cargo run -p loopbound-api-listing --locked            # check (CI)
//! cargo run -p loopbound-api-listing --locked -- --bless # rewrite the listings
//! ```
//!
//! A change to a public signature, a new item, a removed one, or a type that stops being `Send`
//! shows as a changed line in review. The listing comes from rustdoc's JSON output, which is
//! unstable: it is produced by the pinned stable toolchain with `RUSTC_BOOTSTRAP=1`, and read by
//! `public-api`, pinned to the format that toolchain writes. Blanket implementations (`From<T>
//! for T`, `Borrow`, ...) are left out: they follow from the rest and would triple the listing.
//!
//! # Invariants
//!
//! - Every package of the workspace that can be published and has a library is listed; a
//!   package marked `publish = false` is not.
//! - The check writes nothing; `--bless` writes only `api/`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use serde_json::Value;

/// The rustdoc JSON format `public-api` 0.52.0 reads (rustc 1.95 writes it).
const FORMAT_VERSION: u64 = 57;

/// A published library crate of the workspace.
struct Crate {
    name: String,
}

impl Crate {
    fn lib_name(&self) -> String {
        self.name.replace('-', "_")
    }
}

fn main() -> ExitCode {
    let bless = match std::env::args().nth(1).as_deref() {
        None => false,
        Some("--bless") => true,
        Some(other) => {
            eprintln!("unknown argument {other:?}; usage: api-listing [--bless]");
            return ExitCode::from(2);
        }
    };
    match run(bless) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(message) => {
            eprintln!("api-listing: {message}");
            ExitCode::from(2)
        }
    }
}

/// Lists every crate; returns whether every committed listing was current (always true with
/// `bless`).
fn run(bless: bool) -> Result<bool, String> {
    let metadata = cargo_metadata()?;
    let root = PathBuf::from(field_str(&metadata, "workspace_root")?);
    let target = PathBuf::from(field_str(&metadata, "target_directory")?);
    let crates = published_libraries(&metadata)?;
    let listings = root.join("api");
    std::fs::create_dir_all(&listings).map_err(|e| format!("cannot create {}: {e}", listings.display()))?;
    let mut current = true;
    for krate in &crates {
        let json = rustdoc_json(krate, &target)?;
        let listing = render(&json)?;
        let path = listings.join(format!("{}.txt", krate.name));
        if bless {
            std::fs::write(&path, &listing).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            println!("wrote {} ({} lines)", path.display(), listing.lines().count());
            continue;
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        if committed == listing {
            println!("{}: current ({} lines)", krate.name, listing.lines().count());
        } else {
            current = false;
            report_difference(&krate.name, &committed, &listing);
        }
    }
    if !current {
        eprintln!(
            "\nThe public API changed. If the change is meant, rewrite the listings with\n  \
             cargo run -p loopbound-api-listing --locked -- --bless\nand commit api/."
        );
    }
    Ok(current)
}

fn cargo_metadata() -> Result<Value, String> {
    let output = Command::new(cargo())
        .args(["metadata", "--no-deps", "--format-version", "1", "--locked"])
        .output()
        .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    if !output.status.success() {
        return Err(format!("cargo metadata failed: {}", String::from_utf8_lossy(&output.stderr)));
    }
    serde_json::from_slice(&output.stdout).map_err(|e| format!("cargo metadata printed no JSON: {e}"))
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned())
}

fn field_str<'a>(value: &'a Value, key: &str) -> Result<&'a str, String> {
    value.get(key).and_then(Value::as_str).ok_or_else(|| format!("cargo metadata has no {key:?}"))
}

/// The packages that can be published (`publish` unset) and have a library target, by name.
fn published_libraries(metadata: &Value) -> Result<Vec<Crate>, String> {
    let packages =
        metadata.get("packages").and_then(Value::as_array).ok_or("cargo metadata has no packages")?;
    let mut crates: Vec<Crate> = packages
        .iter()
        .filter(|package| package.get("publish").is_some_and(Value::is_null))
        .filter(|package| {
            package.get("targets").and_then(Value::as_array).is_some_and(|targets| {
                targets.iter().any(|target| {
                    target
                        .get("kind")
                        .and_then(Value::as_array)
                        .is_some_and(|kinds| kinds.iter().any(|k| k == "lib"))
                })
            })
        })
        .filter_map(|package| package.get("name").and_then(Value::as_str))
        .map(|name| Crate { name: name.to_owned() })
        .collect();
    crates.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(crates)
}

/// Runs rustdoc's JSON output for `krate`; returns the file it wrote.
fn rustdoc_json(krate: &Crate, target: &Path) -> Result<PathBuf, String> {
    let status = Command::new(cargo())
        .args(["rustdoc", "--quiet", "--locked", "--lib", "-p", &krate.name])
        .args(["--", "-Z", "unstable-options", "--output-format", "json"])
        .env("RUSTC_BOOTSTRAP", "1")
        .status()
        .map_err(|e| format!("cannot run cargo rustdoc: {e}"))?;
    if !status.success() {
        return Err(format!("cargo rustdoc -p {} failed", krate.name));
    }
    Ok(target.join("doc").join(format!("{}.json", krate.lib_name())))
}

/// The listing of one rustdoc JSON file: one item per line, sorted.
fn render(json: &Path) -> Result<String, String> {
    let text = std::fs::read(json).map_err(|e| format!("cannot read {}: {e}", json.display()))?;
    let version = serde_json::from_slice::<Value>(&text)
        .map_err(|e| format!("{} is not JSON: {e}", json.display()))?
        .get("format_version")
        .and_then(Value::as_u64);
    if version != Some(FORMAT_VERSION) {
        return Err(format!(
            "{} has rustdoc JSON format {version:?}; the listing reads format {FORMAT_VERSION}, \
             which rustc 1.95 writes: run it with the workspace's rust-version",
            json.display()
        ));
    }
    let api = public_api::Builder::from_rustdoc_json(json)
        .omit_blanket_impls(true)
        .build()
        .map_err(|e| format!("cannot read the API in {}: {e}", json.display()))?;
    let mut listing = String::new();
    for item in api.items() {
        listing.push_str(&item.to_string());
        listing.push('\n');
    }
    Ok(listing)
}

/// Prints the lines only one side has, the removed ones first.
fn report_difference(name: &str, committed: &str, listing: &str) {
    let before: BTreeSet<&str> = committed.lines().collect();
    let after: BTreeSet<&str> = listing.lines().collect();
    eprintln!("\n{name}: the public API differs from api/{name}.txt");
    for line in before.difference(&after) {
        eprintln!("- {line}");
    }
    for line in after.difference(&before) {
        eprintln!("+ {line}");
    }
}
