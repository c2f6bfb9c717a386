//! Every error of the crate chains like the ecosystem's: a level either writes its cause's words
//! or returns the cause as `source()`, never both, so a chain printed whole (`{:#}` in anyhow)
//! says each thing once, and the root cause is reachable.

use std::io;

use loopbound::CallError;
#[cfg(feature = "journal")]
use loopbound::journal::{JournalError, StorageError};
use loopbound::transport::{TransportError, TransportErrorKind};
use loopbound::{RunError, Stop, ToolError};
use loopbound_test::chain::assert_chain;

fn refused() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionRefused, "connection refused (os error 111)")
}

#[test]
fn a_provider_error_reaches_the_clients_error() {
    let error = RunError::Provider(TransportError::malformed("the reply is not JSON").with_source(refused()));
    let levels = assert_chain(&error, "connection refused (os error 111)");
    assert_eq!(
        levels,
        ["malformed provider response: the reply is not JSON", "connection refused (os error 111)"]
    );
    let call = CallError::Transport(TransportError::unavailable("cannot connect").with_source(refused()));
    assert_eq!(assert_chain(&call, "connection refused (os error 111)").len(), 2);
}

#[cfg(feature = "journal")]
#[test]
fn a_storage_error_reaches_the_backends_error() {
    let storage = JournalError::Storage(StorageError::new("the commit failed").with_source(refused()));
    let error = RunError::Journal(storage);
    let levels = assert_chain(&error, "connection refused (os error 111)");
    assert_eq!(levels, ["journal storage failed: the commit failed", "connection refused (os error 111)"]);
}

#[test]
fn a_failed_body_names_its_tool_and_leaves_the_bodys_words_to_its_source() {
    let error = ToolError::Failed { tool: "refund".into(), source: "the payments API said no".into() };
    let levels = assert_chain(&error, "the payments API said no");
    assert_eq!(levels, ["tool refund failed", "the payments API said no"]);
    // The model still gets both, in one message.
    assert_eq!(error.model_message().as_deref(), Some("Error: tool refund failed: the payments API said no"));
}

#[test]
fn errors_without_a_cause_are_one_level() {
    assert_chain(&RunError::Cancelled, "the run was cancelled by its caller");
    assert_chain(&ToolError::Stopped(Stop::Cancelled), "the caller cancelled the run");
    let bound = TransportError::too_many_calls(16);
    assert_eq!(bound.kind(), TransportErrorKind::TooManyCalls { limit: 16 });
    assert_chain(&bound, "the reply asked for more than 16 tool calls and was refused whole");
}
