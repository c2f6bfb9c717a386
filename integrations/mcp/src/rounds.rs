//! A tool call as a multi-round-trip request (2026-07-28): the server may answer
//! `input_required` instead of a result, and the call is sent again with the answers.
//!
//! # Invariants
//!
//! - Each round is one request under the call: the deadline, a halt or the caller's
//!   cancellation drops the round in flight and the server is sent `notifications/cancelled`
//!   for it). Between rounds nothing is in flight at the server
//!   (the revision is stateless), so there is nothing to tell it.
//! - At most [`MAX_ROUNDS`] requests are sent for one call; a server that still asks after
//!   that ends the call with [`CallError::TooManyRounds`]. One round answers at most
//!   [`MAX_QUESTIONS`] questions; more is [`CallError::TooManyQuestions`], nothing asked.
//! - The server's `requestState` is echoed back unread, as the revision requires.
//! - A call the server turns into a task is awaited as a task ([`task`]), within
//!   the same bounds.

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, InputRequests, InputResponses,
    ServerResult,
};
use serde_json::{Map, Value};

use crate::answer::Question;
use crate::connection::Inner;
use crate::error::{CallError, name};
use crate::request::send;
use crate::task;

/// Most requests sent for one tool call: the first and the retries with answers.
pub const MAX_ROUNDS: usize = 10;
/// Most questions one `input_required` answer may ask.
pub const MAX_QUESTIONS: usize = 16;

/// Calls `tool` with `arguments`, answering the server's questions, until a result.
pub(crate) async fn call(
    inner: &Inner,
    tool: &str,
    arguments: Map<String, Value>,
) -> Result<CallToolResult, CallError> {
    let mut params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
    for _ in 0..MAX_ROUNDS {
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
        let answer =
            send(&inner.peer, request, inner.meta.as_ref()).await.map_err(|error| inner.failed(error))?;
        match answer {
            ServerResult::CallToolResult(result) => return Ok(result),
            ServerResult::InputRequiredResult(asked) => {
                let questions = asked.input_requests.unwrap_or_default();
                if questions.is_empty() && asked.request_state.is_none() {
                    return Err(CallError::Malformed { server: name(&inner.name) });
                }
                let responses = answers(inner, tool, &questions).await?;
                params.input_responses = (!responses.is_empty()).then_some(responses);
                params.request_state = asked.request_state;
            }
            ServerResult::CreateTaskResult(created) => return task::wait(inner, tool, created).await,
            other => return empty(other).ok_or_else(|| CallError::Malformed { server: name(&inner.name) }),
        }
    }
    Err(CallError::TooManyRounds { server: name(&inner.name), limit: MAX_ROUNDS })
}

/// The answers of the connection's answerer to `questions`, one at a time.
pub(crate) async fn answers(
    inner: &Inner,
    tool: &str,
    questions: &InputRequests,
) -> Result<InputResponses, CallError> {
    if questions.len() > MAX_QUESTIONS {
        return Err(CallError::TooManyQuestions { server: name(&inner.name), limit: MAX_QUESTIONS });
    }
    let mut responses = InputResponses::new();
    for (key, request) in questions {
        let question = Question { server: &inner.name, tool, request };
        let kind = question.kind();
        let answer = inner.answerer.answer(question).await;
        match answer.filter(|answer| answer.kind() == kind).and_then(|answer| answer.to_value()) {
            Some(value) => responses.insert(key.clone(), value),
            None => return Err(CallError::Unanswered { server: name(&inner.name), kind }),
        };
    }
    Ok(responses)
}

/// A result without content (`{}`, or only `_meta`), which the SDK decodes as another kind:
/// a tool result with no content, as a 2025-06-18 server may send.
fn empty(answer: ServerResult) -> Option<CallToolResult> {
    match answer {
        ServerResult::EmptyResult(_) | ServerResult::TaskAckResult(_) => Some(CallToolResult::default()),
        ServerResult::CustomResult(custom) => {
            let only_meta =
                custom.0.as_object().is_some_and(|object| object.keys().all(|key| key == "_meta"));
            only_meta.then(CallToolResult::default)
        }
        _ => None,
    }
}
