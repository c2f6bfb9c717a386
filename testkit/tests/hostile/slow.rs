//! The slow behaviours: a trickled reply and a stream of keep-alive comments only.

use std::time::Duration;

use loopbound_testkit::hostile::{Behaviour, Budget, HostileServer, Reply};
use tokio::io::AsyncReadExt;
use tokio::time::Instant;

use crate::client::{PATIENCE, chat_body, parse, post, request, send};

#[tokio::test]
async fn a_trickle_sends_one_byte_per_interval() {
    let body = Reply::text("Review finished.").body;
    let interval = Duration::from_millis(4);
    let server = HostileServer::start(Behaviour::Trickle { body: body.clone(), interval }).await.unwrap();
    let started = Instant::now();
    let mut stream = send(&server, &request(&chat_body(false), None)).await;
    let (mut raw, mut reads) = (Vec::new(), 0_usize);
    let mut buf = [0_u8; 4096];
    loop {
        let n = tokio::time::timeout(PATIENCE, stream.read(&mut buf)).await.expect("in time").expect("read");
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&buf[..n]);
        reads += 1;
    }
    let elapsed = started.elapsed();
    let response = parse(&raw);
    assert!(response.complete);
    assert_eq!(response.text(), body);
    assert_eq!(response.json()["choices"][0]["message"]["content"], "Review finished.");
    let least = interval * u32::try_from(body.len() - 1).unwrap();
    assert!(elapsed >= least, "{elapsed:?} < {least:?}");
    assert!(reads > body.len() / 4, "{reads} reads for {} bytes: the bytes came apart", body.len());
}

#[tokio::test]
async fn a_trickle_longer_than_the_time_budget_is_cut() {
    let body = Reply::text("Review finished.").body;
    let budget = Budget::new(1024, Duration::from_millis(500));
    let behaviour = Behaviour::Trickle { body: body.clone(), interval: Duration::from_millis(50) };
    let server = HostileServer::start_with(behaviour, budget).await.unwrap();
    let started = Instant::now();
    let response = post(&server, false).await;
    let elapsed = started.elapsed();
    assert!(!response.complete);
    assert!(response.body.len() < body.len() / 4, "{} bytes", response.body.len());
    assert!(elapsed >= Duration::from_millis(450) && elapsed < Duration::from_secs(3), "{elapsed:?}");
}

#[tokio::test]
async fn keep_alive_comments_flow_until_the_time_budget() {
    let budget = Budget::new(8 * 1024 * 1024, Duration::from_secs(1));
    let behaviour = Behaviour::KeepAliveForever { interval: Duration::from_millis(50) };
    let server = HostileServer::start_with(behaviour, budget).await.unwrap();
    let started = Instant::now();
    let response = post(&server, true).await;
    let elapsed = started.elapsed();
    assert_eq!(response.header("content-type"), Some("text/event-stream"));
    assert!(!response.complete);
    let events = response.events();
    assert!((10..=25).contains(&events.len()), "{} comments", events.len());
    assert!(events.iter().all(|event| *event == ": keep-alive"));
    assert!(elapsed >= Duration::from_millis(950) && elapsed < Duration::from_secs(3), "{elapsed:?}");
}

#[tokio::test]
async fn a_delayed_reply_starts_after_its_delay() {
    let behaviour = Behaviour::Delayed {
        delay: Duration::from_millis(300),
        then: Box::new(Behaviour::Reply(Reply::text("late"))),
    };
    let server = HostileServer::start(behaviour).await.unwrap();
    let started = Instant::now();
    let response = post(&server, false).await;
    let elapsed = started.elapsed();
    assert_eq!(response.json()["choices"][0]["message"]["content"], "late");
    assert!(elapsed >= Duration::from_millis(300) && elapsed < Duration::from_secs(3), "{elapsed:?}");
}
