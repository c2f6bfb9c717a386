//! An incremental decoder of server-sent events (the `text/event-stream` format).
//!
//! # Invariants
//!
//! - Feeding the same bytes in any split (inside a UTF-8 sequence, between `\r` and `\n`, one
//!   byte at a time) yields the same events as feeding them at once: lines are cut on bytes
//!   (`\r\n`, `\n` or a lone `\r`, which are never part of a multi-byte UTF-8 sequence) and only
//!   complete lines are decoded.
//! - Text is decoded as UTF-8 with replacement characters, as the format requires; a leading
//!   byte-order mark is dropped.
//! - Memory is bounded: a line or an event's data longer than the decoder's limit is an
//!   [`SseError`], after which the decoder refuses further input.
//! - An event is dispatched on a blank line and only if it had a `data` field; comments (`:`)
//!   and `id`/`retry` fields are ignored. An event left unfinished at the end of the input is
//!   discarded, as the format says.

use std::fmt;

/// Default limit, in bytes, of one line and of one event's data: 8 MiB.
pub const DEFAULT_MAX_EVENT: usize = 8 << 20;

const BOM: &[u8] = "\u{feff}".as_bytes();

/// One dispatched event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event` field, if the event had one.
    pub event: Option<String>,
    /// The `data` lines, joined by `\n`.
    pub data: String,
}

/// A line or an event grew past the decoder's limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SseError {
    /// The limit, in bytes.
    pub limit: usize,
}

impl fmt::Display for SseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "an event-stream line or event is longer than {} bytes", self.limit)
    }
}

impl std::error::Error for SseError {}

/// Decodes a byte stream into [`SseEvent`]s, fed in chunks of any size.
///
/// ```
/// use loopbound_provider::sse::SseDecoder;
///
/// let mut decoder = SseDecoder::default();
/// let mut events = Vec::new();
/// decoder.feed(b"data: {\"a\":1}\r", &mut events)?;
/// decoder.feed(b"\n\r\ndata: [DONE]\n\n", &mut events)?;
/// let data: Vec<&str> = events.iter().map(|e| e.data.as_str()).collect();
/// assert_eq!(data, ["{\"a\":1}", "[DONE]"]);
/// # Ok::<(), loopbound_provider::sse::SseError>(())
/// ```
#[derive(Debug)]
pub struct SseDecoder {
    /// Bytes of the line being read, without its terminator.
    line: Vec<u8>,
    /// The previous chunk ended with `\r`: a `\n` starting the next chunk completes that break.
    after_cr: bool,
    /// No line has been completed yet (a byte-order mark may open it).
    first_line: bool,
    /// The data lines of the event being built, joined by `\n`; `None` before its first.
    data: Option<String>,
    /// The event being built's `event` field.
    event: Option<String>,
    limit: usize,
    failed: bool,
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self::with_limit(DEFAULT_MAX_EVENT)
    }
}

impl SseDecoder {
    /// A decoder whose lines and events may not exceed `limit` bytes.
    #[must_use]
    pub fn with_limit(limit: usize) -> Self {
        Self {
            line: Vec::new(),
            after_cr: false,
            first_line: true,
            data: None,
            event: None,
            limit,
            failed: false,
        }
    }

