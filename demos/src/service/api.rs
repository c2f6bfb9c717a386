//! The HTTP API: routes, request bodies and their checks, and every response's JSON.
//!
//! # Invariants
//!
//! - Every refusal by a route is a JSON body `{"error":{"kind":…,"message":…}}` with the code
//!   of the [`status`] table or 400/401/403/404/409/413; no handler panics on any input.
//! - Every command on a run (approve, deny, close, cancel, resume) passes the [`Gate`] before
//!   its handler runs: its origin is the service's own or absent, and its approver is
//!   authenticated ([`approver`]).
//! - A request body is read up to [`MAX_BODY`] bytes; a prompt, a grant and the number of
//!   grants are bounded ([`MAX_PROMPT`], [`MAX_GRANT`], [`MAX_GRANTS`]).
//! - Every run's response carries the links of what a client may do next in the run's phase,
//!   and only those: `cancel` while an attempt is in flight, `approve` and `deny` while a
//!   proposal waits.
//! - Nothing here logs a request's prompt or a tool call's arguments; an approver sees a
//!   proposal's arguments in the run's own response, which is theirs.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Extension, Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::{Stream, StreamExt as _};
use loopbound::journal::{self, Journal, RunId, RunState};
use loopbound::transport::Transport;
use serde::Deserialize;
use serde_json::{Value, json};

use super::app::{App, CommandError, FindError};
use super::approver::{self, Approver, Gate};
use super::durable::Verdict;
use super::listing;
use super::page;
use super::runs::{Ended, Failure, Phase, Recorded, RunSlot};
use super::status;
use super::task::Task;
use super::tenants::Tenants;

/// The largest request body read, in bytes.
pub const MAX_BODY: usize = 64 * 1024;
/// The longest prompt, in bytes.
pub const MAX_PROMPT: usize = 16 * 1024;
/// The longest capability name, in bytes.
pub const MAX_GRANT: usize = 128;
/// The most capabilities one request may be granted.
pub const MAX_GRANTS: usize = 32;

/// The routes, over `app`; the commands on a run pass `gate` first (its origin, its approver).
pub fn router<T: Transport + 'static, J: Journal + 'static>(app: Arc<App<T, J>>, gate: Arc<Gate>) -> Router {
    let commands = Router::new()
        .route("/runs/{id}/cancel", post(cancel::<T, J>))
        .route("/runs/{id}/resume", post(resume::<T, J>))
        .route("/runs/{id}/close", post(close::<T, J>))
        .route("/runs/{id}/approve", post(approve::<T, J>))
        .route("/runs/{id}/deny", post(deny::<T, J>))
        .route_layer(axum::middleware::from_fn_with_state(gate, approver::require));
    Router::new()
        .route("/", get(page::index))
        .route("/page.css", get(page::style))
        .route("/page.js", get(page::script))
        .route("/runs", post(create::<T, J>).get(listing::runs::<T, J>))
        .route("/tenants", get(listing::tenants::<T, J>))
        .route("/runs/{id}", get(show::<T, J>))
        .route("/runs/{id}/events", get(events::<T, J>))
        .merge(commands)
        .with_state(app)
}

/// A refusal: its code, a kind a client matches on, and a message for people.
#[derive(Debug)]
pub struct ApiError {
    code: StatusCode,
    kind: &'static str,
    message: String,
}

impl ApiError {
    /// A refusal with `code`, `kind` and `message`.
    pub fn new(code: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        Self { code, kind, message: message.into() }
    }

    fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error": {"kind": self.kind, "message": self.message}});
        (self.code, axum::Json(body)).into_response()
    }
}

/// `POST /runs`: what to do, on what, under which grants.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NewRun {
    task: Task,
    prompt: String,
    #[serde(default)]
    grants: Vec<String>,
    /// The tenant whose daily pool the run draws from: one configured with `--tenant`.
    #[serde(default)]
    tenant: Option<String>,
}

/// `POST /runs/{id}/approve` and `/deny`: the digest of the proposal decided on (who decides
/// comes from the [`approver`](super::approver) seam, never from the body).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Decision {
    digest: String,
}

/// `POST /runs/{id}/close`: why the run is closed.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Closing {
    reason: String,
}

