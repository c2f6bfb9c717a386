//! Loom models of the progress checks (SPEC §25), which share the admission's critical section:
//! two threads race calls that close a cycle, or repeats that compete for the run's one nudge.

#![cfg(loopbound_loom)]

use loom::thread;
use loopbound::progress::Progress;
use loopbound::{HaltReason, Limits, Stop, ToolError};
use loopbound_loom::fixtures::{lines, scope_and_tool_under};

/// Which orders the cycle model explored (std atomics: outside what loom models).
static HALTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static ADMITTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

#[test]
fn two_racing_calls_close_a_cycle_exactly_as_one_after_another_would() {
    loom::model(|| {
        // Calls 1, 2, 1 are admitted; then 1 and 2 race. Only 2 first closes the block (1, 2)
        // twice: the run halts, and 1 is refused by the halt. 1 first is no cycle (1, 2, 1, 1),
        // nor is 2 after it (2, 1, 1, 2): both are admitted.
        let limits = Limits::default().with_tool_calls(10).with_repetitions(5);
        let (scope, tool) = scope_and_tool_under(limits, Progress::exact().cycles(2, 2));
        for input in [1, 2, 1] {
            assert!(tool.reserve(input).is_ok());
        }
        let (one, two) = (tool.clone(), tool.clone());
        let a = thread::spawn(move || one.reserve(1));
        let b = thread::spawn(move || two.reserve(2));
        let (a, b) = (a.join().unwrap(), b.join().unwrap());
        let halted = |result: &Result<u32, ToolError>| {
            matches!(result, Err(ToolError::Stopped(Stop::Halted(HaltReason::NoProgress))))
        };
        if halted(&b) {
            assert!(halted(&a), "the halt is sticky: {a:?}");
            assert_eq!(lines(&scope)[3..], ["NoProgress t 3"]);
            HALTED.store(true, std::sync::atomic::Ordering::SeqCst);
        } else {
            assert_eq!((a.ok(), b.ok()), (Some(4), Some(5)), "1 first, then 2");
            assert_eq!(scope.stop_reason(), None);
            ADMITTED.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        assert!(!scope.state().get(), "no body ran");
    });
    let seen = |order: &std::sync::atomic::AtomicBool| order.load(std::sync::atomic::Ordering::SeqCst);
    assert!(seen(&HALTED) && seen(&ADMITTED), "both orders were explored");
}

#[test]
fn two_racing_repeats_share_one_nudge_and_the_other_halts() {
    loom::model(|| {
        let limits = Limits::default().with_tool_calls(10);
        let (scope, tool) = scope_and_tool_under(limits, Progress::exact().nudge(true));
        assert!(tool.reserve(7).is_ok());
        let (one, two) = (tool.clone(), tool.clone());
        let a = thread::spawn(move || one.reserve(7));
        let b = thread::spawn(move || two.reserve(7));
        let mut results = [a.join().unwrap(), b.join().unwrap()];
        results.sort_by_key(|result| matches!(result, Err(ToolError::Stopped(_))));
        assert!(matches!(results[0], Err(ToolError::Nudged(_))), "{:?}", results[0]);
        assert!(matches!(results[1], Err(ToolError::Stopped(Stop::Halted(HaltReason::RepeatedCall)))));
        assert_eq!(lines(&scope), ["ToolCall t 1", "Nudged t 1", "RepeatedCall t 1"]);
        assert_eq!(scope.tool_calls(), 1, "a nudge reserves nothing");
    });
}
