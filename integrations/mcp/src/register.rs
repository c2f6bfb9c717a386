//! A server's tools defined as guarded tools, for the host to add to its set.
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
//! - A tool that cannot be offered safely (unsupported schema, invalid name, or a name the server
//!   gave an earlier tool) is left out and listed in [`Registered::skipped`], with a `warn` event;
//!   the others are defined. A name taken by another tool of the host's set (its own, another
//!   server's) is refused when the set is built
//!   ([`ToolSetBuilder::build`](loopbound::ToolSetBuilder::build)), never silently dropped.
//!
//! [run_journaled]: https://docs.rs/loopbound/latest/loopbound/struct.Runner.html#method.run_journaled

use std::sync::Arc;

use loopbound::tool::{EffectKind, Policy};
use loopbound::{GuardedTool, RegistrationError, ToolBuilder, ToolContext, ToolSetBuilder};
use serde_json::Value;

use crate::arguments::Arguments;
use crate::connection::{Connection, RemoteTool};
use crate::error::{CallError, SkipReason, name};
use crate::mapping::{Mapping, SuccessHook};
use crate::output::{cut, render};
use crate::schema::InputSchema;

/// Longest tool description, in bytes, passed on to the model.
pub const MAX_DESCRIPTION: usize = 4096;

/// What [`Connection::register`] defined, and what it left out.
#[derive(Debug)]
#[must_use]
pub struct Registered<S = ()> {
    tools: Vec<McpTool<S>>,
    skipped: Vec<Skipped>,
}

impl<S: Send + Sync + 'static> Registered<S> {
    /// The tools defined, in the server's order.
    #[must_use]
    pub fn tools(&self) -> &[McpTool<S>] {
        &self.tools
    }

    /// Adds every tool defined, in the server's order, to `set`.
    ///
    /// ```no_run
    /// # use loopbound::ToolSet;
    /// # use loopbound_mcp::{Connection, Mapping};
    /// # fn host(connection: &Connection) -> Result<ToolSet, loopbound::RegistrationError> {
    /// let registered = connection.register(&Mapping::new().prefix("files_"));
    /// let tools = registered.add_to(ToolSet::builder()).build()?;
    /// # Ok(tools)
    /// # }
    /// ```
    pub fn add_to(&self, set: ToolSetBuilder<S>) -> ToolSetBuilder<S> {
        self.tools.iter().fold(set, |set, tool| set.add(&tool.tool))
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

/// A server's tool, defined as a guarded tool.
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
    /// Defines the server's tools as guarded tools, as `mapping` says; the host adds them to
    /// its set with [`Registered::add_to`]. Tools that cannot be offered safely are left out and
    /// listed in [`Registered::skipped`].
    pub fn register<S: Send + Sync + 'static>(&self, mapping: &Mapping<S>) -> Registered<S> {
        let mut registered = Registered { tools: Vec::new(), skipped: Vec::new() };
        for remote in self.tools().iter().filter(|tool| mapping.includes(tool.name())) {
            let given = mapping.name_of(remote.name());
            let defined = if registered.get(&given).is_some() {
                Err(SkipReason::Name(RegistrationError::DuplicateName(given)))
            } else {
                self.define(mapping, remote)
            };
            match defined {
                Ok(tool) => registered.tools.push(tool),
                Err(reason) => {
                    tracing::warn!(server = %self.server(), tool = %name(remote.name()), %reason, "MCP tool left out");
                    registered.skipped.push(Skipped { remote: remote.name().to_owned(), reason });
                }
            }
        }
        registered
    }

    fn define<S: Send + Sync + 'static>(
        &self,
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
        let tool = ToolBuilder::new(name, mapping.capability_of(self.server(), remote.name()))
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
