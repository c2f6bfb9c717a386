//! The tools, defined once at start-up and shared by every request: a native ticket reader, and
//! the tools of an MCP `server-filesystem` limited to one folder.
//!
//! | tool | capability | effect | decision |
//! |---|---|---|---|
//! | `read_ticket` (native) | `tickets.read` | read | allowed |
//! | `read_text_file`, `list_directory` (MCP) | `mcp.filesystem.<tool>` | read (the server's hints) | allowed |
//! | `write_file` (MCP) | `mcp.filesystem.write_file` | idempotent (the server's hints) | asks a person (destructive) |
//!
//! # Invariants
//!
//! - A request runs a tool only if its own grants name the tool's capability; every tool is
//!   offered to the model, and the guard refuses the others (`PermissionDenied`).
//! - The MCP server's tools that are not listed above are not offered; one of those listed that
//!   the server does not have, or that could not be checked safely, is a start-up error.

use std::fmt;

use loopbound::tool::EffectKind;
use loopbound::{RegistrationError, ToolBuilder, ToolContext, ToolSet};
use loopbound_mcp::{Connection, Mapping, Skipped};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The MCP server's tools this service offers.
pub const MCP_TOOLS: [&str; 3] = ["read_text_file", "list_directory", "write_file"];

/// The capability of the native ticket reader.
pub const READ_TICKET: &str = "tickets.read";

/// The input of `read_ticket`.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
pub struct TicketId {
    /// The ticket's number, 1 to 9999.
    pub id: u32,
}

/// The text of ticket `id`, or `None` outside 1 to 9999.
#[must_use]
pub fn ticket(id: u32) -> Option<String> {
    const SUBJECTS: [&str; 3] = [
        "the customer cannot log in since the last update",
        "an invoice shows the wrong currency",
        "the export to CSV stops after 1000 rows",
    ];
    (1..=9999).contains(&id).then(|| format!("Ticket {id}: {}.", SUBJECTS[id as usize % SUBJECTS.len()]))
}

/// Why the tools could not be defined.
#[derive(Debug)]
pub enum ToolsError {
    /// A tool could not be registered (a name used twice, say).
    Registration(RegistrationError),
    /// The MCP server does not offer a tool this service needs, or it could not be checked.
    Missing(Vec<String>),
}

impl fmt::Display for ToolsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Registration(error) => write!(f, "a tool could not be registered: {error}"),
            Self::Missing(names) => write!(f, "the MCP server lacks the tools {}", names.join(", ")),
        }
    }
}

impl std::error::Error for ToolsError {}

/// The tools: `read_ticket`, and [`MCP_TOOLS`] from `filesystem`.
///
/// # Errors
///
/// [`ToolsError`] if a tool cannot be registered or the server lacks one of [`MCP_TOOLS`].
pub fn define(filesystem: &Connection) -> Result<ToolSet, ToolsError> {
    let read_ticket = ToolBuilder::new("read_ticket", READ_TICKET)
        .description("Read one support ticket by its number.")
        .effect(EffectKind::Read)
        .build(|input: TicketId, _call: ToolContext| {
            let found = ticket(input.id);
            async move { found.ok_or_else(|| format!("no ticket {}", input.id)) }
        })
        .map_err(ToolsError::Registration)?;
    let mapping = Mapping::new().only(MCP_TOOLS);
    let registered = filesystem.register(&mapping);
    let mut missing: Vec<String> = MCP_TOOLS
        .iter()
        .filter(|name| registered.get(name).is_none())
        .map(|name| (*name).to_owned())
        .collect();
    missing.extend(registered.skipped().iter().map(Skipped::remote).map(str::to_owned));
    if !missing.is_empty() {
        missing.sort();
        missing.dedup();
        return Err(ToolsError::Missing(missing));
    }
    registered.add_to(ToolSet::builder().add(&read_ticket)).build().map_err(ToolsError::Registration)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tickets_exist_from_1_to_9999_only() {
        assert_eq!(ticket(0), None);
        assert_eq!(ticket(10_000), None);
        assert_eq!(
            ticket(42).as_deref(),
            Some("Ticket 42: the customer cannot log in since the last update.")
        );
    }
}
