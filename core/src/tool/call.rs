//! What a running body is handed, and admitted calls that have not run yet.
//!
//! # Invariants
//!
//! - A [`ToolContext`] exists only for an admitted attempt: it is built by the guarded tool right after
//!   the scope was checked once more, and handed to the body's closure.
//! - A [`Reservation`] is counted when it is made and never given back, run or not; running it
//!   later takes the same body-start check as every other path.
//! - After the body returns, the scope is checked again: a run stopped during the body does not
//!   hand the body's result on.

use std::fmt;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::error::ToolError;
use super::pipeline::{Admitted, BodyFuture};
use crate::guard::{Activity, Guard};
use crate::scope::Scope;
use crate::sync::CancellationToken;

/// What a tool's body receives with its input: the request it runs for.
///
/// Through it a body reads the request's own state ([`state`](Self::state)), watches the
/// request's cancellation ([`cancellation`](Self::cancellation)), or calls other tools in the
/// same scope ([`scope`](Self::scope)), which the guard counts like any other call.
pub struct ToolContext<S = ()> {
    scope: Scope<S>,
    count: u32,
    operation: Option<Arc<str>>,
}

impl<S> ToolContext<S> {
    pub(crate) fn new(scope: Scope<S>, count: u32, operation: Option<Arc<str>>) -> Self {
        Self { scope, count, operation }
    }

    /// The host's state for this request.
    #[must_use]
    pub fn state(&self) -> &S {
        self.scope.state()
    }

    /// The request's scope.
    #[must_use]
    pub fn scope(&self) -> &Scope<S> {
        &self.scope
    }

    /// A token that fires when the request stops (deadline, halt or the caller's cancellation).
    /// A body that ignores it is still dropped at its next await point.
    #[must_use]
    pub fn cancellation(&self) -> &CancellationToken {
        self.scope.token()
    }

    /// Starts building a child scope, for an agent run inside this body: see
    /// [`Scope::child`].
    pub fn child(&self) -> crate::ScopeBuilder
    where
        S: Send + Sync + 'static,
    {
        self.scope.child()
    }

    /// The request's tool-call count when this call was admitted (1 for the first).
    #[must_use]
    pub fn tool_count(&self) -> u32 {
        self.count
    }

    /// In a journaled run, the operation id of this call (`<run>/op/<n>`), the same in every
    /// attempt that drives it; `None` without a journal.
    #[must_use]
    pub fn operation(&self) -> Option<&str> {
        self.operation.as_deref()
    }

    /// The key to hand to the external system so that it applies this call once, however often
    /// it is driven: the operation id in a journaled run (an `idempotent` tool is driven again
    /// with the same key after a crash), `None` without a journal.
    #[must_use]
    pub fn idempotency_key(&self) -> Option<&str> {
        self.operation()
    }

    /// In a journaled run, this attempt's fencing token: the operation id and the attempt's
    /// epoch, which grows with every attempt that takes the run. The journal fences its own
    /// writes; an effect's system that records the highest epoch it applied for an operation,
    /// and refuses a lower one, also refuses an attempt that was paused past its lease and
    /// wakes after another took the run over. `None` without a journal.
    #[cfg(feature = "journal")]
    #[must_use]
    pub fn fencing_token(&self) -> Option<crate::journal::FencingToken> {
        let operation = self.operation.as_ref()?;
        Some(crate::journal::FencingToken::new(std::sync::Arc::clone(operation), self.scope.guard().epoch()?))
    }
}

impl<S> fmt::Debug for ToolContext<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolContext")
            .field("tool_count", &self.count)
            .field("operation", &self.operation)
            .finish_non_exhaustive()
    }
}

/// One admitted attempt, counted and not yet run. Dropping it does not give the attempt back.
///
/// It borrows its tool and its scope, so that admitting a call touches no shared reference count.
#[must_use = "the attempt is counted whether or not it runs"]
pub struct Reservation<'a, T, S> {
    admitted: Admitted<'a, T, S>,
    scope: &'a Scope<S>,
}

impl<T, S> fmt::Debug for Reservation<'_, T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reservation").field("tool_count", &self.admitted.count()).finish_non_exhaustive()
    }
}

impl<'a, T, S> Reservation<'a, T, S>
where
    T: DeserializeOwned + Serialize + Send + 'static,
    S: Send + Sync + 'static,
{
    pub(crate) fn new(admitted: Admitted<'a, T, S>, scope: &'a Scope<S>) -> Self {
        Self { admitted, scope }
    }

    /// The scope's tool-call count after this reservation (1 for the first admitted call).
    #[must_use]
    pub fn tool_count(&self) -> u32 {
        self.admitted.count()
    }

    /// Runs the body, bounded by the scope, then checks the scope again. If the scope stopped
    /// since the reservation was made, the body does not start.
    ///
    /// # Errors
    ///
    /// [`ToolError::Stopped`] if the scope stopped before, during or right after the body;
    /// [`ToolError::Failed`] if the body returned an error.
    pub async fn run(self) -> Result<String, ToolError> {
        let name = self.admitted.tool().name();
        let count = self.admitted.count();
        let body = self.admitted.start(self.scope, None)?;
        finish(self.scope.guard(), name, count, body).await
    }
}

/// Runs a started body (admitted as tool call `count`) under the scope's bounds, notes its
/// result for the progress checks, then re-checks the scope.
pub(crate) async fn finish(
    guard: &Guard,
    name: &Arc<str>,
    count: u32,
    body: BodyFuture,
) -> Result<String, ToolError> {
    let output = guard.bounded(Activity::Tool(name), body).await?;
    // A streak this result completes halts the run: the check below reports it.
    let _noted = guard.note_output(name, count, &output);
    guard.check(Activity::Tool(name))?;
    output.map_err(|source| ToolError::Failed { tool: Arc::clone(name), source })
}
