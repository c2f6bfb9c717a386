//! The endless streams: text, new tool-call indices, growing arguments, usage reports that grow
//! forever, and text deltas followed by an error event.
//!
//! # Invariants
//!
//! - Each endless stream opens as its API opens a stream and then never ends by itself: no
//!   finish, no end event, no end of the chunked body. Only the budget (or the client leaving)
//!   ends it, through the error of a write.
//! - A repeated event is built once and written again and again, so memory stays at one event
//!   (plus the responder's pending bytes) however long the stream runs. A usage report is built
//!   per event, of a fixed size plus its count's digits.
//! - The error stream ends well: its deltas, the API's overload error, and the end of the body.

use tokio::io::AsyncWrite;

use crate::hostile::dialect::Dialect;
use crate::hostile::response::{Responder, Sent};

/// Text events of `delta` bytes of `a`, forever.
pub(super) async fn text<S: AsyncWrite + Unpin>(
    mut out: Responder<'_, S>,
    api: Dialect,
    delta: usize,
) -> Sent {
    out.sse_head(200);
    out.body(&api.open()).await?;
    out.body(&api.open_text()).await?;
    let event = api.text(&"a".repeat(delta));
    loop {
        out.body(&event).await?;
    }
}

/// Tool-call events each opening the tool call of index n = 0, 1, 2, …, forever.
pub(super) async fn call_indices<S: AsyncWrite + Unpin>(mut out: Responder<'_, S>, api: Dialect) -> Sent {
    out.sse_head(200);
    out.body(&api.open()).await?;
    for index in 0_usize.. {
        out.body(&api.call(index, &format!("c{index}"), "read_ticket", r#"{"input":42}"#)).await?;
    }
    // Only reached after `usize::MAX` events, which no budget allows; the stream stays unended.
    Ok(())
}

/// One tool call whose arguments open a JSON string and then grow by `delta` bytes of `7` per
/// event, forever.
pub(super) async fn arguments<S: AsyncWrite + Unpin>(
    mut out: Responder<'_, S>,
    api: Dialect,
    delta: usize,
) -> Sent {
    out.sse_head(200);
    out.body(&api.open()).await?;
    out.body(&api.open_call(0, "c0", "read_ticket", r#"{"input":""#)).await?;
    let event = api.arguments(0, &"7".repeat(delta));
    loop {
        out.body(&event).await?;
    }
}

/// One text delta, then usage reports whose output count grows by one per event, forever.
pub(super) async fn usage<S: AsyncWrite + Unpin>(mut out: Responder<'_, S>, api: Dialect) -> Sent {
    out.sse_head(200);
    out.body(&api.open()).await?;
    out.body(&api.open_text()).await?;
    out.body(&api.text("a")).await?;
    for output in 1_u64.. {
        out.body(&api.usage(output)).await?;
    }
    // Only reached after `u64::MAX` events, which no budget allows; the stream stays unended.
    Ok(())
}

/// `deltas` text deltas of one byte, then the API's overload error inside the stream.
pub(super) async fn error_after<S: AsyncWrite + Unpin>(
    mut out: Responder<'_, S>,
    api: Dialect,
    deltas: usize,
) -> Sent {
    out.sse_head(200);
    out.body(&api.open()).await?;
    out.body(&api.open_text()).await?;
    let event = api.text("a");
    for _ in 0..deltas {
        out.body(&event).await?;
    }
    out.body(&api.overloaded()).await?;
    out.finish().await
}
