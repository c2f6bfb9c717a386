//! Usage read exactly as the provider reports it: aimock's fixtures (input and output counts) and
//! canned replies with the cache counts aimock does not send, whole and streamed, per call and
//! summed over a run; and priced under a cost budget by the transport's model.

use loopbound::spend::{Micros, Price, Prices};
use loopbound::transport::{Transport, Usage};
use loopbound::{Limits, RunError, Status};
use loopbound_testkit::Composition;
use loopbound_testkit::aimock::Aimock;
use loopbound_testkit::canned::{Answer, Canned, event_stream, json};
use loopbound_testkit::scenarios::{PATHS, Scenario, run, run_priced};
use serde_json::json;

use crate::transport_to;

#[tokio::test]
async fn the_fixtures_usage_is_summed_over_the_calls_on_both_paths_and_in_both_compositions() {
    let Some(server) = Aimock::start() else { return };
    // The fixtures report 120+160+210 input and 7+9+4 output tokens for the three calls.
    for (composition, streaming) in PATHS {
        let live = run(Scenario::Complete, composition, streaming, transport_to(&server.base_url())).await;
        assert_eq!(live.outcome().usage(), Some(Usage::new(490, 20)), "{composition} streaming={streaming}");
    }
    // A fixture without usage is reported by aimock as zero counts, which are read as such.
    let live = run(Scenario::Incomplete, Composition::Harness, true, transport_to(&server.base_url())).await;
    assert_eq!(live.outcome().usage(), Some(Usage::new(0, 0)));
}

/// The usage every canned reply reports: 10 plain input tokens, 1000 read from the cache, 200
/// written to it, 9 output tokens.
fn cached() -> Usage {
    Usage::new(1210, 9).with_cached_input(1000).with_cache_write(200)
}

fn whole(content: serde_json::Value) -> Answer {
    let usage = json!({"input_tokens": 10, "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 200, "output_tokens": 9});
    Answer::Bytes(json(&json!({"type": "message", "content": content, "usage": usage}).to_string()))
}

/// A stream whose `message_start` brings the input and cache counts and whose two `message_delta`
/// events bring the cumulative output (5, then 9): the last report is the reply's usage.
fn streamed(block: serde_json::Value, deltas: &[serde_json::Value]) -> Answer {
    let mut events = vec![
        json!({"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": [],
            "usage": {"input_tokens": 10, "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 200, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": block}),
    ];
    events.extend(
        deltas.iter().map(|delta| json!({"type": "content_block_delta", "index": 0, "delta": delta})),
    );
    events.extend([
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}}),
        json!({"type": "ping"}),
        json!({"type": "message_delta", "delta": {}, "usage": {"output_tokens": 9}}),
        json!({"type": "message_stop"}),
    ]);
    let text: String = events
        .iter()
        .map(|event| format!("event: {}\ndata: {event}\n\n", event["type"].as_str().unwrap()))
        .collect();
    Answer::Bytes(event_stream(&text))
}

fn call_block(id: &str, name: &str) -> serde_json::Value {
    json!({"type": "tool_use", "id": id, "name": name, "input": {}})
}

/// The canned replies of the complete review, each reporting [`cached`] usage.
fn review_answers(streaming: bool) -> Vec<Answer> {
    let input = json!({"type": "input_json_delta", "partial_json": "{\"input\":42}"});
    if streaming {
        vec![
            streamed(call_block("toolu_1", "read_ticket"), std::slice::from_ref(&input)),
            streamed(call_block("toolu_2", "finish_review"), std::slice::from_ref(&input)),
            streamed(
                json!({"type": "text", "text": ""}),
                &[json!({"type": "text_delta", "text": "Review finished."})],
            ),
        ]
    } else {
        vec![
            whole(
                json!([{"type": "tool_use", "id": "toolu_1", "name": "read_ticket", "input": {"input": 42}}]),
            ),
            whole(
                json!([{"type": "tool_use", "id": "toolu_2", "name": "finish_review", "input": {"input": 42}}]),
            ),
            whole(json!([{"type": "text", "text": "Review finished."}])),
        ]
    }
}

#[tokio::test]
async fn cache_reads_and_writes_count_as_input_per_call_and_summed_over_the_run() {
    for streaming in [false, true] {
        let server = Canned::start(review_answers(streaming)).await;
        let live =
            run(Scenario::Complete, Composition::Harness, streaming, transport_to(&server.base_url())).await;
        assert_eq!(live.outcome().status(), Status::Completed, "streaming={streaming}");
        let mut total = Usage::default();
        for _ in 0..3 {
            total += cached();
        }
        assert_eq!(live.outcome().usage(), Some(total), "streaming={streaming}");
        assert_eq!(total, Usage::new(3630, 27).with_cached_input(3000).with_cache_write(600));
    }
}

/// Per million tokens: 3 units of money for plain input, 0.30 for cache reads, 3.75 for cache
/// writes, 15 for output (in micro-units).
fn claude_price() -> Price {
    Price::per_million(Micros(3_000_000), Micros(15_000_000))
        .with_cached_input(Micros(300_000))
        .with_cache_write(Micros(3_750_000))
}

#[tokio::test]
async fn a_cost_budget_prices_each_call_by_the_configured_model_with_cache_reads_and_writes() {
    assert_eq!(transport_to("http://127.0.0.1:1/v1").model(), Some("claude-test-model"));
    for streaming in [false, true] {
        let server = Canned::start(review_answers(streaming)).await;
        let prices = Prices::new().model("claude-test-model", claude_price());
        let limits = Limits::default().with_cost(Micros(1_000_000));
        let transport = transport_to(&server.base_url());
        let live =
            run_priced(Scenario::Complete, Composition::Harness, streaming, limits, prices, transport).await;
        assert_eq!(live.outcome().status(), Status::Completed, "streaming={streaming}");
        let spend = live.outcome().spend();
        // Each call: 10 plain input (30 µ) + 1000 cache reads (300 µ) + 200 cache writes (750 µ)
        // + 9 output (135 µ) = 1215 µ; three calls.
        assert_eq!(spend.cost, Micros(3 * 1215), "streaming={streaming}");
        assert_eq!(spend.settled, Usage::new(3630, 27).with_cached_input(3000).with_cache_write(600));
        // The canned replies report 1210 input tokens for requests of a few hundred bytes, more
        // than the byte counter reserves: the first call is counted as over its reservation; the
        // next two are reserved from its report (calibrated, the default) and fit. The run stays
        // within its budget.
        assert_eq!((spend.calls_over_reservation, spend.overshoot_cost), (1, Micros::ZERO));
    }
}

#[tokio::test]
async fn under_a_cost_budget_a_model_the_table_does_not_price_is_refused_before_any_request() {
    let server = Canned::start(review_answers(false)).await;
    let prices = Prices::new().model("claude-other-model", claude_price());
    let limits = Limits::default().with_cost(Micros(1_000_000));
    let transport = transport_to(&server.base_url());
    let live = run_priced(Scenario::Complete, Composition::Harness, false, limits, prices, transport).await;
    assert_eq!(live.result.err(), Some(RunError::Unpriced("the model claude-test-model".to_owned())));
    assert_eq!(server.requests().len(), 0, "nothing was sent");
}
