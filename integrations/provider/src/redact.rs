//! Redaction of the API key from everything a provider sends back: error messages, the model's
//! text, tool-call ids, names and arguments, whole or streamed.
//!
//! A provider may echo the key whole, cut, or padded so that a later truncation would keep a
//! part of it. So the redactor does not look for the key, but for any run of its characters:
//! every stretch of text covered by windows of [`RUN`] consecutive bytes that also occur, in the
//! same order, somewhere in the key is replaced by [`REDACTED`]. A key shorter
//! than [`RUN`] is looked for whole.
//!
//! # Invariants
//!
//! - After [`Redactor::redact`], no [`RUN`] consecutive bytes of the output occur in the key
//!   (the marker's own characters aside, which a key made of `[redacted]`'s letters could
//!   match); shorter pieces may remain, next to a marker.
//! - Redaction comes first: every message is redacted before it is cleaned and cut, so a cut can
//!   never keep a run that redaction would have caught.
//! - The key's characters are visible ASCII (an [`ApiKey`] guarantees it), so a run is made of
//!   whole characters of the text and a replacement never splits a UTF-8 sequence.
//! - A `StreamRedactor` holds back the end of a streamed text that could still become part of
//!   a run with the next piece (at most [`RUN`] − 1 bytes, or the start of a run in progress up
//!   to the key's length), and releases it when the stream ends; the joined output equals the
//!   redaction of the joined input, except that a run longer than the hold-back may be cut in
//!   two markers.
//! - Work is linear in the text: one rolling window per byte, and a hash-table probe only where
//!   the last eight bytes all occur in the key.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use loopbound::transport::{ModelReply, ReplyChunk, TransportError};

use crate::key::{ApiKey, REDACTED};

/// The shortest run of the key's characters that is redacted: 8 bytes.
pub const RUN: usize = 8;

/// Replaces every run of the API key's characters in the texts it is given.
///
/// ```
/// use loopbound_provider::{ApiKey, Redactor};
///
/// let redactor = Redactor::new(Some(ApiKey::new("sk-0123456789abcdefghij")?));
/// // The whole key, a part of it, a part cut at the end of a message.
/// assert_eq!(redactor.redact("key sk-0123456789abcdefghij!"), "key [redacted]!");
/// assert_eq!(redactor.redact("...456789abcde..."), "...[redacted]...");
/// assert_eq!(redactor.redact("ends with sk-01234567"), "ends with [redacted]");
/// // Fewer than eight characters of it stay.
/// assert_eq!(redactor.redact("sk-0123 and 6789"), "sk-0123 and 6789");
/// # Ok::<(), loopbound_provider::ConfigError>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct Redactor {
    /// Shared: a redactor is cloned into every stream and every large parse.
    runs: Option<Arc<Runs>>,
}

/// The key's windows, looked up by a small open-addressing table.
struct Runs {
    /// Window width: [`RUN`], or the key's length when shorter.
    width: usize,
    /// The key's length, the longest a run in progress is held back across stream pieces.
    key_len: usize,
    /// Every window of the key, packed big-endian into a `u64`, in a table of `2^bits` slots;
    /// `EMPTY` marks a free slot (no window of visible ASCII packs to it).
    table: Vec<u64>,
    bits: u32,
    /// Whether each byte value occurs in the key: a window can match only where the last
    /// `width` bytes all do, so the table is probed only there.
    in_key: [bool; 256],
}

impl std::fmt::Debug for Runs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Neither the key nor its windows are ever printed.
        f.debug_struct("Runs").field("width", &self.width).finish_non_exhaustive()
    }
}

const EMPTY: u64 = u64::MAX;

impl Runs {
    fn new(key: &[u8]) -> Option<Self> {
        if key.is_empty() {
            return None;
        }
        let width = key.len().min(RUN);
        let windows = key.len() - width + 1;
        let bits = (windows * 4).next_power_of_two().trailing_zeros().max(4);
        let mut in_key = [false; 256];
        for &byte in key {
            in_key[usize::from(byte)] = true;
        }
        let mut runs = Self { width, key_len: key.len(), table: vec![EMPTY; 1 << bits], bits, in_key };
        for window in key.windows(width) {
            runs.insert(pack(window));
        }
        Some(runs)
    }

