//! A scope and a tool small enough for loom, built inside each model.

use loopbound::tool::ToolBuilder;
use loopbound::{GuardedTool, Limits, Scope, ToolError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

/// The tool input of every model.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema)]
pub struct Id {
    /// Which call this is.
    pub input: i64,
}

/// The tool `t`, needing capability `cap`, bound to the scope a thread calls it in.
#[derive(Clone, Debug)]
pub struct Caller {
    tool: GuardedTool<Id>,
    scope: Scope,
}

impl Caller {
    /// Checks and reserves one call of `t` with `input` (the reservation is dropped unrun).
    ///
    /// # Errors
    ///
    /// The guard's refusal.
    pub fn reserve(&self, input: i64) -> Result<u32, ToolError> {
        self.tool.reserve(&self.scope, Id { input }).map(|reservation| reservation.tool_count())
    }
}

/// A scope with `grant` (or nothing), `limits` and a caller token, and one tool `t` needing
/// capability `cap`.
#[must_use]
pub fn scope_and_tool(grant: bool, limits: Limits) -> (Scope, Caller, CancellationToken) {
    let caller = CancellationToken::new();
    let mut builder = Scope::builder().limits(limits).caller(caller.clone());
    if grant {
        builder = builder.grant("cap");
    }
    let scope = builder.build().expect("valid limits");
    let tool = ToolBuilder::new("t", "cap")
        .build(|_: Id, _| async { Ok::<_, String>(String::new()) })
        .expect("a valid name");
    (scope.clone(), Caller { tool, scope }, caller)
}

/// Whether `input` was admitted by the guard (the reservation is dropped unrun).
#[must_use]
pub fn admit(tool: &Caller, input: i64) -> bool {
    tool.reserve(input).is_ok()
}

/// The events as `Kind name count` lines.
#[must_use]
pub fn lines(scope: &Scope) -> Vec<String> {
    scope.events().iter().map(ToString::to_string).collect()
}
