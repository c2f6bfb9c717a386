//! The reply full of terminal control sequences.
//!
//! # Invariants
//!
//! - The streamed pieces join to exactly [`ESCAPE_TEXT`], and the first piece ends in the middle
//!   of an escape sequence, so a filter that looks at one delta at a time misses it.
//! - Every control character is carried by a JSON string (escaped where JSON requires it), so
//!   the reply itself is valid JSON: the hostility is in the decoded text only.

use tokio::io::AsyncWrite;

use crate::hostile::dialect::{Dialect, Finish};
use crate::hostile::response::{Responder, Sent};

/// The fake status line inside [`ESCAPE_TEXT`]: it imitates a run's closing report.
pub const FAKE_STATUS_LINE: &str = "status        Completed (exit 0)";

/// The content of [`Behaviour::EscapeSequences`](crate::hostile::Behaviour::EscapeSequences): clear
/// screen and cursor home (`ESC[2J ESC[H`), a bare carriage return, BEL, the C1 control sequence
/// introducer (U+009B), DEL, and [`FAKE_STATUS_LINE`].
pub const ESCAPE_TEXT: &str = "\u{1b}[2J\u{1b}[HReview finished.\rOverwritten\u{7}\u{9b}31mred\u{7f}\nstatus        Completed (exit 0)\n";

/// [`ESCAPE_TEXT`] as the contents of successive deltas.
const PIECES: [&str; 5] = [
    "\u{1b}",
    "[2J\u{1b}[HReview finished.",
    "\rOverwritten\u{7}\u{9b}",
    "31mred\u{7f}\n",
    "status        Completed (exit 0)\n",
];

/// A whole text reply of [`ESCAPE_TEXT`], or its pieces as server-sent events when `stream`.
pub(super) async fn answer<S: AsyncWrite + Unpin>(
    mut out: Responder<'_, S>,
    api: Dialect,
    stream: bool,
) -> Sent {
    if !stream {
        return out.whole(200, api.whole_text(ESCAPE_TEXT).as_bytes()).await;
    }
    out.sse_head(200);
    out.body(&api.open()).await?;
    out.body(&api.open_text()).await?;
    for piece in PIECES {
        out.body(&api.text(piece)).await?;
    }
    out.body(&api.close_text()).await?;
    out.body(&api.finish(Finish::Stop)).await?;
    out.finish().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pieces_join_to_the_text() {
        assert_eq!(PIECES.concat(), ESCAPE_TEXT);
        assert!(ESCAPE_TEXT.contains(FAKE_STATUS_LINE));
    }
}
