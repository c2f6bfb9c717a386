//! Answering one model-call request (chat completions or Messages API) with a [`Behaviour`], in
//! the request's API.
//!
//! # Invariants
//!
//! - Every answer writes through one [`Responder`], so the byte budget bounds it; the time budget
//!   bounds it from outside (the connection's deadline), which also covers a client that stops
//!   reading and a pause between writes.
//! - [`Behaviour::Scripted`] and [`Behaviour::Delayed`] are resolved by loops, never by
//!   recursion, so a deeply nested script or delay cannot overflow the stack.
//! - An answer returns as soon as a write fails or the budget is spent; the caller then closes
//!   the connection.

mod echo;
mod endless;
mod escape;
mod flood;

use std::time::Duration;

use tokio::io::AsyncWrite;

pub use escape::{ESCAPE_TEXT, FAKE_STATUS_LINE};

use crate::hostile::behaviour::Behaviour;
use crate::hostile::dialect::Dialect;
use crate::hostile::http::Request;
use crate::hostile::response::{Framing, Responder, Sent};

/// Answers `request`, in `api`, the model-call request number `index`, with `behaviour`.
pub(crate) async fn answer<S>(
    behaviour: &Behaviour,
    request: &Request,
    api: Dialect,
    index: usize,
    out: Responder<'_, S>,
) -> Sent
where
    S: AsyncWrite + Unpin,
{
    let Some(mut behaviour) = resolve(behaviour, index) else {
        return exhausted(out, api, index).await;
    };
    while let Behaviour::Delayed { delay, then } = behaviour {
        tokio::time::sleep(*delay).await;
        let Some(next) = resolve(then, index) else {
            return exhausted(out, api, index).await;
        };
        behaviour = next;
    }
    let stream = request.wants_stream();
    match behaviour {
        Behaviour::EndlessText { delta } => endless::text(out, api, *delta).await,
        Behaviour::EndlessCallIndices => endless::call_indices(out, api).await,
        Behaviour::EndlessArguments { delta } => endless::arguments(out, api, *delta).await,
        Behaviour::EndlessUsage => endless::usage(out, api).await,
        Behaviour::ErrorAfterDeltas { deltas } => endless::error_after(out, api, *deltas).await,
        Behaviour::CallFlood { calls, arguments, name } if stream => {
            flood::streamed(out, api, *calls, name, arguments).await
        }
        Behaviour::CallFlood { calls, arguments, name } => {
            flood::whole(out, api, *calls, name, arguments).await
        }
        Behaviour::Trickle { body, interval } => trickle(out, body.as_bytes(), *interval).await,
        Behaviour::KeepAliveForever { interval } => keep_alive(out, api, *interval).await,
        Behaviour::EchoKey { status, padding, place, part } => {
            let echoed = part.of(request.api_key());
            echo::answer(out, api, *status, &".".repeat(*padding), *place, &echoed).await
        }
        Behaviour::EscapeSequences => escape::answer(out, api, stream).await,
        Behaviour::Reply(reply) => out.whole(reply.status, reply.body.as_bytes()).await,
        // `resolve` never yields a script and the loop above unwraps every delay; answering as
        // exhausted keeps these arms panic-free.
        Behaviour::Scripted(_) | Behaviour::Delayed { .. } => exhausted(out, api, index).await,
    }
}

/// The behaviour that answers request `index`: through every script, the one at `index`; `None`
/// when a script is too short.
fn resolve(mut behaviour: &Behaviour, index: usize) -> Option<&Behaviour> {
    while let Behaviour::Scripted(script) = behaviour {
        behaviour = script.get(index)?;
    }
    Some(behaviour)
}

/// Answers request `index`, which no script reaches, with a 500 error whose code is
/// `script_exhausted` (an `api_error` in the Messages API).
async fn exhausted<S: AsyncWrite + Unpin>(out: Responder<'_, S>, api: Dialect, index: usize) -> Sent {
    let message = format!("hostile server: script exhausted at request {index}");
    let body = api.error(&message, "server_error", "script_exhausted");
    out.whole(500, body.as_bytes()).await
}

/// Writes the whole `body` with status 200, one byte at a time, `interval` apart.
async fn trickle<S: AsyncWrite + Unpin>(mut out: Responder<'_, S>, body: &[u8], interval: Duration) -> Sent {
    out.head(200, "application/json", Framing::Length(body.len() as u64));
    out.flush().await?;
    for (at, byte) in body.iter().enumerate() {
        if at > 0 {
            tokio::time::sleep(interval).await;
        }
        out.body(std::slice::from_ref(byte)).await?;
        out.flush().await?;
    }
    out.finish().await
}

/// Writes the API's keep-alive (the comment `: keep-alive`; a `ping` event) every `interval`,
/// until the budget ends the stream.
async fn keep_alive<S: AsyncWrite + Unpin>(
    mut out: Responder<'_, S>,
    api: Dialect,
    interval: Duration,
) -> Sent {
    out.sse_head(200);
    loop {
        out.body(api.keep_alive()).await?;
        out.flush().await?;
        tokio::time::sleep(interval).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hostile::behaviour::Reply;

    #[test]
    fn scripts_resolve_by_index_through_nesting() {
        let reply = |text: &str| Behaviour::Reply(Reply::text(text));
        let script = Behaviour::Scripted(vec![
            reply("zero"),
            Behaviour::Scripted(vec![reply("inner zero"), reply("inner one")]),
        ]);
        assert!(matches!(resolve(&script, 0), Some(Behaviour::Reply(r)) if r.body.contains("zero")));
        assert!(matches!(resolve(&script, 1), Some(Behaviour::Reply(r)) if r.body.contains("inner one")));
        assert!(resolve(&script, 2).is_none());
        assert!(matches!(resolve(&Behaviour::EndlessCallIndices, 7), Some(Behaviour::EndlessCallIndices)));
    }
}
