//! The call flood: many tool calls in one reply, whole or streamed.
//!
//! # Invariants
//!
//! - The whole reply is written item by item, never built in memory, so a flood of any size
//!   costs one item (plus the responder's pending bytes); its `Content-Length` is computed in
//!   advance from the item lengths, which differ only by the digits of their index.
//! - The streamed reply is well formed: one event per call, a finish chunk with
//!   `finish_reason: "tool_calls"`, `[DONE]` and the end of the chunked body (unless the budget
//!   cuts it first).

use tokio::io::AsyncWrite;

use crate::hostile::payload;
use crate::hostile::response::{Framing, Responder, Sent};

/// The tool-call item of index `index` (id `c{index}`); `name` and `arguments` are JSON string
/// literals.
fn item(index: usize, name: &str, arguments: &str) -> String {
    payload::tool_call_item(index, &format!("c{index}"), name, arguments)
}

/// How many decimal digits the numbers `0..n` have in all.
fn digits_total(n: u64) -> u64 {
    let (mut total, mut low, mut high, mut digits) = (0_u64, 0_u64, 10_u64, 1_u64);
    while low < n {
        total = total.saturating_add(digits.saturating_mul(n.min(high) - low));
        low = high;
        high = high.saturating_mul(10);
        digits += 1;
    }
    total
}

/// The length of the whole reply of `calls` items: prefix, items, commas, suffix.
fn whole_len(calls: usize, name: &str, arguments: &str) -> u64 {
    let calls = calls as u64;
    // Item 0 has two one-digit numbers (its index and its id); item i has two of digits(i).
    let fixed = item(0, name, arguments).len() as u64 - 2;
    let items = calls.saturating_mul(fixed).saturating_add(digits_total(calls).saturating_mul(2));
    (payload::CALLS_PREFIX.len() + payload::CALLS_SUFFIX.len()) as u64
        + items.saturating_add(calls.saturating_sub(1))
}

/// One whole `chat.completion` with `calls` tool calls.
pub(super) async fn whole<S: AsyncWrite + Unpin>(
    mut out: Responder<'_, S>,
    calls: usize,
    name: &str,
    arguments: &str,
) -> Sent {
    let (name, arguments) = (payload::json_string(name), payload::json_string(arguments));
    out.head(200, "application/json", Framing::Length(whole_len(calls, &name, &arguments)));
    out.body(payload::CALLS_PREFIX.as_bytes()).await?;
    for index in 0..calls {
        let separator = if index == 0 { "" } else { "," };
        out.body(format!("{separator}{}", item(index, &name, &arguments)).as_bytes()).await?;
    }
    out.body(payload::CALLS_SUFFIX.as_bytes()).await?;
    out.finish().await
}

/// `calls` tool calls as server-sent events, one per call, then the finish chunk and `[DONE]`.
pub(super) async fn streamed<S: AsyncWrite + Unpin>(
    mut out: Responder<'_, S>,
    calls: usize,
    name: &str,
    arguments: &str,
) -> Sent {
    let (name, arguments) = (payload::json_string(name), payload::json_string(arguments));
    out.sse_head(200);
    out.body(&payload::role_event()).await?;
    for index in 0..calls {
        out.body(&payload::tool_call_event(&item(index, &name, &arguments))).await?;
    }
    out.body(&payload::finish_event("tool_calls")).await?;
    out.body(payload::DONE).await?;
    out.finish().await
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;

    use super::*;

    #[test]
    fn digits_add_up() {
        for n in [0_u64, 1, 9, 10, 11, 99, 100, 101, 12_345] {
            let naive: u64 = (0..n).map(|i| i.to_string().len() as u64).sum();
            assert_eq!(digits_total(n), naive, "n = {n}");
        }
        assert!(digits_total(u64::MAX) > 0);
    }

    #[tokio::test]
    async fn the_length_matches_the_body() {
        for calls in [0, 1, 2, 10, 11, 101, 1_001] {
            let sent = AtomicU64::new(0);
            let mut raw = Vec::new();
            whole(Responder::new(&mut raw, u64::MAX, &sent), calls, "read\"ticket", "{\"input\":\"x\"}")
                .await
                .unwrap();
            let text = String::from_utf8(raw).unwrap();
            let (head, body) = text.split_once("\r\n\r\n").unwrap();
            assert!(head.contains(&format!("Content-Length: {}\r\n", body.len())), "calls = {calls}");
            let reply: serde_json::Value = serde_json::from_str(body).unwrap();
            let items = reply["choices"][0]["message"]["tool_calls"].as_array().unwrap();
            assert_eq!(items.len(), calls);
        }
    }
}
