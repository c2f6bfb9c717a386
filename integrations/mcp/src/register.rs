//! A server's tools added to a host's set as guarded tools.
//!
//! Each tool gets: the name and capability of the [`Mapping`], the server's JSON schema passed
//! to the model, a check of the bound arguments against that schema before the guard (a
//! failure is a binding error for the model, nothing counted), the effect kind and policy of
//! its annotations unless the host overrides them, and a body that sends the arguments that
//! were bound (and signed) to the server.
//!
//! # Invariants
//!
//! - The guard's signature is the canonical JSON of exactly the arguments sent.
//! - The body reads no policy: deciding is the journal's, as for every loopbound tool. Under
//!   [`Runner::run_journaled`][run_journaled] a call the policy does not
//!   allow reaches this body only after an approval; outside a journal core halts such a call
//!   `Denied` before this body starts (see [`annotations`](crate::annotations)).
//! - A tool that cannot be offered safely (unsupported schema, invalid or taken name) is left
//!   out and listed in [`Registered::skipped`], with a `warn` event; the others are added.
//!
//! [run_journaled]: https://docs.rs/loopbound/latest/loopbound/struct.Runner.html#method.run_journaled

use std::sync::Arc;

use loopbound::tool::{EffectKind, Policy};
use loopbound::{GuardedTool, ToolContext, ToolSetBuilder};
use serde_json::Value;

use crate::arguments::Arguments;
use crate::connection::{Connection, RemoteTool};
use crate::error::{CallError, SkipReason, name};
use crate::mapping::{Mapping, SuccessHook};
use crate::output::{cut, render};
use crate::schema::InputSchema;

/// Longest tool description, in bytes, passed on to the model.
pub const MAX_DESCRIPTION: usize = 4096;

/// What [`Connection::register`] added, and what it left out.
#[derive(Debug)]
#[must_use]
pub struct Registered<S = ()> {
    tools: Vec<McpTool<S>>,
    skipped: Vec<Skipped>,
}

impl<S: Send + Sync + 'static> Registered<S> {
    /// The tools added, in the server's order.
    #[must_use]
    pub fn tools(&self) -> &[McpTool<S>] {
        &self.tools
    }

    /// The tools left out, and why.
    #[must_use]
    pub fn skipped(&self) -> &[Skipped] {
        &self.skipped
    }

    /// The tool the model knows as `name`.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&McpTool<S>> {
        self.tools.iter().find(|tool| tool.tool.name() == name)
    }
}

/// A server's tool, added to the host's set.
#[derive(Debug)]
pub struct McpTool<S = ()> {
    remote: String,
    hints: crate::Hints,
    unchecked: Vec<String>,
    tool: GuardedTool<Arguments, S>,
}

impl<S: Send + Sync + 'static> McpTool<S> {
    /// The name the model sees.
    #[must_use]
    pub fn name(&self) -> &str {
        self.tool.name()
    }

    /// The server's name for the tool.
    #[must_use]
    pub fn remote(&self) -> &str {
        &self.remote
    }

    /// The capability it needs.
    #[must_use]
    pub fn capability(&self) -> &str {
        self.tool.capability()
    }

    /// Its effect kind.
    #[must_use]
    pub fn effect(&self) -> EffectKind {
        self.tool.effect()
    }

    /// Its standing decision.
    #[must_use]
    pub fn policy(&self) -> Policy {
        self.tool.policy()
    }

    /// The server's annotations.
    #[must_use]
    pub fn hints(&self) -> crate::Hints {
        self.hints
    }

    /// Schema keywords left to the server (see [`InputSchema::unchecked`]).
    #[must_use]
    pub fn unchecked(&self) -> &[String] {
        &self.unchecked
    }

    /// The guarded tool, for calls outside the loop (they take a scope and go through the
    /// same guard).
    #[must_use]
    pub fn guarded(&self) -> &GuardedTool<Arguments, S> {
        &self.tool
    }
}

