//! Shared pools in a SQLite file: the pool-store conformance suite every store must pass
//! (`loopbound_test::pool::conformance`, with the race), one file for the journal and the pools
//! (opened in either order), a foreign database refused untouched, the figures surviving a
//! reopen.

use std::sync::Arc;

use loopbound::pool::{Amount, ManualClock, PoolBudget, PoolError, PoolStore, Window};
use loopbound_sqlite::{SqliteJournal, SqlitePools, Synchronous};
use loopbound_testkit::pool::conformance::{self, Stores};
use loopbound_testkit::scratch;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

#[test]
fn the_journal_and_the_pools_share_one_file_whichever_opens_it_first() {
    let runtime = runtime();
    let pool = "tenant:acme";
    for pools_first in [true, false] {
        let file = scratch::dir("pool-shared-file").join("runs.db");
        let (pools, journal) = if pools_first {
            let pools = SqlitePools::open(&file).unwrap();
            (pools, SqliteJournal::open(&file).unwrap())
        } else {
            let journal = SqliteJournal::open(&file).unwrap();
            (SqlitePools::open(&file).unwrap(), journal)
        };
        runtime.block_on(pools.define(pool, PoolBudget::default().with_calls(3).per(Window::Day))).unwrap();
        drop((pools, journal));
        let reopened = SqlitePools::open(&file).unwrap();
        let state = runtime.block_on(reopened.state(pool)).unwrap();
        assert_eq!((state.budget.calls(), state.settled), (Some(3), Amount::ZERO));
        SqliteJournal::open(&file).expect("the journal still opens the file");
    }
}

#[test]
fn a_foreign_database_is_refused_untouched() {
    let file = scratch::dir("pool-foreign").join("other.db");
    let foreign = rusqlite::Connection::open(&file).unwrap();
    foreign.execute_batch("CREATE TABLE orders (id INTEGER); INSERT INTO orders VALUES (7);").unwrap();
    let refused = SqlitePools::open(&file).unwrap_err();
    assert_eq!(refused, PoolError::Corrupt("the file is a SQLite database but not a loopbound file".into()));
    let tables: i64 = foreign
        .query_row("SELECT count(*) FROM sqlite_schema WHERE type = 'table'", [], |row| row.get(0))
        .unwrap();
    let orders: i64 = foreign.query_row("SELECT id FROM orders", [], |row| row.get(0)).unwrap();
    assert_eq!((tables, orders), (1, 7), "untouched");
}

/// A fresh file per store, with `synchronous = FULL` as [`SqlitePools::open`] opens it.
struct Sqlite;

impl Stores for Sqlite {
    type Store = SqlitePools;

    async fn fresh(&self) -> SqlitePools {
        SqlitePools::open(scratch::dir("pool-conform").join("pools.db")).expect("a fresh file opens")
    }

    async fn fresh_on(&self, clock: ManualClock) -> Option<SqlitePools> {
        let file = scratch::dir("pool-conform").join("pools.db");
        Some(SqlitePools::open_with(file, Synchronous::Full, Arc::new(clock)).expect("a fresh file opens"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sqlite_pool_store_conforms() {
    conformance::check_all(&Sqlite).await;
}
