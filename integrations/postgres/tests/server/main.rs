//! Against a real PostgreSQL server (a throwaway cluster shared by this test binary, a database
//! per test): connecting and its failures, migrations, leases, fencing, and workers in separate
//! processes, the pool store. Where PostgreSQL is absent each test prints `SKIPPED` (a failure in CI).

mod connect;
mod fencing;
mod journal;
mod journal_processes;
mod leases;
mod notify;
mod pool;
mod processes;
mod schema;
mod upgrade;

use std::time::Duration;

use loopbound_postgres::{Config, Store, WorkerId};
use loopbound_testkit::postgres::{Cluster, Database, Durability};

/// The password every test's login role uses; no 8-character run of it may appear in output.
pub(crate) const PASSWORD: &str = "Vk3-pg_Password-77z";

/// The shared cluster of this test binary, or `None` (after `SKIPPED`).
pub(crate) fn cluster() -> Option<&'static Cluster> {
    Cluster::shared(Durability::Fast)
}

/// A fresh database and a store connected to it, with a short wait for pooled connections.
pub(crate) async fn fresh(hint: &str) -> Option<(Store, Database)> {
    let cluster = cluster()?;
    let database = cluster.create_database(hint);
    let store = Store::connect(&config(&database.url)).await.expect("the fresh database accepts the store");
    Some((store, database))
}

pub(crate) fn config(url: &str) -> Config {
    Config::new(url)
        .expect("a valid URL")
        .with_timeouts(Duration::from_secs(5), Duration::from_secs(10))
        .unwrap()
}

pub(crate) fn worker(name: &str) -> WorkerId {
    WorkerId::new(name).expect("a valid worker id")
}

/// Fails if any 8-character run of [`PASSWORD`] appears in `text`.
pub(crate) fn assert_no_password(text: &str) {
    let chars: Vec<char> = PASSWORD.chars().collect();
    for window in chars.windows(8) {
        let run: String = window.iter().collect();
        assert!(!text.contains(&run), "{run:?} of the password appears in {text:?}");
    }
}
