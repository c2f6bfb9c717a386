//! Untrusted text made safe to print on a terminal: every control character shown as an escape.
//!
//! The model's text, and whatever a provider says, may carry terminal control sequences: a
//! clear screen, a cursor move, a bare carriage return or a bell could redraw the console or
//! fake a status line. In text mode the console prints such text through [`visible`]; `--json`
//! keeps the exact text, escaped by JSON.
//!
//! # Invariants
//!
//! - The output holds no C0 control (U+0000 to U+001F, newline and tab included), no DEL
//!   (U+007F), no C1 control (U+0080 to U+009F), and none of the Unicode formatting characters
//!   that reorder or hide text (bidirectional embeddings, overrides and isolates, the marks,
//!   zero-width characters, line and paragraph separators): each is written as `\n`, `\r`, `\t`
//!   or `\u{…}` with its code point in hexadecimal.
//! - A backslash is written `\\`, so an escape in the output always stands for one character of
//!   the input: the output reads back to the input without ambiguity.
//! - Every other character, printable Unicode included, is kept as it is.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` must not reach a terminal as it is.
fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{2069}'
                | '\u{FEFF}'
        )
}

/// `text` with every control and hiding character written as an escape, and `\` as `\\`.
///
/// ```
/// use loopbound_demos::visible::visible;
///
/// assert_eq!(visible("Review finished."), "Review finished.");
/// assert_eq!(visible("\u{1b}[2J\rfake\u{7}"), r"\u{1b}[2J\rfake\u{7}");
/// assert_eq!(visible("a\\nb\nc"), r"a\\nb\nc");
/// ```
#[must_use]
pub fn visible(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| c == '\\' || is_hidden(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if is_hidden(c) => {
                // Writing to a String cannot fail.
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_control_or_hiding_character_survives() {
        let every: String = (0..=0x2100_u32).filter_map(char::from_u32).collect();
        let shown = visible(&every);
        assert!(!shown.chars().any(is_hidden), "a hidden character survived");
        assert!(!shown.chars().any(char::is_control));
        assert!(shown.contains(r"\u{1b}") && shown.contains(r"\u{9b}") && shown.contains(r"\u{7f}"));
        assert!(shown.contains(r"\u{202e}") && shown.contains(r"\u{2066}"));
        assert!(shown.contains('é'), "printable text is kept");
    }

    #[test]
    fn escapes_read_back_to_the_input() {
        for text in ["plain", "\\", "\\n", "\n", "\u{1b}[H", "a\\u{1b}b", "é\u{85}"] {
            let shown = visible(text);
            let mut back = String::new();
            let mut chars = shown.chars();
            while let Some(c) = chars.next() {
                if c != '\\' {
                    back.push(c);
                    continue;
                }
                match chars.next() {
                    Some('\\') => back.push('\\'),
                    Some('n') => back.push('\n'),
                    Some('r') => back.push('\r'),
                    Some('t') => back.push('\t'),
                    Some('u') => {
                        let code: String = chars.by_ref().skip(1).take_while(|&c| c != '}').collect();
                        back.push(char::from_u32(u32::from_str_radix(&code, 16).unwrap()).unwrap());
                    }
                    other => panic!("unexpected escape {other:?} in {shown}"),
                }
            }
            assert_eq!(back, text);
        }
    }
}
