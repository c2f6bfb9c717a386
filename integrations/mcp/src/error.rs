//! What can go wrong with a server: connecting to it, registering its tools, calling one.
//!
//! # Invariants
//!
//! - Every failure is typed; none panics. A classification comes from the variant, never from
//!   a message's text.
//! - No message carries an argument's value. Three carry the server's own words, cut
//!   to [`MAX_MESSAGE_LEN`] bytes: a tool's reported error ([`CallError::Reported`]), a
//!   JSON-RPC error's message ([`CallError::Protocol`]) and a failed task's
//!   ([`CallError::TaskFailed`]); a server may quote what it was sent
//!   in them, as in any tool result.

use std::fmt;
use std::time::Duration;

use loopbound::tool::{MAX_MESSAGE_LEN, RegistrationError};

use crate::answer::InputKind;
use crate::revision::Revision;
use crate::schema::{SchemaError, short};

/// Why a connection to a server could not be made. Nothing was registered.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConnectError {
    /// The server's process could not be started.
    Spawn {
        /// The host's name for the server.
        server: String,
        /// Why.
        source: std::io::Error,
    },
    /// `https://` URLs are not supported by the built-in HTTP transport (no TLS stack is
    /// compiled in); nothing was sent. Bring a TLS-capable transport with
    /// [`Connection::with_transport`](crate::Connection::with_transport).
    HttpsUnsupported {
        /// The host's name for the server.
        server: String,
    },
    /// The URL is not `http://…`.
    InvalidUrl {
        /// The host's name for the server.
        server: String,
    },
    /// The MCP handshake (`initialize`) failed: the server closed, or answered unusably.
    Initialize {
        /// The host's name for the server.
        server: String,
        /// What rmcp reported.
        detail: String,
    },
    /// The server did not finish a step within its timeout.
    Timeout {
        /// The host's name for the server.
        server: String,
        /// `initialize` or `tools/list`.
        step: &'static str,
        /// The timeout.
        after: Duration,
    },
    /// `tools/list` failed.
    List {
        /// The host's name for the server.
        server: String,
        /// What rmcp reported.
        detail: String,
    },
    /// The host pinned a revision the server does not speak (it answered `server/discover`
    /// with an error, or named only other revisions). Nothing else was sent.
    RevisionUnsupported {
        /// The host's name for the server.
        server: String,
        /// The revision asked for.
        revision: Revision,
    },
    /// The server listed more tools, or more pages of tools, than a connection accepts.
    TooManyTools {
        /// The host's name for the server.
        server: String,
        /// The limit on tools ([`MAX_TOOLS`](crate::MAX_TOOLS)) or pages
        /// ([`MAX_LIST_PAGES`](crate::MAX_LIST_PAGES)).
        limit: usize,
    },
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Spawn { server, source } => {
                write!(f, "MCP server {server}: could not start its process: {source}")
            }
            Self::HttpsUnsupported { server } => write!(
                f,
                "MCP server {server}: https is not supported by the built-in HTTP transport; nothing was sent \
                 (use Connection::with_transport with a TLS-capable transport)"
            ),
            Self::InvalidUrl { server } => write!(f, "MCP server {server}: the URL must start with http://"),
            Self::Initialize { server, detail } => {
                write!(f, "MCP server {server}: the handshake failed: {}", cut(detail))
            }
            Self::Timeout { server, step, after } => {
                write!(f, "MCP server {server}: no answer to {step} within {} ms", after.as_millis())
            }
            Self::List { server, detail } => {
                write!(f, "MCP server {server}: tools/list failed: {}", cut(detail))
            }
            Self::RevisionUnsupported { server, revision } => {
                write!(f, "MCP server {server} does not speak protocol revision {revision}")
            }
            Self::TooManyTools { server, limit } => {
                write!(f, "MCP server {server}: more tools (or pages of tools) than the limit of {limit}")
            }
        }
    }
}

