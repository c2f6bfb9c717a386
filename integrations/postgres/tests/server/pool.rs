//! Shared pools on PostgreSQL: the pool-store conformance suite every store must pass
//! (`loopbound_test::pool::conformance`, with the race of 64 tasks), a fresh database per store.
//! Leases and windows are judged by the server's clock, so the checks of leases wait in real
//! time and the days that need a moved clock are left out.

use loopbound::pool::ManualClock;
use loopbound_postgres::{PostgresPools, Store};
use loopbound_testkit::pool::conformance::{self, Stores};
use loopbound_testkit::postgres::Cluster;

use crate::{cluster, config};

struct Postgres(&'static Cluster);

impl Stores for Postgres {
    type Store = PostgresPools;

    async fn fresh(&self) -> PostgresPools {
        let database = self.0.create_database("pool_conform");
        let store =
            Store::connect(&config(&database.url)).await.expect("the fresh database accepts the store");
        PostgresPools::connect(&store).await.expect("the pools' tables are created")
    }

    async fn fresh_on(&self, _clock: ManualClock) -> Option<PostgresPools> {
        None
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_postgres_pool_store_conforms() {
    let Some(cluster) = cluster() else { return };
    conformance::check_all(&Postgres(cluster)).await;
}
