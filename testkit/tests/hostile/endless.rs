//! The endless streams stop at the budget, never with `[DONE]`.

use std::time::Duration;

use loopbound_testkit::hostile::{Behaviour, Budget, HostileServer};
use tokio::io::AsyncReadExt;
use tokio::time::Instant;

use crate::client::{PATIENCE, chat_body, post, request, send};

const MIB: usize = 1024 * 1024;
const SMALL: Budget = Budget::new(8 * MIB as u64, Duration::from_secs(10));

#[tokio::test]
async fn endless_text_stops_at_the_byte_budget() {
    let server = HostileServer::start_with(Behaviour::EndlessText { delta: MIB }, SMALL).await.unwrap();
    let response = post(&server, true).await;
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-type"), Some("text/event-stream"));
    assert_eq!(response.header("connection"), Some("close"));
    assert!(response.body.starts_with(b"data: {"));
    assert_eq!(response.body.len(), 8 * MIB, "cut exactly at the budget");
    assert!(!response.complete, "the chunked body is never ended");
    assert!(!response.body.windows(6).any(|w| w == b"[DONE]"));
    let deltas = response.deltas();
    assert_eq!(deltas[0], "", "the role chunk comes first");
    assert!(deltas.len() >= 7);
    assert!(deltas[1..].iter().all(|delta| delta.len() == MIB && delta.bytes().all(|b| b == b'a')));
    assert_eq!(server.bytes_sent(), 8 * MIB as u64);
    assert_eq!(server.requests(), 1);
}

#[tokio::test]
async fn endless_call_indices_open_a_new_call_each_time() {
    let budget = Budget::new(MIB as u64, Duration::from_secs(10));
    let server = HostileServer::start_with(Behaviour::EndlessCallIndices, budget).await.unwrap();
    let response = post(&server, true).await;
    assert_eq!(response.header("content-type"), Some("text/event-stream"));
    assert_eq!(response.body.len(), MIB);
    assert!(!response.complete);
    let chunks = response.chunks();
    assert!(chunks.len() > 1000, "{} chunks", chunks.len());
    for (n, chunk) in chunks[1..].iter().enumerate() {
        let call = &chunk["choices"][0]["delta"]["tool_calls"][0];
        assert_eq!(call["index"], n);
        assert_eq!(call["id"], format!("c{n}"));
        assert_eq!(call["function"]["name"], "read_ticket");
        assert_eq!(call["function"]["arguments"], r#"{"input":42}"#);
        assert!(chunk["choices"][0]["finish_reason"].is_null());
    }
}

#[tokio::test]
async fn endless_arguments_grow_one_call_forever() {
    let server = HostileServer::start_with(Behaviour::EndlessArguments { delta: MIB }, SMALL).await.unwrap();
    let response = post(&server, true).await;
    assert_eq!(response.body.len(), 8 * MIB);
    assert!(!response.complete);
    assert!(!response.body.windows(6).any(|w| w == b"[DONE]"));
    let chunks = response.chunks();
    let opening = &chunks[1]["choices"][0]["delta"]["tool_calls"][0];
    assert_eq!(opening["index"], 0);
    assert_eq!(opening["function"]["name"], "read_ticket");
    assert_eq!(opening["function"]["arguments"], r#"{"input":""#);
    assert!(chunks.len() >= 8);
    for chunk in &chunks[2..] {
        let call = &chunk["choices"][0]["delta"]["tool_calls"][0];
        assert_eq!(call["index"], 0);
        let growth = call["function"]["arguments"].as_str().unwrap();
        assert!(growth.len() == MIB && growth.bytes().all(|b| b == b'7'));
    }
}

#[tokio::test]
async fn a_client_that_never_reads_is_cut_at_the_time_budget() {
    let budget = Budget::new(1 << 30, Duration::from_secs(1));
    let server = HostileServer::start_with(Behaviour::EndlessText { delta: MIB }, budget).await.unwrap();
    let started = Instant::now();
    let mut stream = send(&server, &request(&chat_body(true), None)).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // Whatever sat in the socket buffers is read, then the server's close.
    let mut total = 0_usize;
    let mut buf = vec![0_u8; 256 * 1024];
    loop {
        match tokio::time::timeout(PATIENCE, stream.read(&mut buf)).await.expect("closed in time") {
            Ok(0) | Err(_) => break,
            Ok(n) => total += n,
        }
    }
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    assert!(total < 1 << 30);
    assert!(server.bytes_sent() < 1 << 30);
}

#[tokio::test]
async fn a_fast_reader_is_cut_at_the_time_budget() {
    let budget = Budget::new(u64::MAX, Duration::from_millis(800));
    let server = HostileServer::start_with(Behaviour::EndlessCallIndices, budget).await.unwrap();
    let started = Instant::now();
    let mut stream = send(&server, &request(&chat_body(true), None)).await;
    let mut buf = vec![0_u8; 256 * 1024];
    loop {
        match tokio::time::timeout(PATIENCE, stream.read(&mut buf)).await.expect("closed in time") {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(750) && elapsed < Duration::from_secs(5), "{elapsed:?}");
    assert!(server.bytes_sent() > 0);
}