/// Whether `GET /runs/{id}` should wait for the attempt in flight to end: `?wait=true` (or
/// `1`); `false`, `0` or no `wait` answer at once; other parameters are ignored.
fn wants_wait(query: Option<&str>) -> Result<bool, ApiError> {
    let value = query.unwrap_or_default().split('&').find_map(|pair| pair.strip_prefix("wait="));
    match value {
        None | Some("false" | "0") => Ok(false),
        Some("true" | "1") => Ok(true),
        Some(_) => Err(ApiError::bad_request("wait is true or false")),
    }
}

/// The request's body, at most [`MAX_BODY`] bytes.
async fn read(body: Body) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(body, MAX_BODY).await.map_err(|_| {
        let message = format!("the request body could not be read within {MAX_BODY} bytes");
        ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", message)
    })
}

fn parse<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|error| {
        // serde_json's message names the line and column and what was expected; with
        // `deny_unknown_fields` it names an unknown field, never a value.
        ApiError::bad_request(format!("invalid request body: {error}"))
    })
}

fn check(run: &NewRun, tenants: &Tenants) -> Result<(), ApiError> {
    if let Some(tenant) = &run.tenant
        && !tenants.knows(tenant)
    {
        let message = "the tenant is not one this service is configured with";
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "unknown_tenant", message));
    }
    if run.prompt.trim().is_empty() || run.prompt.len() > MAX_PROMPT {
        return Err(ApiError::bad_request(format!("the prompt must have 1 to {MAX_PROMPT} bytes")));
    }
    if run.grants.len() > MAX_GRANTS {
        return Err(ApiError::bad_request(format!("at most {MAX_GRANTS} grants")));
    }
    let valid = |grant: &String| {
        (1..=MAX_GRANT).contains(&grant.len()) && grant.chars().all(|c| c.is_ascii_graphic())
    };
    if !run.grants.iter().all(valid) {
        return Err(ApiError::bad_request(format!(
            "a grant must have 1 to {MAX_GRANT} printable ASCII characters"
        )));
    }
    Ok(())
}

/// What a client may do next with a run, as links: `self` and `events` always; `cancel` while
/// an attempt is in flight; `approve`, `deny` and `close` while a proposal waits for a decision;
/// `resume` and `close` while the journal holds the run open and no attempt holds it; `close`
/// while it is ambiguous.
fn links(id: &RunId, phase: &Phase) -> Value {
    let mut links = serde_json::Map::new();
    let mut add = |action: &str, path: String| links.insert(action.to_owned(), json!(path));
    add("self", format!("/runs/{id}"));
    add("events", format!("/runs/{id}/events"));
    let actions: &[&str] = match phase {
        Phase::Running => &["cancel"],
        _ if phase.pending().is_some() => &["approve", "deny", "close"],
        Phase::Recorded(recorded) if recorded.held => &[],
        Phase::Recorded(recorded) => match recorded.state {
            RunState::Open => &["resume", "close"],
            RunState::Ambiguous(_) => &["close"],
            _ => &[],
        },
        Phase::Ended(_) => &[],
    };
    for action in actions {
        add(action, format!("/runs/{id}/{action}"));
    }
    Value::Object(links)
}

/// The run `id`, kept in memory or rebuilt from the journal.
async fn load<T: Transport + 'static, J: Journal + 'static>(
    app: &App<T, J>,
    id: &str,
) -> Result<Arc<RunSlot>, ApiError> {
    let id = RunId::new(id).map_err(|error| ApiError::bad_request(error.to_string()))?;
    app.find(&id).await.map_err(|error| match error {
        FindError::Unknown | FindError::Foreign => {
            ApiError::new(StatusCode::NOT_FOUND, "unknown_run", error.to_string())
        }
        FindError::Full(full) => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "full", full.to_string()),
        FindError::Journal(error) => ApiError::new(status::of_command(&error), "journal", error.to_string()),
    })
}

