//! The load server's control routes, over HTTP: reset (with a hold), release, figures.
//!
//! # Invariants
//!
//! - Control requests use their own HTTP client, so they never take a connection of the runs'
//!   pool.
//! - A non-success answer or an unreadable body is an error naming the route, never a default.

use std::fmt;
use std::time::Duration;

use loopbound_testkit::load::Snapshot;
use loopbound_testkit::load::stats::Runs;
use serde::de::DeserializeOwned;

/// A failed control request.
#[derive(Debug)]
pub struct ControlError {
    route: &'static str,
    reason: String,
}

impl fmt::Display for ControlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the load server's {} failed: {}", self.route, self.reason)
    }
}

impl std::error::Error for ControlError {}

/// The control routes of one load server.
#[derive(Clone, Debug)]
pub struct Control {
    client: reqwest::Client,
    root: String,
}

impl Control {
    /// The control routes of the server whose chat base URL is `base_url` (`…/v1`).
    #[must_use]
    pub fn new(base_url: &str) -> Self {
        let root = base_url.trim_end_matches('/').trim_end_matches("/v1").to_owned();
        Self { client: reqwest::Client::new(), root }
    }

    /// Forgets the server's figures; with `hold`, every run's first call waits for
    /// [`release`](Self::release).
    ///
    /// # Errors
    ///
    /// A [`ControlError`] if the server did not accept it.
    pub async fn reset(&self, hold: bool) -> Result<(), ControlError> {
        let body = if hold { r#"{"hold":true}"# } else { r#"{"hold":false}"# };
        self.post("/__load/reset", body).await
    }

    /// Releases the hold: the held calls are answered evenly over `over` (all at once for
    /// zero).
    ///
    /// # Errors
    ///
    /// A [`ControlError`] if the server did not accept it.
    pub async fn release(&self, over: Duration) -> Result<(), ControlError> {
        self.post("/__load/release", format!(r#"{{"over_ms":{}}}"#, over.as_millis())).await
    }

    /// The server's figures since the reset.
    ///
    /// # Errors
    ///
    /// A [`ControlError`] if they could not be read.
    pub async fn stats(&self) -> Result<Snapshot, ControlError> {
        self.get("/__load/stats").await
    }

    /// What the server knows of each run.
    ///
    /// # Errors
    ///
    /// A [`ControlError`] if it could not be read.
    pub async fn runs(&self) -> Result<Runs, ControlError> {
        self.get("/__load/runs").await
    }

    async fn post(&self, route: &'static str, body: impl Into<String>) -> Result<(), ControlError> {
        let fail = |reason: String| ControlError { route, reason };
        let response = self
            .client
            .post(format!("{}{route}", self.root))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.into())
            .send()
            .await
            .map_err(|error| fail(error.to_string()))?;
        if !response.status().is_success() {
            return Err(fail(format!("status {}", response.status())));
        }
        Ok(())
    }

    async fn get<T: DeserializeOwned>(&self, route: &'static str) -> Result<T, ControlError> {
        let fail = |reason: String| ControlError { route, reason };
        let response = self
            .client
            .get(format!("{}{route}", self.root))
            .send()
            .await
            .map_err(|error| fail(error.to_string()))?;
        if !response.status().is_success() {
            return Err(fail(format!("status {}", response.status())));
        }
        let bytes = response.bytes().await.map_err(|error| fail(error.to_string()))?;
        serde_json::from_slice(&bytes).map_err(|error| fail(error.to_string()))
    }
}
