//! A tiny HTTP server on 127.0.0.1 that gives one canned answer per connection, for what a
//! well-behaved mock server does not produce: cut bodies, silence, early closes, exact bytes.
//! Every provider transport's HTTP tests use it.
//!
//! # Invariants
//!
//! - It listens on loopback only and stops, closing its listener, when the [`Canned`] is dropped.
//! - Each connection gets the next answer, in order; connections past the last answer are closed
//!   at once. Every request's head and body are recorded, in arrival order.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// What the server does with one connection, after reading its request.
#[derive(Clone, Debug)]
pub enum Answer {
    /// Writes these bytes, then closes.
    Bytes(Vec<u8>),
    /// Writes these bytes, then waits until the client closes the connection.
    ThenHang(Vec<u8>),
}

/// A running canned server; stops when dropped.
#[derive(Debug)]
pub struct Canned {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<(String, String)>>>,
    client_closed: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

/// A complete response with a `Content-Length`.
pub fn response(status: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut head = format!("HTTP/1.1 {status}\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    [head.into_bytes(), body.to_vec()].concat()
}

/// The head of an event stream whose body runs until the connection closes.
pub fn event_stream(body: &str) -> Vec<u8> {
    format!("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: text/event-stream\r\n\r\n{body}")
        .into_bytes()
}

/// A 200 JSON response.
pub fn json(body: &str) -> Vec<u8> {
    response("200 OK", &[("Content-Type", "application/json")], body.as_bytes())
}

/// Reads one request (head and `Content-Length` body) and returns its head (lower-cased) and its
/// body, as text.
async fn read_request(socket: &mut TcpStream) -> (String, String) {
    let mut data = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        if let Some(end) = data.windows(4).position(|window| window == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .and_then(|value| value.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if data.len() >= end + 4 + length {
                return (head, String::from_utf8_lossy(&data[end + 4..end + 4 + length]).into_owned());
            }
        }
        match socket.read(&mut buffer).await {
            Ok(0) | Err(_) => return (String::new(), String::from_utf8_lossy(&data).into_owned()),
            Ok(read) => data.extend_from_slice(&buffer[..read]),
        }
    }
}

impl Canned {
    /// Serves `answers` in order, one per connection; later connections are closed at once.
    pub async fn start(answers: Vec<Answer>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a free loopback port");
        let addr = listener.local_addr().expect("a bound address");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let client_closed = Arc::new(AtomicBool::new(false));
        let (seen, closed) = (Arc::clone(&requests), Arc::clone(&client_closed));
        let task = tokio::spawn(async move {
            let mut answers = answers.into_iter();
            while let Ok((mut socket, _)) = listener.accept().await {
                let request = read_request(&mut socket).await;
                seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(request);
                match answers.next() {
                    Some(Answer::Bytes(bytes)) => {
                        let _ = socket.write_all(&bytes).await;
                        let _ = socket.shutdown().await;
                    }
                    Some(Answer::ThenHang(bytes)) => {
                        let _ = socket.write_all(&bytes).await;
                        let closed = Arc::clone(&closed);
                        tokio::spawn(async move {
                            let mut rest = [0u8; 64];
                            while matches!(socket.read(&mut rest).await, Ok(read) if read > 0) {}
                            closed.store(true, Ordering::SeqCst);
                        });
                    }
                    None => drop(socket),
                }
            }
        });
        Self { addr, requests, client_closed, task }
    }

    /// The base URL to configure.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The request bodies received so far.
    pub fn requests(&self) -> Vec<String> {
        self.seen().into_iter().map(|(_, body)| body).collect()
    }

    /// The request heads received so far (request line and headers, lower-cased).
    pub fn heads(&self) -> Vec<String> {
        self.seen().into_iter().map(|(head, _)| head).collect()
    }

    fn seen(&self) -> Vec<(String, String)> {
        self.requests.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Whether the client closed a connection the server was holding open.
    pub fn client_closed(&self) -> bool {
        self.client_closed.load(Ordering::SeqCst)
    }
}

impl Drop for Canned {
    fn drop(&mut self) {
        self.task.abort();
    }
}
