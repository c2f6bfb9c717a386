//! The reply full of terminal control sequences, whole and streamed.

use loopbound_testkit::hostile::{Behaviour, ESCAPE_TEXT, FAKE_STATUS_LINE, HostileServer};

use crate::client::post;

#[tokio::test]
async fn a_whole_reply_carries_every_control_sequence() {
    let server = HostileServer::start(Behaviour::EscapeSequences).await.unwrap();
    let response = post(&server, false).await;
    assert_eq!((response.status, response.header("content-type")), (200, Some("application/json")));
    assert!(response.text().contains(r"\u001b[2J\u001b[H"), "JSON escapes ESC");
    let content = response.json()["choices"][0]["message"]["content"].as_str().unwrap().to_owned();
    assert_eq!(content, ESCAPE_TEXT);
    for control in ["\u{1b}[2J", "\u{1b}[H", "\r", "\u{7}", "\u{9b}", "\u{7f}", FAKE_STATUS_LINE] {
        assert!(content.contains(control), "{control:?}");
    }
}

#[tokio::test]
async fn a_stream_splits_an_escape_sequence_across_deltas() {
    let server = HostileServer::start(Behaviour::EscapeSequences).await.unwrap();
    let response = post(&server, true).await;
    assert_eq!(response.header("content-type"), Some("text/event-stream"));
    assert!(response.complete && response.text().ends_with("data: [DONE]\n\n"));
    let deltas = response.deltas();
    assert_eq!(deltas[1], "\u{1b}", "the first delta ends mid-sequence");
    assert_eq!(deltas.concat(), ESCAPE_TEXT);
}
