//! The run's definition as its journal keeps it: the grants, the limits and the host's labels of
//! its first attempt, so that a resume in any process rebuilds the same scope from the run id
//! alone.
//!
//! # Invariants
//!
//! - Written once, when the run is created, and never changed by a backend.
//! - Decoding never panics: a stored definition that does not decode, or whose limits do not
//!   validate, is [`Corrupt`](super::JournalError::Corrupt).

use std::collections::BTreeSet;

use super::label::Labels;
use crate::limits::Limits;

/// What a run was started with: its granted capabilities, its limits, its labels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunDefinition {
    pub(crate) grants: BTreeSet<String>,
    pub(crate) limits: Limits,
    pub(crate) labels: Labels,
}

impl RunDefinition {
    /// The granted capabilities, in code-point order.
    pub fn grants(&self) -> impl Iterator<Item = &str> {
        self.grants.iter().map(String::as_str)
    }

    /// Whether `capability` was granted.
    #[must_use]
    pub fn is_granted(&self, capability: &str) -> bool {
        self.grants.contains(capability)
    }

    /// The run's limits. The deadline is each attempt's own: a resume may set another.
    #[must_use]
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The host's labels.
    #[must_use]
    pub fn labels(&self) -> &Labels {
        &self.labels
    }
}
