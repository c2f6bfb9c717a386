//! The tools registered in one scope, by name.
//!
//! # Invariants
//!
//! - A name identifies one tool (one implementation, one input type) within a scope: a second
//!   registration of a name is refused, so a signature can never be shared by two tools.
//! - Registration order is kept: it is the order in which tool definitions reach the model.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::tool::ErasedTool;
use crate::transport::ToolDefinition;

/// The scope's tools.
#[derive(Default)]
pub(crate) struct Registry {
    by_name: BTreeMap<Arc<str>, Arc<dyn ErasedTool>>,
    order: Vec<Arc<dyn ErasedTool>>,
}

impl Registry {
    /// Adds `tool`; refuses a name that is already taken.
    pub(crate) fn insert(&mut self, tool: Arc<dyn ErasedTool>) -> Result<(), RegistrationError> {
        let name = Arc::clone(tool.name());
        if self.by_name.contains_key(&name) {
            return Err(RegistrationError::DuplicateName(name.to_string()));
        }
        self.order.push(Arc::clone(&tool));
        self.by_name.insert(name, tool);
        Ok(())
    }

    pub(crate) fn get(&self, name: &str) -> Option<Arc<dyn ErasedTool>> {
        self.by_name.get(name).cloned()
    }

    pub(crate) fn definitions(&self) -> Vec<ToolDefinition> {
        self.order.iter().map(|tool| tool.definition()).collect()
    }
}

/// Why a tool could not be registered in a scope.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegistrationError {
    /// The scope already has a tool with this name.
    DuplicateName(String),
    /// Tool names are 1 to 64 characters of `A-Z a-z 0-9 _ -`, as tool-calling APIs require.
    InvalidName(String),
}

impl fmt::Display for RegistrationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DuplicateName(name) => {
                write!(f, "a tool named {name:?} is already registered in this scope")
            }
            Self::InvalidName(name) => write!(
                f,
                "invalid tool name {name:?}: use 1 to 64 characters among A-Z, a-z, 0-9, '_' and '-'"
            ),
        }
    }
}

impl std::error::Error for RegistrationError {}

/// Whether `name` is a valid tool name.
pub(crate) fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
