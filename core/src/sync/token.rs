//! A cancellation token modelled by loom, in place of tokio-util's under `--cfg loopbound_loom`.
//!
//! Only what the guard uses: `new`, `Default`, `Clone`, `cancel`, `is_cancelled`,
//! `child_token` and `cancelled`. It follows tokio-util's shape: each token is a node whose
//! state (cancelled or not, its waiters, its children) sits behind the node's own mutex, a
//! parent's `cancel` walks down to its children, and `is_cancelled` locks the node it asks. So
//! the loom models explore that second lock where the guard takes it, inside the ledger's.
//!
//! # Invariants
//!
//! - `cancel` sets the node's flag under its lock, then cancels its children and wakes its
//!   waiters; the flag never goes back.
//! - A child made from a cancelled parent is born cancelled; otherwise the parent knows it, so
//!   a later `cancel` of the parent reaches it.
//! - `is_cancelled` reads one node's flag under that node's lock.
//! - `cancelled` completes once `is_cancelled` holds; a waiter registers on its own node only,
//!   since a parent's cancellation reaches the node itself.

use std::fmt;
use std::future::{Future, poll_fn};
use std::sync::Arc;
use std::task::{Poll, Waker};

use super::Mutex;

/// A loom-modelled stand-in for `tokio_util::sync::CancellationToken`.
#[derive(Clone)]
pub struct CancellationToken {
    node: Arc<Node>,
}

#[derive(Default)]
struct Node {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    cancelled: bool,
    waiters: Vec<Waker>,
    children: Vec<Arc<Node>>,
}

impl Node {
    fn cancel(&self) {
        let (children, waiters) = {
            let mut state = self.state.lock();
            if state.cancelled {
                return;
            }
            state.cancelled = true;
            (std::mem::take(&mut state.children), std::mem::take(&mut state.waiters))
        };
        for child in children {
            child.cancel();
        }
        for waiter in waiters {
            waiter.wake();
        }
    }
}

impl Default for CancellationToken {
    fn default() -> Self {
        Self { node: Arc::new(Node::default()) }
    }
}

impl fmt::Debug for CancellationToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancellationToken").field("is_cancelled", &self.is_cancelled()).finish()
    }
}

impl CancellationToken {
    /// A token that is not cancelled.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// A token cancelled when this one is (or on its own).
    #[must_use]
    pub fn child_token(&self) -> Self {
        let child = Arc::new(Node::default());
        let mut parent = self.node.state.lock();
        if parent.cancelled {
            child.state.lock().cancelled = true;
        } else {
            parent.children.push(Arc::clone(&child));
        }
        drop(parent);
        Self { node: child }
    }

    /// Cancels this token and its children.
    pub fn cancel(&self) {
        self.node.cancel();
    }

    /// Whether this token (or, through it, an ancestor) was cancelled.
    #[must_use]
    pub fn is_cancelled(&self) -> bool {
        self.node.state.lock().cancelled
    }

    /// Completes once the token is cancelled.
    pub fn cancelled(&self) -> impl Future<Output = ()> + '_ {
        poll_fn(move |cx| {
            let mut state = self.node.state.lock();
            if state.cancelled {
                return Poll::Ready(());
            }
            state.waiters.push(cx.waker().clone());
            Poll::Pending
        })
    }
}
