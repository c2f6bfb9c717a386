//! What the operator's page lists: the runs of the journal by state and tenant, a page at a
//! time (`GET /runs`), and each tenant's pool (`GET /tenants`).
//!
//! | query of `GET /runs` | values | default |
//! |---|---|---|
//! | `state` | `running`, `open`, `awaiting_approval`, `ambiguous`, `finished` | every state |
//! | `tenant` | a configured tenant's name | every tenant, and runs of none |
//! | `after` | a run id: the page starts after it (the previous page's `next`) | the first page |
//! | `limit` | 1 to 200 runs | 50 |
//!
//! The answer is `{"runs":[{id, task, tenant, state, status, attempts, running}], "next"}`:
//! `state` and `status` as the journal holds them (`running` is true while an attempt holds a
//! live lease, whatever the state), `next` the cursor of the following page or `null`.
//!
//! # Invariants
//!
//! - The journal is the only source: a run this process never held is listed like one it
//!   started, and a listing costs one journal query (plus one pool read per tenant for
//!   `/tenants`).
//! - A malformed query is refused (400) before the journal is asked; no listing holds more
//!   than [`MAX_PAGE`] runs.
//! - Only names the host chose (task, tenant, states) and ids are listed here: a prompt, a
//!   reply or an argument never is.

use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use loopbound::journal::{self, Journal, RunId, RunQuery, RunSummary, StateFilter};
use loopbound::transport::Transport;
use serde_json::{Value, json};

use super::api::ApiError;
use super::app::App;
use super::durable::TASK_LABEL;
use super::status;
use super::tenants::{TENANT_LABEL, valid_name};

/// Runs per page unless `limit` says otherwise.
pub const DEFAULT_PAGE: u32 = 50;
/// The most runs a page holds.
pub const MAX_PAGE: u32 = 200;

/// A `GET /runs` query's parameters, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listing {
    state: Option<StateFilter>,
    tenant: Option<String>,
    after: Option<RunId>,
    limit: u32,
}

fn state_filter(name: &str) -> Option<StateFilter> {
    Some(match name {
        "running" => StateFilter::Running,
        "open" => StateFilter::Open,
        "awaiting_approval" => StateFilter::AwaitingApproval,
        "ambiguous" => StateFilter::Ambiguous,
        "finished" => StateFilter::Finished(None),
        _ => return None,
    })
}

impl Listing {
    /// The parameters of `query` (`a=1&b=2`, no percent-encoding needed: every value allowed
    /// here is plain ASCII); unknown parameters are ignored.
    ///
    /// # Errors
    ///
    /// A 400 [`ApiError`] naming the parameter that is not valid.
    pub fn parse(query: Option<&str>) -> Result<Self, ApiError> {
        let bad = |what: &str| ApiError::new(StatusCode::BAD_REQUEST, "bad_request", what.to_owned());
        let mut listing = Self { state: None, tenant: None, after: None, limit: DEFAULT_PAGE };
        for pair in query.unwrap_or_default().split('&').filter(|pair| !pair.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match key {
                "state" | "tenant" | "after" if value.is_empty() => {}
                "state" => {
                    listing.state = Some(state_filter(value).ok_or_else(|| {
                        bad("state is running, open, awaiting_approval, ambiguous or finished")
                    })?);
                }
                "tenant" if valid_name(value) => listing.tenant = Some(value.to_owned()),
                "tenant" => return Err(bad("tenant is not a tenant's name")),
                "after" => listing.after = Some(RunId::new(value).map_err(|_| bad("after is not a run id"))?),
                "limit" => {
                    listing.limit = value
                        .parse::<u32>()
                        .ok()
                        .filter(|limit| (1..=MAX_PAGE).contains(limit))
                        .ok_or_else(|| bad(&format!("limit is 1 to {MAX_PAGE}")))?;
                }
                _ => {}
            }
        }
        Ok(listing)
    }

    fn query(&self) -> Result<RunQuery, ApiError> {
        let mut query = RunQuery::new().limit(self.limit);
        if let Some(state) = self.state {
            query = query.state(state);
        }
        if let Some(tenant) = &self.tenant {
            query = query
                .label(TENANT_LABEL, tenant)
                .map_err(|error| ApiError::new(StatusCode::BAD_REQUEST, "bad_request", error.to_string()))?;
        }
        if let Some(after) = &self.after {
            query = query.after(after.clone());
        }
        Ok(query)
    }
}

/// One run of a listing, as JSON.
fn summary(run: &RunSummary) -> Value {
    let state = run.state();
    json!({
        "id": run.run().as_str(),
        "task": run.labels().get(TASK_LABEL),
        "tenant": run.labels().get(TENANT_LABEL),
        "state": state.name(),
        "status": state.status().map(loopbound::Status::as_str),
        "attempts": run.attempts(),
        "running": run.is_running(),
    })
}

/// `GET /runs`.
///
/// # Errors
///
/// 400 for a malformed query; the journal's code when it cannot list.
pub async fn runs<T: Transport + 'static, J: Journal + 'static>(
    State(app): State<Arc<App<T, J>>>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let query = Listing::parse(query.as_deref())?.query()?;
    let page = journal::list(app.journal(), &query)
        .await
        .map_err(|error| ApiError::new(status::of_command(&error), "journal", error.to_string()))?;
    let runs: Vec<Value> = page.runs().iter().map(summary).collect();
    let body = json!({"runs": runs, "next": page.next().map(RunId::as_str)});
    Ok((StatusCode::OK, axum::Json(body)).into_response())
}

/// `GET /tenants`: `{"tenants":[…]}`, each tenant's pool in today's window
/// ([`TenantPool`](super::tenants::TenantPool)).
///
/// # Errors
///
/// 503 when the pools cannot be read.
pub async fn tenants<T: Transport + 'static, J: Journal + 'static>(
    State(app): State<Arc<App<T, J>>>,
) -> Result<Response, ApiError> {
    let pools = app.tenants().pools().await.map_err(|error| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "pools",
            format!("the pools could not be read: {error}"),
        )
    })?;
    Ok((StatusCode::OK, axum::Json(json!({"tenants": pools}))).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_query_is_checked_parameter_by_parameter() {
        let all = Listing::parse(None).expect("no query");
        assert_eq!(all, Listing { state: None, tenant: None, after: None, limit: DEFAULT_PAGE });
        let some = Listing::parse(Some("state=awaiting_approval&tenant=acme&after=run-1&limit=7&x=y"))
            .expect("a full query");
        assert_eq!(some.state, Some(StateFilter::AwaitingApproval));
        assert_eq!((some.tenant.as_deref(), some.limit), (Some("acme"), 7));
        assert_eq!(some.after.as_ref().map(RunId::as_str), Some("run-1"));
        let empty = Listing::parse(Some("state=&tenant=&after=")).expect("empty values are no filter");
        assert_eq!(empty, all);
        for bad in ["state=done", "tenant=Acme", "limit=0", "limit=201", "limit=x", "after=a%20b"] {
            assert!(Listing::parse(Some(bad)).is_err(), "{bad}");
        }
    }
}
