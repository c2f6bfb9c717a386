//! Repetition by result (SPEC §25) over random polls, through the public API (a tool called
//! again and again with the same arguments in one scope):
//!
//! - **A poll that progresses is never halted**: every result differs from the one before, and
//!   every call up to the poll limit runs.
//! - **A poll that stops changing is halted at the limit**: after a progressing prefix of `p`
//!   calls, a result that no longer changes is halted `RepeatedCall` at call `p + 1 + limit`
//!   (0-based), with the charged count `limit` in the event, and no body runs after it.
//! - **Any poll follows the rule**: over random results from a small alphabet, the call the guard
//!   halts on, and the reason, are those of a reference model of the rule written apart from the
//!   guard's code.
//! - **Every policy follows its reference model**: random bytes, read as the `progress` fuzz
//!   target reads them (a policy with every check and a trace of calls to two tools), go
//!   through its check (`loopbound_testkit::fuzz::progress`).

use std::sync::Mutex;

use loopbound::progress::Progress;
use loopbound::{Limits, Scope, ToolBuilder, ToolContext, ToolError, ToolSet};
use loopbound_proptests::config::with_cases;
use loopbound_proptests::regressions;
use proptest::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, Serialize, JsonSchema)]
struct Job {
    job: i64,
}

/// The results the poll answers, in turn, and how many bodies ran.
#[derive(Default)]
struct Script {
    results: Vec<String>,
    ran: Mutex<usize>,
}

fn tools() -> ToolSet<Script> {
    let poll = ToolBuilder::new("poll", "jobs.read")
        .build(|_: Job, call: ToolContext<Script>| async move {
            let mut ran = call.state().ran.lock().map_err(|_| "poisoned".to_owned())?;
            let result = call.state().results.get(*ran).cloned().unwrap_or_default();
            *ran += 1;
            Ok::<_, String>(result)
        })
        .unwrap_or_else(|error| panic!("a valid tool: {error}"));
    ToolSet::builder().add(&poll).build().unwrap_or_else(|error| panic!("a set of one tool: {error}"))
}

/// Calls the poll once per result; returns the 0-based call that was halted (if one was), the
/// run's last event, and how many bodies ran.
fn drive(results: Vec<String>, limit: u32, polls: u32) -> (Option<usize>, Option<String>, usize) {
    let calls = results.len();
    let scope = Scope::builder()
        .grant("jobs.read")
        .limits(Limits::default().with_tool_calls(1000).with_repetitions(limit))
        .progress(Progress::exact().by_result("poll", polls))
        .state(Script { results, ran: Mutex::new(0) })
        .build()
        .unwrap_or_else(|error| panic!("valid limits: {error}"));
    let tools = tools();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap_or_else(|error| panic!("a runtime: {error}"));
    let halted = runtime.block_on(async {
        for call in 0..calls {
            match tools.invoke(&scope, "poll", r#"{"job":1}"#).await {
                Ok(_) => {}
                Err(ToolError::Stopped(_)) => return Some(call),
                Err(other) => panic!("call {call}: {other}"),
            }
        }
        None
    });
    let last = scope.events().last().map(ToString::to_string);
    let ran = *scope.state().ran.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    (halted, last, ran)
}

/// The rule, written from the contract: a first call is charged; a repeat whose previous result
/// differs from the one before it (or that follows the first result) is not; any other repeat
/// is, and is refused if `limit` attempts are charged already; no more than `polls` attempts.
/// Returns the 0-based call refused, if any.
fn reference(results: &[String], limit: u32, polls: u32) -> Option<usize> {
    let mut charged = 0;
    let mut seen: Vec<&String> = Vec::new();
    for (call, result) in results.iter().enumerate() {
        if seen.len() >= polls as usize {
            return Some(call);
        }
        let moved_on = match seen.as_slice() {
            [] => false,
            [_] => true,
            [.., before, last] => before != last,
        };
        if !seen.is_empty() && !moved_on && charged >= limit {
            return Some(call);
        }
        if seen.is_empty() || !moved_on {
            charged += 1;
        }
        seen.push(result);
    }
    None
}

/// Results in which each differs from the one before it.
fn progressing(len: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(0u32..1000, len).prop_map(|steps| {
        let mut total = 0u64;
        steps
            .into_iter()
            .map(|step| {
                total += u64::from(step) + 1;
                format!("running {total}")
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(with_cases(128, regressions!("progress")))]

    #[test]
    fn a_poll_that_progresses_is_never_halted(limit in 1u32..4, polls in 1u32..40, seed in progressing(1..=40)) {
        let results: Vec<String> = seed.into_iter().take(polls as usize).collect();
        let calls = results.len();
        let (halted, _, ran) = drive(results, limit, polls);
        prop_assert_eq!(halted, None);
        prop_assert_eq!(ran, calls);
    }

    #[test]
    fn a_poll_that_stops_changing_is_halted_at_the_limit(
        limit in 1u32..5,
        prefix in progressing(0..=6),
        tail in 1usize..12,
    ) {
        let p = prefix.len();
        let mut results = prefix;
        results.extend(std::iter::repeat_n("stuck".to_owned(), tail + limit as usize + 2));
        let (halted, last, ran) = drive(results, limit, 1000);
        let expected = p + 1 + limit as usize;
        prop_assert_eq!(halted, Some(expected));
        prop_assert_eq!(ran, expected, "no body ran from the halted call on");
        prop_assert_eq!(last, Some(format!("RepeatedCall poll {limit}")));
    }

    #[test]
    fn any_poll_follows_the_rule(
        limit in 1u32..4,
        polls in 1u32..16,
        results in prop::collection::vec(prop::sample::select(vec!["a", "b", "c"]), 1..24),
    ) {
        let results: Vec<String> = results.into_iter().map(str::to_owned).collect();
        let expected = reference(&results, limit, polls);
        let (halted, last, ran) = drive(results, limit, polls);
        prop_assert_eq!(halted, expected);
        if let Some(call) = expected {
            prop_assert_eq!(ran, call);
            prop_assert!(last.is_some_and(|event| event.starts_with("RepeatedCall poll ")));
        }
    }

    #[test]
    fn every_policy_follows_its_reference_model(data in prop::collection::vec(any::<u8>(), 0..512)) {
        loopbound_proptests::harness::progress(&data);
    }
}
