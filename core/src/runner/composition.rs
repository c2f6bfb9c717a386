//! How the loop is composed: its own iteration cap and whether it emits tracing spans.
//!
//! The two compositions are presets of the one loop, kept in the library on purpose: the claim
//! they let a host check (the same guard gives the same events and the same outcome whatever
//! loop drives it, so a harness does not replace business control) is about this crate's
//! runtime, and the tests of every integration run both. A host that wants another cap sets it
//! with [`Runner::max_iterations`](crate::Runner::max_iterations).
//!
//! # Invariants
//!
//! - The `harness` cap is the model-call limit + 1, so the scope's `ModelBudget` always fires
//!   before the loop's own cap.
//! - A composition changes neither the guard nor the events: both run the same loop over the
//!   same tools and scope.

use std::fmt;

use crate::limits::Limits;

/// How the loop is composed. Both run the same loop over the same guarded tools and scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Composition {
    /// Iteration cap = model-call limit + 1, tracing spans on.
    Harness,
    /// The plain loop with the common cap of 40 iterations and no spans.
    Simple,
}

impl Composition {
    /// Iteration cap of the [`Composition::Simple`] loop, the common default of agent loops.
    pub const SIMPLE_MAX_ITERATIONS: u32 = 40;

    /// `harness` or `simple`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Harness => "harness",
            Self::Simple => "simple",
        }
    }

    /// The loop's own iteration cap under `limits`.
    #[must_use]
    pub const fn max_iterations(self, limits: &Limits) -> u32 {
        match self {
            Self::Harness => limits.model_calls().saturating_add(1),
            Self::Simple => Self::SIMPLE_MAX_ITERATIONS,
        }
    }

    /// Whether the loop emits tracing spans (run, model call, tool call; never arguments).
    #[must_use]
    pub const fn telemetry(self) -> bool {
        matches!(self, Self::Harness)
    }
}

impl fmt::Display for Composition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
