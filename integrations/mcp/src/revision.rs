//! Which revision of the protocol a connection speaks, and how it is chosen.
//!
//! Two revisions are spoken: **2026-07-28** (stateless: no `initialize`, the server describes
//! itself in answer to `server/discover`, every request carries the client's version, identity
//! and capabilities, a server asks for input by answering `input_required` and may run a call
//! as a task) and **2025-06-18** (the `initialize` handshake, one session per connection).
//!
//! # Invariants
//!
//! - By default ([`Revision::Newest`]) a connection asks `server/discover` first and speaks
//!   2026-07-28 when the server does; a server that answers the probe with an error (a server
//!   of an older revision does not know the method) is then greeted with `initialize` at
//!   2025-06-18 on the same connection. A server that stays silent is greeted with
//!   `initialize` after 10 s of the initialize timeout. Every step is within that timeout.
//! - A pinned revision never falls back: [`Revision::V2026_07_28`] against a server that does
//!   not speak it is [`ConnectError::RevisionUnsupported`](crate::ConnectError::RevisionUnsupported),
//!   and [`Revision::V2025_06_18`] never sends `server/discover`.
//! - On a 2025-06-18 connection the client declares no capability, exactly as before the
//!   2026-07-28 revision existed: a server that lists tools by the client's capabilities lists
//!   the same tools. The capabilities of [`Answerer`] and the tasks extension
//!   are declared only on 2026-07-28 requests.

use std::fmt;
use std::sync::Arc;

use crate::answer::{Answerer, Decline};

/// The protocol revision a host asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Revision {
    /// The newest the server speaks: 2026-07-28 if it answers `server/discover`, else
    /// 2025-06-18 through `initialize`. The default.
    #[default]
    Newest,
    /// 2026-07-28 only; a server that does not speak it is a connection error.
    V2026_07_28,
    /// 2025-06-18 only, through `initialize`; `server/discover` is never sent.
    V2025_06_18,
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Newest => "newest",
            Self::V2026_07_28 => "2026-07-28",
            Self::V2025_06_18 => "2025-06-18",
        })
    }
}

/// How a connection talks to its server: the revision it asks for and who answers the
/// server's questions in the middle of a call.
///
/// ```
/// use std::sync::Arc;
/// use loopbound_mcp::{Decline, Protocol, Revision, StdioServer};
///
/// let server = StdioServer::new("files", "node")
///     .arg("server.js")
///     .protocol(Protocol::default().revision(Revision::V2025_06_18).answerer(Arc::new(Decline)));
/// assert_eq!(server.name(), "files");
/// ```
#[derive(Clone)]
pub struct Protocol {
    pub(crate) revision: Revision,
    pub(crate) answerer: Arc<dyn Answerer>,
}

impl Default for Protocol {
    /// [`Revision::Newest`], and [`Decline`] answers every question.
    fn default() -> Self {
        Self { revision: Revision::Newest, answerer: Arc::new(Decline) }
    }
}

impl fmt::Debug for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Protocol").field("revision", &self.revision).finish_non_exhaustive()
    }
}

impl Protocol {
    /// Asks for `revision`.
    #[must_use]
    pub fn revision(mut self, revision: Revision) -> Self {
        self.revision = revision;
        self
    }

    /// Lets `answerer` answer the server's questions (elicitation, sampling, roots).
    #[must_use]
    pub fn answerer(mut self, answerer: Arc<dyn Answerer>) -> Self {
        self.answerer = answerer;
        self
    }

    /// The revision asked for.
    #[must_use]
    pub fn requested(&self) -> Revision {
        self.revision
    }
}
