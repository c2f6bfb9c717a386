//! Loom models of what the guard reads besides its ledger: the caller's token (modelled, under
//! `--cfg loopbound_loom`, by loopbound's own token), the "no tool can be admitted" hint read
//! before the lock, and the check right before a body starts.

#![cfg(loopbound_loom)]

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::Poll;

use loom::sync::atomic::AtomicBool;
use loom::thread;
use loopbound::{EventKind, HaltReason, Limits, Stop, ToolError};
use loopbound_loom::fixtures::{admit, lines, poll_once, scope_and_tool};

#[test]
fn nothing_is_admitted_after_the_callers_cancel_returned() {
    loom::model(|| {
        // A call races the caller's cancellation and another call holding the lock: a call
        // that waited for the lock is judged on the token as it is once it holds the lock.
        let (scope, tool, caller) = scope_and_tool(true, Limits::default());
        let observer = scope.clone();
        let canceller = thread::spawn(move || {
            caller.cancel();
            // Every admission counted here came before the cancel returned.
            observer.tool_calls()
        });
        let other = tool.clone();
        let contender = thread::spawn(move || admit(&other, 2));
        let admitted = admit(&tool, 1);
        let counted_at_cancel = canceller.join().unwrap();
        let contender = contender.join().unwrap();
        assert_eq!(scope.tool_calls(), counted_at_cancel, "a call was admitted after cancel() returned");
        assert_eq!(u32::from(admitted) + u32::from(contender), counted_at_cancel);
        assert_eq!(scope.check(), Err(Stop::Cancelled));
        assert!(lines(&scope).iter().all(|line| line.starts_with("ToolCall t ")), "{:?}", lines(&scope));
    });
}

/// A stop made visible to the thread that runs a reservation: the stopping thread sets a flag
/// (release) after its stop, and the running thread reads it (acquire) before it runs. When it
/// reads it set, the stop happened before the run: the body must not start.
fn stop_then_signal(stop: impl FnOnce() + Send + 'static) -> (Arc<AtomicBool>, thread::JoinHandle<()>) {
    let visible = Arc::new(AtomicBool::new(false));
    let signal = Arc::clone(&visible);
    let handle = thread::spawn(move || {
        stop();
        signal.store(true, Ordering::Release);
    });
    (visible, handle)
}

#[test]
fn a_reservation_never_starts_its_body_once_the_callers_cancel_is_visible() {
    loom::model(|| {
        let (scope, tool, caller) = scope_and_tool(true, Limits::default());
        let reservation = tool.reservation(1).expect("an open scope admits the call");
        let (visible, canceller) = stop_then_signal(move || caller.cancel());
        let stopped_before_the_run = visible.load(Ordering::Acquire);
        let result = poll_once(reservation.run());
        canceller.join().unwrap();
        if stopped_before_the_run {
            assert!(!scope.state().get(), "the body started after the caller's cancel was visible");
        }
        if !scope.state().get() {
            assert!(matches!(result, Poll::Ready(Err(ToolError::Stopped(Stop::Cancelled)))), "{result:?}");
        }
        assert_eq!(scope.tool_calls(), 1, "the reservation stays counted, run or not");
        assert_eq!(lines(&scope), ["ToolCall t 1"]);
    });
}

#[test]
fn a_reservation_never_starts_its_body_once_a_halt_is_visible() {
    loom::model(|| {
        let (scope, tool, _caller) = scope_and_tool(true, Limits::default().with_model_calls(1));
        assert_eq!(scope.admit_model(), Ok(1));
        let reservation = tool.reservation(1).expect("an open scope admits the call");
        let models = scope.clone();
        let (visible, halter) = stop_then_signal(move || {
            // One model call too many: the scope halts with ModelBudget.
            assert_eq!(models.admit_model(), Err(Stop::Halted(HaltReason::ModelBudget)));
        });
        let stopped_before_the_run = visible.load(Ordering::Acquire);
        let result = poll_once(reservation.run());
        halter.join().unwrap();
        if stopped_before_the_run {
            assert!(!scope.state().get(), "the body started after the halt was visible");
        }
        if !scope.state().get() {
            assert!(
                matches!(result, Poll::Ready(Err(ToolError::Stopped(Stop::Halted(HaltReason::ModelBudget))))),
                "{result:?}"
            );
        }
        assert_eq!(lines(&scope), ["ModelCall model 1", "ToolCall t 1", "ModelBudget model 1"]);
    });
}

