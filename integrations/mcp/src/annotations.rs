//! What a server says about a tool (its annotations), and what loopbound makes of it: an effect
//! kind and a standing decision, unless the host overrides them.
//!
//! Annotations are **hints from the server, not guarantees**: a server may call a tool
//! read-only and still have it write. They choose cautious defaults for tools the host has not
//! looked at; the host decides, per tool, with [`Mapping::effect`](crate::Mapping::effect) and
//! [`Mapping::policy`](crate::Mapping::policy). The capability check does not read them at all.
//!
//! Absent hints take the MCP specification's defaults: `readOnlyHint` false, `destructiveHint`
//! true, `idempotentHint` false, `openWorldHint` true; `destructiveHint` and `idempotentHint`
//! mean something only when `readOnlyHint` is false.
//!
//! | `readOnlyHint` | `destructiveHint` | `idempotentHint` | [`EffectKind`] | [`Policy`] |
//! |---|---|---|---|---|
//! | true | (ignored) | (ignored) | `Read` | `Allow` |
//! | false or absent | true or absent | false or absent | `Effect` | `Ask` |
//! | false or absent | true or absent | true | `Idempotent` | `Ask` |
//! | false or absent | false | false or absent | `Effect` | `Allow` |
//! | false or absent | false | true | `Idempotent` | `Allow` |
//!
//! `openWorldHint` changes neither: whether a tool reaches outside systems is what the host's
//! capability grants are for.
//!
//! # Who reads the effect kind and the policy
//!
//! A journal does, exactly as for a tool defined in the host; the adapter adds no
//! rule of its own. Under [`Runner::run_journaled`][run_journaled] a call to
//! an `Ask` tool is proposed and the run stops `AwaitingApproval` naming the operation, before
//! anything is sent to the server; after
//! [`journal::approve`][approve] (bound to the proposal's digest) the same
//! call resumes the run and sends it once; after [`journal::deny`][deny] the
//! run halts `Denied` and nothing is sent. A `Deny` tool halts `Denied` when proposed.
//!
//! Outside a journal (a plain [`Runner::run`](loopbound::Runner::run), or a direct
//! [`ToolSet::invoke`](loopbound::ToolSet::invoke)) no decision can be recorded, so, for MCP
//! tools as for any other, a policy other than `Allow` fails closed: the admitted call halts the
//! run `Denied` and nothing is sent. A host that runs destructive tools without a journal says
//! so per tool (`Policy::Allow` in its [`Mapping`](crate::Mapping)).
//!
//! # Idempotent tools
//!
//! MCP has no standard field for an idempotency key, so the operation id a journal hands an
//! `Idempotent` body ([`ToolContext::idempotency_key`](loopbound::ToolContext::idempotency_key)) is not sent
//! to the server. When a crash leaves such a call between its `started` record and its result,
//! the resume drives it again **with the same arguments**, and nothing else: whether that is
//! harmless is what the server's `idempotentHint` claims, not something loopbound can check. A
//! host that does not trust the claim maps the tool to [`EffectKind::Effect`] (at most once; the
//! resume then stops `Ambiguous`) with [`Mapping::effect`](crate::Mapping::effect).
//!
//! # Invariants
//!
//! - A tool without annotations is an `Effect` under `Ask`: in a journaled run, nothing a
//!   server leaves unsaid makes a tool run without a decision.
//!
//! [run_journaled]: https://docs.rs/loopbound/latest/loopbound/struct.Runner.html#method.run_journaled
//! [approve]: https://docs.rs/loopbound/latest/loopbound/journal/fn.approve.html
//! [deny]: https://docs.rs/loopbound/latest/loopbound/journal/fn.deny.html

use loopbound::tool::{EffectKind, Policy};
use rmcp::model::ToolAnnotations;

/// A tool's annotations as the server sent them (`None` when absent).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[allow(clippy::struct_field_names, reason = "the fields are named after the MCP annotations")]
pub struct Hints {
    /// `readOnlyHint`: the tool does not modify its environment.
    pub read_only: Option<bool>,
    /// `destructiveHint`: the tool may perform destructive updates.
    pub destructive: Option<bool>,
    /// `idempotentHint`: calling it again with the same arguments has no further effect.
    pub idempotent: Option<bool>,
    /// `openWorldHint`: the tool interacts with an open world of external entities.
    pub open_world: Option<bool>,
}

impl Hints {
    pub(crate) fn of(annotations: Option<&ToolAnnotations>) -> Self {
        annotations.map_or_else(Self::default, |a| Self {
            read_only: a.read_only_hint,
            destructive: a.destructive_hint,
            idempotent: a.idempotent_hint,
            open_world: a.open_world_hint,
        })
    }

    /// The effect kind these hints map to (see the module's table).
    ///
    /// ```
    /// use loopbound::tool::{EffectKind, Policy};
    /// use loopbound_mcp::Hints;
    ///
    /// let write_file = Hints { read_only: Some(false), destructive: Some(true), idempotent: Some(true), open_world: Some(false) };
    /// assert_eq!((write_file.effect(), write_file.policy()), (EffectKind::Idempotent, Policy::Ask));
    /// let unannotated = Hints::default();
    /// assert_eq!((unannotated.effect(), unannotated.policy()), (EffectKind::Effect, Policy::Ask));
    /// let echo = Hints { read_only: Some(true), ..Hints::default() };
    /// assert_eq!((echo.effect(), echo.policy()), (EffectKind::Read, Policy::Allow));
    /// ```
    #[must_use]
    pub fn effect(&self) -> EffectKind {
        if self.read_only == Some(true) {
            EffectKind::Read
        } else if self.idempotent == Some(true) {
            EffectKind::Idempotent
        } else {
            EffectKind::Effect
        }
    }

    /// The standing decision these hints map to: `Ask` for a tool that may be destructive,
    /// `Allow` otherwise (see the module's table).
    #[must_use]
    pub fn policy(&self) -> Policy {
        if self.read_only != Some(true) && self.destructive != Some(false) {
            Policy::Ask
        } else {
            Policy::Allow
        }
    }
}
