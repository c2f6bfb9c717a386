//! The review task of SPEC §11: `read_ticket` (ticket.read) and `finish_review`
//! (review.finish) over one ticket, with the host's completion condition. Shared by the HTTP
//! tests and the live example; nothing is written anywhere but the host's memory.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use loopbound::Scope;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The tools' input: a ticket id.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
pub(crate) struct Ticket {
    /// The ticket's id.
    pub(crate) input: i64,
}

/// The text of the one ticket in scope.
pub(crate) const TICKET_42: &str =
    "Ticket 42: the login page rejects valid passwords since the last release.";
/// What `read_ticket` answers for any other id.
pub(crate) const NOT_FOUND: &str = "NotFound: only ticket 42 is in scope.";

/// The host's memory of the review: whether ticket 42 was read, and whether the review finished.
#[derive(Clone, Debug, Default)]
pub(crate) struct Review {
    read: Arc<AtomicBool>,
    finished: Arc<AtomicBool>,
}

impl Review {
    /// Registers `read_ticket` (ticket.read) and `finish_review` (review.finish) in `scope`.
    pub(crate) fn register(scope: &Scope) -> Self {
        let review = Self::default();
        let read = Arc::clone(&review.read);
        scope
            .tool("read_ticket", "ticket.read")
            .description("Read a ticket by its numeric id.")
            .build(move |ticket: Ticket, _cancel| {
                let read = Arc::clone(&read);
                async move {
                    if ticket.input != 42 {
                        return Ok::<_, String>(NOT_FOUND.to_owned());
                    }
                    read.store(true, Ordering::SeqCst);
                    Ok(TICKET_42.to_owned())
                }
            })
            .expect("read_ticket registers");
        let (read, finished) = (Arc::clone(&review.read), Arc::clone(&review.finished));
        scope
            .tool("finish_review", "review.finish")
            .description("Record that the review of a ticket is finished.")
            .build(move |ticket: Ticket, _cancel| {
                let (read, finished) = (Arc::clone(&read), Arc::clone(&finished));
                async move {
                    if ticket.input != 42 || !read.load(Ordering::SeqCst) {
                        return Err("ticket 42 must be read before its review can finish".to_owned());
                    }
                    finished.store(true, Ordering::SeqCst);
                    Ok("Review of ticket 42 recorded.".to_owned())
                }
            })
            .expect("finish_review registers");
        review
    }

    /// The host's completion condition: `finish_review` succeeded.
    pub(crate) fn is_complete(&self) -> bool {
        self.finished.load(Ordering::SeqCst)
    }
}