#[test]
fn a_reservation_run_on_another_thread_never_starts_after_the_cancel() {
    loom::model(|| {
        // The reservation is made and run on a spawned thread while the main thread cancels.
        let (scope, tool, caller) = scope_and_tool(true, Limits::default());
        let (visible, canceller) = stop_then_signal(move || caller.cancel());
        let runner = thread::spawn(move || {
            let reservation = tool.reservation(1);
            let stopped_before_the_run = visible.load(Ordering::Acquire);
            let ran = reservation.map(|reservation| poll_once(reservation.run()));
            (stopped_before_the_run, ran.is_ok())
        });
        let (stopped_before_the_run, reserved) = runner.join().unwrap();
        canceller.join().unwrap();
        if stopped_before_the_run {
            assert!(!scope.state().get(), "the body started after the caller's cancel was visible");
        }
        assert_eq!(scope.tool_calls(), u32::from(reserved));
    });
}

#[test]
fn a_call_that_skips_its_signature_on_the_hint_is_still_judged_by_the_guard() {
    loom::model(|| {
        // The budget admits one call. A call that reads the "no tool can be admitted" hint as
        // set skips its signature; one that reads it unset computes it. Either way the lock
        // decides: one admission, one ToolBudget halt, and the skipped signature is never used
        // to admit anything.
        let (scope, tool, _caller) = scope_and_tool(true, Limits::default().with_tool_calls(1));
        let first = tool.clone();
        let a = thread::spawn(move || admit(&first, 1));
        let second = tool.clone();
        let b = thread::spawn(move || admit(&second, 2));
        let admitted = [a.join().unwrap(), b.join().unwrap()];
        assert_eq!(admitted.iter().filter(|ok| **ok).count(), 1);
        assert_eq!(lines(&scope), ["ToolCall t 1", "ToolBudget t 1"]);
        // Once the hint is set, a third call skips its signature and is refused by the halt.
        assert!(!admit(&tool, 3));
        assert_eq!(scope.stop_reason(), Some(HaltReason::ToolBudget));
        assert!(!scope.state().get(), "no body ran: reservations were never run");
    });
}

#[test]
fn a_halt_racing_a_call_with_a_new_signature_keeps_the_log_consistent() {
    loom::model(|| {
        // A: the same signature twice (the second halts with RepeatedCall and sets the hint).
        // B: a new signature, admitted only if it came before the halt.
        let (scope, tool, _caller) = scope_and_tool(true, Limits::default());
        let first = tool.clone();
        let a = thread::spawn(move || (admit(&first, 42), admit(&first, 42)));
        let second = tool.clone();
        let b = thread::spawn(move || admit(&second, 7));
        let (a_first, a_second) = a.join().unwrap();
        let b_admitted = b.join().unwrap();
        assert!(a_first && !a_second);
        let events = scope.events();
        let halt = events.iter().position(|e| matches!(e.kind(), EventKind::Halt(_))).expect("a halt");
        assert_eq!(events[halt].kind(), EventKind::Halt(HaltReason::RepeatedCall));
        assert_eq!(halt, events.len() - 1, "nothing after the halt: {:?}", lines(&scope));
        assert_eq!(scope.tool_calls(), 1 + u32::from(b_admitted));
        let counts: Vec<u32> =
            events.iter().filter(|e| e.kind() == EventKind::ToolCall).map(|e| e.count()).collect();
        assert_eq!(counts, (1..=scope.tool_calls()).collect::<Vec<_>>());
    });
}
