//! A plain HTTP/1.1 client over `tokio::net::TcpStream`, just enough to see what the server
//! sends: the status, the headers, the body (de-chunked) and whether the body was complete.

use std::time::Duration;

use loopbound_testkit::hostile::{Behaviour, Budget, HostileServer};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The key every test sends, unless it says otherwise.
pub(crate) const KEY: &str = "sk-hostile-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGH";

/// How long any read of a test may take before the test fails instead of hanging.
pub(crate) const PATIENCE: Duration = Duration::from_secs(20);

/// A chat-completions request body, streamed or not.
pub(crate) fn chat_body(stream: bool) -> String {
    format!(
        r#"{{"model":"m","messages":[{{"role":"user","content":"review ticket 42"}}],"stream":{stream}}}"#
    )
}

/// The bytes of `POST /v1/chat/completions` with `body`, authorized by `key` when given.
pub(crate) fn request(body: &str, key: Option<&str>) -> Vec<u8> {
    let auth = key.map(|key| format!("Authorization: Bearer {key}\r\n")).unwrap_or_default();
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n{auth}Content-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The bytes of `POST /v1/messages` (the Anthropic mode) with a Messages API body, streamed or
/// not, authorized by `key` as `x-api-key`.
pub(crate) fn messages_request(stream: bool, key: &str) -> Vec<u8> {
    let body = format!(
        r#"{{"model":"m","max_tokens":800,"messages":[{{"role":"user","content":[{{"type":"text","text":"review ticket 42"}}]}}],"stream":{stream}}}"#
    );
    format!(
        "POST /v1/messages HTTP/1.1\r\nHost: localhost\r\nx-api-key: {key}\r\nanthropic-version: 2023-06-01\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The bytes of `POST /v1/responses` (the Responses mode) with a Responses API body, streamed or
/// not, authorized by `key` as a bearer token.
pub(crate) fn responses_request(stream: bool, key: &str) -> Vec<u8> {
    let body = format!(
        r#"{{"model":"m","input":[{{"role":"user","content":"review ticket 42"}}],"max_output_tokens":800,"store":false,"stream":{stream}}}"#
    );
    format!(
        "POST /v1/responses HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Starts a server with `behaviour` within `budget`, sends it `raw` and reads the one response.
pub(crate) async fn post_once(behaviour: Behaviour, budget: Budget, raw: &[u8]) -> Response {
    let server = HostileServer::start_with(behaviour, budget).await.unwrap();
    let response = exchange(&server, raw).await;
    assert_eq!(server.requests(), 1);
    response
}

/// The data of the named events of `response` (comments aside), each checked to be named after
/// its `type`, as the Messages and Responses APIs name their events.
pub(crate) fn named_events(response: &Response) -> Vec<Value> {
    response
        .events()
        .into_iter()
        .filter(|event| !event.starts_with(':'))
        .map(|event| {
            let (name, data) = event.split_once('\n').expect("an event and a data line");
            let json: Value = serde_json::from_str(data.strip_prefix("data: ").expect("data")).expect("JSON");
            assert_eq!(
                name.strip_prefix("event: "),
                json["type"].as_str(),
                "the event is named after its type"
            );
            json
        })
        .collect()
}

/// The `type` of each of `events`.
pub(crate) fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|event| event["type"].as_str().unwrap()).collect()
}

/// Connects to `server` and sends `raw`.
pub(crate) async fn send(server: &HostileServer, raw: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(server.addr()).await.expect("connects");
    stream.write_all(raw).await.expect("sends");
    stream
}

/// What came back on one connection.
#[derive(Debug)]
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    /// The body, de-chunked when chunked.
    pub(crate) body: Vec<u8>,
    /// Whether the body ended as its framing says (the zero chunk, or `Content-Length` bytes).
    pub(crate) complete: bool,
}

impl Response {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub(crate) fn text(&self) -> &str {
        std::str::from_utf8(&self.body).expect("UTF-8 body")
    }

    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("JSON body")
    }

    /// The complete server-sent events of the body, as their raw text (without the blank line).
    pub(crate) fn events(&self) -> Vec<&str> {
        let text = self.text();
        let complete = text.rfind("\n\n").map_or("", |end| &text[..end]);
        complete.split("\n\n").filter(|event| !event.is_empty()).collect()
    }

    /// The JSON of every complete `data:` event but `[DONE]`.
    pub(crate) fn chunks(&self) -> Vec<Value> {
        self.events()
            .into_iter()
            .filter_map(|event| event.strip_prefix("data: "))
            .filter(|data| *data != "[DONE]")
            .map(|data| serde_json::from_str(data).expect("JSON chunk"))
            .collect()
    }

    /// The content deltas of the chunks, in order.
    pub(crate) fn deltas(&self) -> Vec<String> {
        self.chunks()
            .iter()
            .filter_map(|chunk| chunk["choices"][0]["delta"]["content"].as_str().map(str::to_owned))
            .collect()
    }
}

/// Reads everything until the server closes, then parses it.
pub(crate) async fn read_response(stream: &mut TcpStream) -> Response {
    let mut raw = Vec::new();
    let read =
        tokio::time::timeout(PATIENCE, stream.read_to_end(&mut raw)).await.expect("server closes in time");
    // A reset after a cut stream still leaves what was read in `raw`.
    let _ = read;
    parse(&raw)
}

/// Sends `raw` and reads the whole response.
pub(crate) async fn exchange(server: &HostileServer, raw: &[u8]) -> Response {
    let mut stream = send(server, raw).await;
    read_response(&mut stream).await
}

/// Sends a chat-completions request (authorized by [`KEY`]) and reads the whole response.
pub(crate) async fn post(server: &HostileServer, stream: bool) -> Response {
    exchange(server, &request(&chat_body(stream), Some(KEY))).await
}

/// Parses one raw HTTP/1.1 response.
pub(crate) fn parse(raw: &[u8]) -> Response {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("a whole head");
    let head = std::str::from_utf8(&raw[..end]).expect("UTF-8 head");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().expect("a status line");
    let status = status_line.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("a status");
    let headers = lines
        .map(|line| {
            let (name, value) = line.split_once(':').expect("a header");
            (name.to_owned(), value.trim().to_owned())
        })
        .collect();
    let mut response = Response { status, headers, body: Vec::new(), complete: false };
    let rest = &raw[end + 4..];
    if response.header("transfer-encoding") == Some("chunked") {
        (response.body, response.complete) = dechunk(rest);
    } else {
        let length: Option<usize> = response.header("content-length").map(|l| l.parse().expect("a length"));
        response.body = rest.to_vec();
        response.complete = length.is_some_and(|length| length == rest.len());
    }
    response
}

/// The body of a chunked encoding, and whether its zero chunk came.
pub(crate) fn dechunk(mut rest: &[u8]) -> (Vec<u8>, bool) {
    let mut body = Vec::new();
    loop {
        let Some(line_end) = rest.windows(2).position(|w| w == b"\r\n") else { return (body, false) };
        let size = std::str::from_utf8(&rest[..line_end]).expect("UTF-8 size");
        let size = usize::from_str_radix(size, 16).expect("a hex size");
        rest = &rest[line_end + 2..];
        if size == 0 {
            return (body, rest == b"\r\n");
        }
        let take = size.min(rest.len());
        body.extend_from_slice(&rest[..take]);
        if take < size {
            return (body, false);
        }
        rest = rest.get(size + 2..).unwrap_or_default();
    }
}
