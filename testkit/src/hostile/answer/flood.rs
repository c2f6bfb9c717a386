//! The call flood: many tool calls in one reply, whole or streamed.
//!
//! # Invariants
//!
//! - The whole reply is written item by item, never built in memory, so a flood of any size
//!   costs one item (plus the responder's pending bytes); its `Content-Length` is computed in
//!   advance from the item lengths, which differ only by the digits of their index.
//! - The streamed reply is well formed in its API: the events of each call, the finish of a
//!   reply with tool calls and the end of the chunked body (unless the budget cuts it first).

use tokio::io::AsyncWrite;

use crate::hostile::dialect::{Dialect, Finish};
use crate::hostile::payload;
use crate::hostile::response::{Framing, Responder, Sent};

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
fn whole_len(api: Dialect, calls: usize, name: &str, arguments: &str) -> u64 {
    let calls = calls as u64;
    // Item i holds `per_digit` numbers of digits(i) digits (its index and its id, or its id
    // alone): items 0 and 10 differ by that many bytes.
    let first = api.call_item(0, name, arguments).len() as u64;
    let per_digit = api.call_item(10, name, arguments).len() as u64 - first;
    let fixed = first - per_digit;
    let items = calls.saturating_mul(fixed).saturating_add(digits_total(calls).saturating_mul(per_digit));
    (api.calls_prefix().len() + api.calls_suffix().len()) as u64
        + items.saturating_add(calls.saturating_sub(1))
}

/// One whole reply with `calls` tool calls.
pub(super) async fn whole<S: AsyncWrite + Unpin>(
    mut out: Responder<'_, S>,
    api: Dialect,
    calls: usize,
    name: &str,
    arguments: &str,
) -> Sent {
    let (name, arguments) = (payload::json_string(name), payload::json_string(arguments));
    out.head(200, "application/json", Framing::Length(whole_len(api, calls, &name, &arguments)));
    out.body(api.calls_prefix().as_bytes()).await?;
    for index in 0..calls {
        let separator = if index == 0 { "" } else { "," };
        out.body(format!("{separator}{}", api.call_item(index, &name, &arguments)).as_bytes()).await?;
    }
    out.body(api.calls_suffix().as_bytes()).await?;
    out.finish().await
}

/// `calls` tool calls as server-sent events, then the finish of a reply with tool calls.
pub(super) async fn streamed<S: AsyncWrite + Unpin>(
    mut out: Responder<'_, S>,
    api: Dialect,
    calls: usize,
    name: &str,
    arguments: &str,
) -> Sent {
    out.sse_head(200);
    out.body(&api.open()).await?;
    for index in 0..calls {
        out.body(&api.call(index, &format!("c{index}"), name, arguments)).await?;
    }
    out.body(&api.finish(Finish::ToolCalls)).await?;
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
    async fn the_length_matches_the_body_in_every_api() {
        for api in [Dialect::Chat, Dialect::Messages, Dialect::Responses] {
            for calls in [0, 1, 2, 10, 11, 101, 1_001] {
                let sent = AtomicU64::new(0);
                let mut raw = Vec::new();
                let out = Responder::new(&mut raw, u64::MAX, &sent);
                whole(out, api, calls, "read\"ticket", "{\"input\":\"x\"}").await.unwrap();
                let text = String::from_utf8(raw).unwrap();
                let (head, body) = text.split_once("\r\n\r\n").unwrap();
                assert!(
                    head.contains(&format!("Content-Length: {}\r\n", body.len())),
                    "{api:?} calls = {calls}"
                );
                let reply: serde_json::Value = serde_json::from_str(body).unwrap();
                let items = match api {
                    Dialect::Chat => reply["choices"][0]["message"]["tool_calls"].as_array().unwrap().len(),
                    Dialect::Messages => reply["content"].as_array().unwrap().len(),
                    Dialect::Responses => reply["output"].as_array().unwrap().len(),
                };
                assert_eq!(items, calls, "{api:?}");
            }
        }
    }
}
