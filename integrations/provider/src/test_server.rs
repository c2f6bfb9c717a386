//! A loopback server for the tests of the connections this crate drives itself (`h1`, `h2c`):
//! hyper's own HTTP/1.1 or HTTP/2 server, answering every request one scripted way, counting
//! the connections it accepts and keeping their tasks so that a test can drop them.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body::Frame;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::body::{BodyError, read_body};

/// How the server answers.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Answer {
    /// 200 with `ok`.
    Whole,
    /// Never.
    Never,
    /// 200, then a body that never ends.
    EndlessBody,
    /// 200, then 1 KiB pieces of a body, without end.
    Flood,
    /// 200 with `ok`, 100 ms after the request.
    Slow,
    /// 200 with the length of the request's body, once read whole.
    Echo,
    /// 200, then 6 MiB in 64 KiB pieces: three times an HTTP/2 client's stream window.
    Big,
}

/// The protocol the server speaks, and what it allows a connection.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Protocol {
    /// HTTP/1.1, keeping a connection alive after a response or closing it.
    Http1 { keep_alive: bool },
    /// HTTP/2, with at most `streams` at once and a receive window of `window`, when set.
    Http2 { streams: Option<u32>, window: Option<u32> },
}

/// A server on loopback: its address, the connections it accepted, and their tasks.
pub(crate) struct Server {
    pub(crate) authority: String,
    pub(crate) accepted: Arc<AtomicUsize>,
    pub(crate) connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Server {
    /// Connections accepted so far.
    pub(crate) fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Drops every connection accepted so far, from the server's side.
    pub(crate) fn drop_connections(&self) {
        for task in self.connections.lock().expect("the tasks").drain(..) {
            task.abort();
        }
    }
}

async fn answer(answer: Answer, request: hyper::Request<Incoming>) -> UnsyncBoxBody<Bytes, Infallible> {
    match answer {
        Answer::Whole => Full::new(Bytes::from_static(b"ok")).boxed_unsync(),
        Answer::Slow => {
            tokio::time::sleep(Duration::from_millis(100)).await;
            Full::new(Bytes::from_static(b"ok")).boxed_unsync()
        }
        Answer::Never => std::future::pending().await,
        Answer::EndlessBody => StreamBody::new(futures_util::stream::pending()).boxed_unsync(),
        Answer::Flood => StreamBody::new(futures_util::stream::repeat_with(|| {
            Ok(Frame::data(Bytes::from_static(&[b'x'; 1 << 10])))
        }))
        .boxed_unsync(),
        Answer::Echo => {
            let read = request.into_body().collect().await.map(|body| body.to_bytes().len());
            let text = read.map_or_else(|error| format!("error: {error}"), |n| n.to_string());
            Full::new(Bytes::from(text)).boxed_unsync()
        }
        Answer::Big => {
            let piece = Bytes::from(vec![b'y'; 64 << 10]);
            StreamBody::new(futures_util::stream::iter((0..96).map(move |_| Ok(Frame::data(piece.clone())))))
                .boxed_unsync()
        }
    }
}

/// A server speaking `protocol` that answers every request as `answer` says.
pub(crate) async fn serve(protocol: Protocol, scripted: Answer) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let authority = listener.local_addr().expect("an address").to_string();
    let accepted = Arc::new(AtomicUsize::new(0));
    let connections = Arc::new(Mutex::new(Vec::new()));
    let (count, tasks) = (Arc::clone(&accepted), Arc::clone(&connections));
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let service = service_fn(move |request| async move {
                Ok::<_, Infallible>(hyper::Response::new(answer(scripted, request).await))
            });
            let io = TokioIo::new(stream);
            let task = match protocol {
                Protocol::Http1 { keep_alive } => {
                    let connection = hyper::server::conn::http1::Builder::new()
                        .keep_alive(keep_alive)
                        .serve_connection(io, service);
                    tokio::spawn(async move {
                        let _ = connection.await;
                    })
                }
                Protocol::Http2 { streams, window } => {
                    let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
                    builder.max_concurrent_streams(streams);
                    if let Some(window) = window {
                        builder.initial_stream_window_size(window).initial_connection_window_size(window);
                    }
                    let connection = builder.serve_connection(io, service);
                    tokio::spawn(async move {
                        let _ = connection.await;
                    })
                }
            };
            tasks.lock().expect("the tasks").push(task);
        }
    });
    Server { authority, accepted, connections }
}

/// A response's body read up to 1 KiB, or why not: `too long`, or the read error.
pub(crate) async fn body_of(response: reqwest::Response) -> Result<Vec<u8>, String> {
    read_body(response, 1 << 10).await.map_err(|error| match error {
        BodyError::TooLong => "too long".to_owned(),
        BodyError::Read(error) => error.to_string(),
    })
}
