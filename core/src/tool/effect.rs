//! What a tool does to the world, and what the host decides before it runs: declared per tool,
//! read by a journal.
//!
//! # Invariants
//!
//! - Both are declarations of the host, fixed when the tool is defined; nothing a model sends
//!   changes them.
//! - A policy other than `Allow` never lets a body run without a journal's recorded decision:
//!   outside a journal such a call halts `Denied` (fail closed).
//! - The defaults are the cautious ones: a tool that declares nothing is an [`EffectKind::Effect`]
//!   (never driven twice by a resume) under [`Policy::Allow`].

use std::fmt;

/// What running a tool's body does outside the host's memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EffectKind {
    /// No external effect: running it again is harmless.
    Read,
    /// An external effect that must happen at most once, ever: a journal never runs it again on
    /// its own.
    #[default]
    Effect,
    /// An external effect keyed by an idempotency key: the body receives the operation id as its
    /// key and may be driven again with the same key.
    Idempotent,
}

impl EffectKind {
    /// `read`, `effect` or `idempotent`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Effect => "effect",
            Self::Idempotent => "idempotent",
        }
    }
}

impl fmt::Display for EffectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The host's standing decision for a tool's proposals, read by a journal. Outside a journal,
/// anything but `Allow` fails closed: the call halts `Denied` without running (no decision could
/// be recorded).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Policy {
    /// Run without asking.
    #[default]
    Allow,
    /// Never run: a proposal is refused.
    Deny,
    /// Ask a person (or another host process) first: the run waits for a decision.
    Ask,
    /// As [`Ask`](Self::Ask), and the proposal expires this long after it was made (by the
    /// proposing host's clock): an approval presented later is refused
    #[cfg_attr(
        feature = "journal",
        doc = " ([`ApprovalExpired`](crate::journal::JournalError::ApprovalExpired)), and an approved"
    )]
    #[cfg_attr(
        not(feature = "journal"),
        doc = " (`journal::JournalError::ApprovalExpired`), and an approved"
    )]
    /// proposal whose effect has not started by then never starts (the resume halts `Denied`).
    AskWithin(std::time::Duration),
}

impl Policy {
    /// `allow`, `deny` or `ask` (with or without an expiry).
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Deny => "deny",
            Self::Ask | Self::AskWithin(_) => "ask",
        }
    }

    /// How long after it is made a proposal expires, if it does.
    #[must_use]
    pub const fn expiry(self) -> Option<std::time::Duration> {
        match self {
            Self::AskWithin(expiry) => Some(expiry),
            _ => None,
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
