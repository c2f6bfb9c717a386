//! Picks a small, varied seed corpus for a fuzz target out of a large fuzzing corpus.
//!
//! ```sh
//! cargo run -p loopbound-proptests --release --example pick_seeds -- run /tmp/corpus/run fuzz/seeds/run
//! ```
//!
//! Every input of the corpus is decoded and classified (`run`: composition, call path, result of the
//! reference simulation, and whether a tool was admitted; `bind_guard`: final stop, admitted tools and the
//! caller's cancellation; `canonical`: each JSON feature the document uses); the smallest input
//! of each class is copied to the output folder, named after its class. Each picked input is
//! checked by its target's check function before it is copied.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use arbitrary::{Arbitrary, Unstructured};
use loopbound_proptests::harness::{self, bind_case, run_case};

/// Whether `text` has `len` consecutive bytes that satisfy `test`.
fn runs(text: &str, test: impl Fn(u8) -> bool, len: usize) -> bool {
    text.as_bytes().split(|b| !test(*b)).any(|run| run.len() >= len)
}

/// The classes an input stands for; the smallest input of each class is kept.
fn classes_of(target: &str, data: &[u8]) -> Vec<String> {
    class_of(target, data).unwrap_or_default()
}

fn class_of(target: &str, data: &[u8]) -> Option<Vec<String>> {
    match target {
        "run" => {
            let case = run_case::RunCase::arbitrary_take_rest(Unstructured::new(data)).ok()?;
            Some(vec![run_case::outcome_class(&case)])
        }
        "bind_guard" => {
            let case = bind_case::BindCase::arbitrary_take_rest(Unstructured::new(data)).ok()?;
            let model = bind_case::check(&case);
            let stop = model.stop.map_or_else(|| "open".to_owned(), |reason| reason.to_string());
            let cancelled = if model.caller_cancelled { "-cancelled" } else { "" };
            Some(vec![format!("{stop}-tools{}{cancelled}", model.tool_calls.min(3))])
        }
        "canonical" => {
            let text = std::str::from_utf8(data).ok()?;
            serde_json::from_str::<serde_json::Value>(text).ok()?;
            let features = [
                ("exponent", runs(text, |b| b.is_ascii_digit(), 1) && text.contains(['e', 'E'])),
                ("long-digits", runs(text, |b| b.is_ascii_digit(), 25)),
                ("escapes", text.contains('\\')),
                ("unicode", !text.is_ascii()),
                ("deep", text.matches(['[', '{']).count() > 8),
                ("object", text.contains('{')),
                ("fraction", text.contains('.')),
            ];
            Some(features.iter().filter(|(_, on)| *on).map(|(name, _)| (*name).to_owned()).collect())
        }
        _ => None,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, target, corpus, out] = args.as_slice() else {
        eprintln!("usage: pick_seeds <canonical|bind_guard|run> <corpus-dir> <out-dir>");
        std::process::exit(64);
    };
    let check: fn(&[u8]) = match target.as_str() {
        "canonical" => harness::canonical,
        "bind_guard" => harness::bind_guard,
        "run" => harness::run,
        other => {
            eprintln!("unknown target {other}");
            std::process::exit(64);
        }
    };
    let mut smallest: BTreeMap<String, (usize, PathBuf)> = BTreeMap::new();
    let entries = std::fs::read_dir(corpus).unwrap_or_else(|error| panic!("reading {corpus}: {error}"));
    for path in entries.filter_map(Result::ok).map(|entry| entry.path()) {
        let Ok(data) = std::fs::read(&path) else { continue };
        for class in classes_of(target, &data) {
            let better = smallest.get(&class).is_none_or(|(len, _)| data.len() < *len);
            if better {
                smallest.insert(class, (data.len(), path.clone()));
            }
        }
    }
    std::fs::create_dir_all(out).unwrap_or_else(|error| panic!("creating {out}: {error}"));
    for (class, (_, path)) in &smallest {
        let data = std::fs::read(path).unwrap_or_else(|error| panic!("reading {}: {error}", path.display()));
        check(&data);
        let name = class.replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "_");
        std::fs::write(Path::new(out).join(name), data).unwrap_or_else(|error| panic!("writing: {error}"));
    }
    println!("{} classes picked into {out}", smallest.len());
}