async fn create<T: Transport + 'static, J: Journal + 'static>(
    State(app): State<Arc<App<T, J>>>,
    body: Body,
) -> Result<Response, ApiError> {
    let run: NewRun = parse(&read(body).await?)?;
    check(&run, app.tenants())?;
    let slot = app
        .start(run.task, run.grants, run.tenant, run.prompt)
        .await
        .map_err(|full| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "full", full.to_string()))?;
    let id = slot.id();
    let location = HeaderValue::from_str(&format!("/runs/{id}")).ok();
    let mut response =
        (StatusCode::ACCEPTED, axum::Json(json!({"id": id.as_str(), "links": links(id, &Phase::Running)})))
            .into_response();
    if let Some(location) = location {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
}

/// The response for a run in `phase`: its code from the status table, and its JSON with the
/// links that apply in that phase.
fn describe(id: &RunId, phase: &Phase) -> Response {
    let (code, mut body) = match phase {
        Phase::Running => (StatusCode::ACCEPTED, json!({"id": id.as_str(), "state": "running"})),
        Phase::Ended(ended) => describe_ended(id, ended),
        Phase::Recorded(recorded) => describe_recorded(id, recorded),
    };
    if let Some(object) = body.as_object_mut() {
        object.insert("links".to_owned(), links(id, phase));
    }
    (code, axum::Json(body)).into_response()
}

/// The code and JSON for a run whose last attempt ended.
fn describe_ended(id: &RunId, ended: &Ended) -> (StatusCode, Value) {
    match ended {
        Ended { result: Ok(outcome), pending } => (
            status::of_outcome(outcome.status()),
            json!({"id": id.as_str(), "state": "ended", "outcome": outcome, "pending": pending}),
        ),
        Ended { result: Err(Failure::Run(error)), .. } => {
            (status::of_error(error.kind()), json!({"id": id.as_str(), "state": "ended", "error": error}))
        }
        Ended { result: Err(Failure::Journal(error)), .. } => (
            status::of_command(error),
            json!({"id": id.as_str(), "state": "ended", "error": {"kind": "journal", "message": error.to_string()}}),
        ),
        Ended { result: Err(Failure::Setup(message)), .. } => (
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({"id": id.as_str(), "state": "ended", "error": {"kind": "setup", "message": message}}),
        ),
    }
}

/// The code and JSON for a run known by its journal record: `state` is `recorded`, and
/// `journal` says where the run stands (`state`, `status` once finished, `attempts`, `held`).
fn describe_recorded(id: &RunId, recorded: &Recorded) -> (StatusCode, Value) {
    let journal = json!({
        "state": recorded.state.name(),
        "status": recorded.state.status().map(loopbound::Status::as_str),
        "attempts": recorded.attempts,
        "held": recorded.held,
    });
    let body = json!({
        "id": id.as_str(),
        "state": "recorded",
        "journal": journal,
        "events": recorded.events,
        "pending": recorded.pending,
    });
    (status::of_record(recorded.state, recorded.held), body)
}

async fn show<T: Transport + 'static, J: Journal + 'static>(
    State(app): State<Arc<App<T, J>>>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let wait = wants_wait(query.as_deref())?;
    let slot = load(&app, &id).await?;
    let phase = if wait { slot.settled().await } else { slot.phase() };
    Ok(describe(slot.id(), &phase))
}

/// A cancel needs an approver, whose name is not recorded (the attempt ends as its caller's
/// cancellation).
async fn cancel<T: Transport + 'static, J: Journal + 'static>(
    State(app): State<Arc<App<T, J>>>,
    Path(id): Path<String>,
    Extension(_approver): Extension<Approver>,
) -> Result<Response, ApiError> {
    let slot = load(&app, &id).await?;
    if app.cancel(slot.id()) {
        Ok((StatusCode::ACCEPTED, axum::Json(json!({"id": slot.id().as_str(), "cancelled": true})))
            .into_response())
    } else {
        Err(ApiError::new(StatusCode::CONFLICT, "not_running", "no attempt of this run is in flight"))
    }
}

async fn decide<T: Transport + 'static, J: Journal + 'static>(
    app: &Arc<App<T, J>>,
    id: &str,
    approver: &Approver,
    body: &[u8],
    verdict: Verdict,
) -> Result<Response, ApiError> {
    let slot = load(app, id).await?;
    let decision: Decision = parse(body)?;
    match app.decide(&slot, &decision.digest, approver.name(), verdict).await {
        Ok(()) => Ok(resumed(slot.id())),
        Err(error) => Err(refused(&error)),
    }
}

