//! Loom models: two spawned threads and the main thread, every interleaving explored.

#![cfg(loopbound_loom)]

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, Wake, Waker};

use loom::sync::atomic::AtomicU32;
use loom::thread;
use loopbound::{EventKind, HaltReason, Limits, Scope, Stop, ToolError};
use loopbound_loom::fixtures::{Started, admit, lines, scope_and_tool, watched_scope_and_tool};

#[test]
fn the_tool_budget_is_never_oversubscribed() {
    loom::model(|| {
        let (scope, tool, _caller) = scope_and_tool(true, Limits::default().with_tool_calls(1));
        let handles: Vec<_> = (0..2)
            .map(|input| {
                let tool = tool.clone();
                thread::spawn(move || admit(&tool, input))
            })
            .collect();
        let admitted = handles.into_iter().map(|h| h.join().unwrap()).filter(|ok| *ok).count();
        assert_eq!(admitted, 1);
        assert_eq!(scope.tool_calls(), 1);
        assert_eq!(scope.stop_reason(), Some(HaltReason::ToolBudget));
        assert_eq!(lines(&scope), ["ToolCall t 1", "ToolBudget t 1"]);
    });
}

#[test]
fn the_model_budget_is_never_oversubscribed() {
    loom::model(|| {
        let (scope, _tool, _caller) = scope_and_tool(true, Limits::default().with_model_calls(1));
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let scope = scope.clone();
                thread::spawn(move || scope.admit_model())
            })
            .collect();
        let mut results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        results.sort_by_key(Result::is_err);
        assert_eq!(results, [Ok(1), Err(Stop::Halted(HaltReason::ModelBudget))]);
        assert_eq!(lines(&scope), ["ModelCall model 1", "ModelBudget model 1"]);
    });
}

#[test]
fn one_signature_is_admitted_at_most_repetitions_times() {
    loom::model(|| {
        let (scope, tool, _caller) = scope_and_tool(true, Limits::default());
        let other = tool.clone();
        let first = thread::spawn(move || admit(&other, 42));
        let second = admit(&tool, 42);
        let first = first.join().unwrap();
        assert!(first ^ second, "exactly one of two identical calls is admitted");
        assert_eq!(scope.tool_calls(), 1);
        assert_eq!(lines(&scope), ["ToolCall t 1", "RepeatedCall t 1"]);
    });
}

#[test]
fn a_halt_is_sticky_and_the_first_reason_wins() {
    loom::model(|| {
        // Thread A halts with ModelBudget on its second model call; thread B's tool call is
        // admitted or refused depending on whether A's halt came first.
        let (scope, tool, _caller) = scope_and_tool(true, Limits::default().with_model_calls(1));
        let models = scope.clone();
        let a = thread::spawn(move || (models.admit_model(), models.admit_model()));
        let tools = tool.clone();
        let b = thread::spawn(move || admit(&tools, 1));
        let (first, second) = a.join().unwrap();
        let tool_admitted = b.join().unwrap();
        assert_eq!(first, Ok(1));
        assert_eq!(second, Err(Stop::Halted(HaltReason::ModelBudget)));
        let events = scope.events();
        let halts: Vec<_> = events.iter().filter(|e| matches!(e.kind(), EventKind::Halt(_))).collect();
        assert_eq!(halts.len(), 1, "one halt event: {:?}", lines(&scope));
        assert_eq!(halts[0].kind(), EventKind::Halt(HaltReason::ModelBudget));
        assert_eq!(
            events.last().map(|e| e.kind()),
            Some(EventKind::Halt(HaltReason::ModelBudget)),
            "nothing is admitted after the halt"
        );
        assert_eq!(scope.tool_calls(), u32::from(tool_admitted));
        // After the halt, nothing more is admitted, by anyone.
        assert!(!admit(&tool, 2));
        assert_eq!(scope.admit_model(), Err(Stop::Halted(HaltReason::ModelBudget)));
    });
}

#[test]
fn two_halts_racing_record_exactly_the_first() {
    loom::model(|| {
        // A: permission refused (the tool needs "cap", not granted). B: the model budget.
        let (scope, tool, _caller) = scope_and_tool(false, Limits::default().with_model_calls(1));
        let a = thread::spawn(move || match tool.reserve(1) {
            Err(ToolError::Stopped(stop)) => stop,
            other => panic!("a call without the capability is refused, got {other:?}"),
        });
        let models = scope.clone();
        let b = thread::spawn(move || (models.admit_model(), models.admit_model()));
        let a = a.join().unwrap();
        let (b_first, b_second) = b.join().unwrap();
        let reason = scope.stop_reason().expect("a halt was recorded");
        // Every refusal reports the one stop reason in force: the first halt.
        assert_eq!(a, Stop::Halted(reason));
        assert_eq!(b_second, Err(Stop::Halted(reason)));
        assert!(b_first == Ok(1) || b_first == Err(Stop::Halted(HaltReason::PermissionDenied)));
        let halts: Vec<_> =
            scope.events().into_iter().filter(|e| matches!(e.kind(), EventKind::Halt(_))).collect();
        assert_eq!(halts.len(), 1);
        assert_eq!(halts[0].kind(), EventKind::Halt(reason), "the stop reason is the recorded halt");
    });
}

