//! The sampling options on the chat-completions wire: each one the run sets reaches every request
//! in its chat shape (`temperature`, `top_p`, the array `stop`, `seed`), as aimock's journal
//! recorded it, on both call paths.

use loopbound::Status;
use loopbound::transport::ChatOptions;
use loopbound_testkit::Composition;
use loopbound_testkit::aimock::Aimock;
use loopbound_testkit::review::MAX_OUTPUT_TOKENS;
use loopbound_testkit::scenarios::{Scenario, run_with_options};
use serde_json::{Value, json};

use crate::scenarios::transport;

/// The review's options with every sampling option set.
fn sampled() -> ChatOptions {
    ChatOptions::default()
        .with_max_output_tokens(MAX_OUTPUT_TOKENS)
        .with_temperature(0.3)
        .and_then(|options| options.with_top_p(0.85))
        .and_then(|options| options.with_stop_sequences(["END", "\n\nUser:"]))
        .expect("valid options")
        .with_seed(1234)
}

#[tokio::test]
async fn every_sampling_option_reaches_the_journal_on_every_call_of_both_paths() {
    let Some(server) = Aimock::start() else { return };
    for streaming in [false, true] {
        let live = run_with_options(
            Scenario::Complete,
            Composition::Harness,
            streaming,
            sampled(),
            transport(&server),
        )
        .await;
        assert_eq!(live.outcome().status(), Status::Completed, "streaming={streaming}");
    }
    let bodies = server.request_bodies().await;
    assert_eq!(bodies.len(), 6);
    for (index, body) in bodies.iter().enumerate() {
        let sent: Vec<&Value> = ["max_completion_tokens", "temperature", "top_p", "stop", "seed", "stream"]
            .iter()
            .map(|field| &body[*field])
            .collect();
        let stream = if index < 3 { Value::Null } else { json!(true) };
        assert_eq!(
            sent,
            [&json!(800), &json!(0.3), &json!(0.85), &json!(["END", "\n\nUser:"]), &json!(1234), &stream],
            "request {index}"
        );
    }
    let first = bodies[0].as_object().unwrap();
    let mut fields: Vec<&str> = first.keys().map(String::as_str).collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        ["max_completion_tokens", "messages", "model", "seed", "stop", "temperature", "tools", "top_p"],
        "nothing else was sent"
    );
}
