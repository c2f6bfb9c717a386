//! Loom models of a tree of scopes: a child's admission is charged to its parent in the same
//! critical section, so siblings racing for the parent's last unit never both get it.

#![cfg(loopbound_loom)]

use loom::thread;
use loopbound::{HaltReason, Limits, Scope, Stop};

#[test]
fn two_children_racing_for_the_parents_last_model_call_admit_exactly_one() {
    loom::model(|| {
        let parent = Scope::builder().limits(Limits::default().with_model_calls(1)).build().unwrap();
        let child = || parent.child().limits(Limits::default().with_model_calls(5)).build().unwrap();
        let (first, second) = (child(), child());
        let racer = thread::spawn(move || first.admit_model());
        let other = second.admit_model();
        let first = racer.join().unwrap();
        let admitted = [first, other].iter().filter(|result| result.is_ok()).count();
        assert_eq!(admitted, 1, "{first:?} {other:?}");
        // The loser's admission would exceed the parent's budget: the parent halts.
        assert_eq!(parent.stop_reason(), Some(HaltReason::ModelBudget));
        assert!(matches!(
            [first, other].into_iter().find(Result::is_err),
            Some(Err(Stop::Halted(HaltReason::ModelBudget) | Stop::Cancelled))
        ));
    });
}
