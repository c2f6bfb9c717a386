//! A tool call the server runs as a task (the Tasks extension of 2026-07-28): polled with
//! `tasks/get` until it ends, its questions answered with `tasks/update`, and cancelled with
//! `tasks/cancel` when the call stops waiting for it.
//!
//! # Invariants
//!
//! - A task is awaited only inside its call: the deadline, a halt, the caller's cancellation or
//!   the call timeout drop the wait, and a task that has not ended by then is sent
//!   `tasks/cancel` (from a task of its own, given [`CANCEL_WAIT`] to be acknowledged). So is a
//!   task the call gives up on for any other reason (a malformed status, too many questions).
//! - Polls are spaced by the server's suggested interval, clamped to
//!   [`MIN_POLL_INTERVAL`]..=[`MAX_POLL_INTERVAL`] ([`DEFAULT_POLL_INTERVAL`] when it suggests
//!   none): a server cannot make the client poll in a tight loop, nor sleep past its deadline
//!   by more than one interval (the sleep is dropped with the call anyway).
//! - A task asks at most [`MAX_ROUNDS`] times; each question is answered once (a key already
//!   answered is not answered again while the server catches up).
//! - The task's result is a tool result like any other: rendered and cut to the mapping's
//!   limit before the model sees it.

use std::collections::BTreeSet;
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{
    CallToolResult, CancelTaskParams, CancelTaskRequest, ClientRequest, CreateTaskResult, GetTaskParams,
    GetTaskRequest, InputRequests, JsonObject, RequestMetaObject, ServerResult, TaskPayload,
    UpdateTaskParams, UpdateTaskRequest,
};
use rmcp::service::Peer;
use serde_json::Value;

use crate::connection::Inner;
use crate::error::{CallError, cut, name};
use crate::request::send;
use crate::rounds::{MAX_ROUNDS, answers};

/// Shortest wait between two polls of a task.
pub const MIN_POLL_INTERVAL: Duration = Duration::from_millis(50);
/// Longest wait between two polls of a task.
pub const MAX_POLL_INTERVAL: Duration = Duration::from_secs(1);
/// The wait between polls when the server suggests none.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(250);
/// How long a `tasks/cancel` sent for an abandoned task waits for its acknowledgement.
pub const CANCEL_WAIT: Duration = Duration::from_secs(5);

/// Awaits the task `created` of a call of `tool` to its end.
pub(crate) async fn wait(
    inner: &Inner,
    tool: &str,
    created: CreateTaskResult,
) -> Result<CallToolResult, CallError> {
    let id = created.task.task_id;
    let mut guard = CancelTask { peer: &inner.peer, meta: inner.meta.as_ref(), id: Some(id.clone()) };
    let mut interval = poll_interval(created.task.poll_interval_ms);
    let mut answered = BTreeSet::new();
    let mut rounds = 0;
    let malformed = || CallError::Malformed { server: name(&inner.name) };
    let ended = loop {
        tokio::time::sleep(interval).await;
        let request = ClientRequest::GetTaskRequest(GetTaskRequest::new(GetTaskParams::new(id.clone())));
        let status = match send(&inner.peer, request, inner.meta.as_ref()).await {
            Ok(ServerResult::GetTaskResult(status)) => status,
            Ok(_) => return Err(malformed()),
            Err(error) => return Err(inner.failed(error)),
        };
        if status.task.task.task_id != id {
            return Err(malformed());
        }
        interval = poll_interval(status.task.task.poll_interval_ms);
        match status.task.payload {
            TaskPayload::Working => {}
            TaskPayload::InputRequired { input_requests } => {
                let fresh: InputRequests =
                    input_requests.into_iter().filter(|(key, _)| !answered.contains(key)).collect();
                if fresh.is_empty() {
                    continue;
                }
                rounds += 1;
                if rounds > MAX_ROUNDS {
                    return Err(CallError::TooManyRounds { server: name(&inner.name), limit: MAX_ROUNDS });
                }
                let responses = answers(inner, tool, &fresh).await?;
                answered.extend(fresh.into_keys());
                let update = UpdateTaskRequest::new(UpdateTaskParams::new(id.clone(), responses));
                match send(&inner.peer, ClientRequest::UpdateTaskRequest(update), inner.meta.as_ref()).await {
                    Ok(ServerResult::TaskAckResult(_) | ServerResult::EmptyResult(_)) => {}
                    Ok(_) => return Err(malformed()),
                    Err(error) => return Err(inner.failed(error)),
                }
            }
            TaskPayload::Completed { result } => {
                break serde_json::from_value(Value::Object(result)).map_err(|_| malformed());
            }
            TaskPayload::Failed { error } => break Err(failed(&error)),
            TaskPayload::Cancelled => break Err(CallError::TaskCancelled { server: name(&inner.name) }),
            _ => return Err(malformed()),
        }
    };
    // The task ended at the server: there is nothing left to cancel.
    guard.id = None;
    ended
}

/// The wait before the next poll, as the server suggests it, within bounds.
fn poll_interval(suggested: Option<u64>) -> Duration {
    suggested.map_or(DEFAULT_POLL_INTERVAL, Duration::from_millis).clamp(MIN_POLL_INTERVAL, MAX_POLL_INTERVAL)
}

/// The error of a task that failed at the server.
fn failed(error: &JsonObject) -> CallError {
    let code =
        error.get("code").and_then(Value::as_i64).and_then(|code| i32::try_from(code).ok()).unwrap_or(0);
    let message = error.get("message").and_then(Value::as_str).unwrap_or_default();
    CallError::TaskFailed { code, message: cut(message) }
}

/// Sends `tasks/cancel` for a task whose call stopped waiting for it.
struct CancelTask<'a> {
    peer: &'a Peer<RoleClient>,
    meta: Option<&'a RequestMetaObject>,
    id: Option<String>,
}

impl Drop for CancelTask<'_> {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let (peer, meta) = (self.peer.clone(), self.meta.cloned());
        runtime.spawn(async move {
            let request = ClientRequest::CancelTaskRequest(CancelTaskRequest::new(CancelTaskParams::new(id)));
            let _ = tokio::time::timeout(CANCEL_WAIT, send(&peer, request, meta.as_ref())).await;
        });
    }
}
