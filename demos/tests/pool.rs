//! `demo330 pool`: golden transcripts of the built binary in `tests/golden-pool/`, and what the
//! run must show whatever its words: every call reserved within the pool, the pool's settled
//! figures the provider's reports, the last request refused before its call is sent, and a pool
//! file kept with `--pools` drawn from again by a second invocation.
//!
//! To rewrite the transcripts after an intended change, run
//! `UPDATE_GOLDEN=1 cargo test -p loopbound-demos --test pool` and review the diff.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

use loopbound::Status;
use loopbound::pool::{Amount, MemoryPools};
use loopbound_demos::pool::{BUDGET, REQUESTS, run};
use loopbound_testkit::golden;
use serde_json::Value;

fn demo330(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_demo330")).args(args).output().expect("demo330 starts")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("utf-8 output")
}

#[test]
fn the_pool_scenario_matches_its_golden_transcripts_and_exits_2() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("golden-pool");
    let mut failures = Vec::new();
    for (file, args) in [("pool.txt", &["pool"][..]), ("pool.json", &["pool", "--json"][..])] {
        let output = demo330(args);
        assert_eq!(output.status.code(), Some(2), "demo330 {args:?}: {}", text(&output.stderr));
        assert!(output.stderr.is_empty(), "{}", text(&output.stderr));
        if let Err(diff) = golden::compare(&dir.join(file), &text(&output.stdout), golden::updating()) {
            failures.push(diff);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test]
async fn every_call_fits_the_pool_and_the_last_request_is_refused_unsent() {
    let played = run(Arc::new(MemoryPools::new())).await.unwrap();
    assert_eq!(played.requests.len(), REQUESTS);
    let (sent, refused) = played.requests.split_at(REQUESTS - 1);
    assert!(sent.iter().all(|request| request.status == Status::Completed && request.output_cap.is_some()));
    assert_eq!(refused[0].status, Status::TokenBudget);
    assert_eq!(refused[0].detail.as_deref(), Some("pool tenant:acme has no room for this call (tokens)"));
    assert_eq!((refused[0].output_cap, refused[0].reported), (None, None), "never sent");
    assert_eq!(played.provider_calls, 4);
    let reported: u64 =
        sent.iter().filter_map(|r| r.reported).map(|u| u.input_tokens + u.output_tokens).sum();
    assert_eq!(played.pool.settled, Amount::new(4, reported, loopbound::spend::Micros::ZERO));
    assert!(played.pool.settled.tokens <= BUDGET);
    assert_eq!((played.pool.reserved, played.pool.holds), (Amount::ZERO, 0));
    // The fourth call was granted only what the pool had left: less than the cap.
    assert!(sent[3].output_cap < sent[2].output_cap);
}

#[test]
fn a_kept_pool_file_is_drawn_from_again_by_the_next_invocation() {
    let file = loopbound_testkit::scratch::dir("demo-pool").join("pools.db");
    let path = file.to_str().expect("a UTF-8 path");
    let first: Value = serde_json::from_slice(&demo330(&["pool", "--json", "--pools", path]).stdout).unwrap();
    assert_eq!(first["provider_calls"], 4);
    let second = demo330(&["pool", "--json", "--pools", path]);
    assert_eq!(second.status.code(), Some(2));
    let second: Value = serde_json::from_slice(&second.stdout).unwrap();
    assert_eq!(second["provider_calls"], 0, "what is left fits no request");
    assert_eq!(second["pool"]["settled"], first["pool"]["settled"]);
    assert!(second["requests"].as_array().unwrap().iter().all(|r| r["status"] == "TokenBudget"));
}