    fn slot(&self, packed: u64) -> usize {
        // Fibonacci hashing; the table's size is a power of two.
        let hash = packed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - self.bits);
        usize::try_from(hash).unwrap_or(0)
    }

    fn insert(&mut self, packed: u64) {
        let mask = self.table.len() - 1;
        let mut slot = self.slot(packed);
        while self.table[slot] != EMPTY && self.table[slot] != packed {
            slot = (slot + 1) & mask;
        }
        self.table[slot] = packed;
    }

    fn contains(&self, packed: u64) -> bool {
        let mask = self.table.len() - 1;
        let mut slot = self.slot(packed);
        loop {
            match self.table[slot] {
                EMPTY => return false,
                found if found == packed => return true,
                _ => slot = (slot + 1) & mask,
            }
        }
    }

    /// The spans of `text` to replace, in order, disjoint and not touching.
    fn spans(&self, text: &[u8]) -> Vec<(usize, usize)> {
        let mut spans: Vec<(usize, usize)> = Vec::new();
        if text.len() < self.width {
            return spans;
        }
        let mask = if self.width == RUN { u64::MAX } else { (1_u64 << (8 * self.width)) - 1 };
        let mut window = 0_u64;
        // How many bytes of the key's alphabet end here.
        let mut keyish = 0_usize;
        for (at, &byte) in text.iter().enumerate() {
            window = ((window << 8) | u64::from(byte)) & mask;
            keyish = if self.in_key[usize::from(byte)] { keyish + 1 } else { 0 };
            if keyish < self.width || !self.contains(window) {
                continue;
            }
            let end = at + 1;
            let start = end - self.width;
            match spans.last_mut() {
                Some(last) if start <= last.1 => last.1 = end,
                _ => spans.push((start, end)),
            }
        }
        spans
    }
}

/// `window`'s bytes as one big-endian number; a window is at most 8 bytes.
fn pack(window: &[u8]) -> u64 {
    window.iter().fold(0, |packed, &byte| (packed << 8) | u64::from(byte))
}

/// `text` with `spans` replaced by the marker.
fn replace(text: &str, spans: &[(usize, usize)]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    for &(start, end) in spans {
        out.push_str(&text[from..start]);
        out.push_str(REDACTED);
        from = end;
    }
    out.push_str(&text[from..]);
    out
}

impl Redactor {
    /// A redactor without a key: it changes nothing.
    #[must_use]
    pub const fn none() -> Self {
        Self { runs: None }
    }

    /// A redactor of `key`; without a key, it changes nothing.
    #[must_use]
    pub fn new(key: Option<ApiKey>) -> Self {
        Self { runs: key.and_then(|key| Runs::new(key.expose().as_bytes())).map(Arc::new) }
    }

    /// `text` with every run of the key's characters replaced by `[redacted]`.
    #[must_use]
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let Some(runs) = &self.runs else { return Cow::Borrowed(text) };
        let spans = runs.spans(text.as_bytes());
        if spans.is_empty() { Cow::Borrowed(text) } else { Cow::Owned(replace(text, &spans)) }
    }

    /// Redacts `text` in place.
    pub fn redact_in_place(&self, text: &mut String) {
        if let Cow::Owned(redacted) = self.redact(text) {
            *text = redacted;
        }
    }

    /// Redacts a whole reply: its text, and every call's id, name and arguments.
    pub fn redact_reply(&self, reply: &mut ModelReply) {
        if self.runs.is_none() {
            return;
        }
        if let Some(content) = &mut reply.content {
            self.redact_in_place(content);
        }
        for call in &mut reply.tool_calls {
            self.redact_in_place(&mut call.id);
            self.redact_in_place(&mut call.name);
            self.redact_in_place(&mut call.arguments);
        }
    }

    /// `error` with its message redacted (a last pass: messages are built redacted already).
    #[must_use]
    pub fn scrub(&self, error: TransportError) -> TransportError {
        match self.redact(error.message()) {
            Cow::Borrowed(_) => error,
            Cow::Owned(redacted) => error.with_message(redacted),
        }
    }
}

/// One streamed text (the reply's text, or one call's arguments) redacted piece by piece.
#[derive(Debug, Default)]
struct Channel {
    /// Received, not yet released: the end that may still join a run.
    pending: String,
}