/// The refusal of a host command: its code and kind from the error.
fn refused(error: &CommandError) -> ApiError {
    let (code, kind) = match error {
        CommandError::Running => (StatusCode::CONFLICT, "running"),
        CommandError::NotWaiting => (StatusCode::CONFLICT, "not_waiting"),
        CommandError::NotOpen(_) => (StatusCode::CONFLICT, "not_open"),
        CommandError::Journal(error) => (status::of_command(error), status::kind_of_command(error)),
    };
    ApiError::new(code, kind, error.to_string())
}

/// The answer to a command that resumed the run: 202, and the links of a run in flight.
fn resumed(id: &RunId) -> Response {
    let body = json!({"id": id.as_str(), "resumed": true, "links": links(id, &Phase::Running)});
    (StatusCode::ACCEPTED, axum::Json(body)).into_response()
}

async fn close<T: Transport + 'static, J: Journal + 'static>(
    State(app): State<Arc<App<T, J>>>,
    Path(id): Path<String>,
    Extension(approver): Extension<Approver>,
    body: Body,
) -> Result<Response, ApiError> {
    let slot = load(&app, &id).await?;
    let closing: Closing = parse(&read(body).await?)?;
    app.close(&slot, &closing.reason, approver.name()).await.map_err(|error| refused(&error))?;
    let body = json!({"id": slot.id().as_str(), "closed": true, "links": links(slot.id(), &slot.phase())});
    Ok((StatusCode::OK, axum::Json(body)).into_response())
}

/// A resume needs an approver (it spends the run's budgets again), whose name is not recorded.
async fn resume<T: Transport + 'static, J: Journal + 'static>(
    State(app): State<Arc<App<T, J>>>,
    Path(id): Path<String>,
    Extension(_approver): Extension<Approver>,
) -> Result<Response, ApiError> {
    let slot = load(&app, &id).await?;
    app.resume(&slot).await.map_err(|error| refused(&error))?;
    Ok(resumed(slot.id()))
}

async fn approve<T: Transport + 'static, J: Journal + 'static>(
    State(app): State<Arc<App<T, J>>>,
    Path(id): Path<String>,
    Extension(approver): Extension<Approver>,
    body: Body,
) -> Result<Response, ApiError> {
    decide(&app, &id, &approver, &read(body).await?, Verdict::Approve).await
}

async fn deny<T: Transport + 'static, J: Journal + 'static>(
    State(app): State<Arc<App<T, J>>>,
    Path(id): Path<String>,
    Extension(approver): Extension<Approver>,
    body: Body,
) -> Result<Response, ApiError> {
    decide(&app, &id, &approver, &read(body).await?, Verdict::Deny).await
}

/// How often an idle event stream sends a comment, so that proxies keep it open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// How long a browser waits before it reconnects to an event stream that ended or dropped.
pub const RECONNECT: Duration = Duration::from_secs(1);

async fn events<T: Transport + 'static, J: Journal + 'static>(
    State(app): State<Arc<App<T, J>>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let slot = load(&app, &id).await?;
    let after = match headers.get("last-event-id") {
        None => 0,
        Some(value) => value
            .to_str()
            .ok()
            .and_then(|text| text.trim().parse::<u64>().ok())
            .ok_or_else(|| ApiError::bad_request("Last-Event-ID must be an event number"))?,
    };
    let lines = journal::follow(Arc::clone(app.journal()), slot.id().clone(), after);
    let stream = futures_util::stream::unfold(Some(lines), |lines| async move {
        let mut lines = lines?;
        match lines.next().await {
            Ok(Some(line)) => {
                Some((Ok(Event::default().id(line.id().to_string()).data(line.json())), Some(lines)))
            }
            Ok(None) => None,
            // The journal failed: say so, and end the stream (the client reconnects).
            Err(error) => Some((Ok(Event::default().event("error").data(error.to_string())), None)),
        }
    });
    // A browser reconnects this soon after the stream ends (a run that waits for a decision
    // ends its stream at once; the reconnection asks again) or the connection drops.
    let retry = futures_util::stream::once(async { Ok(Event::default().retry(RECONNECT)) });
    Ok(Sse::new(retry.chain(stream)).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)))
}
