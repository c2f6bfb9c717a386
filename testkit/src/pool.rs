//! Races for one shared pool ([`loopbound_test::pool`], re-exported), and the SQLite or
//! PostgreSQL pool store a worker process is told to open.
//!
//! # Invariants
//!
//! - The races are `loopbound-test`'s, in one copy; this module adds only what needs a database
//!   crate.

use std::sync::Arc;

use loopbound::pool::DynPoolStore;
use loopbound_postgres::{Config, PostgresPools, Store};
use loopbound_sqlite::SqlitePools;
pub use loopbound_test::pool::*;

/// The pool store `spec` names: `sqlite:<file>` or `postgres:<url>`.
///
/// # Errors
///
/// Its words when it cannot be opened.
pub async fn open(spec: &str) -> Result<Arc<dyn DynPoolStore>, String> {
    if let Some(file) = spec.strip_prefix("sqlite:") {
        return Ok(Arc::new(SqlitePools::open(file).map_err(|error| error.to_string())?));
    }
    if let Some(url) = spec.strip_prefix("postgres:") {
        let config = Config::new(url).map_err(|error| error.to_string())?;
        let store = Store::connect(&config).await.map_err(|error| error.to_string())?;
        return Ok(Arc::new(PostgresPools::connect(&store).await.map_err(|error| error.to_string())?));
    }
    Err(format!("unknown store {spec}"))
}
