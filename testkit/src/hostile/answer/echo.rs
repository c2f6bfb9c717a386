//! The replies that echo the client's key.
//!
//! # Invariants
//!
//! - The echoed text comes from the request's own key header (`Authorization: Bearer` or
//!   `x-api-key`, cut by [`KeyPart`](crate::hostile::KeyPart)), never from a fixture, so a test
//!   proves that a real key would leak through the client's outputs if it were not redacted.
//! - The key is carried inside JSON strings (escaped), so any key yields valid JSON.
//! - [`KeyPlace::StreamText`] splits the echo by characters between two text deltas, so neither
//!   delta alone holds the whole key.

use tokio::io::AsyncWrite;

use crate::hostile::behaviour::KeyPlace;
use crate::hostile::dialect::{Dialect, Finish};
use crate::hostile::payload;
use crate::hostile::response::{Responder, Sent};

/// The words before the key in every echo.
const LEAD: &str = " the key you sent was ";

/// Answers with status `status`, with `padding` and then `echoed` at `place`.
pub(super) async fn answer<S: AsyncWrite + Unpin>(
    mut out: Responder<'_, S>,
    api: Dialect,
    status: u16,
    padding: &str,
    place: KeyPlace,
    echoed: &str,
) -> Sent {
    let body = match place {
        KeyPlace::ErrorBody => {
            api.error(&format!("{padding}{LEAD}{echoed}"), "invalid_request_error", "invalid_api_key")
        }
        KeyPlace::Text => api.whole_text(&format!("{padding}{LEAD}{echoed}")),
        KeyPlace::ToolCallFields => {
            let arguments = format!(r#"{{"input":{}}}"#, payload::json_string(&format!("{padding}{echoed}")));
            api.whole_call(&format!("call_{echoed}"), &format!("key_{echoed}"), &arguments)
        }
        KeyPlace::StreamText => {
            let half = echoed.chars().count() / 2;
            let split = echoed.char_indices().nth(half).map_or(echoed.len(), |(at, _)| at);
            let (first, second) = echoed.split_at(split);
            out.sse_head(status);
            out.body(&api.open()).await?;
            out.body(&api.open_text()).await?;
            out.body(&api.text(&format!("{padding}{LEAD}{first}"))).await?;
            out.body(&api.text(second)).await?;
            out.body(&api.close_text()).await?;
            out.body(&api.finish(Finish::Stop)).await?;
            return out.finish().await;
        }
    };
    out.whole(status, body.as_bytes()).await
}