impl Channel {
    /// Adds `piece` and returns what can be released now. Without a run to replace, the
    /// released text is the received text itself, moved, not copied.
    fn push(&mut self, redactor: &Redactor, piece: String) -> String {
        let Some(runs) = &redactor.runs else { return piece };
        if self.pending.is_empty() {
            self.pending = piece;
        } else {
            self.pending.push_str(&piece);
        }
        let spans = runs.spans(self.pending.as_bytes());
        let len = self.pending.len();
        let mut cut = floor_char_boundary(&self.pending, len.saturating_sub(runs.width - 1));
        // A run that reaches into the held-back end may go on with the next piece: hold it back
        // whole, unless it is already longer than one copy of the key (then it is released cut
        // here, and what follows is judged with the next piece).
        if let Some(&(start, end)) = spans.last()
            && end > cut
            && len - start <= runs.key_len + runs.width
        {
            cut = start;
        }
        let released: Vec<(usize, usize)> = spans
            .iter()
            .filter(|(start, _)| *start < cut)
            .map(|&(start, end)| (start, end.min(cut)))
            .collect();
        let held = self.pending.split_off(cut);
        let received = std::mem::replace(&mut self.pending, held);
        if released.is_empty() { received } else { replace(&received, &released) }
    }

    /// Releases what is held back, redacted.
    fn finish(&mut self, redactor: &Redactor) -> String {
        let pending = std::mem::take(&mut self.pending);
        redactor.redact(&pending).into_owned()
    }
}

/// The largest char boundary of `text` at or below `at`.
fn floor_char_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// Redacts the chunks of one streamed reply: the text and each call's arguments as streams (a
/// run split across two pieces is caught), ids and names piece by piece (the assembler keeps the
/// first piece of each only).
#[derive(Debug, Default)]
pub struct StreamRedactor {
    redactor: Redactor,
    content: Channel,
    arguments: BTreeMap<u32, Channel>,
}

impl StreamRedactor {
    /// A stream redactor of `redactor`'s key.
    #[must_use]
    pub fn new(redactor: Redactor) -> Self {
        Self { redactor, ..Self::default() }
    }

    /// `chunk` redacted, with the ends that may still join a run held back; `None` when nothing
    /// of it is left to hand on now.
    pub fn chunk(&mut self, mut chunk: ReplyChunk) -> Option<ReplyChunk> {
        if self.redactor.runs.is_none() {
            return Some(chunk);
        }
        if let Some(text) = chunk.content.take() {
            chunk.content = Some(self.content.push(&self.redactor, text)).filter(|text| !text.is_empty());
        }
        for delta in &mut chunk.tool_calls {
            if let Some(id) = &mut delta.id {
                self.redactor.redact_in_place(id);
            }
            if let Some(name) = &mut delta.name {
                self.redactor.redact_in_place(name);
            }
            if let Some(arguments) = delta.arguments.take() {
                let channel = self.arguments.entry(delta.index).or_default();
                delta.arguments = Some(channel.push(&self.redactor, arguments));
            }
        }
        let empty = chunk.content.is_none() && chunk.tool_calls.is_empty() && chunk.usage.is_none();
        (!empty).then_some(chunk)
    }

    /// What was held back, as one last chunk, when the stream ended well.
    pub fn finish(&mut self) -> Option<ReplyChunk> {
        let content = self.content.finish(&self.redactor);
        let tool_calls: Vec<_> = std::mem::take(&mut self.arguments)
            .into_iter()
            .filter_map(|(index, mut channel)| {
                let arguments = channel.finish(&self.redactor);
                (!arguments.is_empty())
                    .then(|| loopbound::transport::ToolCallDelta::new(index).with_arguments(arguments))
            })
            .collect();
        let mut chunk = ReplyChunk::calls(tool_calls);
        chunk.content = Some(content).filter(|text| !text.is_empty());
        (chunk.content.is_some() || !chunk.tool_calls.is_empty()).then_some(chunk)
    }
}

#[cfg(test)]
mod tests {
    use loopbound::transport::{ReplyAssembler, ToolCallDelta};

    use super::*;

    const KEY: &str = "sk-hostile-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGH";

    fn redactor() -> Redactor {
        Redactor::new(Some(ApiKey::new(KEY).unwrap()))
    }

    /// Whether `text` holds a run of [`RUN`] bytes of the key.
    fn leaks(text: &str) -> bool {
        text.as_bytes().windows(RUN).any(|window| KEY.as_bytes().windows(RUN).any(|k| k == window))
    }

