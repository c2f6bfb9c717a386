//! Minimal HTTP/1.1 request reading: the request line, the headers and a `Content-Length` body
//! under a cap.
//!
//! # Invariants
//!
//! - A request is read from untrusted bytes without a panic: every malformed head yields a
//!   [`ReadError`], never an index out of bounds or an `unwrap`.
//! - Memory is bounded: the head is at most [`MAX_HEAD`] bytes (plus one read), at most
//!   [`MAX_HEADERS`] headers, and the body at most the caller's cap; a larger declared body is
//!   refused before any of it is read.
//! - Only `Content-Length` bodies are read; a request with `Transfer-Encoding` is refused with
//!   411, so the reader never has to trust chunk sizes.
//! - Exactly the declared body is read; bytes after it (a pipelined request) are ignored, since
//!   every response closes its connection.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::hostile::dialect::Dialect;

/// The most bytes of request line and headers read before the request is refused with 431.
pub(crate) const MAX_HEAD: usize = 64 * 1024;
/// The most header lines read before the request is refused with 431.
pub(crate) const MAX_HEADERS: usize = 128;

/// One request, read whole.
#[derive(Debug)]
pub(crate) struct Request {
    /// The method, as sent.
    pub(crate) method: String,
    /// The request target (path and query), as sent.
    pub(crate) target: String,
    /// The headers in order, names as sent; invalid UTF-8 is replaced.
    pub(crate) headers: Vec<(String, String)>,
    /// The body, exactly `Content-Length` bytes.
    pub(crate) body: Vec<u8>,
}

impl Request {
    /// The value of the first header named `name` (compared without case).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The key of `Authorization: Bearer <KEY>`: the value after the scheme, or the whole value
    /// without a `Bearer` scheme, or empty without the header.
    pub(crate) fn bearer_key(&self) -> &str {
        let value = self.header("authorization").unwrap_or_default();
        match value.split_once(' ') {
            Some((scheme, key)) if scheme.eq_ignore_ascii_case("bearer") => key.trim(),
            _ => value,
        }
    }

    /// The key the request sent: `x-api-key` when present, else [`bearer_key`](Self::bearer_key).
    pub(crate) fn api_key(&self) -> &str {
        self.header("x-api-key").unwrap_or_else(|| self.bearer_key())
    }

    /// Whether the body is a JSON object with `"stream": true`.
    pub(crate) fn wants_stream(&self) -> bool {
        serde_json::from_slice::<serde_json::Value>(&self.body)
            .ok()
            .and_then(|body| body.get("stream").and_then(serde_json::Value::as_bool))
            .unwrap_or(false)
    }

    /// The API this request speaks: `POST /v1/chat/completions`, `POST /v1/messages` or
    /// `POST /v1/responses` (any
    /// query string aside); `None` for anything else.
    pub(crate) fn dialect(&self) -> Option<Dialect> {
        let path = self.target.split_once('?').map_or(self.target.as_str(), |(path, _)| path);
        match (self.method.as_str(), path) {
            ("POST", "/v1/chat/completions") => Some(Dialect::Chat),
            ("POST", "/v1/messages") => Some(Dialect::Messages),
            ("POST", "/v1/responses") => Some(Dialect::Responses),
            _ => None,
        }
    }
}

/// Why no whole request was read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ReadError {
    /// The connection failed or closed before a whole request: there is no one to answer.
    Closed,
    /// The request is unusable; answer `status` with `reason`, then close.
    Refused {
        /// The HTTP status of the answer.
        status: u16,
        /// Why, for the error body.
        reason: &'static str,
    },
    /// The declared body is larger than the cap; answer 413, then close. Nothing of it was read.
    TooLarge {
        /// The declared `Content-Length`.
        declared: u64,
    },
}

impl ReadError {
    const fn refused(status: u16, reason: &'static str) -> Self {
        Self::Refused { status, reason }
    }
}

/// Reads one request from `stream`, with a body of at most `max_body` bytes.
///
/// It answers `Expect: 100-continue` with an interim `100 Continue` before reading the body.
pub(crate) async fn read_request<S>(stream: &mut S, max_body: usize) -> Result<Request, ReadError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (head, rest) = read_head(stream).await?;
    let mut request = parse_head(&head)?;
    if request.header("transfer-encoding").is_some() {
        return Err(ReadError::refused(411, "only Content-Length request bodies are read"));
    }
    let declared = content_length(&request.headers)?;
    let len = match usize::try_from(declared) {
        Ok(len) if len <= max_body => len,
        _ => return Err(ReadError::TooLarge { declared }),
    };
    if request.header("expect").is_some_and(|v| v.eq_ignore_ascii_case("100-continue")) {
        stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await.map_err(|_| ReadError::Closed)?;
    }
    let mut body = Vec::with_capacity(len.min(1024 * 1024));
    body.extend_from_slice(rest.get(..len).unwrap_or(&rest));
    let missing = (len - body.len()) as u64;
    (&mut *stream).take(missing).read_to_end(&mut body).await.map_err(|_| ReadError::Closed)?;
    if body.len() != len {
        return Err(ReadError::Closed);
    }
    request.body = body;
    Ok(request)
}

