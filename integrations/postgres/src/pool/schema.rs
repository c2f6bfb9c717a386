//! The pools' tables, versioned apart from the journal's so that each evolves on its own.
//!
//! # Invariants
//!
//! - All the pools' migrations run in one transaction under their own transaction-scoped
//!   advisory lock ([`POOL_LOCK_KEY`]): workers connecting at once apply each exactly once.
//! - `loopbound_pool_schema` holds one row per applied version; a database whose pools are
//!   newer than this build is refused, untouched.
//! - Migrations are append-only.

use loopbound::pool::PoolError;
use tokio_postgres::Client;

use crate::error::Redactor;

/// The advisory lock that serialises the pools' migrations ("lbpools" in ASCII).
const POOL_LOCK_KEY: i64 = 0x006c_6270_6f6f_6c73;

/// The newest pools' schema version this build knows.
pub const POOL_SCHEMA_VERSION: i64 = 1;

const V1: &str = "
    CREATE TABLE loopbound_pools (
        pool        text   PRIMARY KEY,
        calls       bigint CHECK (calls > 0),
        tokens      bigint CHECK (tokens > 0),
        cost        bigint CHECK (cost > 0),
        window_kind text   NOT NULL
    );
    CREATE TABLE loopbound_pool_windows (
        pool            text   NOT NULL REFERENCES loopbound_pools (pool),
        start           bigint NOT NULL,
        settled_calls   bigint NOT NULL,
        settled_tokens  bigint NOT NULL,
        settled_cost    bigint NOT NULL,
        reserved_calls  bigint NOT NULL,
        reserved_tokens bigint NOT NULL,
        reserved_cost   bigint NOT NULL,
        PRIMARY KEY (pool, start)
    );
    CREATE TABLE loopbound_pool_holds (
        hold    bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        holder  text    NOT NULL,
        expires bigint  NOT NULL,
        expired boolean NOT NULL,
        calls   bigint  NOT NULL,
        tokens  bigint  NOT NULL,
        cost    bigint  NOT NULL
    );
    CREATE INDEX loopbound_pool_holds_open ON loopbound_pool_holds (expires) WHERE NOT expired;
    CREATE TABLE loopbound_pool_hold_parts (
        hold  bigint NOT NULL REFERENCES loopbound_pool_holds (hold) ON DELETE CASCADE,
        pool  text   NOT NULL,
        start bigint NOT NULL,
        PRIMARY KEY (hold, pool)
    );
    CREATE INDEX loopbound_pool_hold_parts_by_pool ON loopbound_pool_hold_parts (pool, start);
";

const MIGRATIONS: &[(i64, &str)] = &[(1, V1)];

/// Brings the pools' tables up to [`POOL_SCHEMA_VERSION`].
pub(crate) async fn migrate(client: &mut Client, redactor: &Redactor) -> Result<(), PoolError> {
    let fail = |error: tokio_postgres::Error| {
        PoolError::storage("migrating the pools' tables", redactor.postgres(&error))
    };
    let transaction = client.transaction().await.map_err(fail)?;
    transaction.execute("SELECT pg_advisory_xact_lock($1)", &[&POOL_LOCK_KEY]).await.map_err(fail)?;
    transaction
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS loopbound_pool_schema (
                 version    bigint      PRIMARY KEY,
                 applied_at timestamptz NOT NULL DEFAULT now()
             )",
        )
        .await
        .map_err(fail)?;
    let found: i64 = transaction
        .query_one("SELECT coalesce(max(version), 0) FROM loopbound_pool_schema", &[])
        .await
        .map_err(fail)?
        .get(0);
    if found > POOL_SCHEMA_VERSION {
        return Err(PoolError::Corrupt("the pools' tables are newer than this build".into()));
    }
    for (version, sql) in MIGRATIONS.iter().filter(|(version, _)| *version > found) {
        transaction.batch_execute(sql).await.map_err(fail)?;
        transaction
            .execute("INSERT INTO loopbound_pool_schema (version) VALUES ($1)", &[version])
            .await
            .map_err(fail)?;
    }
    transaction.commit().await.map_err(fail)
}
