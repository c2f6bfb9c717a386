//! The spend scenarios (`demo330 spend`, `demo330 subagent`) and the budget flags of the review
//! scenarios: golden transcripts of the built binary in `tests/golden-spend/`, and what the runs
//! must show whatever their words: the call that would not fit never sent, every report within
//! its reservation, the tree's spend the planner's and within its budgets.
//!
//! To rewrite the transcripts after an intended change, run
//! `UPDATE_GOLDEN=1 cargo test -p loopbound-demos --test spend` and review the diff.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use loopbound::Status;
use loopbound_demos::spend::{Handed, Played, SpendArgs, budgets, tree};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// Every golden case: its file, its arguments, its exit code.
const CASES: [(&str, &[&str], i32); 7] = [
    ("spend.txt", &["spend"], 2),
    ("spend.json", &["spend", "--json"], 2),
    ("spend.stream.txt", &["spend", "--stream"], 2),
    ("spend.simple.txt", &["spend", "--simple"], 2),
    ("subagent.txt", &["subagent"], 0),
    ("subagent.json", &["subagent", "--json"], 0),
    ("subagent.stream.txt", &["subagent", "--stream"], 0),
];

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("golden-spend")
}

fn demo330(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_demo330")).args(args).output().expect("demo330 starts")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("utf-8 output")
}