#[test]
fn the_caller_wins_a_race_with_a_halt() {
    loom::model(|| {
        let (scope, tool, caller) = scope_and_tool(false, Limits::default());
        let cancel = thread::spawn(move || caller.cancel());
        let refused = thread::spawn(move || tool.reserve(1).is_err());
        cancel.join().unwrap();
        assert!(refused.join().unwrap(), "a call without the capability is never admitted");
        // Whatever the order, once the caller has cancelled, every check reports the caller.
        assert_eq!(scope.check(), Err(Stop::Cancelled));
        assert_eq!(scope.admit_model(), Err(Stop::Cancelled));
        // The halt is recorded only if it came before the cancellation, and then exactly once.
        let events = lines(&scope);
        assert!(events.is_empty() || events == ["PermissionDenied t 0"], "{events:?}");
    });
}

#[test]
fn model_and_tool_reservations_keep_counters_and_events_consistent() {
    loom::model(|| {
        let (scope, tool, _caller) = scope_and_tool(true, Limits::default());
        let models = scope.clone();
        let a = thread::spawn(move || [models.admit_model(), models.admit_model()]);
        let b = thread::spawn(move || [admit(&tool, 1), admit(&tool, 2)]);
        assert_eq!(a.join().unwrap(), [Ok(1), Ok(2)]);
        assert_eq!(b.join().unwrap(), [true, true]);
        let events = scope.events();
        let counts = |kind: EventKind| -> Vec<u32> {
            events.iter().filter(|e| e.kind() == kind).map(|e| e.count()).collect()
        };
        assert_eq!(counts(EventKind::ModelCall), [1, 2]);
        assert_eq!(counts(EventKind::ToolCall), [1, 2]);
        assert_eq!(scope.model_calls(), 2);
        assert_eq!(scope.tool_calls(), 2);
        assert_eq!(scope.stop_reason(), None);
    });
}

#[test]
fn a_watcher_sees_the_events_in_the_order_the_scope_recorded_them() {
    loom::model(|| {
        let (scope, tool, mut updates) = watched_scope_and_tool(Limits::default().with_tool_calls(1));
        let models = scope.clone();
        let a = thread::spawn(move || models.admit_model().is_ok());
        let tools = tool.clone();
        let b = thread::spawn(move || admit(&tools, 1));
        let c = admit(&tool, 2);
        let model_admitted = a.join().unwrap();
        assert!(b.join().unwrap() ^ c, "one tool call within the budget of one");
        let streamed: Vec<String> = std::iter::from_fn(|| updates.try_next())
            .filter_map(|update| match update {
                loopbound::watch::Update::Event(event) => Some(event.to_string()),
                _ => None,
            })
            .collect();
        assert_eq!(streamed, lines(&scope), "the stream's order is the log's");
        // A tool call and the budget's halt, and the model call unless the halt came first.
        assert_eq!(streamed.len(), 2 + usize::from(model_admitted));
    });
}

/// A watcher's waker that reads the scope's tool-call count when woken: run inside the ledger's
/// lock, that read would take the lock its own thread holds, a deadlock that loom reports.
struct Reader {
    scope: Scope<Started>,
    read: AtomicU32,
}

impl Wake for Reader {
    fn wake(self: Arc<Self>) {
        self.read.store(self.scope.tool_calls(), Ordering::SeqCst);
    }
}

#[test]
fn a_watchers_waker_runs_once_the_ledgers_lock_is_released() {
    loom::model(|| {
        let (scope, tool, mut updates) = watched_scope_and_tool(Limits::default());
        let reader = Arc::new(Reader { scope, read: AtomicU32::new(u32::MAX) });
        let admitting = thread::spawn(move || admit(&tool, 1));
        // The watcher looks while the call is admitted: before its event is queued (it waits,
        // and is woken) or after (it reads the event at once).
        let waker = Waker::from(Arc::clone(&reader));
        let polled = pin!(updates.next()).poll(&mut Context::from_waker(&waker));
        assert!(admitting.join().unwrap());
        match polled {
            Poll::Pending => {
                assert_eq!(reader.read.load(Ordering::SeqCst), 1, "woken after the admission, the lock free");
                let event = updates.try_next();
                assert!(
                    matches!(&event, Some(loopbound::watch::Update::Event(e)) if e.to_string() == "ToolCall t 1")
                );
            }
            Poll::Ready(update) => {
                assert!(
                    matches!(&update, Some(loopbound::watch::Update::Event(e)) if e.to_string() == "ToolCall t 1")
                );
                assert_eq!(reader.read.load(Ordering::SeqCst), u32::MAX, "never waited, never woken");
            }
        }
    });
}
