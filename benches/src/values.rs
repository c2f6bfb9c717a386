//! Argument values for the canonical-form benchmarks, built from JSON text as a model would send
//! them, at about 100 B, 10 KB and 1 MB.
//!
//! # Invariants
//!
//! - Every value is deterministic: the same text on every build and every run.
//! - A sample's [`bytes`](Sample::bytes) is the length of `serde_json::to_string` of its value,
//!   the byte count both throughputs are reported against.
//! - Numbers are written in varied forms (`42`, `-7`, `12.50`, `4.2e1`, a 25-digit integer), so
//!   the canonical form's number normalisation is exercised, not only its integer fast path.

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;

/// One argument value and its size.
#[derive(Debug)]
pub struct Sample {
    /// A short name: size, then shape (`10KB/records`).
    pub name: &'static str,
    /// The value.
    pub value: Value,
    /// The length of `serde_json::to_string(&value)`.
    pub bytes: usize,
}

impl Sample {
    /// Parses `text` into a sample named `name`.
    ///
    /// # Panics
    ///
    /// If `text` is not JSON: the generators here always write valid JSON.
    #[must_use]
    pub fn parse(name: &'static str, text: &str) -> Self {
        let value: Value = serde_json::from_str(text).expect("the generators write valid JSON");
        let bytes = serde_json::to_string(&value).map_or(0, |compact| compact.len());
        Self { name, value, bytes }
    }
}

/// The samples every canonical benchmark runs: one small object, four 10 KB shapes (records,
/// numbers in varied forms, numbers in normal form, one long string) and 1 MB of records.
#[must_use]
pub fn samples() -> Vec<Sample> {
    vec![
        Sample::parse("100B/object", SMALL),
        Sample::parse("10KB/records", &records(10_000)),
        Sample::parse("10KB/numbers-varied", &numbers(10_000)),
        Sample::parse("10KB/numbers-plain", &plain_numbers(10_000)),
        Sample::parse("10KB/string", &long_string(10_000)),
        Sample::parse("1MB/records", &records(1_000_000)),
    ]
}

/// A small argument object, about 100 bytes, keys not in order.
pub const SMALL: &str =
    r#"{"query":"login returns 401","input":42,"filters":{"open":true,"limit":20},"ids":[7,12.5,4.2e1]}"#;

/// One record of the `records` shape: keys out of order, strings with escapes, varied numbers.
fn record(index: usize) -> String {
    let score = format!("{}.{:02}", index % 97, index % 100);
    let big = format!("{}1234567890123456789", 100_000 + index);
    format!(
        r#"{{"title":"Ticket {index}: login returns \"401\"\n","id":{index},"tags":["auth","login","é"],"score":{score},"ratio":{r}e-2,"big":{big},"open":{open},"assignee":null}}"#,
        r = index % 13,
        open = index.is_multiple_of(2),
    )
}

/// An array of records whose text is at least `bytes` long.
#[must_use]
pub fn records(bytes: usize) -> String {
    let mut text = String::from("[");
    let mut index = 0;
    while text.len() < bytes {
        if index > 0 {
            text.push(',');
        }
        text.push_str(&record(index));
        index += 1;
    }
    text.push(']');
    text
}

/// An object `{"values": [...]}` of integers and short decimals already in normal form (as a
/// model usually writes them), at least `bytes` long.
#[must_use]
pub fn plain_numbers(bytes: usize) -> String {
    let mut text = String::from(r#"{"values":["#);
    let mut index: u64 = 0;
    while text.len() < bytes {
        if index > 0 {
            text.push(',');
        }
        let _ = match index % 4 {
            0 => write!(text, "{index}"),
            1 => write!(text, "-{}", index * 7),
            2 => write!(text, "{}.5", index / 3),
            _ => write!(text, "0.{}5", index % 10),
        };
        index += 1;
    }
    text.push_str("]}");
    text
}

/// An object `{"values": [...]}` of integers and decimals in varied forms (trailing zeros,
/// exponents), at least `bytes` long: numbers the canonical form has to rewrite.
#[must_use]
pub fn numbers(bytes: usize) -> String {
    let mut text = String::from(r#"{"values":["#);
    let mut index: u64 = 0;
    while text.len() < bytes {
        if index > 0 {
            text.push(',');
        }
        let number = match index % 5 {
            0 => format!("{index}"),
            1 => format!("-{}", index * 7),
            2 => format!("{}.{}0", index / 3, index % 10),
            3 => format!("{}e{}", index % 90 + 1, index % 7),
            _ => format!("{}.{}e-3", index % 9, index),
        };
        text.push_str(&number);
        index += 1;
    }
    text.push_str("]}");
    text
}

/// An object `{"text": "..."}` whose one string is at least `bytes` long: prose with a quote, a
/// newline and non-ASCII letters every line.
#[must_use]
pub fn long_string(bytes: usize) -> String {
    let mut text = String::from(r#"{"text":""#);
    let mut line = 0;
    while text.len() < bytes {
        let _ = write!(text, r#"Line {line}: the user said \"it fails\" after login — réessayer?\n"#);
        line += 1;
    }
    text.push_str(r#""}"#);
    text
}

/// A typed record, fields declared out of key order, as a tool's input type might be.
#[derive(Clone, Debug, Serialize)]
pub struct Record {
    /// A title with characters to escape.
    pub title: String,
    /// An id.
    pub id: u64,
    /// A few tags.
    pub tags: Vec<String>,
    /// A decimal score.
    pub score: f64,
    /// Whether the ticket is open.
    pub open: bool,
    /// An optional assignee.
    pub assignee: Option<String>,
}

/// A typed input holding `count` records: about 110 bytes of JSON per record.
#[must_use]
pub fn typed_records(count: u64) -> Vec<Record> {
    (0..count)
        .map(|id| Record {
            title: format!("Ticket {id}: login returns \"401\"\n"),
            id,
            tags: vec!["auth".to_owned(), "login".to_owned()],
            score: f64::from(u32::try_from(id % 1000).unwrap_or(0)) / 8.0,
            open: id % 2 == 0,
            assignee: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_have_the_announced_sizes() {
        let sizes: Vec<(&str, bool)> = samples()
            .iter()
            .map(|sample| {
                let (low, high) = match sample.name.split('/').next() {
                    Some("100B") => (80, 120),
                    Some("10KB") => (9_000, 11_000),
                    _ => (900_000, 1_100_000),
                };
                (sample.name, (low..high).contains(&sample.bytes))
            })
            .collect();
        assert!(sizes.iter().all(|(_, ok)| *ok), "{sizes:?}");
    }

    #[test]
    fn canonical_form_differs_from_serde_json_where_it_must() {
        let small = Sample::parse("small", SMALL);
        assert_eq!(
            loopbound::canonical::canonical_json(&small.value),
            r#"{"filters":{"limit":20,"open":true},"ids":[7,12.5,42],"input":42,"query":"login returns 401"}"#
        );
    }
}
