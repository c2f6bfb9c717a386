//! Scanning JSON text: whitespace, literals, strings, number tokens, and whole values skipped
//! without recursion.
//!
//! # Invariants
//!
//! - The reader only moves forward, and only over text it has checked against the JSON grammar
//!   (RFC 8259); every refusal is a [`Syntax`] error with the byte offset where it was found.
//! - Nothing here panics or recurses: [`Reader::skip_value`] keeps one bit per open container
//!   on the heap, so a value of any depth is skipped in memory proportional to its depth / 8.
//! - A string is handed out borrowed from the text when it holds no escape, else decoded into
//!   the caller's scratch buffer. A `\u` escape decoded into text must form a Unicode scalar
//!   value (surrogates paired); a skipped string only needs well-formed escapes, as serde_json
//!   requires.

use super::error::{Syntax, SyntaxCode};

/// For each byte, whether a string scan must stop at it: `"`, `\` and control characters.
const STRING_STOP: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = true;
        byte += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table
};

/// A string read from the text.
#[derive(Debug)]
pub(crate) enum Text<'de, 's> {
    /// The string held no escape: a slice of the input.
    Borrowed(&'de str),
    /// The string was decoded into the scratch buffer.
    Copied(&'s str),
}

impl Text<'_, '_> {
    pub(crate) fn as_str(&self) -> &str {
        // The two arms borrow for different lifetimes, so they cannot share one pattern.
        #[allow(clippy::match_same_arms, reason = "the arms' lifetimes differ")]
        match self {
            Self::Borrowed(text) => text,
            Self::Copied(text) => text,
        }
    }
}

/// A number token: its text, which follows the JSON number grammar.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Token<'t> {
    pub(crate) text: &'t str,
    /// The token has neither a fraction nor an exponent: `-?digits`.
    pub(crate) plain: bool,
}

/// A cursor over JSON text.
#[derive(Clone, Debug)]
pub(crate) struct Reader<'de> {
    text: &'de str,
    pos: usize,
}

impl<'de> Reader<'de> {
    pub(crate) fn new(text: &'de str) -> Self {
        Self { text, pos: 0 }
    }

    /// Moves the cursor to byte `at` (at most the end of the text).
    pub(crate) fn skip_to(&mut self, at: usize) {
        self.pos = at.min(self.text.len());
    }

