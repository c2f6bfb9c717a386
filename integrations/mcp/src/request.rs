//! One request to the server, with the client's per-request context, cancelled at the server
//! when its caller stops waiting.
//!
//! # Invariants
//!
//! - A request whose future is dropped before its answer (the deadline, a halt, the caller's
//!   cancellation, the call timeout) sends `notifications/cancelled` for its id; an answer that
//!   still arrives is discarded.
//! - On a 2026-07-28 connection every request carries the client's context (version, identity,
//!   capabilities) in its `_meta`: the server keeps no session.

use rmcp::model::{
    CancelledNotification, CancelledNotificationParam, ClientNotification, ClientRequest, RequestId,
    RequestMetaObject, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions};
use rmcp::{RoleClient, ServiceError};

/// Why a request is cancelled when its caller stops waiting.
const ABANDONED: &str = "the call was dropped: deadline, halt, caller's cancellation or call timeout";

/// Sends `request` with `meta` (the client's context on a 2026-07-28 connection) and waits for
/// its answer; tells the server if this future is dropped first.
pub(crate) async fn send(
    peer: &Peer<RoleClient>,
    request: ClientRequest,
    meta: Option<&RequestMetaObject>,
) -> Result<ServerResult, ServiceError> {
    let mut options = PeerRequestOptions::no_options();
    options.meta = meta.cloned();
    let handle = peer.send_request_with_option(request, options).await?;
    let mut guard = CancelOnDrop { peer, id: Some(handle.id.clone()) };
    let answer = handle.await_response().await;
    guard.id = None;
    answer
}

/// Sends `notifications/cancelled` for a request whose answer nobody waits for any more.
struct CancelOnDrop<'a> {
    peer: &'a Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let params = CancelledNotificationParam::new(Some(id), Some(ABANDONED.to_owned()));
        let notification = ClientNotification::CancelledNotification(CancelledNotification::new(params));
        spawn_notification(self.peer.clone(), notification);
    }
}

/// Sends `notification` from a task of its own (a `Drop` cannot wait). Outside a tokio runtime
/// nothing is sent: the connection's own task, which would carry it, is gone too.
pub(crate) fn spawn_notification(peer: Peer<RoleClient>, notification: ClientNotification) {
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(async move {
            let _ = peer.send_notification(notification).await;
        });
    }
}
