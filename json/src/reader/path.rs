//! Where in the arguments a binding problem was found: field names, array indices and enum
//! variants, outermost first (`shapes[2].Circle.radius`).
//!
//! # Invariants
//!
//! - A path holds only what the input type declares (its field and variant names, as
//!   `&'static str`) and positions (array indices). An object key that is not one of the
//!   type's declared field names is input data and is shown as the placeholder `[<key>]`, never
//!   as its text.
//! - A rendered path is at most [`MAX_PATH_LEN`] bytes: longer paths keep their beginning and
//!   their end around an ellipsis.

use std::fmt::Write as _;

use super::read::Reader;

/// Longest rendered path, in bytes.
pub(crate) const MAX_PATH_LEN: usize = 96;

/// One step into a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Segment {
    /// A field the input type declares.
    Field(&'static str),
    /// An object key that the type does not declare (a map's key): not shown.
    Key,
    /// An array element.
    Index(usize),
    /// An enum variant the type declares.
    Variant(&'static str),
}

impl Segment {
    /// The segment of the object key whose string starts at byte `at` of `text`: the declared
    /// name it equals among `names`, else [`Segment::Key`]. `variant` picks the variant form.
    pub(crate) fn of_key(text: &str, at: usize, names: &'static [&'static str], variant: bool) -> Self {
        let mut reader = Reader::new(text);
        reader.skip_to(at);
        let mut scratch = String::new();
        let declared = match reader.string(&mut scratch) {
            Ok(key) => names.iter().find(|name| **name == key.as_str()).copied(),
            Err(_) => None,
        };
        match declared {
            Some(name) if variant => Self::Variant(name),
            Some(name) => Self::Field(name),
            None => Self::Key,
        }
    }
}

/// Renders `segments`, given innermost first, as one path, outermost first.
pub(crate) fn render(segments: &[Segment]) -> String {
    let mut out = String::new();
    for segment in segments.iter().rev() {
        match segment {
            Segment::Field(name) | Segment::Variant(name) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(name);
            }
            Segment::Key => out.push_str("[<key>]"),
            Segment::Index(index) => {
                let _ = write!(out, "[{index}]");
            }
        }
    }
    shorten(out)
}

/// Keeps a path within [`MAX_PATH_LEN`] bytes: its first third and its last part, joined by an
/// ellipsis, each cut on a char boundary.
fn shorten(path: String) -> String {
    const ELLIPSIS: &str = "…";
    if path.len() <= MAX_PATH_LEN {
        return path;
    }
    let head_len = floor_boundary(&path, MAX_PATH_LEN / 3);
    let tail_budget = MAX_PATH_LEN - head_len - ELLIPSIS.len();
    let tail_start = ceil_boundary(&path, path.len() - tail_budget);
    let mut out = String::with_capacity(MAX_PATH_LEN);
    out.push_str(path.get(..head_len).unwrap_or_default());
    out.push_str(ELLIPSIS);
    out.push_str(path.get(tail_start..).unwrap_or_default());
    out
}

fn floor_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn ceil_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_read_outermost_first() {
        let segments = [
            Segment::Field("radius"),
            Segment::Variant("Circle"),
            Segment::Index(2),
            Segment::Field("shapes"),
        ];
        assert_eq!(render(&segments), "shapes[2].Circle.radius");
        assert_eq!(render(&[Segment::Field("x"), Segment::Key, Segment::Field("m")]), "m[<key>].x");
        assert_eq!(render(&[Segment::Index(0), Segment::Index(1)]), "[1][0]");
        assert_eq!(render(&[]), "");
    }

    #[test]
    fn keys_are_named_only_when_declared() {
        const NAMES: &[&str] = &["input", "label"];
        let text = r#"{"input":1,"SECRET":2,"l\u0061bel":3}"#;
        assert_eq!(Segment::of_key(text, 1, NAMES, false), Segment::Field("input"));
        assert_eq!(Segment::of_key(text, 11, NAMES, false), Segment::Key);
        assert_eq!(Segment::of_key(text, 22, NAMES, true), Segment::Variant("label"));
    }

    #[test]
    fn long_paths_keep_both_ends() {
        let segments: Vec<Segment> = (0..200).map(Segment::Index).collect();
        let path = render(&segments);
        assert!(path.len() <= MAX_PATH_LEN, "{}", path.len());
        assert!(path.starts_with("[199][198]"), "{path}");
        assert!(path.ends_with("[1][0]"), "{path}");
        assert!(path.contains('…'));
    }
}
