//! Who answers a server that asks for input in the middle of a call.
//!
//! On the 2026-07-28 revision a server does not send requests of its own to the client: it
//! answers a `tools/call` with `input_required`, naming what it needs (an elicitation, a
//! sampling, the client's roots), and the client sends the call again with the answers. An
//! [`Answerer`] gives those answers; [`Decline`] is the default.
//!
//! # Invariants
//!
//! - The default never waits and never gives anything away: it declines every elicitation,
//!   lists no roots, and cannot sample, so a call whose server needs a sampling ends with
//!   [`CallError::Unanswered`](crate::CallError::Unanswered).
//! - An answerer runs inside the call: the deadline, a halt or the caller's cancellation drops
//!   it with the call, so an answerer that waits for a person cannot keep a run past its
//!   deadline.
//! - An answer of another kind than the question (roots for an elicitation) is treated as no
//!   answer: the call ends with [`CallError::Unanswered`](crate::CallError::Unanswered).

// Sampling and roots are deprecated by the protocol (SEP-2577) but still asked in 2026-07-28
// `input_required` answers; a client must be able to answer them.
#![allow(deprecated, reason = "sampling and roots are still asked by 2026-07-28 servers")]

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use rmcp::model::{CreateMessageResult, ElicitResult, ElicitationAction, InputRequest, ListRootsResult};

/// What a server asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum InputKind {
    /// Input from the user (`elicitation/create`).
    Elicitation,
    /// A completion from the host's model (`sampling/createMessage`).
    Sampling,
    /// The client's roots (`roots/list`).
    Roots,
}

impl InputKind {
    pub(crate) fn of(request: &InputRequest) -> Self {
        match request {
            InputRequest::CreateMessage(_) => Self::Sampling,
            InputRequest::ListRoots(_) => Self::Roots,
            // The remaining kind, and any kind a later SDK adds, is asked of the answerer as
            // an elicitation-like question the default declines.
            _ => Self::Elicitation,
        }
    }
}

impl fmt::Display for InputKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Elicitation => "elicitation/create",
            Self::Sampling => "sampling/createMessage",
            Self::Roots => "roots/list",
        })
    }
}

/// One question a server asked during a call.
#[derive(Clone, Copy, Debug)]
pub struct Question<'a> {
    pub(crate) server: &'a str,
    pub(crate) tool: &'a str,
    pub(crate) request: &'a InputRequest,
}

impl<'a> Question<'a> {
    /// The host's name for the server.
    #[must_use]
    pub fn server(&self) -> &'a str {
        self.server
    }

    /// The server's name for the tool being called.
    #[must_use]
    pub fn tool(&self) -> &'a str {
        self.tool
    }

    /// What kind of answer the server needs.
    #[must_use]
    pub fn kind(&self) -> InputKind {
        InputKind::of(self.request)
    }

    /// The request as the server sent it. Its text is the server's: show it to a person as
    /// such, never as the host's own words.
    #[must_use]
    pub fn request(&self) -> &'a InputRequest {
        self.request
    }
}

/// An answer to a [`Question`], of the question's kind.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Answer {
    /// The user's answer (accept with content, decline, or cancel).
    Elicitation(ElicitResult),
    /// The host model's completion.
    Sampling(CreateMessageResult),
    /// The client's roots.
    Roots(ListRootsResult),
}

impl Answer {
    /// The kind of question this answers.
    #[must_use]
    pub fn kind(&self) -> InputKind {
        match self {
            Self::Elicitation(_) => InputKind::Elicitation,
            Self::Sampling(_) => InputKind::Sampling,
            Self::Roots(_) => InputKind::Roots,
        }
    }

    pub(crate) fn to_value(&self) -> Option<serde_json::Value> {
        match self {
            Self::Elicitation(result) => serde_json::to_value(result).ok(),
            Self::Sampling(result) => serde_json::to_value(result).ok(),
            Self::Roots(result) => serde_json::to_value(result).ok(),
        }
    }
}

/// The future an [`Answerer`] returns: an answer, or `None` when it cannot answer.
pub type Answering<'a> = Pin<Box<dyn Future<Output = Option<Answer>> + Send + 'a>>;

/// Answers the questions servers ask during calls, on 2026-07-28 connections.
///
/// ```
/// use loopbound_mcp::rmcp::model::{ElicitResult, ElicitationAction};
/// use loopbound_mcp::{Answer, Answerer, Answering, InputKind, Question};
///
/// /// Accepts every confirmation with `{"confirm": true}`; answers nothing else.
/// struct Confirm;
///
/// impl Answerer for Confirm {
///     fn answer<'a>(&'a self, question: Question<'a>) -> Answering<'a> {
///         Box::pin(async move {
///             (question.kind() == InputKind::Elicitation).then(|| {
///                 Answer::Elicitation(
///                     ElicitResult::new(ElicitationAction::Accept)
///                         .with_content(serde_json::json!({"confirm": true})),
///                 )
///             })
///         })
///     }
/// }
/// ```
pub trait Answerer: Send + Sync + 'static {
    /// The answer to `question`, or `None` to end the call with
    /// [`CallError::Unanswered`](crate::CallError::Unanswered).
    fn answer<'a>(&'a self, question: Question<'a>) -> Answering<'a>;

    /// Whether it answers samplings: only then is the sampling capability declared, so that a
    /// well-behaved server does not ask for one. Default `false`.
    fn samples(&self) -> bool {
        false
    }
}

/// The default answerer: declines every elicitation, lists no roots, cannot sample.
#[derive(Clone, Copy, Debug, Default)]
pub struct Decline;

impl Answerer for Decline {
    fn answer<'a>(&'a self, question: Question<'a>) -> Answering<'a> {
        let answer = match question.kind() {
            InputKind::Elicitation => {
                Some(Answer::Elicitation(ElicitResult::new(ElicitationAction::Decline)))
            }
            InputKind::Roots => Some(Answer::Roots(ListRootsResult::default())),
            InputKind::Sampling => None,
        };
        Box::pin(std::future::ready(answer))
    }
}
