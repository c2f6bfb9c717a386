//! JSON string escaping for canonical text.
//!
//! # Invariants
//!
//! - The output depends only on the decoded string value: `"\u0041"` and `"A"` decode to the
//!   same string and escape to the same text.
//! - Exactly `"`, `\` and the control characters U+0000..U+001F are escaped: the five common
//!   controls as `\b \f \n \r \t`, the others as `\u00XX` with lower-case hex digits. Everything
//!   else, including non-ASCII text, is written as itself. This is the escaping serde_json
//!   writes, so a canonical string parses back with serde_json to the same value.

/// For each byte, the letter of its two-character escape (`"`, `\\`, `b`, `f`, `n`, `r`, `t`),
/// `u` for the other control characters, or 0 for a byte written as itself.
const ESCAPES: [u8; 256] = {
    let mut table = [0_u8; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = b'u';
        byte += 1;
    }
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table[0x08] = b'b';
    table[0x0c] = b'f';
    table[b'\n' as usize] = b'n';
    table[b'\r' as usize] = b'r';
    table[b'\t' as usize] = b't';
    table
};

/// Appends `value` to `out` as a quoted, escaped JSON string.
pub(crate) fn write_json_string(out: &mut String, value: &str) {
    out.reserve(value.len() + 2);
    out.push('"');
    let mut clean_from = 0;
    for (index, &byte) in value.as_bytes().iter().enumerate() {
        let escape = ESCAPES[usize::from(byte)];
        if escape == 0 {
            continue;
        }
        // Every byte escaped here is ASCII, so `index` is a char boundary.
        out.push_str(&value[clean_from..index]);
        out.push('\\');
        if escape == b'u' {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.push_str("u00");
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0x0f)]));
        } else {
            out.push(char::from(escape));
        }
        clean_from = index + 1;
    }
    out.push_str(&value[clean_from..]);
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::write_json_string;

    fn escaped(value: &str) -> String {
        let mut out = String::new();
        write_json_string(&mut out, value);
        out
    }

    #[test]
    fn escapes_quotes_backslashes_and_controls_only() {
        assert_eq!(escaped("plain"), r#""plain""#);
        assert_eq!(escaped("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(escaped("\n\r\t\u{8}\u{c}"), r#""\n\r\t\b\f""#);
        assert_eq!(escaped("\u{0}\u{1f}"), r#""\u0000\u001f""#);
        assert_eq!(escaped("é ✓ /"), "\"é ✓ /\"");
    }

    #[test]
    fn agrees_with_serde_json_on_every_ascii_and_some_unicode() {
        let mut all = String::new();
        for code in 0u32..0x80 {
            all.extend(char::from_u32(code));
        }
        all.push_str("\u{7f}\u{80}\u{2028}\u{10ffff}");
        assert_eq!(escaped(&all), serde_json::to_string(&all).unwrap_or_default());
    }
}
