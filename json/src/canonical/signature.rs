//! A call's signature: the tool's name and the canonical JSON of its bound arguments.
//!
//! # Invariants
//!
//! - The text is `tool + ":" + canonical arguments`, and the tool's part is known by its length,
//!   so the arguments are read back exactly, never by searching the text for a separator.
//! - A signature holds argument values: it has no `Display`, and its `Debug` names the tool only.

use std::fmt;

/// The key the repetition limit counts: a tool's name and the canonical JSON of the call's bound
/// arguments, made by [`signature`](super::signature).
///
/// ```
/// #[derive(serde::Serialize)]
/// struct Ticket { input: i64 }
/// let signature = loopbound_json::canonical::signature("read_ticket", &Ticket { input: 42 })?;
/// assert_eq!(signature.tool(), "read_ticket");
/// assert_eq!(signature.arguments(), r#"{"input":42}"#);
/// assert_eq!(signature.as_str(), r#"read_ticket:{"input":42}"#);
/// assert_eq!(format!("{signature:?}"), r#"Signature { tool: "read_ticket", .. }"#);
/// # Ok::<(), loopbound_json::canonical::SignatureError>(())
/// ```
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Signature {
    text: String,
    tool: usize,
}

impl Signature {
    /// A signature from its text, whose first `tool` bytes are the tool's name, followed by `:`.
    pub(crate) fn from_parts(text: String, tool: usize) -> Self {
        debug_assert_eq!(text.as_bytes().get(tool), Some(&b':'), "the tool's name is followed by ':'");
        Self { text, tool }
    }

    /// The tool's name.
    #[must_use]
    pub fn tool(&self) -> &str {
        &self.text[..self.tool]
    }

    /// The canonical JSON of the bound arguments.
    #[must_use]
    pub fn arguments(&self) -> &str {
        &self.text[self.tool + 1..]
    }

    /// The whole signature: `tool:arguments`.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The whole signature's text.
    #[must_use]
    pub fn into_string(self) -> String {
        self.text
    }
}

impl fmt::Debug for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signature").field("tool", &self.tool()).finish_non_exhaustive()
    }
}