    #[test]
    fn every_run_of_eight_or_more_is_replaced_and_shorter_ones_stay() {
        let redactor = redactor();
        for (start, end) in [(0, KEY.len()), (0, 8), (20, 28), (5, 40), (KEY.len() - 8, KEY.len())] {
            let text = format!("{}{}!", ".".repeat(270), &KEY[start..end]);
            let redacted = redactor.redact(&text);
            assert_eq!(redacted, format!("{}[redacted]!", ".".repeat(270)), "{start}..{end}");
        }
        for (start, end) in [(0, 7), (30, 37)] {
            let text = format!("x{}y", &KEY[start..end]);
            assert_eq!(redactor.redact(&text), text);
        }
        let twice = format!("{KEY}{KEY} and {}", &KEY[10..30]);
        assert_eq!(redactor.redact(&twice), "[redacted] and [redacted]");
        assert!(!leaks(&redactor.redact(&format!("é{KEY}ü{}", &KEY[3..12]))));
    }

    #[test]
    fn short_keys_are_looked_for_whole_and_no_key_changes_nothing() {
        let short = Redactor::new(Some(ApiKey::new("abc").unwrap()));
        assert_eq!(short.redact("xabcx ab c"), "x[redacted]x ab c");
        assert_eq!(Redactor::default().redact(KEY), KEY);
    }

    #[test]
    fn a_whole_reply_is_redacted_in_every_field() {
        let mut reply = ModelReply::new(
            Some(format!("text {KEY}")),
            vec![loopbound::transport::ToolCall::new(
                format!("call_{KEY}"),
                format!("key_{KEY}"),
                format!(r#"{{"input":"{KEY}"}}"#),
            )],
        );
        redactor().redact_reply(&mut reply);
        assert_eq!(reply.content.as_deref(), Some("text [redacted]"));
        assert_eq!(reply.tool_calls[0].id, "call_[redacted]");
        assert_eq!(reply.tool_calls[0].name, "key_[redacted]");
        assert_eq!(reply.tool_calls[0].arguments, r#"{"input":"[redacted]"}"#);
    }

    /// Streams `text` cut at every pair of points through a [`StreamRedactor`] and assembles it.
    fn streamed(text: &str, cuts: &[usize]) -> ModelReply {
        let mut stream = StreamRedactor::new(redactor());
        let mut assembler = ReplyAssembler::default();
        let mut from = 0;
        for &cut in cuts.iter().chain([&text.len()]) {
            let piece = &text[from..cut];
            from = cut;
            let mut chunk = ReplyChunk::calls(vec![ToolCallDelta::new(3).with_arguments(piece)]);
            chunk.content = Some(piece.to_owned());
            if let Some(chunk) = stream.chunk(chunk) {
                assembler.push(chunk).unwrap();
            }
        }
        if let Some(chunk) = stream.finish() {
            assembler.push(chunk).unwrap();
        }
        assembler.finish()
    }

    #[test]
    fn a_key_split_anywhere_across_pieces_is_redacted() {
        let text = format!("{} the key you sent was {KEY}, and {} again", ".".repeat(40), &KEY[11..23]);
        let whole = redactor().redact(&text).into_owned();
        for first in 0..=text.len() {
            for second in (first..=text.len()).step_by(7) {
                let reply = streamed(&text, &[first, second]);
                let content = reply.content.unwrap_or_default();
                assert!(!leaks(&content), "cuts {first} {second}: {content}");
                assert_eq!(content, whole, "cuts {first} {second}");
                assert_eq!(reply.tool_calls[0].arguments, whole, "cuts {first} {second}");
            }
        }
    }

    #[test]
    fn a_piece_at_a_time_releases_everything_but_the_held_back_end() {
        let mut channel = Channel::default();
        let redactor = redactor();
        assert_eq!(channel.push(&redactor, "plain text, long enough".into()), "plain text, long");
        // The run is held back whole while it may go on.
        assert_eq!(channel.push(&redactor, KEY[..20].into()), " enough");
        assert_eq!(channel.push(&redactor, KEY[20..].into()), "");
        assert_eq!(
            channel.push(&redactor, " after the key, more text".into()),
            "[redacted] after the key, mo"
        );
        assert_eq!(channel.finish(&redactor), "re text");
    }
}
