//! Cancel requests pushed, not polled: one connection per journal handle (and its clones)
//! `LISTEN`s on [`CHANNEL`], and a request's `NOTIFY` (sent with it) tells the waiting attempt
//! through the handle's [`CancelWatch`] as soon as the request is committed.
//!
//! # Invariants
//!
//! - The watcher is marked pushed only while the listening connection is confirmed: its
//!   `LISTEN` succeeded and a liveness query answered within [`ALIVE_WITHIN`] at most
//!   [`CHECK_EVERY`] ago. Otherwise (a lost connection, a server that stopped answering) it is
//!   not, and the watcher's rounds poll the store again: the slow path is the fallback.
//! - The listener is started once per watcher, by the first attempt that waits, and ends once
//!   no journal handle shares the watcher any more (seen within [`CHECK_EVERY`]); it reconnects
//!   after a loss (a `LISTEN` or a check unanswered in time counts as one), pausing up to
//!   [`MAX_PAUSE`] between tries.
//! - A notification names a run id; one that does not parse is ignored (a request is still
//!   found at the run's next admission).

use std::future::poll_fn;
use std::pin::pin;
use std::time::Duration;

use loopbound::journal::RunId;
use loopbound::journal::backend::WeakCancelWatch;
use tokio_postgres::{AsyncMessage, NoTls};

/// The channel that cancel requests are notified on.
pub(crate) const CHANNEL: &str = "loopbound_cancel";

/// How often the listening connection is checked.
const CHECK_EVERY: Duration = Duration::from_secs(2);
/// How long a check may take before the connection is taken as lost.
const ALIVE_WITHIN: Duration = Duration::from_secs(1);
/// The longest pause between two connection attempts.
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// Listens for cancel requests on the database of `config` until `watch` is gone.
pub(crate) async fn listen(config: tokio_postgres::Config, watch: WeakCancelWatch) {
    let mut pause = Duration::from_millis(100);
    loop {
        if watch.upgrade().is_none() {
            return;
        }
        if session(&config, &watch).await.is_break() {
            return;
        }
        if let Some(watch) = watch.upgrade() {
            watch.set_pushed(false);
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

/// One listening connection, until it is lost (`Continue`) or the watcher is gone (`Break`).
async fn session(config: &tokio_postgres::Config, watch: &WeakCancelWatch) -> std::ops::ControlFlow<()> {
    use std::ops::ControlFlow::{Break, Continue};
    let connected = tokio::time::timeout(ALIVE_WITHIN * 5, config.connect(NoTls)).await;
    let Ok(Ok((client, mut connection))) = connected else { return Continue(()) };
    let statement = format!("LISTEN {CHANNEL}");
    let mut listening = pin!(client.batch_execute(&statement));
    let mut listened = false;
    let opened = tokio::time::Instant::now();
    let mut checks = tokio::time::interval(CHECK_EVERY);
    loop {
        tokio::select! {
            message = poll_fn(|cx| connection.poll_message(cx)) => match message {
                Some(Ok(AsyncMessage::Notification(notification))) => {
                    let Some(watch) = watch.upgrade() else { return Break(()) };
                    if let Ok(run) = RunId::new(notification.payload()) {
                        watch.tell(&[run]);
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return Continue(()),
            },
            result = &mut listening, if !listened => {
                if result.is_err() {
                    return Continue(());
                }
                listened = true;
                let Some(watch) = watch.upgrade() else { return Break(()) };
                watch.set_pushed(true);
            }
            _ = checks.tick() => {
                let Some(live) = watch.upgrade() else { return Break(()) };
                if !listened {
                    // A `LISTEN` unanswered for a whole check's period: the connection is
                    // taken as lost, and another one tries.
                    if opened.elapsed() >= CHECK_EVERY {
                        return Continue(());
                    }
                    continue;
                }
                // The check needs the connection driven: it is polled here, beside the query.
                let check = async {
                    matches!(tokio::time::timeout(ALIVE_WITHIN, client.simple_query("")).await, Ok(Ok(_)))
                };
                let alive = drive_until(&mut connection, pin!(check), &live).await;
                if !alive {
                    return Continue(());
                }
            }
        }
    }
}

/// Drives `connection` (telling `watch` of the notifications that arrive meanwhile) until
/// `check` ends; whether it answered in time.
async fn drive_until<S, T>(
    connection: &mut tokio_postgres::Connection<S, T>,
    mut check: std::pin::Pin<&mut impl std::future::Future<Output = bool>>,
    watch: &loopbound::journal::backend::CancelWatch,
) -> bool
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    loop {
        tokio::select! {
            alive = &mut check => return alive,
            message = poll_fn(|cx| connection.poll_message(cx)) => match message {
                Some(Ok(AsyncMessage::Notification(notification))) => {
                    if let Ok(run) = RunId::new(notification.payload()) {
                        watch.tell(&[run]);
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return false,
            },
        }
    }
}
