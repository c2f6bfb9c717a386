//! The loop-trace benchmark's figures, asserted: the table is deterministic (scripted runs), so
//! a change to a policy's behaviour shows up here before it reaches the committed table.

use loopbound::Status;
use loopbound_benches::traces::{self, Ending, Summary, TRACES};

fn endings() -> Vec<Vec<Ending>> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("a runtime");
    runtime.block_on(traces::run_all(&traces::policies())).expect("scripted runs never fail")
}

/// (correct halts, early halts, false halts, mean model calls of the stuck traces × 10).
fn figures(summary: &Summary) -> (usize, usize, usize, i64) {
    #[allow(clippy::cast_possible_truncation, reason = "a mean of at most 40 calls, times 10")]
    let mean = (summary.mean_model_calls * 10.0).round() as i64;
    (summary.correct_halts, summary.early_halts, summary.false_halts, mean)
}

#[test]
fn each_policy_halts_and_spares_what_the_committed_table_says() {
    let all = endings();
    let summaries: Vec<_> = all.iter().map(|endings| figures(&traces::summarise(endings))).collect();
    assert_eq!(
        summaries,
        [
            (17, 12, 11, 123), // seed: exact, 1 repetition
            (17, 12, 4, 151),  // threshold: exact, 3 repetitions
            (17, 16, 2, 51),   // recommended
            (17, 16, 0, 63),   // recommended, 2 repetitions
            (17, 16, 2, 58),   // recommended + nudge
        ]
    );
}

#[test]
fn the_checks_stop_what_only_a_budget_stopped_before() {
    let all = endings();
    let at = |name: &str| TRACES.iter().position(|trace| trace.name == name).expect("a trace of that name");
    let (seed, recommended) = (&all[0], &all[2]);
    for name in
        ["failing calls with fresh arguments", "arguments that never bind", "a tool that does not exist"]
    {
        assert!(seed[at(name)].by_budget(), "{name}: the seed's rules wait for a budget");
        assert_eq!(
            (recommended[at(name)].status, recommended[at(name)].model_calls),
            (Status::NoProgress, 3),
            "{name}"
        );
    }
    let polled = &recommended[at("poll done after 12")];
    assert_eq!((polled.status, polled.tool_calls), (Status::Completed, 12));
    assert_eq!(seed[at("poll done after 12")].status, Status::RepeatedCall);
}
