//! The release `demo330 --live` under a token budget against the hostile server, for the four
//! ways a provider can defeat a budget that is checked after the call: it ignores the output cap
//! and streams forever, it reports far more usage than it was sent, it never reports usage, it
//! reports zero. Each run ends by itself with its documented status, its spend charged as the
//! budget's contract says (the call's report, else its whole reservation; a stream cut where it
//! passes its reservation), never past the budget but for the one documented overshoot, within
//! 64 MiB of resident memory above an idle run and well within the deadline.

#[path = "attacks/console.rs"]
#[allow(dead_code, reason = "the attack tests' console helpers, of which this test uses a few")]
mod console;

use std::time::Duration;

use console::{Run, run};
use loopbound_testkit::hostile::{Behaviour, Budget, HostileServer, Reply};
use serde_json::{Value, json};

const MIB: u64 = 1024 * 1024;
/// The most a run may use above an idle run.
const MEMORY_ABOVE_IDLE: u64 = 64 * MIB;
/// The run's total-token budget.
const BUDGET: u64 = 20_000;
/// A run that ends by itself does so long before its 120-second deadline.
const ENDS_WITHIN: Duration = Duration::from_secs(10);

async fn against(behaviour: Behaviour, extra: &[&'static str]) -> Run {
    let budget = Budget::new(256 * MIB, Duration::from_secs(5));
    let server = HostileServer::start_with(behaviour, budget).await.expect("a loopback server");
    let base = server.base_url();
    let mut args = vec!["complete", "--live", "--json", "--total-tokens", "20000"];
    args.extend_from_slice(extra);
    let ran = tokio::task::spawn_blocking(move || run(&base, &args)).await.expect("the run completes");
    drop(server);
    ran
}

/// A whole `chat.completion` with the review's closing text and, if given, this `usage`.
fn completion(usage: Option<Value>) -> Reply {
    let mut body = json!({
        "id": "chatcmpl-spend",
        "object": "chat.completion",
        "created": 0,
        "model": "hostile",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": "Review finished."},
            "finish_reason": "stop"
        }]
    });
    if let Some(usage) = usage {
        body["usage"] = usage;
    }
    Reply::new(200, body.to_string())
}

fn kinds(report: &Value) -> Vec<String> {
    report["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|event| {
            format!(
                "{} {} {}",
                event["kind"].as_str().unwrap(),
                event["name"].as_str().unwrap(),
                event["count"]
            )
        })
        .collect()
}

fn tokens(report: &Value, field: &str) -> u64 {
    report["spend"]["settled"][field].as_u64().expect("a token count")
}

/// The memory and time every run must stay within.
fn check_bounds(name: &str, ran: &Run, idle_kib: u64) {
    let above = ran.peak_kib.saturating_sub(idle_kib) * 1024;
    assert!(above < MEMORY_ABOVE_IDLE, "{name}: {} MiB above idle", above / MIB);
    assert!(ran.elapsed < ENDS_WITHIN, "{name}: returned after {:?}", ran.elapsed);
}

#[tokio::test]
async fn a_hostile_provider_cannot_spend_past_a_token_budget() {
    let idle =
        against(Behaviour::Reply(completion(Some(json!({"prompt_tokens": 1, "completion_tokens": 1})))), &[])
            .await;
    assert_eq!(idle.code, 2, "an idle run is Incomplete: {}", idle.stderr);

    // 1. It ignores the output cap and streams text forever: the stream is counted as it
    // arrives and cut where it passes its reservation, charged at least that reservation.
    let ran = against(Behaviour::EndlessText { delta: 4096 }, &["--stream"]).await;
    check_bounds("endless stream", &ran, idle.peak_kib);
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    let report = ran.report();
    assert_eq!(report["status"], "TokenBudget");
    assert_eq!(kinds(&report), ["ModelCall model 1", "TokenBudget model 1"]);
    // The request's cap is the review's 800 tokens; a 4,096-byte delta is at least 32 tokens
    // (128 bytes the longest token), so the 26th delta passes the reservation and is the last.
    let streamed_input = tokens(&report, "input_tokens");
    assert_eq!(tokens(&report, "output_tokens"), 26 * 32, "counted to the chunk that crossed");
    assert!(streamed_input + 26 * 32 <= BUDGET, "a cut stream is charged within the budget");
    assert_eq!(report["spend"]["calls_over_reservation"], 1);
    assert_eq!(report["spend"]["overshoot_tokens"], 0);

    // 2. It reports far more than it was sent: charged as reported, counted, and the run halts
    // at once with the overshoot stated; no second call is sent.
    let huge = json!({"prompt_tokens": 1_000_000, "completion_tokens": 1_000_000, "total_tokens": 2_000_000});
    let ran = against(Behaviour::Reply(completion(Some(huge))), &[]).await;
    check_bounds("usage far above", &ran, idle.peak_kib);
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    let report = ran.report();
    assert_eq!(report["status"], "TokenBudget");
    assert_eq!(kinds(&report), ["ModelCall model 1", "TokenBudget model 1"]);
    assert_eq!((tokens(&report, "input_tokens"), tokens(&report, "output_tokens")), (1_000_000, 1_000_000));
    assert_eq!(report["spend"]["calls_over_reservation"], 1);
    assert_eq!(report["spend"]["overshoot_tokens"], 2_000_000 - BUDGET);

    // 3. It never reports usage: the call is charged its whole reservation, which fits.
    let ran = against(Behaviour::Reply(completion(None)), &[]).await;
    check_bounds("no usage", &ran, idle.peak_kib);
    assert_eq!(ran.code, 2, "Incomplete: {}", ran.stderr);
    let report = ran.report();
    assert_eq!(report["status"], "Incomplete");
    assert_eq!(kinds(&report), ["ModelCall model 1"]);
    // The whole reservation: the same request's estimate as the streamed case, and its cap.
    assert_eq!((tokens(&report, "input_tokens"), tokens(&report, "output_tokens")), (streamed_input, 800));
    assert_eq!(report["spend"]["calls_over_reservation"], 0);
    assert_eq!(report["spend"]["overshoot_tokens"], 0);

    // 4. It reports zero: the report replaces the reservation, so nothing is charged.
    let zero = json!({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0});
    let ran = against(Behaviour::Reply(completion(Some(zero))), &[]).await;
    check_bounds("zero usage", &ran, idle.peak_kib);
    let report = ran.report();
    assert_eq!(report["status"], "Incomplete");
    assert_eq!((tokens(&report, "input_tokens"), tokens(&report, "output_tokens")), (0, 0));
    assert_eq!(report["spend"]["reserved"]["input_tokens"], 0);
}
