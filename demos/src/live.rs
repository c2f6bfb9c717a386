//! `--watch`: a run's updates printed as they happen, one line each, before the usual outcome.
//!
//! # Invariants
//!
//! - Everything the model or a tool wrote (text, answers, names, call ids) goes through
//!   [`visible`]: no control character reaches the terminal, in any piece of any update.
//! - The text of one reply is printed on one line, its pieces appended as they arrive: the same
//!   bytes whether the watcher got the text whole, in pieces, or in merged pieces, so a
//!   transcript does not depend on timing.
//! - Every update is flushed as soon as it is printed; nothing here reads a clock.

use std::fmt::Write as _;
use std::io::Write;

use loopbound::watch::{Update, Updates};

use crate::visible::visible;

/// Width of the label column, as in the transcript.
const LABEL: usize = 14;

/// Prints `updates` to `out` as they come, until the stream ends.
pub async fn print_updates(mut updates: Updates, out: &mut impl Write) {
    let mut printer = Printer { open_text: None, buffer: String::new() };
    printer.line("live", "updates as they happen");
    printer.flush(out);
    while let Some(update) = updates.next().await {
        printer.update(&update);
        printer.flush(out);
    }
    printer.close_text();
    printer.flush(out);
}

struct Printer {
    /// The reply whose text line is open.
    open_text: Option<u32>,
    buffer: String,
}

impl Printer {
    fn update(&mut self, update: &Update) {
        if let Update::Text(text) = update {
            if self.open_text != Some(text.reply()) {
                self.close_text();
                // Writing to a String cannot fail.
                let _ = write!(self.buffer, "  {:<w$}\"", "text", w = LABEL - 2);
                self.open_text = Some(text.reply());
            }
            self.buffer.push_str(&visible(text.text()));
            return;
        }
        self.close_text();
        match update {
            Update::Event(event) => self.line("  event", &event.to_string()),
            Update::ToolStarted(call) => self.line(
                "  call",
                &format!(
                    "{} {} (reply {}, call {})",
                    visible(call.name()),
                    visible(call.call_id()),
                    call.reply(),
                    call.index() + 1
                ),
            ),
            Update::ToolResult(result) => {
                let kind = if result.is_error() { "error" } else { "result" };
                self.line(
                    &format!("  {kind}"),
                    &format!("{} \"{}\"", visible(result.call_id()), visible(result.text())),
                );
            }
            Update::Suspended(suspension) => self.line(
                "  suspended",
                &format!("{} on {}", suspension.status(), visible(suspension.operation().unwrap_or("-"))),
            ),
            Update::Outcome(outcome) => self.line("  outcome", outcome.status().as_str()),
            Update::Error(error) => self.line("  error", error.kind().as_str()),
            _ => self.line("  update", "of a kind this console does not describe yet"),
        }
    }

    fn line(&mut self, label: &str, value: &str) {
        // Writing to a String cannot fail.
        let _ = writeln!(self.buffer, "{label:<LABEL$}{value}");
    }

    fn close_text(&mut self) {
        if self.open_text.take().is_some() {
            self.buffer.push_str("\"\n");
        }
    }

    /// Writes what is buffered. A closed or failing stream is ignored on purpose: the exit code
    /// still carries the outcome.
    fn flush(&mut self, out: &mut impl Write) {
        if !self.buffer.is_empty() {
            let _ = out.write_all(self.buffer.as_bytes()).and_then(|()| out.flush());
            self.buffer.clear();
        }
    }
}
