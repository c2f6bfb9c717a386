//! Whole runs over arbitrary scripted transports, in both compositions and on both call paths,
//! under tokio's paused clock. Each case goes through `harness::run_case::check`, the same check
//! the `run` fuzz target makes: termination by the deadline, every limit, the log's shape,
//! `Completed` iff the host's condition holds without a halt, no text on a halt, a hang ending
//! exactly at the deadline, and agreement with the reference simulation of the loop.
//!
//! The same cases also run their replies' calls as a parallel batch: the batch's admissions,
//! events, counters and body starts are the sequential loop's.
//!
//! Also feeds arbitrary bytes to the `bind_guard` and `run` fuzz checks, so that their
//! `arbitrary` decoding is explored on stable too.

use loopbound_proptests::config::with_cases;
use loopbound_proptests::harness;
use loopbound_proptests::harness::json_mirror::{JsonMirror, TextMirror};
use loopbound_proptests::harness::run_case::{
    AfterScript, ArgsCase, CallCase, FailKind, RunCase, StepCase, ToolPick,
};
use loopbound_proptests::regressions;
use proptest::prelude::*;

fn mirror() -> impl Strategy<Value = JsonMirror> {
    let leaf = prop_oneof![
        Just(JsonMirror::Null),
        any::<bool>().prop_map(JsonMirror::Bool),
        any::<i8>().prop_map(JsonMirror::Small),
        Just(JsonMirror::Small(42)),
        any::<f64>().prop_map(JsonMirror::Float),
        prop::sample::select(vec!["input", "text", "tags", "42", ""])
            .prop_map(|s| JsonMirror::Str(TextMirror::Any(s.to_owned()))),
    ];
    leaf.prop_recursive(3, 12, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(JsonMirror::Array),
            prop::collection::vec(
                (prop::sample::select(vec!["input", "text", "tags", "other"]), inner),
                0..4
            )
            .prop_map(|entries| JsonMirror::Object(
                entries.into_iter().map(|(k, v)| (TextMirror::Any(k.to_owned()), v)).collect()
            )),
        ]
    })
}

fn args() -> impl Strategy<Value = ArgsCase> {
    prop_oneof![
        4 => prop_oneof![Just(42u8), 40u8..45, any::<u8>()].prop_map(ArgsCase::Ticket),
        3 => Just(ArgsCase::Answer),
        2 => ("[a-z ]{0,6}", prop::collection::vec("[a-z]{0,3}", 0..3))
            .prop_map(|(text, tags)| ArgsCase::Note { text, tags }),
        2 => mirror().prop_map(ArgsCase::Mirror),
        2 => prop::sample::select(vec![
            r#"{"input":"42"}"#, r#"{"input":42.0}"#, r#"{"input":4.2e1}"#, "[42]", "{", "", "  ",
            r#"{"input":42,"extra":[1,2]}"#, r#"{"text":"a","tags":[]}"#, "null", r#"{"input":-0}"#,
        ])
        .prop_map(|text| ArgsCase::Raw(text.to_owned())),
    ]
}

fn tool() -> impl Strategy<Value = ToolPick> {
    prop_oneof![
        6 => Just(ToolPick::Read),
        5 => Just(ToolPick::Finish),
        1 => Just(ToolPick::Slow),
        2 => Just(ToolPick::Failing),
        2 => Just(ToolPick::Note),
        2 => prop::sample::select(vec!["", "READ_TICKET", "read_ticket ", "shell", "finish"])
            .prop_map(|name| ToolPick::Unknown(name.to_owned())),
    ]
}

fn step() -> impl Strategy<Value = StepCase> {
    let call = call_case();
    prop_oneof![
        10 => (
            prop::option::of(prop::sample::select(vec!["Review finished.", "", "Done?", "é ✓"]).prop_map(str::to_owned)),
            prop::collection::vec(call, 0..4),
        )
            .prop_map(|(text, calls)| StepCase::Reply { text, calls }),
        1 => Just(StepCase::Hang),
        1 => "[a-z ]{0,8}".prop_map(StepCase::Unavailable),
        1 => prop::sample::select(vec![FailKind::Authentication, FailKind::Malformed, FailKind::Cancelled, FailKind::Other])
            .prop_map(StepCase::Fail),
        1 => Just(StepCase::CancelCaller),
        1 => (any::<u16>(), prop::collection::vec(call_case(), 0..3))
            .prop_map(|(after, calls)| StepCase::CancelLater { after, calls }),
    ]
}

fn call_case() -> impl Strategy<Value = CallCase> {
    (tool(), args()).prop_map(|(tool, args)| CallCase { tool, args })
}

/// Steps of a mostly well-behaved review, so that completions and repetitions are common.
fn review_step() -> impl Strategy<Value = StepCase> {
    let call = |tool: ToolPick| CallCase { tool, args: ArgsCase::Answer };
    prop_oneof![
        Just(StepCase::Reply { text: None, calls: vec![call(ToolPick::Read)] }),
        Just(StepCase::Reply { text: None, calls: vec![call(ToolPick::Finish)] }),
        Just(StepCase::Reply { text: None, calls: vec![call(ToolPick::Read), call(ToolPick::Finish)] }),
        Just(StepCase::Reply { text: Some("Review finished.".to_owned()), calls: vec![] }),
        step(),
    ]
}

fn run_case() -> impl Strategy<Value = RunCase> {
    (
        (any::<bool>(), any::<bool>(), prop_oneof![3 => 0u8..8, 1 => 36u8..48]),
        (prop_oneof![0u8..8, 2u8..8], 0u8..3, any::<u16>(), prop_oneof![Just(0xffu8), any::<u8>()]),
        prop_oneof![prop::collection::vec(step(), 0..8), prop::collection::vec(review_step(), 0..6)],
        prop::sample::select(vec![AfterScript::Fail, AfterScript::Repeat, AfterScript::Hang]),
        prop::option::of(any::<u8>()),
    )
        .prop_map(
            |(
                (simple, streaming, model_limit),
                (tool_limit, repetitions, deadline_secs, granted),
                steps,
                after,
                review_at,
            )| {
                RunCase {
                    simple,
                    streaming,
                    model_limit,
                    tool_limit,
                    repetitions,
                    deadline_secs,
                    granted,
                    steps,
                    after,
                    review_at,
                }
            },
        )
}

proptest! {
    #![proptest_config(with_cases(128, regressions!("runs")))]

    #[test]
    fn every_scripted_run_ends_within_its_bounds_and_matches_the_simulation(case in run_case()) {
        harness::run_case::check(&case);
    }

    #[test]
    fn a_parallel_batch_admits_exactly_what_the_sequential_loop_admits(case in run_case(), cap in any::<u8>()) {
        harness::run_case::check_parallel(&case, cap);
    }

    #[test]
    fn arbitrary_bytes_hold_the_run_checks(data in prop::collection::vec(any::<u8>(), 0..600)) {
        harness::run(&data);
    }

    #[test]
    fn arbitrary_bytes_hold_the_bind_guard_checks(data in prop::collection::vec(any::<u8>(), 0..600)) {
        harness::bind_guard(&data);
    }
}
