//! The call flood: a quarter of a million tool calls in one reply, whole or streamed.

use std::time::Duration;

use loopbound_testkit::hostile::{Behaviour, Budget, HostileServer};

use crate::client::post;

fn flood(calls: usize, name: &str) -> Behaviour {
    Behaviour::CallFlood { calls, arguments: r#"{"input":"x"}"#.to_owned(), name: name.to_owned() }
}

#[tokio::test]
async fn a_whole_reply_holds_every_call() {
    let server = HostileServer::start(flood(250_000, "read_ticket")).await.unwrap();
    let response = post(&server, false).await;
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-type"), Some("application/json"));
    assert!(response.complete, "the Content-Length matches the body");
    assert_eq!(server.bytes_sent(), response.body.len() as u64);
    // The whole reply is about 26 MB: a debug-build `Value` of it takes seconds to build and
    // drop, so it is checked piece by piece; the next test parses a smaller flood whole.
    let text = response.text();
    let (head, rest) = text.split_once(r#""tool_calls":["#).unwrap();
    let (items, tail) = rest.rsplit_once("]},").unwrap();
    let envelope: serde_json::Value =
        serde_json::from_str(&format!(r#"{head}"tool_calls":[]}},{tail}"#)).unwrap();
    assert_eq!(envelope["object"], "chat.completion");
    assert_eq!(envelope["choices"][0]["finish_reason"], "tool_calls");
    assert!(envelope["choices"][0]["message"]["content"].is_null());
    let items: Vec<&str> = items.split(r#"},{"index":"#).collect();
    assert_eq!(items.len(), 250_000);
    for (n, item) in items.iter().enumerate().step_by(997).chain([(249_999, &items[249_999])]) {
        let item = item.strip_prefix(r#"{"index":"#).unwrap_or(item).trim_end_matches('}');
        let call: serde_json::Value = serde_json::from_str(&format!(r#"{{"index":{item}}}}}"#)).unwrap();
        assert_eq!(call["index"], n);
        assert_eq!(call["id"], format!("c{n}"));
        assert_eq!(call["function"]["name"], "read_ticket");
        assert_eq!(call["function"]["arguments"], r#"{"input":"x"}"#);
    }
}

#[tokio::test]
async fn a_whole_reply_of_some_calls_parses_whole() {
    let server = HostileServer::start(flood(10_000, "no_such_tool")).await.unwrap();
    let reply = post(&server, false).await.json();
    let calls = reply["choices"][0]["message"]["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 10_000);
    assert!(
        calls
            .iter()
            .enumerate()
            .all(|(n, call)| call["index"] == n && call["function"]["name"] == "no_such_tool")
    );
}

#[tokio::test]
async fn a_streamed_flood_sends_one_delta_per_call_then_done() {
    let server = HostileServer::start(flood(1000, "no_such_tool")).await.unwrap();
    let response = post(&server, true).await;
    assert_eq!(response.header("content-type"), Some("text/event-stream"));
    assert!(response.complete);
    assert!(response.text().ends_with("data: [DONE]\n\n"));
    let chunks = response.chunks();
    assert_eq!(chunks.len(), 1 + 1000 + 1, "role, calls, finish");
    for (n, chunk) in chunks[1..=1000].iter().enumerate() {
        let call = &chunk["choices"][0]["delta"]["tool_calls"][0];
        assert_eq!(
            (call["index"].as_u64(), call["function"]["name"].as_str()),
            (Some(n as u64), Some("no_such_tool"))
        );
    }
    assert_eq!(chunks[1001]["choices"][0]["finish_reason"], "tool_calls");
}

#[tokio::test]
async fn the_budget_cuts_a_flood_short_of_its_length() {
    let budget = Budget::new(1024 * 1024, Duration::from_secs(10));
    let server = HostileServer::start_with(flood(250_000, "read_ticket"), budget).await.unwrap();
    let response = post(&server, false).await;
    let declared: usize = response.header("content-length").unwrap().parse().unwrap();
    assert!(declared > 20 * 1024 * 1024, "{declared}");
    assert_eq!(response.body.len(), 1024 * 1024);
    assert!(!response.complete);
}