    /// The byte offset of the cursor.
    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    fn bytes(&self) -> &'de [u8] {
        self.text.as_bytes()
    }

    fn error(&self, code: SyntaxCode) -> Syntax {
        Syntax { code, at: self.pos }
    }

    /// The next byte that is not JSON whitespace, without consuming it.
    #[inline]
    pub(crate) fn peek(&mut self) -> Option<u8> {
        while let Some(&byte) = self.bytes().get(self.pos) {
            if !matches!(byte, b' ' | b'\n' | b'\t' | b'\r') {
                return Some(byte);
            }
            self.pos += 1;
        }
        None
    }

    /// Consumes one byte, already seen by [`peek`](Self::peek).
    #[inline]
    pub(crate) fn bump(&mut self) {
        self.pos += 1;
    }

    /// Consumes `expected` (after whitespace), or fails with `code`.
    pub(crate) fn expect(&mut self, expected: u8, code: SyntaxCode) -> Result<(), Syntax> {
        match self.peek() {
            Some(byte) if byte == expected => {
                self.bump();
                Ok(())
            }
            Some(_) => Err(self.error(code)),
            None => Err(self.error(SyntaxCode::Eof)),
        }
    }

    /// Consumes the literal `word` (`null`, `true`, `false`) at the cursor.
    pub(crate) fn literal(&mut self, word: &'static [u8]) -> Result<(), Syntax> {
        match self.bytes().get(self.pos..self.pos + word.len()) {
            Some(found) if found == word => {
                self.pos += word.len();
                Ok(())
            }
            None if word.starts_with(self.bytes().get(self.pos..).unwrap_or_default()) => {
                Err(Syntax { code: SyntaxCode::Eof, at: self.bytes().len() })
            }
            Some(_) | None => Err(self.error(SyntaxCode::InvalidLiteral)),
        }
    }

    /// Reads the string whose opening quote is at the cursor.
    #[inline]
    pub(crate) fn string<'s>(&mut self, scratch: &'s mut String) -> Result<Text<'de, 's>, Syntax> {
        self.bump();
        let start = self.pos;
        let end = self.scan_plain();
        if self.bytes().get(end) == Some(&b'"') {
            self.pos = end + 1;
            // `start` follows a quote and `end` is a quote: both are char boundaries.
            return self.text.get(start..end).map(Text::Borrowed).ok_or_else(|| self.error(SyntaxCode::Eof));
        }
        scratch.clear();
        scratch.push_str(self.text.get(start..end).unwrap_or_default());
        self.pos = end;
        self.decode_rest(scratch)?;
        Ok(Text::Copied(scratch.as_str()))
    }

    /// The offset of the first byte from the cursor at which a string scan must stop.
    #[inline]
    fn scan_plain(&self) -> usize {
        let bytes = self.bytes();
        let mut end = self.pos;
        while let Some(&byte) = bytes.get(end) {
            if STRING_STOP[usize::from(byte)] {
                break;
            }
            end += 1;
        }
        end
    }

    /// Decodes the rest of a string into `scratch`, from the cursor up to and past its closing
    /// quote.
    fn decode_rest(&mut self, scratch: &mut String) -> Result<(), Syntax> {
        loop {
            let end = self.scan_plain();
            scratch.push_str(self.text.get(self.pos..end).unwrap_or_default());
            self.pos = end;
            match self.bytes().get(end) {
                Some(b'"') => {
                    self.bump();
                    return Ok(());
                }
                Some(b'\\') => {
                    self.bump();
                    self.decode_escape(scratch)?;
                }
                Some(_) => return Err(self.error(SyntaxCode::ControlCharacter)),
                None => return Err(self.error(SyntaxCode::Eof)),
            }
        }
    }

    /// Decodes one escape, the cursor just past its backslash.
    fn decode_escape(&mut self, scratch: &mut String) -> Result<(), Syntax> {
        let Some(&letter) = self.bytes().get(self.pos) else { return Err(self.error(SyntaxCode::Eof)) };
        self.bump();
        let decoded = match letter {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => self.unicode_escape()?,
            _ => return Err(Syntax { code: SyntaxCode::InvalidEscape, at: self.pos - 1 }),
        };
        scratch.push(decoded);
        Ok(())
    }

    /// Decodes `XXXX` after `\u`, and its low surrogate's escape when it is a high surrogate.
    fn unicode_escape(&mut self) -> Result<char, Syntax> {
        let first = self.hex4()?;
        let code = match first {
            0xD800..=0xDBFF => {
                if self.bytes().get(self.pos..self.pos + 2) != Some(b"\\u") {
                    return Err(self.error(SyntaxCode::LoneSurrogate));
                }
                self.pos += 2;
                let second = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&second) {
                    return Err(self.error(SyntaxCode::LoneSurrogate));
                }
                0x10000 + ((u32::from(first) - 0xD800) << 10) + (u32::from(second) - 0xDC00)
            }
            0xDC00..=0xDFFF => return Err(self.error(SyntaxCode::LoneSurrogate)),
            other => u32::from(other),
        };
        char::from_u32(code).ok_or_else(|| self.error(SyntaxCode::LoneSurrogate))
    }

    /// Reads four hex digits.
    fn hex4(&mut self) -> Result<u16, Syntax> {
        let mut value = 0u16;
        for _ in 0..4 {
            let Some(&byte) = self.bytes().get(self.pos) else { return Err(self.error(SyntaxCode::Eof)) };
            let digit = match byte {
                b'0'..=b'9' => byte - b'0',
                b'a'..=b'f' => byte - b'a' + 10,
                b'A'..=b'F' => byte - b'A' + 10,
                _ => return Err(self.error(SyntaxCode::InvalidEscape)),
            };
            value = value * 16 + u16::from(digit);
            self.bump();
        }
        Ok(value)
    }

    /// Skips the string whose opening quote is at the cursor, checking its escapes' form only.
    fn skip_string(&mut self) -> Result<(), Syntax> {
        self.bump();
        loop {
            self.pos = self.scan_plain();
            match self.bytes().get(self.pos) {
                Some(b'"') => {
                    self.bump();
                    return Ok(());
                }
                Some(b'\\') => {
                    self.bump();
                    match self.bytes().get(self.pos) {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => self.bump(),
                        Some(b'u') => {
                            self.bump();
                            self.hex4()?;
                        }
                        Some(_) => return Err(self.error(SyntaxCode::InvalidEscape)),
                        None => return Err(self.error(SyntaxCode::Eof)),
                    }
                }
                Some(_) => return Err(self.error(SyntaxCode::ControlCharacter)),
                None => return Err(self.error(SyntaxCode::Eof)),
            }
        }
    }

    /// Reads the number token at the cursor (a `-` or a digit).
    #[inline]
    pub(crate) fn number(&mut self) -> Result<Token<'de>, Syntax> {
        let start = self.pos;
        let bytes = self.bytes();
        let mut at = start;
        if bytes.get(at) == Some(&b'-') {
            at += 1;
        }
        match bytes.get(at) {
            Some(b'0') => {
                at += 1;
                if bytes.get(at).is_some_and(u8::is_ascii_digit) {
                    return Err(Syntax { code: SyntaxCode::InvalidNumber, at });
                }
            }
            Some(b'1'..=b'9') => at = digits_end(bytes, at + 1),
            Some(_) => return Err(Syntax { code: SyntaxCode::InvalidNumber, at }),
            None => return Err(Syntax { code: SyntaxCode::Eof, at }),
        }
        let mut plain = true;
        if bytes.get(at) == Some(&b'.') {
            plain = false;
            at = required_digits(bytes, at + 1)?;
        }
        if let Some(b'e' | b'E') = bytes.get(at) {
            plain = false;
            at += 1;
            if let Some(b'+' | b'-') = bytes.get(at) {
                at += 1;
            }
            at = required_digits(bytes, at)?;
        }
        self.pos = at;
        // Every boundary here follows or precedes an ASCII byte.
        let text = self.text.get(start..at).ok_or(Syntax { code: SyntaxCode::InvalidNumber, at })?;
        Ok(Token { text, plain })
    }

    /// Skips one whole value, checking its grammar, without recursion. With `limit`, nesting
    /// deeper than `limit` containers is refused with [`SyntaxCode::TooDeep`]; without, any
    /// depth is skipped.
    pub(crate) fn skip_value(&mut self, limit: Option<usize>) -> Result<(), Syntax> {
        let mut open = BitStack::default();
        loop {
            // A value starts here.
            match self.peek() {
                Some(b'{') => {
                    self.bump();
                    self.check_depth(open.len() + 1, limit)?;
                    if self.peek() == Some(b'}') {
                        self.bump();
                    } else {
                        open.push(true);
                        self.key_and_colon()?;
                        continue;
                    }
                }
                Some(b'[') => {
                    self.bump();
                    self.check_depth(open.len() + 1, limit)?;
                    if self.peek() == Some(b']') {
                        self.bump();
                    } else {
                        open.push(false);
                        continue;
                    }
                }
                Some(b'"') => self.skip_string()?,
                Some(b'n') => self.literal(b"null")?,
                Some(b't') => self.literal(b"true")?,
                Some(b'f') => self.literal(b"false")?,
                Some(b'-' | b'0'..=b'9') => {
                    self.number()?;
                }
                Some(_) => return Err(self.error(SyntaxCode::ExpectedValue)),
                None => return Err(self.error(SyntaxCode::Eof)),
            }
            // A value ended: close finished containers until one has a next item.
            loop {
                let Some(in_object) = open.last() else { return Ok(()) };
                match self.peek() {
                    Some(b',') => {
                        self.bump();
                        if in_object {
                            self.key_and_colon()?;
                        }
                        break;
                    }
                    Some(b'}') if in_object => {
                        self.bump();
                        open.pop();
                    }
                    Some(b']') if !in_object => {
                        self.bump();
                        open.pop();
                    }
                    Some(_) if in_object => return Err(self.error(SyntaxCode::ExpectedCommaOrBrace)),
                    Some(_) => return Err(self.error(SyntaxCode::ExpectedCommaOrBracket)),
                    None => return Err(self.error(SyntaxCode::Eof)),
                }
            }
        }
    }

    fn check_depth(&self, depth: usize, limit: Option<usize>) -> Result<(), Syntax> {
        match limit {
            Some(limit) if depth > limit => Err(self.error(SyntaxCode::TooDeep)),
            _ => Ok(()),
        }
    }

    /// Skips an object key and its colon.
    fn key_and_colon(&mut self) -> Result<(), Syntax> {
        match self.peek() {
            Some(b'"') => self.skip_string()?,
            Some(_) => return Err(self.error(SyntaxCode::KeyMustBeString)),
            None => return Err(self.error(SyntaxCode::Eof)),
        }
        self.expect(b':', SyntaxCode::ExpectedColon)
    }

    /// Checks that only whitespace is left.
    pub(crate) fn end(&mut self) -> Result<(), Syntax> {
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(self.error(SyntaxCode::TrailingCharacters)),
        }
    }
}