#[test]
fn every_spend_run_matches_its_golden_transcript_and_exit_code() {
    let update = std::env::var("UPDATE_GOLDEN").is_ok_and(|value| value == "1");
    let mut failures = Vec::new();
    for (file, args, exit) in CASES {
        let output = demo330(args);
        let stdout = text(&output.stdout);
        let invocation = format!("demo330 {}", args.join(" "));
        if output.status.code() != Some(exit) {
            failures.push(format!("{invocation}: exit {:?}, expected {exit}", output.status.code()));
        }
        if !output.stderr.is_empty() {
            failures.push(format!("{invocation}: unexpected stderr:\n{}", text(&output.stderr)));
        }
        let path = golden_dir().join(file);
        if update {
            fs::write(&path, &stdout).expect("golden file written");
            continue;
        }
        match fs::read_to_string(&path) {
            Ok(expected) if expected == stdout => {}
            Ok(expected) => {
                failures.push(format!(
                    "{invocation}: differs from {file}\n--- expected\n{expected}--- actual\n{stdout}"
                ));
            }
            Err(error) => failures.push(format!("{invocation}: cannot read {file}: {error}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{}\n\nIf the change is intended: UPDATE_GOLDEN=1 cargo test -p loopbound-demos --test spend",
        failures.join("\n\n")
    );
    let found: BTreeSet<String> = fs::read_dir(golden_dir())
        .expect("tests/golden-spend exists")
        .map(|entry| entry.expect("an entry").file_name().to_string_lossy().into_owned())
        .collect();
    let expected: BTreeSet<String> = CASES.iter().map(|(file, _, _)| (*file).to_owned()).collect();
    assert_eq!(found, expected, "every golden file is a case, every case has one");
}

async fn spend(args: SpendArgs) -> Played {
    budgets::run(args, CancellationToken::new()).await.expect("an outcome")
}

async fn subagent(args: SpendArgs) -> Played {
    tree::run(args, CancellationToken::new()).await.expect("an outcome")
}

fn lines(played: &Played) -> Vec<String> {
    played.outcome.events().iter().map(ToString::to_string).collect()
}

#[tokio::test(start_paused = true)]
async fn spend_stops_at_its_token_budget_before_the_call_that_would_not_fit_is_sent() {
    let played = spend(SpendArgs::default()).await;
    let outcome = &played.outcome;
    assert_eq!(outcome.status(), Status::TokenBudget);
    // Seven calls reached the provider (each reserved from its report of the last request, plus
    // what was appended since); the eighth was refused before it was sent.
    assert_eq!(played.bills.len(), 7);
    assert_eq!(lines(&played).last().map(String::as_str), Some("TokenBudget model 7"));
    let model_calls = lines(&played).iter().filter(|line| line.starts_with("ModelCall ")).count();
    assert_eq!(model_calls, 7);
    // An honest provider: every report within its reservation, the settled spend exactly what
    // it reported, within both budgets.
    let spend = outcome.spend();
    assert_eq!((spend.calls_over_reservation, spend.overshoot_tokens, spend.overshoot_cost.0), (0, 0, 0));
    let reported: u64 = played.bills.iter().map(|bill| bill.usage.total_tokens()).sum();
    assert_eq!(spend.settled.total_tokens(), reported);
    assert_eq!(spend.settled.total_tokens(), 2_907);
    assert!(spend.settled.total_tokens() <= budgets::TOTAL_TOKENS);
    assert_eq!(spend.cost.0, 9_225);
    assert!(spend.cost <= budgets::COST);
    assert_eq!(spend.reserved, loopbound::spend::Reserved::default(), "nothing left in flight");
    // Each call went out capped at what the budgets left: the review's 800 while there was
    // room, then less and less.
    let caps: Vec<Option<u32>> = played.bills.iter().map(|bill| bill.output_cap).collect();
    assert_eq!(caps, [Some(800), Some(800), Some(800), Some(778), Some(679), Some(570), Some(449)]);
    assert!(played.bills.iter().all(|bill| bill.usage.output_tokens <= u64::from(bill.output_cap.unwrap())));
}

#[tokio::test(start_paused = true)]
async fn spend_shows_the_same_events_and_spend_on_every_path_and_composition() {
    let base = spend(SpendArgs::default()).await;
    for args in [
        SpendArgs { stream: true, ..SpendArgs::default() },
        SpendArgs { simple: true, ..SpendArgs::default() },
        SpendArgs { simple: true, stream: true, json: false },
    ] {
        let other = spend(args).await;
        assert_eq!(lines(&other), lines(&base), "{args:?}");
        assert_eq!(other.outcome.spend(), base.outcome.spend(), "{args:?}");
        assert_eq!(other.bills, base.bills, "{args:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_sub_agents_halt_reaches_the_planner_as_an_error_result_and_the_tree_spends_within_its_budgets() {
    let played = subagent(SpendArgs::default()).await;
    let outcome = &played.outcome;
    assert_eq!(outcome.status(), Status::Completed);
    assert_eq!(outcome.text(), Some("Review finished."));
    assert_eq!(
        played.results,
        [
            Handed {
                content: "Error: tool delegate failed: the sub-agent ended with TokenBudget".to_owned(),
                error: true
            },
            Handed { content: "Review finished.".to_owned(), error: false },
        ]
    );
    // The planner's own events: its three model calls and two admitted delegations, no halt.
    assert_eq!(
        lines(&played),
        [
            "ModelCall model 1",
            "Middleware delegate 1",
            "ToolCall delegate 1",
            "ModelCall model 2",
            "Middleware delegate 2",
            "ToolCall delegate 2",
            "ModelCall model 3",
        ]
    );
    let agents: Vec<&str> = played.bills.iter().map(|bill| bill.agent).collect();
    assert_eq!(
        agents,
        [
            "planner",
            "reviewer 1",
            "reviewer 1",
            "reviewer 1",
            "reviewer 1",
            "reviewer 1",
            "reviewer 1",
            "planner",
            "reviewer 2",
            "reviewer 2",
            "reviewer 2",
            "planner"
        ]
    );
    // The first reviewer stopped within its own budget.
    let first: u64 = played
        .bills
        .iter()
        .filter(|bill| bill.agent == "reviewer 1")
        .map(|bill| bill.usage.total_tokens())
        .sum();
    assert!(first <= tree::REVIEWER_TOKENS, "{first}");
    // Every call of the tree is the planner's spend, and within the planner's budgets.
    let spend = outcome.spend();
    let reported: u64 = played.bills.iter().map(|bill| bill.usage.total_tokens()).sum();
    assert_eq!(spend.settled.total_tokens(), reported);
    assert_eq!(spend.settled.total_tokens(), 3_929);
    assert!(spend.settled.total_tokens() <= tree::TREE_TOKENS);
    assert!(spend.cost <= tree::TREE_COST);
    assert_eq!((spend.calls_over_reservation, spend.overshoot_tokens), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn subagent_gives_the_same_tree_on_the_streaming_path() {
    let whole = subagent(SpendArgs::default()).await;
    let streamed = subagent(SpendArgs { stream: true, ..SpendArgs::default() }).await;
    assert_eq!(lines(&streamed), lines(&whole));
    assert_eq!(streamed.bills, whole.bills);
    assert_eq!(streamed.outcome.spend(), whole.outcome.spend());
    assert_eq!(streamed.results, whole.results);
}

fn report(args: &[&str]) -> (i32, Value) {
    let output = demo330(args);
    let code = output.status.code().expect("an exit code");
    (code, serde_json::from_slice(&output.stdout).expect("one JSON object"))
}

#[test]
fn the_budget_flags_bound_a_review_scenario_and_its_json_carries_them_and_the_spend() {
    let (code, json) = report(&[
        "changing",
        "--json",
        "--total-tokens",
        "3000",
        "--cost",
        "20000",
        "--price-per-million",
        "3000000,15000000",
    ]);
    assert_eq!(code, 2);
    assert_eq!(json["status"], "TokenBudget");
    assert_eq!(json["limits"]["total_tokens"], 3000);
    assert_eq!(json["limits"]["cost"], 20000);
    assert_eq!(json["limits"]["min_output_tokens"], 16);
    assert_eq!(json["limits"].get("input_tokens"), None, "unset budgets are left out");
    assert_eq!(
        json["price"],
        serde_json::json!({"model": "scripted", "input_per_million": 3_000_000, "output_per_million": 15_000_000})
    );
    // The scripted review reports no usage: each call is charged its whole reservation, and
    // the run stops before the call that would not fit, within both budgets.
    let spend = &json["spend"];
    let settled = spend["settled"]["input_tokens"].as_u64().unwrap()
        + spend["settled"]["output_tokens"].as_u64().unwrap();
    assert!(settled <= 3000, "{spend}");
    assert!(spend["cost"].as_u64().unwrap() <= 20000, "{spend}");
    assert_eq!(spend["overshoot_tokens"], 0);
    assert_eq!(spend["calls_over_reservation"], 0);
    let events = json["events"].as_array().unwrap();
    assert_eq!(events.last().unwrap()["kind"], "TokenBudget");
}

#[test]
fn without_budgets_the_review_transcripts_show_no_spend_and_the_json_a_zero_one() {
    let output = demo330(&["complete"]);
    assert!(!text(&output.stdout).contains("\nspend "), "{}", text(&output.stdout));
    let (code, json) = report(&["complete", "--json"]);
    assert_eq!(code, 0);
    assert_eq!(json["spend"]["settled"]["input_tokens"], 0);
    assert_eq!(json["spend"]["cost"], 0);
}

#[test]
fn the_budget_header_states_the_budgets_and_the_price() {
    let output = demo330(&["incomplete", "--output-tokens", "500", "--price-per-million", "150000,600000"]);
    assert_eq!(output.status.code(), Some(2));
    let stdout = text(&output.stdout);
    assert!(stdout.contains("reply bytes 16MiB, output tokens 500, min output 16\n"), "{stdout}");
    assert!(
        stdout.contains("prices        scripted: input 150000µ, output 600000µ per million tokens\n"),
        "{stdout}"
    );
    // No usage reported: the one call is charged its whole reservation, its output the 500 left.
    assert!(stdout.contains(" + 500 output = "), "{stdout}");
}

#[test]
fn bad_budget_flags_exit_64_with_the_usage_line_and_run_nothing() {
    let cases: [(&[&str], &str); 8] = [
        (&["--total-tokens", "0"], "invalid value '0' for '--total-tokens <N>'"),
        (&["--input-tokens", "-5"], "unexpected argument '-5'"),
        (&["--output-tokens", "many"], "invalid value 'many' for '--output-tokens <N>'"),
        (&["--cost", "0", "--price-per-million", "1,1"], "invalid value '0' for '--cost <MICROS>'"),
        (&["--cost", "100"], "--price-per-million <IN,OUT>"),
        (&["--price-per-million", "1.5,2"], "expected IN,OUT: two whole numbers"),
        (&["--price-per-million", "1"], "expected IN,OUT"),
        (&["--total-tokens", "18446744073709551616"], "invalid value '18446744073709551616'"),
    ];
    for (args, problem) in cases {
        let output = demo330(args);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(64), "{args:?}: {stderr}");
        assert!(stderr.contains(problem), "{args:?}: {stderr}");
        assert!(stderr.contains("Usage: demo330"), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(text(&output.stdout), "", "{args:?}: nothing ran");
    }
}

#[test]
fn commands_take_no_review_flags() {
    for args in [
        &["--total-tokens", "100", "spend"][..],
        &["--json", "subagent"],
        &["spend", "--live"],
        &["--cost", "5", "--price-per-million", "1,1", "refund", "--journal", "/nonexistent/j"],
    ] {
        let output = demo330(args);
        assert_eq!(output.status.code(), Some(64), "{args:?}");
        assert_eq!(text(&output.stdout), "", "{args:?}");
    }
}

#[test]
fn help_announces_the_budget_flags_and_the_spend_commands() {
    let stdout = text(&demo330(&["--help"]).stdout);
    for flag in [
        "--input-tokens <N>",
        "--output-tokens <N>",
        "--total-tokens <N>",
        "--cost <MICROS>",
        "--price-per-million <IN,OUT>",
    ] {
        assert!(stdout.contains(flag), "{flag} missing from:\n{stdout}");
    }
    for command in ["  spend ", "  subagent "] {
        assert!(stdout.contains(command), "{command} missing from:\n{stdout}");
    }
    assert!(stdout.contains("TokenBudget,\n       CostBudget, ToolLimit"), "{stdout}");
}