    /// Decodes `bytes`, appending every event they complete to `out`.
    ///
    /// # Errors
    ///
    /// [`SseError`] when a line or an event exceeds the limit (now or before).
    pub fn feed(&mut self, mut bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if self.failed {
            return Err(SseError { limit: self.limit });
        }
        if bytes.is_empty() {
            return Ok(());
        }
        if std::mem::take(&mut self.after_cr) {
            bytes = bytes.strip_prefix(b"\n").unwrap_or(bytes);
        }
        while let Some(end) = bytes.iter().position(|&byte| byte == b'\n' || byte == b'\r') {
            self.extend_line(&bytes[..end])?;
            let line = std::mem::take(&mut self.line);
            self.process_line(line, out)?;
            let cr = bytes[end] == b'\r';
            bytes = &bytes[end + 1..];
            if cr {
                match bytes.first() {
                    Some(b'\n') => bytes = &bytes[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
        }
        self.extend_line(bytes)
    }

    /// Ends the input: completes a last line left without its terminator and dispatches an
    /// event left without its blank line. The format says such an event is discarded; a
    /// caller may still want to know whether it was, say, a final `[DONE]`.
    pub fn flush(&mut self, out: &mut Vec<SseEvent>) {
        if self.failed {
            return;
        }
        let line = std::mem::take(&mut self.line);
        let closed = line.is_empty() || self.process_line(line, out).is_ok();
        if let Some(data) = self.data.take().filter(|_| closed) {
            out.push(SseEvent { event: self.event.take(), data });
        }
        self.after_cr = false;
    }

    /// Bytes held for the line and the event being read.
    #[must_use]
    pub fn buffered(&self) -> usize {
        self.line.len() + self.data.as_ref().map_or(0, String::len)
    }

    /// Whether a partial line or an undispatched event is waiting for more input.
    #[must_use]
    pub fn has_pending(&self) -> bool {
        !self.line.is_empty() || self.data.is_some()
    }

    fn extend_line(&mut self, bytes: &[u8]) -> Result<(), SseError> {
        if self.line.len() + bytes.len() > self.limit {
            return Err(self.fail());
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn fail(&mut self) -> SseError {
        self.failed = true;
        self.line = Vec::new();
        self.data = None;
        SseError { limit: self.limit }
    }

    /// Decodes one complete line. A `data` value that is valid UTF-8 becomes the event's text
    /// in place, without a copy of the line.
    fn process_line(&mut self, mut line: Vec<u8>, out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        let mut start = 0;
        if std::mem::take(&mut self.first_line) && line.starts_with(BOM) {
            start = BOM.len();
        }
        let rest = &line[start..];
        if rest.is_empty() {
            let event = self.event.take();
            if let Some(data) = self.data.take() {
                out.push(SseEvent { event, data });
            }
            return Ok(());
        }
        let (field_end, value_start) = match rest.iter().position(|&byte| byte == b':') {
            Some(0) => return Ok(()),
            Some(colon) => (colon, if rest.get(colon + 1) == Some(&b' ') { colon + 2 } else { colon + 1 }),
            None => (rest.len(), rest.len()),
        };
        match &rest[..field_end] {
            b"data" => {
                line.drain(..start + value_start);
                let value = match String::from_utf8(line) {
                    Ok(text) => text,
                    Err(error) => String::from_utf8_lossy(error.as_bytes()).into_owned(),
                };
                let held = self.data.as_ref().map_or(0, |data| data.len() + 1);
                if held + value.len() > self.limit {
                    return Err(self.fail());
                }
                match &mut self.data {
                    Some(data) => {
                        data.push('\n');
                        data.push_str(&value);
                    }
                    None => self.data = Some(value),
                }
            }
            b"event" => self.event = Some(String::from_utf8_lossy(&rest[value_start..]).into_owned()),
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut decoder = SseDecoder::default();
        let mut events = Vec::new();
        for chunk in chunks {
            decoder.feed(chunk, &mut events).unwrap();
        }
        events
    }

    fn data(event: &str) -> SseEvent {
        SseEvent { event: None, data: event.to_owned() }
    }

    const STREAM: &[u8] = "\u{feff}: comment\r\ndata: {\"x\":\"héllo ✓\"}\r\n\r\nevent: error\ndata: a\ndata:\ndata:b\nid: 7\nretry: 5\n\n\rdata: [DONE]\r\r".as_bytes();

    fn expected() -> Vec<SseEvent> {
        vec![
            data("{\"x\":\"héllo ✓\"}"),
            SseEvent { event: Some("error".into()), data: "a\n\nb".into() },
            data("[DONE]"),
        ]
    }

    #[test]
    fn fields_comments_and_every_line_ending_are_understood() {
        assert_eq!(decode(&[STREAM]), expected());
    }

    #[test]
    fn every_split_point_gives_the_same_events() {
        for cut in 0..=STREAM.len() {
            assert_eq!(decode(&[&STREAM[..cut], &STREAM[cut..]]), expected(), "cut at {cut}");
            for second in cut..=STREAM.len() {
                let parts = [&STREAM[..cut], &STREAM[cut..second], &STREAM[second..]];
                assert_eq!(decode(&parts), expected(), "cuts at {cut} and {second}");
            }
        }
    }

    #[test]
    fn byte_at_a_time_gives_the_same_events() {
        let bytes: Vec<&[u8]> = STREAM.chunks(1).collect();
        assert_eq!(decode(&bytes), expected());
    }

    #[test]
    fn an_unfinished_event_is_pending_and_not_dispatched() {
        let mut decoder = SseDecoder::default();
        let mut events = Vec::new();
        decoder.feed(b"data: {\"cut\":", &mut events).unwrap();
        assert!(events.is_empty());
        assert!(decoder.has_pending());
        decoder.feed(b"1}\n", &mut events).unwrap();
        assert!(events.is_empty());
        assert!(decoder.has_pending());
        decoder.feed(b"\n", &mut events).unwrap();
        assert_eq!(events, vec![data("{\"cut\":1}")]);
        assert!(!decoder.has_pending());
    }

    #[test]
    fn flushing_dispatches_an_event_left_open_at_the_end() {
        for tail in [&b"data: [DONE]"[..], b"data: [DONE]\n", b"data: [DONE]\r\n"] {
            let mut decoder = SseDecoder::default();
            let mut events = Vec::new();
            decoder.feed(tail, &mut events).unwrap();
            assert!(events.is_empty());
            decoder.flush(&mut events);
            assert_eq!(events, vec![data("[DONE]")], "{tail:?}");
        }
    }

    #[test]
    fn invalid_utf8_becomes_replacement_characters() {
        assert_eq!(decode(&[b"data: a\xffb\n\n"]), vec![data("a\u{fffd}b")]);
    }

    #[test]
    fn overlong_lines_and_events_are_refused_and_the_refusal_sticks() {
        let mut decoder = SseDecoder::with_limit(8);
        let mut events = Vec::new();
        assert_eq!(decoder.feed(b"data: 12345", &mut events), Err(SseError { limit: 8 }));
        assert_eq!(decoder.feed(b"\n\n", &mut events), Err(SseError { limit: 8 }));

        let mut decoder = SseDecoder::with_limit(10);
        decoder.feed(b"data:12345\n", &mut events).unwrap();
        assert_eq!(decoder.feed(b"data:12345\n", &mut events), Err(SseError { limit: 10 }));
        assert!(events.is_empty());
    }
}
