//! The journal conformance suite: what every [`Journal`] backend must do, checked the same way
//! on each (the in-memory reference, SQLite, PostgreSQL).
//!
//! A backend's test calls [`check_all`] with its [`Backend`]: fresh, empty storage, and journals
//! opened on it under a holder's name and a lease. Two journals opened on one storage stand for
//! two processes sharing it. Each check panics with a message naming the rule it found broken.
//!
//! - `rows`: batches written whole or not at all, keys written once, rows read back in key
//!   order, every state (each finished status) read back as written, unknown runs;
//! - `leases`: one live attempt per run, refused with `LeaseHeld` and nothing written, one grant
//!   of many acquisitions racing for a new or a released run, taken over once released or
//!   expired, kept by renewals alone and by commits alone, fencing an expired attempt out, host
//!   writes waiting for no live lease;
//! - `listing`: runs listed by state and by label, one page at a time, in id order, and a
//!   finished run by each status of [`Status::ALL`](loopbound::Status::ALL);
//! - `cancels`: cancel requests recorded without a lease, read by every journal, replaced, kept
//!   through the holder's commits that do not honour one, and cleared by the attempt that does;
//! - `definitions`: a run's grants, limits, per-tool limits, price table and labels rebuilt
//!   by another journal from the run id alone, a wider resume refused, an explicit widening;
//! - `runs`: journaled runs of the refund task end to end: approval, an effect's start written
//!   before its body runs, a second live attempt refused while the first is inside its effect, and a reconciliation after a later attempt
//!   died too;
//! - `closing`: a host closes a run for good with a reason: listed finished `Closed`, its
//!   proposal never run, no attempt taking it again, refused while an attempt holds it;
//! - `spend`: a model call's reservation in flight when its attempt died is charged whole on
//!   resume, and replayed replies are not charged again;
//! - `approvals`: a proposal's expiry kept by the backend, a late approval refused and
//!   nothing written, a host asking again (a new expiry, audited) after which the approval is
//!   taken and the effect runs once, and asking again refused for bad input or a held run;
//! - `streams`: recorded streams numbered per run in commit order, read a page at a time from
//!   any position, no line from a refused commit, and a run's stream followed from another
//!   process line for line what its watchers got, across a suspension and a resume.
//!
//! # Invariants
//!
//! - The checks use the trait and the host's commands only; every storage is fresh, so checks
//!   cannot see each other's runs.
//! - Expiry is real time: checks that wait for a lease to expire use [`SHORT`] leases.

mod approvals;
mod cancels;
mod closing;
mod definitions;
mod leases;
mod listing;
mod rows;
mod runs;
mod spend;
mod streams;

use std::future::Future;
use std::time::Duration;

use loopbound::journal::backend::{Batch, Entry, RunRow};
use loopbound::journal::{Journal, RunId, RunState};

/// A lease that no check outlives.
pub const LONG: Duration = Duration::from_secs(60);
/// A lease that a check waits out.
pub const SHORT: Duration = Duration::from_secs(2);
/// How long a check waits for a [`SHORT`] lease to expire.
pub const PAST_SHORT: Duration = Duration::from_millis(2600);

/// A backend under test.
pub trait Backend {
    /// What names one storage (a memory journal, a file, a database's URL).
    type Place;
    /// The journal it opens.
    type Journal: Journal;

    /// New, empty storage.
    fn fresh(&self) -> impl Future<Output = Self::Place>;

    /// A journal on `place` whose leases carry `holder`'s name and last `lease`.
    fn open(&self, place: &Self::Place, holder: &str, lease: Duration)
    -> impl Future<Output = Self::Journal>;
}

/// Runs every check, each on fresh storage from `backend`.
///
/// Each group's future is boxed: together, held in one future on the test thread's stack, the
/// runs they drive (debug builds, the largest backend's futures) outgrow its 2 MiB.
pub async fn check_all<B: Backend>(backend: &B) {
    Box::pin(rows::check_all(backend)).await;
    Box::pin(leases::check_all(backend)).await;
    Box::pin(listing::check_all(backend)).await;
    Box::pin(runs::check_all(backend)).await;
    Box::pin(cancels::check_all(backend)).await;
    Box::pin(closing::check_all(backend)).await;
    Box::pin(spend::check_all(backend)).await;
    Box::pin(definitions::check_all(backend)).await;
    Box::pin(streams::check_all(backend)).await;
    Box::pin(approvals::check_all(backend)).await;
}

/// Two journals on one fresh storage, `a` and `b`, with leases of `lease`.
pub(crate) async fn two<B: Backend>(backend: &B, lease: Duration) -> (B::Journal, B::Journal) {
    pair(backend, lease, lease).await
}

/// Two journals on one fresh storage, `a` with leases of `a_lease`, `b` of `b_lease`.
pub(crate) async fn pair<B: Backend>(
    backend: &B,
    a_lease: Duration,
    b_lease: Duration,
) -> (B::Journal, B::Journal) {
    let place = backend.fresh().await;
    (backend.open(&place, "attempt-a", a_lease).await, backend.open(&place, "attempt-b", b_lease).await)
}

/// One journal on fresh storage, with a long lease.
pub(crate) async fn one<B: Backend>(backend: &B) -> B::Journal {
    let place = backend.fresh().await;
    backend.open(&place, "attempt-a", LONG).await
}

pub(crate) fn run() -> RunId {
    run_named("conformance-1")
}

pub(crate) fn run_named(name: &str) -> RunId {
    RunId::new(name).unwrap_or_else(|error| panic!("a valid run id: {error}"))
}

/// A new run's row as a test writes it: an empty conversation, zero counters, no definition.
#[must_use]
pub fn fresh_row() -> RunRow {
    RunRow {
        epoch: 1,
        attempts: 1,
        conversation: "[]".to_owned(),
        ledger: r#"{"model_calls":0,"tool_calls":0,"middleware":0,"repetitions":[]}"#.to_owned(),
        state: RunState::Open,
        definition: String::new(),
        labels: Vec::new(),
    }
}

pub(crate) fn batch(entries: Vec<Entry>) -> Batch {
    Batch { entries }
}

/// The batch that ends an attempt in `state`.
pub(crate) fn ending(state: RunState) -> Batch {
    batch(vec![Entry::State(state), Entry::Release])
}
