//! The one table from what a run or a host command ended with to an HTTP status code.
//!
//! A run answers through four channels, and each has its row here (a run whose last attempt did
//! not end in this process answers by its journal record):
//!
//! | channel | value | HTTP | why |
//! |---|---|---|---|
//! | run in flight | — | 202 Accepted | not ended yet: poll, wait or watch its events |
//! | outcome | `Completed` | 200 OK | the host's completion condition holds |
//! | outcome | `AwaitingApproval` | 202 Accepted | a proposal waits for `approve` or `deny` |
//! | outcome | `PermissionDenied`, `Denied` | 403 Forbidden | a grant was missing, or a person or policy refused |
//! | outcome | `Incomplete` | 422 Unprocessable Content | the model stopped talking but the task is not done |
//! | outcome | `RepeatedCall`, `NoProgress`, `ToolBudget`, `ModelBudget`, `ToolLimit`, `TooManyCalls`, `TokenBudget`, `CostBudget` | 422 Unprocessable Content | a limit stopped the run before the task was done |
//! | outcome | `Ambiguous` | 409 Conflict | an effect may or may not have happened: reconcile it first |
//! | outcome | `ProviderUnavailable` | 503 Service Unavailable | the model's endpoint could not serve the call (unreachable, timed out, rate limited, overloaded or failing) |
//! | outcome | `DeadlineExceeded` | 504 Gateway Timeout | the run's wall-clock deadline passed |
//! | journal record | `open`, `awaiting_approval`, or held by another process's attempt | 202 Accepted | not ended: resume it, decide, or wait |
//! | journal record | `ambiguous` | 409 Conflict | as the outcome `Ambiguous` |
//! | journal record | `finished` with a status | the outcome's row | |
//! | `RunError::kind()` | `Cancelled` | 499 Client Closed Request | cancelled by its id |
//! | `RunError::kind()` | `Provider`, `ProviderAuthentication` | 502 Bad Gateway | the endpoint answered unusably |
//! | `RunError::kind()` | `Busy`, `Finished` | 409 Conflict | another attempt holds the run, or it already ended |
//! | `RunError::kind()` | `JournalUnavailable`, `PoolUnavailable` | 503 Service Unavailable | the journal's or a shared pool's storage failed (nothing unrecorded ran, no call was sent unreserved) |
//! | `RunError::kind()` | `Internal`, `Configuration` | 500 Internal Server Error | the host's setup or rows do not fit |
//! | host command's `JournalError` | `InvalidDigest`, `InvalidActor`, `InvalidReason`, `InvalidOperationId`, `InvalidRunId` | 400 Bad Request | the request is malformed |
//! | host command's `JournalError` | `UnknownRun`, `UnknownOperation` | 404 Not Found | |
//! | host command's `JournalError` | `SignatureMismatch`, `AlreadyDecided`, `Finished`, `LeaseHeld`, `LeaseLost`, `Conflict` | 409 Conflict | the journal holds something else than the request assumed (`LeaseHeld`: an attempt holds the run, kind `running`; `Finished`: the run ended, kind `finished`) |
//! | host command's `JournalError` | `Storage` | 503 Service Unavailable | |
//! | host command's `JournalError` | any other | 500 Internal Server Error | |
//!
//! A status or kind added by a later version of loopbound answers 500 until this table names it.
//!
//! # Invariants
//!
//! - Classification is by the typed status or kind, never by a message.
//! - The table is total: every value maps to one code, and `2xx` only for `Completed`,
//!   `AwaitingApproval` and a run in flight or open.

use axum::http::StatusCode;
use loopbound::journal::{JournalError, RunState};
use loopbound::{RunErrorKind, Status};

/// 499, nginx's "client closed request": the run was cancelled by a caller.
pub const CLIENT_CLOSED_REQUEST: u16 = 499;

