//! Waiting for another connection's lock, for no longer than someone waits for the answer.
//!
//! SQLite calls a connection's busy handler while another connection (another process on the
//! same file) holds a lock it needs. Ours sleeps a little and tries again for at most
//! [`BUSY_TIMEOUT`], and stops at once when the caller has given the call up: a run's deadline
//! or its caller's cancellation drops the call's future (see `loopbound::STORE_GRACE`), which
//! raises the call's [`Abandon`] flag, and the blocking thread then stops waiting, rolls back,
//! and frees the connection for the next call instead of holding it for the whole timeout.
//!
//! # Invariants
//!
//! - A call whose future was dropped before its work started does not start it.
//! - A call given up while it waits for a lock stops waiting within one pause (at most
//!   [`MAX_PAUSE`]); its statement fails `SQLITE_BUSY`, so its transaction writes nothing. A
//!   call past the lock (inside its `fsync`, say) finishes: whether its write landed is what
//!   the journal's caller already treats as unknown.
//! - The handler reads its call's flag from the thread the call runs on: the flag is set on
//!   that thread for the call's duration only.

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long one statement waits for another connection's lock, unless its caller gives it up
/// first.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest pause between two tries.
const MAX_PAUSE: Duration = Duration::from_millis(10);

thread_local! {
    /// The flag of the call running on this thread and how long it waits for a lock, if it runs
    /// under one.
    static CALL: RefCell<Option<(Vec<Arc<AtomicBool>>, Duration)>> = const { RefCell::new(None) };
    /// When the statement that waits now started waiting.
    static SINCE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// The flag a call's future raises when it is dropped: the caller no longer waits.
#[derive(Debug, Default)]
pub(crate) struct Abandon(Arc<AtomicBool>);

impl Abandon {
    /// The flag, for the blocking thread.
    pub(crate) fn flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.0)
    }
}

impl Drop for Abandon {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Whether the call behind `flag` was given up.
pub(crate) fn given_up(flag: &AtomicBool) -> bool {
    flag.load(Ordering::SeqCst)
}

/// Runs `work` on this thread with `flag` as its call's flag, each statement waiting for a
/// lock at most `timeout`.
pub(crate) fn under<T>(flag: Arc<AtomicBool>, timeout: Duration, work: impl FnOnce() -> T) -> T {
    under_all(vec![flag], timeout, work)
}

/// Runs `work` on this thread for the calls behind `flags` (a group's), each statement waiting
/// for a lock at most `timeout`, and no longer once every one of them was given up.
pub(crate) fn under_all<T>(flags: Vec<Arc<AtomicBool>>, timeout: Duration, work: impl FnOnce() -> T) -> T {
    CALL.with(|call| *call.borrow_mut() = Some((flags, timeout)));
    let output = work();
    CALL.with(|call| *call.borrow_mut() = None);
    output
}

/// The connection's busy handler: `true` to try again after a pause, `false` to give up.
pub(crate) fn handler(tries: i32) -> bool {
    let (abandoned, timeout) = CALL.with(|call| match call.borrow().as_ref() {
        Some((flags, timeout)) => (!flags.is_empty() && flags.iter().all(|flag| given_up(flag)), *timeout),
        None => (false, BUSY_TIMEOUT),
    });
    if abandoned {
        return false;
    }
    let now = Instant::now();
    let since = match SINCE.get() {
        Some(since) if tries > 0 => since,
        _ => {
            SINCE.set(Some(now));
            now
        }
    };
    if now.duration_since(since) >= timeout {
        return false;
    }
    let exponent = u32::try_from(tries.clamp(0, 4)).unwrap_or(0);
    std::thread::sleep((Duration::from_millis(1) * 2_u32.pow(exponent)).min(MAX_PAUSE));
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_given_up_stops_waiting_and_one_without_a_flag_waits() {
        let abandon = Abandon::default();
        let flag = abandon.flag();
        assert!(under(Arc::clone(&flag), BUSY_TIMEOUT, || handler(0)), "a live call waits");
        assert!(!under(Arc::clone(&flag), Duration::ZERO, || handler(1)), "past its timeout it stops");
        drop(abandon);
        assert!(given_up(&flag));
        assert!(!under(flag, BUSY_TIMEOUT, || handler(1)), "a call given up stops at once");
        assert!(handler(0), "a call without a flag waits");
    }
}
