//! Guarded tools: defined once, bound from the model's JSON, admitted by the request's guard,
//! then run.
//!
//! - `pipeline`: the one path from a model's arguments to a body (bind → the tool's check →
//!   sign → admit → start), which every way of calling a tool takes;
//! - [`definition`](GuardedTool): name, capability, description, typed input, JSON schema and
//!   private body, built once with a [`ToolBuilder`];
//! - [`builder`]: the type parameters of a [`ToolBuilder`] (its check and the source of its
//!   schema), which a host never needs to write;
//! - [`set`](ToolSet): the host's tools, assembled by value and shared by every request;
//! - [`binding`](BindError): JSON arguments to the typed input, before the guard;
//! - [`call`](ToolContext): what a body receives, and admitted calls not yet run ([`Reservation`]);
//! - [`error`](ToolError): why an invocation produced no result;
//! - [`effect`](EffectKind): what a tool does to the world and the host's standing
//!   [`Policy`] for it, read by a journal.
//!
//! # Invariants
//!
//! - A tool is defined one way, [`ToolBuilder::new`] … [`ToolBuilder::build`], and belongs to no
//!   set; a set is assembled one way, [`ToolSet::builder`] … [`ToolSetBuilder::add`] …
//!   [`ToolSetBuilder::build`], which refuses two tools of one name.
//! - The raw body is never exposed. Every path to it (the loop, a call by name, a typed call, a
//!   reservation run later) takes a [`Scope`](crate::Scope) and goes through the same
//!   check-and-reserve, so a direct or concurrent call is bounded exactly like a call from the
//!   loop.
//! - Binding comes first and a binding failure touches nothing here: no counter, no reservation, no
//!   event.
//! - Immediately before a body starts, the scope is checked once more: an admitted call whose
//!   run was cancelled, halted or past its deadline in between never starts its body.

mod binding;
pub mod builder;
mod call;
mod definition;
mod effect;
mod error;
pub(crate) mod pipeline;
mod set;

pub use binding::{BindError, BindErrorKind};
pub use call::{Reservation, ToolContext};
pub use definition::{GuardedTool, ToolBody, ToolBuilder};
pub use effect::{EffectKind, Policy};
pub use error::{BodyError, MAX_MESSAGE_LEN, ToolError};
pub use set::{RegistrationError, ToolSet, ToolSetBuilder};

pub(crate) use pipeline::Refusal;
pub(crate) use set::AdmittedCall;
#[cfg(feature = "journal")]
pub(crate) use set::ErasedTool;
#[cfg(feature = "journal")]
pub(crate) use set::check_name;