/// The code for a run that ended with `status`.
#[must_use]
pub fn of_outcome(status: Status) -> StatusCode {
    match status {
        Status::Completed => StatusCode::OK,
        Status::AwaitingApproval => StatusCode::ACCEPTED,
        Status::PermissionDenied | Status::Denied => StatusCode::FORBIDDEN,
        Status::Incomplete
        | Status::RepeatedCall
        | Status::NoProgress
        | Status::ToolBudget
        | Status::ModelBudget
        | Status::ToolLimit
        | Status::TooManyCalls
        | Status::TokenBudget
        | Status::CostBudget => StatusCode::UNPROCESSABLE_ENTITY,
        Status::Ambiguous | Status::Closed => StatusCode::CONFLICT,
        Status::ProviderUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        Status::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The code for a run known by its journal record: in `state`, `held` by another process's
/// attempt or not.
#[must_use]
pub fn of_record(state: RunState, held: bool) -> StatusCode {
    match state {
        _ if held => StatusCode::ACCEPTED,
        RunState::Open | RunState::AwaitingApproval(_) => StatusCode::ACCEPTED,
        RunState::Ambiguous(_) => StatusCode::CONFLICT,
        RunState::Finished(status) => of_outcome(status),
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The code for a run that ended without an outcome, by its error's kind.
#[must_use]
pub fn of_error(kind: RunErrorKind) -> StatusCode {
    match kind {
        RunErrorKind::Cancelled => {
            StatusCode::from_u16(CLIENT_CLOSED_REQUEST).unwrap_or(StatusCode::BAD_REQUEST)
        }
        RunErrorKind::Provider | RunErrorKind::ProviderAuthentication => StatusCode::BAD_GATEWAY,
        RunErrorKind::Busy | RunErrorKind::Finished => StatusCode::CONFLICT,
        RunErrorKind::JournalUnavailable | RunErrorKind::PoolUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The code for a host command (an approval, a denial, a closing) that the journal refused or
/// failed.
#[must_use]
pub fn of_command(error: &JournalError) -> StatusCode {
    match error {
        JournalError::InvalidDigest
        | JournalError::InvalidActor
        | JournalError::InvalidReason
        | JournalError::InvalidOperationId
        | JournalError::InvalidRunId => StatusCode::BAD_REQUEST,
        JournalError::UnknownRun | JournalError::UnknownOperation => StatusCode::NOT_FOUND,
        JournalError::SignatureMismatch
        | JournalError::AlreadyDecided
        | JournalError::Finished(_)
        | JournalError::LeaseHeld { .. }
        | JournalError::LeaseLost
        | JournalError::Conflict(_) => StatusCode::CONFLICT,
        JournalError::Storage(_) => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The kind a client matches on for a host command the journal refused: `bad_request` for a
/// malformed request, `running` while an attempt holds the run, `finished` for a run that
/// ended, `journal` otherwise.
#[must_use]
pub fn kind_of_command(error: &JournalError) -> &'static str {
    match error {
        JournalError::LeaseHeld { .. } => "running",
        JournalError::Finished(_) => "finished",
        _ if of_command(error) == StatusCode::BAD_REQUEST => "bad_request",
        _ => "journal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_of_this_version_has_its_documented_code() {
        let codes: Vec<(&str, u16)> =
            Status::ALL.iter().map(|status| (status.as_str(), of_outcome(*status).as_u16())).collect();
        assert_eq!(
            codes,
            [
                ("Completed", 200),
                ("Incomplete", 422),
                ("PermissionDenied", 403),
                ("RepeatedCall", 422),
                ("ToolBudget", 422),
                ("ModelBudget", 422),
                ("DeadlineExceeded", 504),
                ("ProviderUnavailable", 503),
                ("TooManyCalls", 422),
                ("AwaitingApproval", 202),
                ("Denied", 403),
                ("Ambiguous", 409),
                ("TokenBudget", 422),
                ("CostBudget", 422),
                ("ToolLimit", 422),
                ("Closed", 409),
                ("NoProgress", 422),
            ]
        );
    }

    #[test]
    fn every_error_kind_has_its_documented_code() {
        let kinds = [
            (RunErrorKind::Cancelled, 499),
            (RunErrorKind::ProviderAuthentication, 502),
            (RunErrorKind::Provider, 502),
            (RunErrorKind::Busy, 409),
            (RunErrorKind::Finished, 409),
            (RunErrorKind::JournalUnavailable, 503),
            (RunErrorKind::PoolUnavailable, 503),
            (RunErrorKind::Internal, 500),
            (RunErrorKind::Configuration, 500),
        ];
        for (kind, code) in kinds {
            assert_eq!(of_error(kind).as_u16(), code, "{kind}");
        }
    }

    #[test]
    fn every_journal_state_has_its_documented_code() {
        let states = [
            (RunState::Open, false, 202),
            (RunState::AwaitingApproval(1), false, 202),
            (RunState::Ambiguous(2), false, 409),
            (RunState::Ambiguous(2), true, 202),
            (RunState::Finished(Status::Completed), false, 200),
            (RunState::Finished(Status::Closed), false, 409),
            (RunState::Finished(Status::Denied), false, 403),
        ];
        for (state, held, code) in states {
            assert_eq!(of_record(state, held).as_u16(), code, "{state} held {held}");
        }
    }

    #[test]
    fn host_commands_refused_by_the_journal_have_their_documented_codes() {
        let errors = [
            (JournalError::InvalidDigest, 400),
            (JournalError::InvalidActor, 400),
            (JournalError::InvalidReason, 400),
            (JournalError::UnknownRun, 404),
            (JournalError::UnknownOperation, 404),
            (JournalError::SignatureMismatch, 409),
            (JournalError::AlreadyDecided, 409),
            (JournalError::LeaseLost, 409),
            (JournalError::storage("disk full"), 503),
            (JournalError::Corrupt("a row".to_owned()), 500),
        ];
        for (error, code) in errors {
            assert_eq!(of_command(&error).as_u16(), code, "{error}");
        }
    }

    #[test]
    fn a_refused_command_names_why_by_its_kind() {
        let held = JournalError::LeaseHeld {
            holder: "host-a:1".to_owned(),
            remaining: std::time::Duration::from_secs(3),
        };
        let kinds = [
            (held, "running"),
            (JournalError::Finished(Status::Closed), "finished"),
            (JournalError::InvalidReason, "bad_request"),
            (JournalError::SignatureMismatch, "journal"),
            (JournalError::storage("disk full"), "journal"),
        ];
        for (error, kind) in kinds {
            assert_eq!(kind_of_command(&error), kind, "{error}");
        }
    }
}
