//! The key echoes carry the key of the request's own `Authorization` header.

use loopbound_testkit::hostile::{Behaviour, HostileServer, KeyPart, KeyPlace};

use crate::client::{KEY, chat_body, exchange, post, request};

fn echo(status: u16, place: KeyPlace, part: KeyPart) -> Behaviour {
    Behaviour::EchoKey { status, padding: 1000, place, part }
}

#[tokio::test]
async fn an_error_body_echoes_the_key_after_padding() {
    let server = HostileServer::start(echo(401, KeyPlace::ErrorBody, KeyPart::Whole)).await.unwrap();
    let response = post(&server, false).await;
    assert_eq!(response.status, 401);
    assert_eq!(response.header("content-type"), Some("application/json"));
    let error = &response.json()["error"];
    let message = error["message"].as_str().unwrap();
    assert!(message.starts_with(&".".repeat(1000)));
    assert!(message.ends_with(&format!("the key you sent was {KEY}")), "{message}");
    assert_eq!(error["code"], "invalid_api_key");
}

#[tokio::test]
async fn the_echo_is_the_key_actually_sent() {
    let server = HostileServer::start(echo(503, KeyPlace::ErrorBody, KeyPart::Whole)).await.unwrap();
    for key in ["sk-first-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "sk-second-\"quoted\"\\-bbbbbbbbbbbbbbbbbbbb"]
    {
        let response = exchange(&server, &request(&chat_body(false), Some(key))).await;
        assert_eq!(response.status, 503);
        assert!(response.json()["error"]["message"].as_str().unwrap().ends_with(key));
    }
    let anonymous = exchange(&server, &request(&chat_body(false), None)).await;
    assert!(anonymous.json()["error"]["message"].as_str().unwrap().ends_with("was "));
}

#[tokio::test]
async fn a_text_reply_echoes_the_key() {
    let server = HostileServer::start(echo(200, KeyPlace::Text, KeyPart::Whole)).await.unwrap();
    let response = post(&server, true).await;
    assert_eq!((response.status, response.header("content-type")), (200, Some("application/json")));
    let content = response.json()["choices"][0]["message"]["content"].as_str().unwrap().to_owned();
    assert!(content.contains(KEY));
}

#[tokio::test]
async fn tool_call_fields_echo_the_key() {
    let server = HostileServer::start(echo(200, KeyPlace::ToolCallFields, KeyPart::Whole)).await.unwrap();
    let reply = post(&server, false).await.json();
    let call = &reply["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["id"], format!("call_{KEY}"));
    assert_eq!(call["function"]["name"], format!("key_{KEY}"));
    let arguments: serde_json::Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert!(arguments["input"].as_str().unwrap().ends_with(KEY));
}

#[tokio::test]
async fn a_stream_splits_the_key_across_two_deltas() {
    let server = HostileServer::start(echo(200, KeyPlace::StreamText, KeyPart::Whole)).await.unwrap();
    let response = post(&server, false).await;
    assert_eq!(response.header("content-type"), Some("text/event-stream"));
    assert!(response.complete && response.text().ends_with("data: [DONE]\n\n"));
    let deltas = response.deltas();
    assert_eq!(deltas.len(), 3, "role, first half, second half: {deltas:?}");
    assert!(deltas.iter().all(|delta| !delta.contains(KEY)));
    assert!(deltas[2].len() >= KEY.len() / 2);
    assert!(deltas.concat().ends_with(&format!("the key you sent was {KEY}")));
}

#[tokio::test]
async fn a_part_of_the_key_is_echoed_alone() {
    let server = HostileServer::start(echo(401, KeyPlace::ErrorBody, KeyPart::Chars(5..40))).await.unwrap();
    let message = post(&server, false).await.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(message.ends_with(&format!("was {}", &KEY[5..40])), "{message}");
    assert!(!message.contains(KEY));
    // A range past the key's end is clamped, never a panic.
    let server = HostileServer::start(echo(401, KeyPlace::Text, KeyPart::Chars(50..500))).await.unwrap();
    let response = exchange(&server, &request(&chat_body(false), Some("short-ключ"))).await;
    assert_eq!(response.status, 401);
}