/// The offset after the run of digits starting at `at`.
fn digits_end(bytes: &[u8], mut at: usize) -> usize {
    while bytes.get(at).is_some_and(u8::is_ascii_digit) {
        at += 1;
    }
    at
}

/// The offset after the run of at least one digit starting at `at`.
fn required_digits(bytes: &[u8], at: usize) -> Result<usize, Syntax> {
    match bytes.get(at) {
        Some(b'0'..=b'9') => Ok(digits_end(bytes, at + 1)),
        Some(_) => Err(Syntax { code: SyntaxCode::InvalidNumber, at }),
        None => Err(Syntax { code: SyntaxCode::Eof, at }),
    }
}

/// One bit per open container (set for an object), packed in words.
#[derive(Debug, Default)]
struct BitStack {
    words: Vec<u64>,
    len: usize,
}

impl BitStack {
    fn push(&mut self, bit: bool) {
        let (word, offset) = (self.len / 64, self.len % 64);
        if word == self.words.len() {
            self.words.push(0);
        }
        if let Some(slot) = self.words.get_mut(word) {
            if bit {
                *slot |= 1 << offset;
            } else {
                *slot &= !(1 << offset);
            }
        }
        self.len += 1;
    }

    fn last(&self) -> Option<bool> {
        let index = self.len.checked_sub(1)?;
        self.words.get(index / 64).map(|word| word & (1 << (index % 64)) != 0)
    }

