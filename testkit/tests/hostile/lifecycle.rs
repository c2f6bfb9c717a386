//! The server's life: loopback only, request bodies measured and capped, bad requests
//! answered, every connection closed by its budget or by the server's drop.

use std::time::Duration;

use loopbound_testkit::hostile::{Behaviour, Budget, HostileServer, MAX_REQUEST_BODY, Reply};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::client::{KEY, PATIENCE, chat_body, exchange, post, read_response, request, send};

fn text() -> Behaviour {
    Behaviour::Reply(Reply::text("Review finished."))
}

#[tokio::test]
async fn it_listens_on_loopback_only() {
    let server = HostileServer::start(text()).await.unwrap();
    assert!(server.addr().ip().is_loopback());
    assert_eq!(server.base_url(), format!("http://127.0.0.1:{}/v1", server.addr().port()));
    assert_eq!(server.budget(), Budget::default());
}

#[tokio::test]
async fn request_bodies_are_measured() {
    let server = HostileServer::start(text()).await.unwrap();
    let small = chat_body(false);
    post(&server, false).await;
    assert_eq!(server.last_request_body_len(), small.len());
    let large = format!(r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#, "y".repeat(300_000));
    let response = exchange(&server, &request(&large, Some(KEY))).await;
    assert_eq!(response.status, 200);
    assert_eq!(server.last_request_body_len(), large.len());
    post(&server, false).await;
    assert_eq!(server.last_request_body_len(), small.len());
    assert_eq!(server.largest_request_body_len(), large.len());
    assert_eq!(server.requests(), 3);
}

#[tokio::test]
async fn an_oversized_body_is_refused_unread() {
    let server = HostileServer::start(text()).await.unwrap();
    let declared = MAX_REQUEST_BODY + 1;
    let head = format!("POST /v1/chat/completions HTTP/1.1\r\nContent-Length: {declared}\r\n\r\n");
    let response = exchange(&server, head.as_bytes()).await;
    assert_eq!(response.status, 413);
    assert_eq!(server.last_request_body_len(), declared);
    assert_eq!(server.requests(), 1);
}

#[tokio::test]
async fn bad_requests_are_answered_and_the_server_goes_on() {
    let server = HostileServer::start(text()).await.unwrap();
    let cases: [(&[u8], u16); 4] = [
        (b"NONSENSE\r\n\r\n", 400),
        (b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: x\r\n\r\n", 400),
        (b"POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 411),
        (b"GET /v1/models HTTP/1.1\r\n\r\n", 404),
    ];
    for (raw, status) in cases {
        let response = exchange(&server, raw).await;
        assert_eq!(response.status, status, "{}", String::from_utf8_lossy(raw));
        assert!(response.json()["error"]["message"].is_string());
    }
    // A client that connects and leaves at once is no request.
    drop(TcpStream::connect(server.addr()).await.unwrap());
    // A garbage flood of a head is refused, not buffered forever.
    let mut flood = send(&server, &vec![b'z'; 200 * 1024]).await;
    assert_eq!(read_response(&mut flood).await.status, 431);
    let response = post(&server, false).await;
    assert_eq!(response.json()["choices"][0]["message"]["content"], "Review finished.");
    assert_eq!(server.requests(), 6);
}

#[tokio::test]
async fn expect_continue_is_honoured() {
    let server = HostileServer::start(text()).await.unwrap();
    let body = chat_body(false);
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let mut stream = send(&server, head.as_bytes()).await;
    let mut interim = [0_u8; 25];
    stream.read_exact(&mut interim).await.unwrap();
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    stream.write_all(body.as_bytes()).await.unwrap();
    assert_eq!(read_response(&mut stream).await.status, 200);
}

#[tokio::test]
async fn a_silent_client_is_closed_at_the_time_budget() {
    let budget = Budget::new(1024, Duration::from_millis(500));
    let server = HostileServer::start_with(text(), budget).await.unwrap();
    let started = Instant::now();
    let mut stream = TcpStream::connect(server.addr()).await.unwrap();
    let mut buf = [0_u8; 16];
    let read = tokio::time::timeout(PATIENCE, stream.read(&mut buf)).await.expect("closed in time");
    assert!(matches!(read, Ok(0) | Err(_)));
    assert!(started.elapsed() >= Duration::from_millis(450));
    assert_eq!(server.requests(), 0);
}

#[tokio::test]
async fn dropping_the_server_closes_every_connection() {
    let behaviour = Behaviour::KeepAliveForever { interval: Duration::from_millis(10) };
    let server = HostileServer::start(behaviour).await.unwrap();
    let addr = server.addr();
    let mut streams = Vec::new();
    for _ in 0..3 {
        let mut stream = send(&server, &request(&chat_body(true), None)).await;
        let mut first = [0_u8; 12];
        stream.read_exact(&mut first).await.unwrap();
        assert_eq!(&first, b"HTTP/1.1 200");
        streams.push(stream);
    }
    let started = Instant::now();
    drop(server);
    for mut stream in streams {
        let mut sink = Vec::new();
        let read = tokio::time::timeout(PATIENCE, stream.read_to_end(&mut sink)).await;
        assert!(read.is_ok(), "the connection closes after the drop");
    }
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    let refused = async {
        while TcpStream::connect(addr).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(2), refused).await.expect("the listener closes");
}
