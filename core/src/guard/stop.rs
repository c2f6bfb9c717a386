//! Why an admission was refused or a wait was interrupted.

use std::fmt;

use crate::event::HaltReason;

/// The reason a run must end now: the caller cancelled, or the scope halted.
///
/// Returned by every check of the scope. The caller's cancellation takes priority: when it races
/// a halt or the deadline, checks report [`Stop::Cancelled`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Stop {
    /// The caller's cancellation token fired.
    Cancelled,
    /// The scope halted for this reason (the first halt recorded).
    Halted(HaltReason),
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cancelled => f.write_str("the caller cancelled the run"),
            Self::Halted(reason) => write!(f, "the run was halted: {reason}"),
        }
    }
}

impl std::error::Error for Stop {}
