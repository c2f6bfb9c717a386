//! The endless streams: text, new tool-call indices, growing arguments.
//!
//! # Invariants
//!
//! - Each stream starts with the assistant's role chunk and then never ends by itself: no finish
//!   chunk, no `[DONE]`, no end of the chunked body. Only the budget (or the client leaving)
//!   ends it, through the error of a write.
//! - A repeated event is built once and written again and again, so memory stays at one event
//!   (plus the responder's pending bytes) however long the stream runs.

use tokio::io::AsyncWrite;

use crate::hostile::payload;
use crate::hostile::response::{Responder, Sent};

/// Content events of `delta` bytes of `a`, forever.
pub(super) async fn text<S: AsyncWrite + Unpin>(mut out: Responder<'_, S>, delta: usize) -> Sent {
    out.sse_head(200);
    out.body(&payload::role_event()).await?;
    let event = payload::content_event(&"a".repeat(delta));
    loop {
        out.body(&event).await?;
    }
}

/// Tool-call events each opening the tool call of index n = 0, 1, 2, …, forever.
pub(super) async fn call_indices<S: AsyncWrite + Unpin>(mut out: Responder<'_, S>) -> Sent {
    out.sse_head(200);
    out.body(&payload::role_event()).await?;
    let name = payload::json_string("read_ticket");
    let arguments = payload::json_string(r#"{"input":42}"#);
    for index in 0_usize.. {
        let item = payload::tool_call_item(index, &format!("c{index}"), &name, &arguments);
        out.body(&payload::tool_call_event(&item)).await?;
    }
    // Only reached after `usize::MAX` events, which no budget allows; the stream stays unended.
    Ok(())
}

/// One tool call whose arguments open a JSON string and then grow by `delta` bytes of `7` per
/// event, forever.
pub(super) async fn arguments<S: AsyncWrite + Unpin>(mut out: Responder<'_, S>, delta: usize) -> Sent {
    out.sse_head(200);
    out.body(&payload::role_event()).await?;
    let name = payload::json_string("read_ticket");
    let opening = payload::tool_call_item(0, "c0", &name, &payload::json_string(r#"{"input":""#));
    out.body(&payload::tool_call_event(&opening)).await?;
    let growth =
        format!(r#"{{"index":0,"function":{{"arguments":{}}}}}"#, payload::json_string(&"7".repeat(delta)));
    let event = payload::tool_call_event(&growth);
    loop {
        out.body(&event).await?;
    }
}
