//! A cancellation token modelled by loom, in place of tokio-util's under `--cfg loopbound_loom`.
//!
//! Only what the guard uses: `new`, `Default`, `Clone`, `cancel`, `is_cancelled`,
//! `child_token` and `cancelled`. Each token is a node with a loom-modelled flag and a link to
//! its parent, so every read and write of "has the caller cancelled?" is a point where loom
//! explores other threads' steps.
//!
//! # Invariants
//!
//! - `cancel` sets the node's flag (sequentially consistent) and wakes whoever waits on it;
//!   the flag never goes back.
//! - `is_cancelled` is true once this node or any ancestor was cancelled.
//! - `cancelled` completes once `is_cancelled` holds; a waiter registers on every ancestor, so a
//!   parent's `cancel` wakes a child's waiter.

use std::fmt;
use std::future::{Future, poll_fn};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Poll, Waker};

use loom::sync::Mutex;
use loom::sync::atomic::AtomicBool;

/// A loom-modelled stand-in for `tokio_util::sync::CancellationToken`.
#[derive(Clone)]
pub struct CancellationToken {
    node: Arc<Node>,
}

struct Node {
    cancelled: AtomicBool,
    parent: Option<Arc<Node>>,
    waiters: Mutex<Vec<Waker>>,
}

impl Node {
    fn new(parent: Option<Arc<Node>>) -> Self {
        Self { cancelled: AtomicBool::new(false), parent, waiters: Mutex::new(Vec::new()) }
    }
}

impl Default for CancellationToken {
    fn default() -> Self {
        Self { node: Arc::new(Node::new(None)) }
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
        Self { node: Arc::new(Node::new(Some(Arc::clone(&self.node)))) }
    }

    /// Cancels this token and its children.
    pub fn cancel(&self) {
        self.node.cancelled.store(true, Ordering::SeqCst);
        let waiters = std::mem::take(&mut *crate::sync::lock(&self.node.waiters));
        for waiter in waiters {
            waiter.wake();
        }
    }

    /// Whether this token or an ancestor was cancelled.
    #[must_use]
    pub fn is_cancelled(&self) -> bool {
        let mut node = Some(&self.node);
        while let Some(current) = node {
            if current.cancelled.load(Ordering::SeqCst) {
                return true;
            }
            node = current.parent.as_ref();
        }
        false
    }

    /// Completes once the token is cancelled.
    pub fn cancelled(&self) -> impl Future<Output = ()> + '_ {
        poll_fn(move |cx| {
            if self.is_cancelled() {
                return Poll::Ready(());
            }
            let mut node = Some(&self.node);
            while let Some(current) = node {
                crate::sync::lock(&current.waiters).push(cx.waker().clone());
                node = current.parent.as_ref();
            }
            if self.is_cancelled() { Poll::Ready(()) } else { Poll::Pending }
        })
    }
}