    fn pop(&mut self) {
        self.len = self.len.saturating_sub(1);
    }

    fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skip(text: &str) -> Result<usize, SyntaxCode> {
        let mut reader = Reader::new(text);
        reader.skip_value(None).and_then(|()| reader.end()).map(|()| reader.position()).map_err(|e| e.code)
    }

    fn read_string(text: &str) -> Result<String, SyntaxCode> {
        let mut scratch = String::new();
        let mut reader = Reader::new(text);
        reader.string(&mut scratch).map(|found| found.as_str().to_owned()).map_err(|e| e.code)
    }

    #[test]
    fn strings_borrow_without_escapes_and_decode_with_them() {
        let mut scratch = String::new();
        let mut reader = Reader::new(r#""plain é""#);
        assert!(matches!(reader.string(&mut scratch), Ok(Text::Borrowed("plain é"))));
        assert_eq!(
            read_string(r#""a\"\\\/\b\f\n\r\t\u0041\u00e9\ud83d\ude00z""#).as_deref(),
            Ok("a\"\\/\u{8}\u{c}\n\r\t\u{41}é😀z")
        );
    }

    #[test]
    fn bad_strings_are_syntax_errors() {
        assert_eq!(read_string(r#""abc"#), Err(SyntaxCode::Eof));
        assert_eq!(read_string("\"a\u{1}\""), Err(SyntaxCode::ControlCharacter));
        assert_eq!(read_string(r#""\x""#), Err(SyntaxCode::InvalidEscape));
        assert_eq!(read_string(r#""\u12g4""#), Err(SyntaxCode::InvalidEscape));
        assert_eq!(read_string(r#""\ud800""#), Err(SyntaxCode::LoneSurrogate));
        assert_eq!(read_string(r#""\ud800\u0041""#), Err(SyntaxCode::LoneSurrogate));
        assert_eq!(read_string(r#""\udc00""#), Err(SyntaxCode::LoneSurrogate));
        assert_eq!(read_string(r#""\u00"#), Err(SyntaxCode::Eof));
    }

    #[test]
    fn numbers_follow_the_grammar() {
        for (text, plain) in [("0", true), ("-0", true), ("42", true), ("4.2e1", false), ("1E+5", false)] {
            let token = Reader::new(text).number().map(|t| (t.text, t.plain));
            assert_eq!(token, Ok((text, plain)), "{text}");
        }
        for (text, code) in [
            ("01", SyntaxCode::InvalidNumber),
            ("-", SyntaxCode::Eof),
            ("-a", SyntaxCode::InvalidNumber),
            ("1.", SyntaxCode::Eof),
            ("1.e5", SyntaxCode::InvalidNumber),
            ("1e", SyntaxCode::Eof),
            ("1e+", SyntaxCode::Eof),
        ] {
            assert_eq!(Reader::new(text).number().map(|t| t.text).map_err(|e| e.code), Err(code), "{text}");
        }
    }

    #[test]
    fn skipping_checks_the_grammar_of_any_depth() {
        let text = r#" {"a": [1, -2.5e3, "x\n", true, false, null, {}, []], "b": {"c": "\ud800"}} "#;
        assert_eq!(skip(text), Ok(text.len()));
        let deep = format!("{}1{}", "[{\"k\":".repeat(100_000), "}]".repeat(100_000));
        assert_eq!(skip(&deep), Ok(deep.len()));
        for (text, code) in [
            ("[1,]", SyntaxCode::ExpectedValue),
            ("[1 2]", SyntaxCode::ExpectedCommaOrBracket),
            (r#"{"a" 1}"#, SyntaxCode::ExpectedColon),
            (r#"{"a":1 "b":2}"#, SyntaxCode::ExpectedCommaOrBrace),
            ("{1:2}", SyntaxCode::KeyMustBeString),
            (r#"{"a":1]"#, SyntaxCode::ExpectedCommaOrBrace),
            ("[1}", SyntaxCode::ExpectedCommaOrBracket),
            ("[[[", SyntaxCode::Eof),
            ("nul", SyntaxCode::Eof),
            ("nulx", SyntaxCode::InvalidLiteral),
            ("1 2", SyntaxCode::TrailingCharacters),
            ("", SyntaxCode::Eof),
            ("x", SyntaxCode::ExpectedValue),
        ] {
            assert_eq!(skip(text), Err(code), "{text}");
        }
    }

    #[test]
    fn a_limit_refuses_deeper_nesting() {
        let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let three = nested(3);
        let mut reader = Reader::new(&three);
        assert_eq!(reader.skip_value(Some(3)).map_err(|e| e.code), Ok(()));
        let text = format!("[{}]", nested(3));
        let mut reader = Reader::new(&text);
        assert_eq!(reader.skip_value(Some(3)).map_err(|e| e.code), Err(SyntaxCode::TooDeep));
    }

    #[test]
    fn the_bit_stack_remembers_each_level() {
        let mut stack = BitStack::default();
        let bits: Vec<bool> = (0..200).map(|i| i % 3 == 0).collect();
        for &bit in &bits {
            stack.push(bit);
        }
        for &bit in bits.iter().rev() {
            assert_eq!(stack.last(), Some(bit));
            stack.pop();
        }
        assert_eq!(stack.last(), None);
    }
}