impl std::error::Error for ConnectError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Spawn { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Why a tool call produced no result. It is a body error for loopbound: the attempt stays
/// counted, the model receives the message, and the run goes on.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallError {
    /// The server is gone (its process ended, its connection broke). Reported once when first
    /// seen; every later call to its tools fails at once with this error, without sending.
    Closed {
        /// The host's name for the server.
        server: String,
    },
    /// No answer within the call timeout; the server was told the request is cancelled.
    Timeout {
        /// The host's name for the server.
        server: String,
        /// The timeout.
        after: Duration,
    },
    /// The tool ran and reported an error (`isError: true`), in the server's words.
    Reported {
        /// The server's text, cut to [`MAX_MESSAGE_LEN`] bytes.
        text: String,
    },
    /// The server answered with a JSON-RPC error.
    Protocol {
        /// The JSON-RPC error code.
        code: i32,
        /// The server's message, cut to [`MAX_MESSAGE_LEN`] bytes.
        message: String,
    },
    /// The server answered something that is not a tool result.
    Malformed {
        /// The host's name for the server.
        server: String,
    },
    /// The server still asked for input after [`MAX_ROUNDS`](crate::MAX_ROUNDS) requests of a
    /// multi-round-trip call, or a task asked more often than that. A task is cancelled.
    TooManyRounds {
        /// The host's name for the server.
        server: String,
        /// The limit.
        limit: usize,
    },
    /// One answer of the server asked more than [`MAX_QUESTIONS`](crate::MAX_QUESTIONS)
    /// questions; none was asked of the answerer.
    TooManyQuestions {
        /// The host's name for the server.
        server: String,
        /// The limit.
        limit: usize,
    },
    /// The server asked for input the connection's [`Answerer`](crate::Answerer) does not give
    /// (by default: a sampling). Nothing more was sent for the call.
    Unanswered {
        /// The host's name for the server.
        server: String,
        /// What it asked for.
        kind: InputKind,
    },
    /// The call ran as a task and the task failed at the server.
    TaskFailed {
        /// The JSON-RPC error code of the failure (0 when it gave none).
        code: i32,
        /// The server's message, cut to [`MAX_MESSAGE_LEN`] bytes.
        message: String,
    },
    /// The call ran as a task and the server cancelled it.
    TaskCancelled {
        /// The host's name for the server.
        server: String,
    },
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Closed { server } => write!(
                f,
                "MCP server {server} is closed (its process ended or its connection broke); \
                 no call to its tools is sent any more"
            ),
            Self::Timeout { server, after } => write!(
                f,
                "MCP server {server} did not answer within {} ms; the call was cancelled",
                after.as_millis()
            ),
            Self::Reported { text } => write!(f, "the tool reported an error: {text}"),
            Self::Protocol { code, message } => write!(f, "the server answered with error {code}: {message}"),
            Self::Malformed { server } => {
                write!(f, "MCP server {server} answered something that is not a tool result")
            }
            Self::TooManyRounds { server, limit } => write!(
                f,
                "MCP server {server} still asked for input after {limit} rounds; the call was given up"
            ),
            Self::TooManyQuestions { server, limit } => {
                write!(
                    f,
                    "MCP server {server} asked more than {limit} questions at once; the call was given up"
                )
            }
            Self::Unanswered { server, kind } => {
                write!(f, "MCP server {server} asked for {kind}, which this client does not answer")
            }
            Self::TaskFailed { code, message } => {
                write!(f, "the tool's task failed with error {code}: {message}")
            }
            Self::TaskCancelled { server } => write!(f, "MCP server {server} cancelled the tool's task"),
        }
    }
}

impl fmt::Debug for CallError {
    /// Like `Display`, without the server's own words.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Reported { text } => f.debug_struct("Reported").field("bytes", &text.len()).finish(),
            Self::Protocol { code, message } => {
                f.debug_struct("Protocol").field("code", code).field("bytes", &message.len()).finish()
            }
            Self::Closed { server } => f.debug_struct("Closed").field("server", server).finish(),
            Self::Timeout { server, after } => {
                f.debug_struct("Timeout").field("server", server).field("after", after).finish()
            }
            Self::Malformed { server } => f.debug_struct("Malformed").field("server", server).finish(),
            Self::TooManyRounds { server, limit } => {
                f.debug_struct("TooManyRounds").field("server", server).field("limit", limit).finish()
            }
            Self::TooManyQuestions { server, limit } => {
                f.debug_struct("TooManyQuestions").field("server", server).field("limit", limit).finish()
            }
            Self::Unanswered { server, kind } => {
                f.debug_struct("Unanswered").field("server", server).field("kind", kind).finish()
            }
            Self::TaskFailed { code, message } => {
                f.debug_struct("TaskFailed").field("code", code).field("bytes", &message.len()).finish()
            }
            Self::TaskCancelled { server } => {
                f.debug_struct("TaskCancelled").field("server", server).finish()
            }
        }
    }
}

impl std::error::Error for CallError {}

/// Why one of the server's tools was left out. The others were defined.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SkipReason {
    /// Its schema cannot be checked here (see [`schema`](crate::schema)).
    Schema(SchemaError),
    /// The name it would get is not a valid tool name
    /// ([`InvalidName`](RegistrationError::InvalidName),
    /// [`ReservedName`](RegistrationError::ReservedName)), or an earlier tool of the same server
    /// gets it ([`DuplicateName`](RegistrationError::DuplicateName)). A name another tool of
    /// the host's set has is refused when that set is built.
    Name(RegistrationError),
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Schema(error) => error.fmt(f),
            Self::Name(error) => error.fmt(f),
        }
    }
}

/// `text` cut to [`MAX_MESSAGE_LEN`] bytes on a character boundary.
pub(crate) fn cut(text: &str) -> String {
    let mut end = text.len().min(MAX_MESSAGE_LEN);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// A server-given name, cut for messages.
pub(crate) fn name(text: &str) -> String {
    short(text).to_owned()
}