/// A tool left out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    remote: String,
    reason: SkipReason,
}

impl Skipped {
    /// The server's name for the tool.
    #[must_use]
    pub fn remote(&self) -> &str {
        &self.remote
    }

    /// Why it was left out.
    #[must_use]
    pub fn reason(&self) -> &SkipReason {
        &self.reason
    }
}

/// What a tool's body needs.
struct ToolBody<S> {
    connection: Connection,
    remote: String,
    name: String,
    max_output: usize,
    on_success: Option<SuccessHook<S>>,
}

impl<S: Send + Sync + 'static> ToolBody<S> {
    async fn run(&self, arguments: Arguments, call: ToolContext<S>) -> Result<String, CallError> {
        let result = self.connection.call(&self.remote, arguments.into_map()).await?;
        let text = render(&result, self.max_output);
        if result.is_error == Some(true) {
            return Err(CallError::Reported { text: crate::error::cut(&text) });
        }
        if let Some(hook) = &self.on_success {
            hook(&self.name, &text, call.state());
        }
        Ok(text)
    }
}

impl Connection {
    /// Adds the server's tools to `set` as guarded tools, as `mapping` says. Tools that cannot
    /// be offered safely are left out and listed in [`Registered::skipped`].
    pub fn register<S: Send + Sync + 'static>(
        &self,
        set: &mut ToolSetBuilder<S>,
        mapping: &Mapping<S>,
    ) -> Registered<S> {
        let mut registered = Registered { tools: Vec::new(), skipped: Vec::new() };
        for remote in self.tools().iter().filter(|tool| mapping.includes(tool.name())) {
            match self.add(set, mapping, remote) {
                Ok(tool) => registered.tools.push(tool),
                Err(reason) => {
                    tracing::warn!(server = %self.server(), tool = %name(remote.name()), %reason, "MCP tool left out");
                    registered.skipped.push(Skipped { remote: remote.name().to_owned(), reason });
                }
            }
        }
        registered
    }

    fn add<S: Send + Sync + 'static>(
        &self,
        set: &mut ToolSetBuilder<S>,
        mapping: &Mapping<S>,
        remote: &RemoteTool,
    ) -> Result<McpTool<S>, SkipReason> {
        let schema = InputSchema::compile(remote.input_schema(), mapping.unsupported_keywords())
            .map_err(SkipReason::Schema)?;
        let unchecked = schema.unchecked().to_vec();
        let schema = Arc::new(schema);
        let hints = remote.hints();
        let effect = mapping.effect_of(remote.name()).unwrap_or_else(|| hints.effect());
        let policy = mapping.policy_of(remote.name()).unwrap_or_else(|| hints.policy());
        let name = mapping.name_of(remote.name());
        let body = Arc::new(ToolBody {
            connection: self.clone(),
            remote: remote.name().to_owned(),
            name: name.clone(),
            max_output: mapping.max_output(),
            on_success: mapping.success_hook(),
        });
        let tool = set
            .tool(name, mapping.capability_of(self.server(), remote.name()))
            .description(cut(remote.description().to_owned(), MAX_DESCRIPTION))
            .effect(effect)
            .policy(policy)
            .parameters(parameters(remote.input_schema()))
            .validate(move |arguments: &Arguments| {
                schema.check(arguments.as_value()).map_err(|v| v.to_string())
            })
            .build(move |arguments: Arguments, call: ToolContext<S>| {
                let body = Arc::clone(&body);
                async move { body.run(arguments, call).await }
            })
            .map_err(SkipReason::Name)?;
        Ok(McpTool { remote: remote.name().to_owned(), hints, unchecked, tool })
    }
}

/// The schema passed to the model: the server's, without `$schema` (tool-calling APIs take the
/// parameters' schema itself, not a document).
fn parameters(schema: &Value) -> Value {
    let mut schema = schema.clone();
    if let Some(object) = schema.as_object_mut() {
        object.remove("$schema");
    }
    schema
}