/// Reads up to the blank line that ends the head; returns the head (without the blank line) and
/// the bytes read after it.
async fn read_head<S: AsyncRead + Unpin>(stream: &mut S) -> Result<(Vec<u8>, Vec<u8>), ReadError> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0_u8; 4096];
    loop {
        let searched = buf.len().saturating_sub(3);
        let n = stream.read(&mut chunk).await.map_err(|_| ReadError::Closed)?;
        if n == 0 {
            return Err(ReadError::Closed);
        }
        buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
        if let Some(at) = buf.get(searched..).unwrap_or_default().windows(4).position(|w| w == b"\r\n\r\n") {
            let end = searched + at;
            let rest = buf.split_off(end + 4);
            buf.truncate(end);
            return Ok((buf, rest));
        }
        if buf.len() > MAX_HEAD {
            return Err(ReadError::refused(431, "request head too large"));
        }
    }
}

/// The request of `head`: its method, target and headers, with an empty body.
fn parse_head(head: &[u8]) -> Result<Request, ReadError> {
    let head = String::from_utf8_lossy(head);
    let mut lines = head.split("\r\n");
    let line = lines.next().unwrap_or_default();
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(ReadError::refused(400, "malformed request line"));
    };
    if method.is_empty() || !target.starts_with('/') || !version.starts_with("HTTP/1.") {
        return Err(ReadError::refused(400, "malformed request line"));
    }
    let mut headers = Vec::new();
    for line in lines {
        if headers.len() == MAX_HEADERS {
            return Err(ReadError::refused(431, "too many request headers"));
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(ReadError::refused(400, "malformed header line"));
        };
        if name.is_empty() || name.bytes().any(|b| b.is_ascii_whitespace()) {
            return Err(ReadError::refused(400, "malformed header name"));
        }
        headers.push((name.to_owned(), value.trim().to_owned()));
    }
    Ok(Request { method: method.to_owned(), target: target.to_owned(), headers, body: Vec::new() })
}

/// The declared body length: 0 without `Content-Length`; every `Content-Length` must agree.
fn content_length(headers: &[(String, String)]) -> Result<u64, ReadError> {
    let mut declared = None;
    for (_, value) in headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case("content-length")) {
        let len = match value.parse::<u64>() {
            Ok(len) if value.bytes().all(|b| b.is_ascii_digit()) => len,
            _ => return Err(ReadError::refused(400, "malformed Content-Length")),
        };
        if declared.is_some_and(|d| d != len) {
            return Err(ReadError::refused(400, "conflicting Content-Length"));
        }
        declared = Some(len);
    }
    Ok(declared.unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read(bytes: &[u8], max_body: usize) -> Result<Request, ReadError> {
        let (mut client, mut server) = tokio::io::duplex(1 << 20);
        client.write_all(bytes).await.unwrap();
        drop(client);
        read_request(&mut server, max_body).await
    }

    #[tokio::test]
    async fn reads_a_request_with_a_body() {
        let raw = b"POST /v1/chat/completions HTTP/1.1\r\nAuthorization: Bearer sk-123\r\n\
                    Content-Length: 16\r\n\r\n{\"stream\": true}";
        let request = read(raw, 100).await.unwrap();
        assert_eq!(request.dialect(), Some(Dialect::Chat));
        assert!(request.wants_stream());
        assert_eq!(request.bearer_key(), "sk-123");
        assert_eq!(request.body.len(), 16);
    }

    #[tokio::test]
    async fn refuses_what_it_cannot_read() {
        let too_large = b"POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n";
        assert_eq!(read(too_large, 100).await.unwrap_err(), ReadError::TooLarge { declared: 101 });
        let chunked = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert!(matches!(read(chunked, 100).await, Err(ReadError::Refused { status: 411, .. })));
        for raw in [
            &b"GARBAGE\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\nno colon\r\n\r\n",
            b"GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
            b"GET / HTTP/1.1\r\nContent-Length: +1\r\n\r\n",
            b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            b"GET / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n",
        ] {
            assert!(matches!(read(raw, 100).await, Err(ReadError::Refused { status: 400, .. })), "{raw:?}");
        }
        let short = b"POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc";
        assert_eq!(read(short, 100).await.unwrap_err(), ReadError::Closed);
        let endless = vec![b'a'; MAX_HEAD + 10];
        assert!(matches!(read(&endless, 100).await, Err(ReadError::Refused { status: 431, .. })));
    }

    #[test]
    fn keys_without_bearer_are_whole() {
        let request = |value: &str| Request {
            method: "POST".into(),
            target: "/".into(),
            headers: vec![("authorization".into(), value.into())],
            body: Vec::new(),
        };
        assert_eq!(request("bearer  k ").bearer_key(), "k");
        assert_eq!(request("Basic abc").bearer_key(), "Basic abc");
        assert_eq!(request("").bearer_key(), "");
        let mut anthropic = request("Bearer other");
        anthropic.headers.push(("X-Api-Key".into(), "sk-ant".into()));
        assert_eq!(anthropic.api_key(), "sk-ant", "x-api-key wins");
        assert_eq!(request("Bearer k").api_key(), "k");
    }
}
