//! A line of a run's recorded stream as stored: what an attempt writes for each step it
//! records, and what a follower hands out when it reads the line back.
//!
//! # Why the stored line is the wire line
//!
//! A line is published live (to a follower in the attempt's process) before it is committed,
//! and a reader that reconnects elsewhere reads the committed copy under the same number: the
//! two must be the same text, or a number would name two lines. So the stored text is the
//! update's JSON as a live stream sends it ([`watch`](crate::watch), "The JSON of an update"),
//! not a separate stored struct converted back on each read. What keeps the stored text safe
//! is that this JSON is no longer a derive of [`Update`]: it is written by hand
//! (`watch/wire.rs`) and each variant's text is pinned (`codec_stream_pins.rs`), so a change to
//! the Rust type changes nothing stored, and a change to the form shows as a failing pin.
//!
//! # Formats
//!
//! Every line is of a numbered format. Format 1 ([`LINE_FORMAT`]) is the form of the `watch`
//! table, a JSON object whose first key is `type`: every line written so far, with no mark of
//! its own (a mark would either be sent to every Server-Sent-Events reader or have to be cut
//! from each line served). A change to the form that is only additive (a new key after the
//! others, a new `type`) stays format 1: an older line lacks the new key, which readers are
//! told to expect. Any other change is a new format, whose lines begin with a mark this module
//! then defines (`{"format":2,` say); [`decode_line`] is the one place lines are read, and it
//! converts every older format to the current one, so a reader always gets the current form,
//! from a journal written by any earlier version. A line this build does not know (a later
//! format, or no JSON object at all) is refused typed ([`JournalError::Corrupt`]), never served
//! in a shape its readers were not promised.
//!
//! # Invariants
//!
//! - [`encode_line`] writes format 1; [`decode_line`] of it is the same text.
//! - Decoding never panics and never puts the stored text in its error.

use std::borrow::Cow;

use super::error::JournalError;
use crate::watch::Update;

/// The format the lines this build writes are of.
pub(crate) const LINE_FORMAT: u32 = 1;

/// How a line of format 1 begins: a JSON object whose first key is `type`.
const FORMAT_1: &str = r#"{"type":""#;

/// `update` as a stored line of the current format: its wire JSON.
pub(crate) fn encode_line(update: &Update) -> String {
    serde_json::to_string(update).unwrap_or_else(|error| {
        serde_json::json!({"type": "unserialisable", "error": error.to_string()}).to_string()
    })
}

/// A stored line as readers get it: in the current format, converted from an older one.
///
/// # Errors
///
/// [`JournalError::Corrupt`] for a line of no format this build knows.
pub(crate) fn decode_line(stored: &str) -> Result<Cow<'_, str>, JournalError> {
    match format_of(stored) {
        Some(LINE_FORMAT) => Ok(Cow::Borrowed(stored)),
        // A later format adds an arm here converting each older one.
        _ => Err(JournalError::Corrupt(
            "a recorded stream line of a format this version does not know".to_owned(),
        )),
    }
}

/// The format of a stored line, known by how it begins; `None` for a line of no format.
fn format_of(stored: &str) -> Option<u32> {
    stored.starts_with(FORMAT_1).then_some(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::RunError;

    #[test]
    fn a_line_of_the_current_format_reads_back_as_it_was_written() {
        let line = encode_line(&Update::Error(RunError::Cancelled));
        assert_eq!(
            line,
            r#"{"type":"error","kind":"cancelled","message":"the run was cancelled by its caller"}"#
        );
        assert_eq!(decode_line(&line), Ok(Cow::Borrowed(line.as_str())));
        assert_eq!(LINE_FORMAT, 1);
    }

    #[test]
    fn a_line_of_no_known_format_is_refused_typed_without_its_text() {
        let refused = Err(JournalError::Corrupt(
            "a recorded stream line of a format this version does not know".to_owned(),
        ));
        for line in [r#"{"format":2,"type":"text"}"#, r#"{ "type":"text"}"#, "", "secret", "[1]"] {
            assert_eq!(decode_line(line), refused, "{line:?}");
        }
    }
}
