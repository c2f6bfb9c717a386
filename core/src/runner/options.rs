//! The loop's opt-in behaviours: running a reply's tool calls in parallel, and offering the
//! model only the tools a scope grants.
//!
//! # Invariants
//!
//! - A [`Concurrency`] is at least 2: a cap of 1 would be the sequential loop under another
//!   name, with other events, so it is refused rather than reinterpreted.
//! - Neither option changes the guard: the same calls are admitted or refused, with the same
//!   events (see [`Runner::parallel`](crate::Runner::parallel)).

use std::fmt;
use std::num::NonZeroUsize;

/// How many bodies of one reply's batch may run at once: at least 2.
///
/// ```
/// use loopbound::Concurrency;
///
/// assert_eq!(Concurrency::new(4).map(Concurrency::get), Ok(4));
/// assert!(Concurrency::new(1).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Concurrency(NonZeroUsize);

impl Concurrency {
    /// A cap of `cap` bodies at a time.
    ///
    /// # Errors
    ///
    /// [`ConcurrencyError`] if `cap` is below 2.
    pub fn new(cap: usize) -> Result<Self, ConcurrencyError> {
        match NonZeroUsize::new(cap) {
            Some(cap) if cap.get() >= 2 => Ok(Self(cap)),
            _ => Err(ConcurrencyError(cap)),
        }
    }

    /// The cap.
    #[must_use]
    pub fn get(self) -> usize {
        self.0.get()
    }
}

/// A concurrency cap below 2: the cap that was asked for.
///
/// It may come to say more: only [`Concurrency::new`] makes one, and a host reads the cap from
/// its field.
///
/// ```compile_fail
/// let made_by_a_host = loopbound::ConcurrencyError(1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConcurrencyError(pub usize);

impl fmt::Display for ConcurrencyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a parallel batch runs at least 2 bodies at a time, not {}; leave the loop sequential instead",
            self.0
        )
    }
}

impl std::error::Error for ConcurrencyError {}

/// Which tools the model is offered in each request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Offer {
    /// Every tool of the set, granted or not (the default): the guard refuses a call to a tool
    /// whose capability the scope lacks, inside the tool's boundary, and the run halts
    /// `PermissionDenied`.
    #[default]
    All,
    /// Only the tools whose capability the scope grants: the model never sees the others.
    Granted,
}
