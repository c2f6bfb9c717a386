//! A scope and a tool small enough for loom, built inside each model.

use loopbound::{GuardedTool, Limits, Scope};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

/// The tool input of every model.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema)]
pub struct Id {
    /// Which call this is.
    pub input: i64,
}

/// A scope with `grant` (or nothing), `limits` and a caller token, and one tool `t` needing
/// capability `cap`.
#[must_use]
pub fn scope_and_tool(grant: bool, limits: Limits) -> (Scope, GuardedTool<Id>, CancellationToken) {
    let caller = CancellationToken::new();
    let mut builder = Scope::builder().limits(limits).caller(caller.clone());
    if grant {
        builder = builder.grant("cap");
    }
    let scope = builder.build().expect("valid limits");
    let tool = scope
        .tool("t", "cap")
        .build(|_: Id, _| async { Ok::<_, String>(String::new()) })
        .expect("one registration");
    (scope, tool, caller)
}

/// Whether `input` was admitted by the guard (the reservation is dropped unrun).
#[must_use]
pub fn admit(tool: &GuardedTool<Id>, input: i64) -> bool {
    tool.reserve(Id { input }).is_ok()
}

/// The events as `Kind name count` lines.
#[must_use]
pub fn lines(scope: &Scope) -> Vec<String> {
    scope.events().iter().map(ToString::to_string).collect()
}
