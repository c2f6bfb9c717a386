//! A structured JSON document that `arbitrary` can build from fuzz bytes, written out as JSON
//! text with an explicit depth cap.
//!
//! # Invariants
//!
//! - [`JsonMirror::to_text`] always writes valid JSON: strings through serde_json's escaping,
//!   numbers from digit lists forced into the JSON grammar, non-finite floats as `null`.
//! - Nesting deeper than the cap is written as `null`, so a mirror never produces text deeper
//!   than the cap, whatever the input; the writer keeps its own stack and never recurses.
//! - Object keys and strings are drawn often from the field and variant names of the harness's
//!   input types, so that structured inputs bind often enough to reach the guard.

use arbitrary::Arbitrary;

/// Names the harness's input types use for fields and variants.
pub const KNOWN_NAMES: &[&str] = &[
    "a", "b", "c", "id", "note", "flag", "rows", "tags", "pick", "also", "s", "m", "k", "x", "y", "input",
    "text", "Unit", "New", "Tup", "Rec",
];

/// Deepest nesting a mirror writes: above the binding limit of 128, to reach its error.
pub const MAX_MIRROR_DEPTH: usize = 140;

/// The prefix of the secrets planted in arguments: no binding error may show it.
pub const SECRET: &str = "SECRET-";

/// A JSON value.
#[derive(Arbitrary, Clone, Debug)]
pub enum JsonMirror {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A small integer, often a valid field value.
    Small(i8),
    /// A machine integer.
    Int(i64),
    /// A float, written by Rust's shortest round-trip formatting.
    Float(f64),
    /// A number of any size and spelling.
    Number(NumberMirror),
    /// A string.
    Str(TextMirror),
    /// An array.
    Array(Vec<JsonMirror>),
    /// An object; a repeated key is written twice.
    Object(Vec<(TextMirror, JsonMirror)>),
}

/// A string: a known name, a secret or arbitrary text.
#[derive(Arbitrary, Clone, Debug)]
pub enum TextMirror {
    /// One of [`KNOWN_NAMES`], by index.
    Known(u8),
    /// `SECRET-<n>`: a value that no error may quote.
    Secret(u16),
    /// Any text.
    Any(String),
}

impl TextMirror {
    /// The string's value.
    pub fn value(&self) -> String {
        match self {
            Self::Known(index) => KNOWN_NAMES[usize::from(*index) % KNOWN_NAMES.len()].to_owned(),
            Self::Secret(number) => format!("{SECRET}{number}"),
            Self::Any(text) => text.clone(),
        }
    }
}

/// A JSON number: digit lists taken modulo 10 and an optional exponent.
#[derive(Arbitrary, Clone, Debug)]
pub struct NumberMirror {
    negative: bool,
    int: Vec<u8>,
    frac: Vec<u8>,
    exponent: Option<ExponentMirror>,
}

/// The exponent part of a number.
#[derive(Arbitrary, Clone, Debug)]
pub struct ExponentMirror {
    upper: bool,
    sign: Option<bool>,
    digits: Vec<u8>,
}

impl NumberMirror {
    /// The number as JSON text, always within the grammar.
    pub fn text(&self) -> String {
        let digits = |list: &[u8]| -> String { list.iter().map(|d| char::from(b'0' + d % 10)).collect() };
        let mut out = String::new();
        if self.negative {
            out.push('-');
        }
        let int = digits(&self.int);
        let int = int.trim_start_matches('0');
        out.push_str(if int.is_empty() { "0" } else { int });
        if !self.frac.is_empty() {
            out.push('.');
            out.push_str(&digits(&self.frac));
        }
        if let Some(exponent) = &self.exponent {
            out.push(if exponent.upper { 'E' } else { 'e' });
            match exponent.sign {
                Some(true) => out.push('+'),
                Some(false) => out.push('-'),
                None => {}
            }
            let written = digits(&exponent.digits);
            out.push_str(if written.is_empty() { "0" } else { &written });
        }
        out
    }
}

/// One step of the writer's explicit walk.
enum Task<'a> {
    Value(&'a JsonMirror, usize),
    Text(&'static str),
    Key(String),
}

impl JsonMirror {
    /// Compact JSON text of this value, with nesting below `max_depth` written as `null`.
    pub fn to_text(&self, max_depth: usize) -> String {
        let mut out = String::new();
        let mut tasks = vec![Task::Value(self, 0)];
        while let Some(task) = tasks.pop() {
            match task {
                Task::Text(text) => out.push_str(text),
                Task::Key(key) => {
                    out.push_str(&serde_json::to_string(&key).unwrap_or_default());
                    out.push(':');
                }
                Task::Value(value, depth) => write_value(&mut out, &mut tasks, value, depth, max_depth),
            }
        }
        out
    }
}

fn write_value<'a>(
    out: &mut String,
    tasks: &mut Vec<Task<'a>>,
    value: &'a JsonMirror,
    depth: usize,
    max_depth: usize,
) {
    match value {
        JsonMirror::Null => out.push_str("null"),
        JsonMirror::Bool(flag) => out.push_str(if *flag { "true" } else { "false" }),
        JsonMirror::Small(number) => out.push_str(&number.to_string()),
        JsonMirror::Int(number) => out.push_str(&number.to_string()),
        JsonMirror::Float(number) if number.is_finite() => out.push_str(&format!("{number:?}")),
        JsonMirror::Float(_) => out.push_str("null"),
        JsonMirror::Number(number) => out.push_str(&number.text()),
        JsonMirror::Str(text) => out.push_str(&serde_json::to_string(&text.value()).unwrap_or_default()),
        JsonMirror::Array(_) | JsonMirror::Object(_) if depth >= max_depth => out.push_str("null"),
        JsonMirror::Array(items) => {
            out.push('[');
            tasks.push(Task::Text("]"));
            for (index, item) in items.iter().enumerate().rev() {
                tasks.push(Task::Value(item, depth + 1));
                if index > 0 {
                    tasks.push(Task::Text(","));
                }
            }
        }
        JsonMirror::Object(entries) => {
            out.push('{');
            tasks.push(Task::Text("}"));
            for (index, (key, item)) in entries.iter().enumerate().rev() {
                tasks.push(Task::Value(item, depth + 1));
                tasks.push(Task::Key(key.value()));
                if index > 0 {
                    tasks.push(Task::Text(","));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirrors_write_valid_json_and_cap_depth() {
        let mut deep = JsonMirror::Small(1);
        for _ in 0..200 {
            deep = JsonMirror::Array(vec![deep]);
        }
        let text = deep.to_text(3);
        assert_eq!(text, "[[[null]]]");
        let number = NumberMirror {
            negative: true,
            int: vec![0, 0, 12],
            frac: vec![5],
            exponent: Some(ExponentMirror { upper: true, sign: Some(false), digits: vec![] }),
        };
        assert_eq!(number.text(), "-2.5E-0");
        let object = JsonMirror::Object(vec![
            (TextMirror::Known(3), JsonMirror::Float(f64::NAN)),
            (TextMirror::Any("\"".into()), JsonMirror::Array(vec![])),
        ]);
        assert_eq!(object.to_text(4), r#"{"id":null,"\"":[]}"#);
    }
}
