//! Shared pools in a SQLite file: one file for the journal and the pools (opened in either
//! order), a foreign database refused untouched, the figures surviving a reopen, and the race
//! every pool store must pass (`loopbound_test::pool::check_race`).

use std::sync::Arc;

use loopbound::pool::{Amount, PoolBudget, PoolError, PoolName, PoolStore, Window};
use loopbound_sqlite::{SqliteJournal, SqlitePools};
use loopbound_testkit::{pool, scratch};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

#[test]
fn the_journal_and_the_pools_share_one_file_whichever_opens_it_first() {
    let runtime = runtime();
    let pool = PoolName::new("tenant:acme").unwrap();
    for pools_first in [true, false] {
        let file = scratch::dir("pool-shared-file").join("runs.db");
        let (pools, journal) = if pools_first {
            let pools = SqlitePools::open(&file).unwrap();
            (pools, SqliteJournal::open(&file).unwrap())
        } else {
            let journal = SqliteJournal::open(&file).unwrap();
            (SqlitePools::open(&file).unwrap(), journal)
        };
        runtime.block_on(pools.define(&pool, PoolBudget::default().with_calls(3).per(Window::Day))).unwrap();
        drop((pools, journal));
        let reopened = SqlitePools::open(&file).unwrap();
        let state = runtime.block_on(reopened.state(&pool)).unwrap();
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_tasks_racing_one_sqlite_pool_settle_within_it_and_use_at_least_95_percent() {
    let store = SqlitePools::open(scratch::dir("pool-race").join("pools.db")).unwrap();
    pool::check_race(Arc::new(store), &PoolName::new("tenant:race").unwrap(), 64, 25).await;
}
