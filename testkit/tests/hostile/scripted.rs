//! Scripts answer request n with behaviour n, then a `script_exhausted` error.

use loopbound_testkit::hostile::{Behaviour, HostileServer, Reply};

use crate::client::post;

#[tokio::test]
async fn a_normal_call_then_a_flood_then_exhaustion() {
    let script = Behaviour::Scripted(vec![
        Behaviour::Reply(Reply::tool_call("read_ticket", r#"{"input":42}"#)),
        Behaviour::CallFlood { calls: 500, arguments: r#"{"input":"x"}"#.into(), name: "read_ticket".into() },
        Behaviour::Reply(Reply::error(503, "overloaded", "server_error", "overloaded")),
    ]);
    let server = HostileServer::start(script).await.unwrap();

    let first = post(&server, false).await.json();
    let calls = first["choices"][0]["message"]["tool_calls"].as_array().unwrap().clone();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["function"]["arguments"], r#"{"input":42}"#);

    let second = post(&server, false).await.json();
    assert_eq!(second["choices"][0]["message"]["tool_calls"].as_array().unwrap().len(), 500);

    let third = post(&server, false).await;
    assert_eq!(third.status, 503);
    assert_eq!(third.json()["error"]["code"], "overloaded");

    let fourth = post(&server, false).await;
    assert_eq!(fourth.status, 500);
    assert_eq!(fourth.json()["error"]["code"], "script_exhausted");
    assert_eq!(server.requests(), 4);
}

#[tokio::test]
async fn a_canned_text_reply_is_sent_as_is() {
    let server = HostileServer::start(Behaviour::Reply(Reply::text("Review finished."))).await.unwrap();
    for _ in 0..3 {
        let response = post(&server, true).await;
        assert!(response.complete);
        assert_eq!(response.header("content-type"), Some("application/json"));
        assert_eq!(response.json()["choices"][0]["message"]["content"], "Review finished.");
    }
}
