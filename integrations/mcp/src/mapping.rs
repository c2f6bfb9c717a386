//! The host's say over a server's tools: which are offered, under which names and
//! capabilities, with which effect kinds and decisions.
//!
//! # Invariants
//!
//! - Nothing here comes from the server: names, capabilities, effect kinds and policies are the
//!   host's choices, with defaults derived from the host's name for the server, the tool's name
//!   and its annotations ([`annotations`](crate::annotations)).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use loopbound::tool::{EffectKind, Policy};

use crate::schema::Unsupported;

/// Longest tool result, in bytes, handed to the model by default.
pub const DEFAULT_MAX_OUTPUT: usize = 64 * 1024;

type CapabilityFn = Arc<dyn Fn(&str, &str) -> String + Send + Sync>;
pub(crate) type SuccessHook<S> = Arc<dyn Fn(&str, &str, &S) + Send + Sync>;

/// How a server's tools become guarded tools.
///
/// Defaults: every tool listed, named as the server names it, needing the capability
/// `mcp.<server>.<tool>`, with the effect kind and policy of its annotations, schemas with a
/// part not checked here refused (see [`Unsupported`]), results cut to [`DEFAULT_MAX_OUTPUT`]
/// bytes.
///
/// ```
/// use loopbound::tool::Policy;
/// use loopbound_mcp::Mapping;
///
/// let mapping: Mapping = Mapping::new()
///     .only(["read_text_file", "write_file"])
///     .prefix("fs_")
///     .capability("read_text_file", "files.read")
///     .policy("write_file", Policy::Allow);
/// assert_eq!(mapping.capability_of("files", "write_file"), "mcp.files.write_file");
/// assert_eq!(mapping.capability_of("files", "read_text_file"), "files.read");
/// assert_eq!(mapping.name_of("write_file"), "fs_write_file");
/// ```
pub struct Mapping<S = ()> {
    capability: CapabilityFn,
    prefix: String,
    overrides: BTreeMap<String, Override>,
    only: Option<BTreeSet<String>>,
    unsupported: Unsupported,
    max_output: usize,
    on_success: Option<SuccessHook<S>>,
}

#[derive(Clone, Debug, Default)]
struct Override {
    name: Option<String>,
    capability: Option<String>,
    effect: Option<EffectKind>,
    policy: Option<Policy>,
}

impl<S> Default for Mapping<S> {
    fn default() -> Self {
        Self {
            capability: Arc::new(|server, tool| format!("mcp.{server}.{tool}")),
            prefix: String::new(),
            overrides: BTreeMap::new(),
            only: None,
            unsupported: Unsupported::Refuse,
            max_output: DEFAULT_MAX_OUTPUT,
            on_success: None,
        }
    }
}

impl<S> Clone for Mapping<S> {
    fn clone(&self) -> Self {
        Self {
            capability: Arc::clone(&self.capability),
            prefix: self.prefix.clone(),
            overrides: self.overrides.clone(),
            only: self.only.clone(),
            unsupported: self.unsupported,
            max_output: self.max_output,
            on_success: self.on_success.clone(),
        }
    }
}

impl<S> fmt::Debug for Mapping<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mapping")
            .field("prefix", &self.prefix)
            .field("overrides", &self.overrides)
            .field("only", &self.only)
            .field("unsupported", &self.unsupported)
            .field("max_output", &self.max_output)
            .finish_non_exhaustive()
    }
}

impl<S> Mapping<S> {
    /// The defaults.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    fn entry(&mut self, tool: &str) -> &mut Override {
        self.overrides.entry(tool.to_owned()).or_default()
    }

    /// Offers only these tools (by the server's names); the others are not added.
    #[must_use]
    pub fn only<I: IntoIterator<Item = T>, T: Into<String>>(mut self, tools: I) -> Self {
        self.only = Some(tools.into_iter().map(Into::into).collect());
        self
    }

    /// Names every tool `<prefix><tool>` (e.g. to keep two servers' `echo` apart).
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Names the server's tool `tool` as `name` (the prefix does not apply to it).
    #[must_use]
    pub fn rename(mut self, tool: &str, name: impl Into<String>) -> Self {
        self.entry(tool).name = Some(name.into());
        self
    }

    /// Derives every tool's capability from the host's name for the server and the tool's
    /// name (default `mcp.<server>.<tool>`).
    #[must_use]
    pub fn capabilities(mut self, derive: impl Fn(&str, &str) -> String + Send + Sync + 'static) -> Self {
        self.capability = Arc::new(derive);
        self
    }

    /// Sets the capability of the server's tool `tool`.
    #[must_use]
    pub fn capability(mut self, tool: &str, capability: impl Into<String>) -> Self {
        self.entry(tool).capability = Some(capability.into());
        self
    }

    /// Sets the effect kind of `tool`, whatever its annotations say.
    #[must_use]
    pub fn effect(mut self, tool: &str, effect: EffectKind) -> Self {
        self.entry(tool).effect = Some(effect);
        self
    }

    /// Sets the standing decision for `tool`, whatever its annotations say.
    #[must_use]
    pub fn policy(mut self, tool: &str, policy: Policy) -> Self {
        self.entry(tool).policy = Some(policy);
        self
    }

    /// What to do with a part of a schema that is not checked here (default: refuse the tool).
    #[must_use]
    pub fn unsupported(mut self, unsupported: Unsupported) -> Self {
        self.unsupported = unsupported;
        self
    }

    /// Cuts every result handed to the model to `bytes` bytes (plus a short note).
    #[must_use]
    pub fn max_output_bytes(mut self, bytes: usize) -> Self {
        self.max_output = bytes;
        self
    }

    /// Calls `hook` with the tool's name, the text handed to the model and the request's state
    /// after each successful call, before the result is handed on (e.g. to record what the
    /// host's completion condition reads).
    #[must_use]
    pub fn on_success(mut self, hook: impl Fn(&str, &str, &S) + Send + Sync + 'static) -> Self {
        self.on_success = Some(Arc::new(hook));
        self
    }

    /// Whether the server's tool `tool` is offered.
    #[must_use]
    pub fn includes(&self, tool: &str) -> bool {
        self.only.as_ref().is_none_or(|only| only.contains(tool))
    }

    /// The name the model sees for the server's tool `tool`.
    #[must_use]
    pub fn name_of(&self, tool: &str) -> String {
        match self.overrides.get(tool).and_then(|o| o.name.clone()) {
            Some(name) => name,
            None => format!("{}{tool}", self.prefix),
        }
    }

    /// The capability the tool `tool` of the server the host calls `server` needs.
    #[must_use]
    pub fn capability_of(&self, server: &str, tool: &str) -> String {
        match self.overrides.get(tool).and_then(|o| o.capability.clone()) {
            Some(capability) => capability,
            None => (self.capability)(server, tool),
        }
    }

    pub(crate) fn effect_of(&self, tool: &str) -> Option<EffectKind> {
        self.overrides.get(tool).and_then(|o| o.effect)
    }

    pub(crate) fn policy_of(&self, tool: &str) -> Option<Policy> {
        self.overrides.get(tool).and_then(|o| o.policy)
    }

    pub(crate) fn unsupported_keywords(&self) -> Unsupported {
        self.unsupported
    }

    pub(crate) fn max_output(&self) -> usize {
        self.max_output
    }

    pub(crate) fn success_hook(&self) -> Option<SuccessHook<S>> {
        self.on_success.clone()
    }
}
