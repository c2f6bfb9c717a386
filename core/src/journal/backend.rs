//! What a journal backend implements or reads, apart from what a host calls.
//!
//! A backend (SQLite in `loopbound-sqlite`, PostgreSQL in `loopbound-postgres`,
//! [`MemoryJournal`](super::MemoryJournal), or a store of your own) implements
//! [`Journal`](super::Journal) over the types of this module: the rows it stores
//! ([`RunRow`], [`StoredRun`], [`ReplyRow`], …), the [`Batch`]es of [`Entry`]s it writes in one
//! transaction under a [`Fence`], the lease helpers ([`check_lease`], [`process_holder`],
//! [`is_dead_holder`]) and the shared watchers it may keep ([`CancelWatch`], [`LiveStreams`]).
//! `loopbound-test`'s conformance suite checks a backend against the contract stated on
//! [`Journal`](super::Journal) and on these types.
//!
//! # Invariants
//!
//! - A host never needs `backend`: running, resuming, approving, listing, inspecting,
//!   cancelling and following runs take the types of [`journal`](super) only. A host reads a
//!   run's [`Lease`](super::Lease) there too, and asks it [`is_held`](super::Lease::is_held).
//! - A backend never interprets a stored text: encoding and decoding are the core's, so a value
//!   that does not decode is the same typed [`Corrupt`](super::JournalError::Corrupt) error on
//!   every backend.
//! - A [`Batch`] is written in one transaction, in order, or not at all.

pub use super::boxed::JournalFuture;
pub use super::cancel_watch::{CancelWatch, WeakCancelWatch};
pub use super::holder::{is_dead_holder, process_holder};
pub use super::row::{
    Batch, CallRow, DecisionRow, Entry, EventRow, ExpiryRow, Fence, LabelRow, ListedRow, ProposalRow,
    ReconciliationRow, ReplyRow, RunRow, StartedRow, StoredRun, UpdateRow,
};
pub use super::store::check_lease;
pub use super::tail::{LIVE_AHEAD, LiveStreams};
