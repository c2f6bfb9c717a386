//! The crate's tables and their versioned migrations, applied when a store connects.
//!
//! # Invariants
//!
//! - All migrations run in one transaction under a transaction-scoped advisory lock
//!   ([`LOCK_KEY`]): many workers starting at once apply each migration exactly once, the others
//!   wait and then find nothing to do; a failing migration rolls back whole, leaving the
//!   database at its previous version.
//! - `loopbound_schema` holds one row per applied version; a database whose newest version is
//!   above [`MIGRATIONS`]'s is refused with [`Error::UnsupportedSchema`], untouched.
//! - Migrations are append-only: a released one is never edited, a change is a new version.

use tokio_postgres::Client;

use crate::error::{Error, Redactor};

/// The advisory lock that serialises migrations (an arbitrary constant: "loopbound" in ASCII).
pub(crate) const LOCK_KEY: i64 = 0x6c6f_6f70_626f_756e;

/// One schema version: its number and the statements that reach it from the previous one.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Migration {
    pub(crate) version: i64,
    pub(crate) sql: &'static str,
}

/// Every migration, in version order from 1.
pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        sql: "
        CREATE TABLE loopbound_runs (
            run_id       text        PRIMARY KEY,
            epoch        bigint      NOT NULL CHECK (epoch > 0),
            attempts     bigint      NOT NULL CHECK (attempts > 0),
            lease_holder text,
            lease_until  timestamptz,
            created_at   timestamptz NOT NULL DEFAULT now(),
            updated_at   timestamptz NOT NULL DEFAULT now(),
            CHECK ((lease_holder IS NULL) = (lease_until IS NULL))
        );
    ",
    },
    Migration { version: 2, sql: JOURNAL },
    Migration { version: 3, sql: DEFINITIONS },
    Migration { version: 4, sql: CANCELS },
    Migration { version: 5, sql: EXPIRIES_AND_REASONS },
    Migration { version: 6, sql: STREAMS },
    Migration { version: 7, sql: HOT_RENEWALS },
];

/// Version 7: what thousands of runs in flight write and read most stays cheap.
///
/// - A lease's renewal (every commit of an attempt renews it) changes no indexed column, so that
///   PostgreSQL rewrites the run's row in its page (a heap-only update) instead of adding an
///   entry to each of the row's indexes: the index on `lease_until` gives way to a partial one
///   on the leased runs' ids (what listing the running runs walks, in id order), whose predicate
///   changes only when a lease is taken or released, and the runs' pages keep room for the
///   rewritten rows. A commit that changes the run's state (an effect's start makes it
///   `ambiguous`, its result `open` again, the last commit `finished`) changes `state`, which
///   the listings by state walk, and is not heap-only: in the load (two effects a run), 5,100
///   of the 5,327 updates of 1,020 runs (see `benches/results/2026-12-07-postgres-hot`).
/// - The runs with a cancel request pending have an index of their own, almost always empty:
///   the check of many runs for requests reads it instead of every run's row.
const HOT_RENEWALS: &str = r#"
    DROP INDEX loopbound_runs_by_lease;
    CREATE INDEX loopbound_runs_leased ON loopbound_runs (run_id COLLATE "C") WHERE lease_holder IS NOT NULL;
    CREATE INDEX loopbound_runs_cancel_requested ON loopbound_runs (run_id) WHERE cancel_by IS NOT NULL;
    ALTER TABLE loopbound_runs SET (fillfactor = 70);
"#;

/// Version 6: each run's recorded stream, one update's JSON per line, numbered from 1.
const STREAMS: &str = "
    CREATE TABLE loopbound_updates (
        run_id text   NOT NULL REFERENCES loopbound_runs (run_id),
        seq    bigint NOT NULL CHECK (seq > 0),
        line   text   NOT NULL,
        PRIMARY KEY (run_id, seq)
    );
";

/// Version 5: when a proposal expires (milliseconds since the Unix epoch), if it does; the
/// host's reason an event gives (a closed run's).
const EXPIRIES_AND_REASONS: &str = "
    ALTER TABLE loopbound_proposals ADD COLUMN expires bigint CHECK (expires >= 0);
    ALTER TABLE loopbound_events ADD COLUMN reason text;
";

/// Version 4: who asked to cancel the run, until an attempt honours it.
const CANCELS: &str = "ALTER TABLE loopbound_runs ADD COLUMN cancel_by text;";

/// Version 3: the run's state as its parts (no text to slice; version 2's `name:detail` states
/// are split once here), its definition, its labels, and the indexes that listing by state and
/// by label walks in run-id order. Listings order run ids byte by byte (`COLLATE "C"`), as every
/// backend does, whatever the database's collation.
const DEFINITIONS: &str = r#"
    ALTER TABLE loopbound_runs
        ADD COLUMN state_operation bigint,
        ADD COLUMN state_status    text,
        ADD COLUMN definition      text;
    UPDATE loopbound_runs
       SET state_operation = split_part(state, ':', 2)::bigint, state = split_part(state, ':', 1)
     WHERE state LIKE 'awaiting\_approval:%' OR state LIKE 'ambiguous:%';
    UPDATE loopbound_runs
       SET state_status = substr(state, length('finished:') + 1), state = 'finished'
     WHERE state LIKE 'finished:%';
    CREATE TABLE loopbound_labels (
        run_id text NOT NULL REFERENCES loopbound_runs (run_id),
        key    text NOT NULL,
        value  text NOT NULL,
        PRIMARY KEY (run_id, key)
    );
    CREATE INDEX loopbound_labels_by_value ON loopbound_labels (key, value, run_id COLLATE "C");
    CREATE INDEX loopbound_runs_by_id ON loopbound_runs (run_id COLLATE "C");
    CREATE INDEX loopbound_runs_by_state ON loopbound_runs (state, run_id COLLATE "C");
    CREATE INDEX loopbound_runs_by_status ON loopbound_runs (state, state_status, run_id COLLATE "C");
    CREATE INDEX loopbound_runs_by_lease ON loopbound_runs (lease_until);
"#;

/// Version 2: the journal's rows, keyed like SQLite's. The run's own columns are
/// null for a run only ever leased through [`Store::acquire`](crate::Store::acquire), never
/// journaled; the journal fills them when it first takes the run. A tool's result may hold any
/// character, NUL included, which `text` refuses: results are `bytea` holding UTF-8.
const JOURNAL: &str = "
    ALTER TABLE loopbound_runs
        ADD COLUMN conversation text,
        ADD COLUMN ledger       text,
        ADD COLUMN state        text;
    CREATE TABLE loopbound_replies (
        run_id  text   NOT NULL REFERENCES loopbound_runs (run_id),
        ordinal bigint NOT NULL,
        reply   text   NOT NULL,
        PRIMARY KEY (run_id, ordinal)
    );
    CREATE TABLE loopbound_calls (
        run_id    text    NOT NULL REFERENCES loopbound_runs (run_id),
        reply     bigint  NOT NULL,
        idx       bigint  NOT NULL,
        operation bigint,
        is_error  boolean NOT NULL,
        text      bytea   NOT NULL,
        PRIMARY KEY (run_id, reply, idx)
    );
    CREATE UNIQUE INDEX loopbound_calls_by_operation
        ON loopbound_calls (run_id, operation) WHERE operation IS NOT NULL;
    CREATE TABLE loopbound_proposals (
        run_id     text   NOT NULL REFERENCES loopbound_runs (run_id),
        ordinal    bigint NOT NULL,
        reply      bigint NOT NULL,
        idx        bigint NOT NULL,
        tool       text   NOT NULL,
        capability text   NOT NULL,
        effect     text   NOT NULL,
        arguments  text   NOT NULL,
        PRIMARY KEY (run_id, ordinal)
    );
    CREATE TABLE loopbound_decisions (
        run_id  text   NOT NULL REFERENCES loopbound_runs (run_id),
        ordinal bigint NOT NULL,
        verdict    text   NOT NULL,
        decided_by text   NOT NULL,
        PRIMARY KEY (run_id, ordinal)
    );
    CREATE TABLE loopbound_started (
        run_id  text   NOT NULL REFERENCES loopbound_runs (run_id),
        ordinal bigint NOT NULL,
        start   bigint NOT NULL,
        PRIMARY KEY (run_id, ordinal, start)
    );
    CREATE TABLE loopbound_reconciliations (
        run_id     text   NOT NULL REFERENCES loopbound_runs (run_id),
        ordinal    bigint NOT NULL,
        start      bigint NOT NULL,
        resolution text   NOT NULL,
        result        bytea,
        reconciled_by text   NOT NULL,
        PRIMARY KEY (run_id, ordinal, start)
    );
    CREATE TABLE loopbound_events (
        run_id    text   NOT NULL REFERENCES loopbound_runs (run_id),
        seq       bigint NOT NULL,
        kind      text   NOT NULL,
        name      text   NOT NULL,
        count     bigint NOT NULL,
        operation  text,
        decided_by text,
        PRIMARY KEY (run_id, seq)
    );
";

/// The newest schema version this build knows.
#[must_use]
pub fn supported_version() -> i64 {
    MIGRATIONS.last().map_or(0, |migration| migration.version)
}

/// Brings the database up to the newest of `migrations`; returns the versions it applied.
pub(crate) async fn migrate(
    client: &mut Client,
    migrations: &[Migration],
    redactor: &Redactor,
) -> Result<Vec<i64>, Error> {
    let fail = |error: tokio_postgres::Error| redactor.postgres(&error);
    let transaction = client.transaction().await.map_err(fail)?;
    transaction.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK_KEY]).await.map_err(fail)?;
    transaction
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS loopbound_schema (
                 version    bigint      PRIMARY KEY,
                 applied_at timestamptz NOT NULL DEFAULT now()
             )",
        )
        .await
        .map_err(fail)?;
    let found: i64 = transaction
        .query_one("SELECT coalesce(max(version), 0) FROM loopbound_schema", &[])
        .await
        .map_err(fail)?
        .get(0);
    let supported = migrations.last().map_or(0, |migration| migration.version);
    if found > supported {
        return Err(Error::UnsupportedSchema { found, supported });
    }
    let mut applied = Vec::new();
    for migration in migrations.iter().filter(|migration| migration.version > found) {
        transaction.batch_execute(migration.sql).await.map_err(fail)?;
        transaction
            .execute("INSERT INTO loopbound_schema (version) VALUES ($1)", &[&migration.version])
            .await
            .map_err(fail)?;
        applied.push(migration.version);
    }
    transaction.commit().await.map_err(fail)?;
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use loopbound_testkit::postgres::{Cluster, Durability};

    use super::{Migration, migrate};
    use crate::error::{Error, Redactor};

    const V1: Migration = Migration { version: 1, sql: "CREATE TABLE first (n int)" };
    const V2_BROKEN: Migration = Migration {
        version: 2,
        sql: "CREATE TABLE second (n int); INSERT INTO second VALUES ('not a number')",
    };
    const V2: Migration =
        Migration { version: 2, sql: "CREATE TABLE second (n int); INSERT INTO second VALUES (2)" };

    #[tokio::test]
    async fn a_failing_migration_rolls_back_whole_and_a_later_run_applies_it() {
        let Some(cluster) = Cluster::shared(Durability::Fast) else { return };
        let database = cluster.create_database("migrations");
        let (mut client, connection) =
            tokio_postgres::connect(&database.url, tokio_postgres::NoTls).await.expect("the cluster answers");
        let connection = tokio::spawn(connection);
        let redactor = Redactor::default();

        assert_eq!(migrate(&mut client, &[V1], &redactor).await.unwrap(), [1]);
        let error = migrate(&mut client, &[V1, V2_BROKEN], &redactor).await.unwrap_err();
        assert_eq!(
            error,
            Error::Storage("invalid input syntax for type integer: \"not a number\" (SQLSTATE 22P02)".into())
        );
        assert_eq!(
            cluster.execute(&database.name, "SELECT string_agg(version::text, ',') FROM loopbound_schema"),
            "1"
        );
        assert_eq!(cluster.execute(&database.name, "SELECT to_regclass('second') IS NULL"), "t");

        assert_eq!(migrate(&mut client, &[V1, V2], &redactor).await.unwrap(), [2]);
        assert_eq!(migrate(&mut client, &[V1, V2], &redactor).await.unwrap(), Vec::<i64>::new());
        assert_eq!(cluster.execute(&database.name, "SELECT n FROM second"), "2");
        drop(client);
        connection.await.expect("no panic").expect("the connection ends cleanly");
    }

    #[tokio::test]
    async fn version_two_states_become_their_parts_in_version_three() {
        let Some(cluster) = Cluster::shared(Durability::Fast) else { return };
        let database = cluster.create_database("migrate_states");
        let (mut client, connection) =
            tokio_postgres::connect(&database.url, tokio_postgres::NoTls).await.expect("the cluster answers");
        let connection = tokio::spawn(connection);
        let redactor = Redactor::default();
        assert_eq!(migrate(&mut client, &super::MIGRATIONS[..2], &redactor).await.unwrap(), [1, 2]);
        for (run, state) in
            [("a", "open"), ("b", "awaiting_approval:3"), ("c", "ambiguous:12"), ("d", "finished:Completed")]
        {
            client
                .execute(
                    "INSERT INTO loopbound_runs (run_id, epoch, attempts, conversation, ledger, state) \
                     VALUES ($1, 1, 1, '[]', '', $2)",
                    &[&run, &state],
                )
                .await
                .unwrap();
        }
        assert_eq!(migrate(&mut client, super::MIGRATIONS, &redactor).await.unwrap(), [3, 4, 5, 6, 7]);
        assert_eq!(
            cluster.execute(
                &database.name,
                "SELECT string_agg(concat_ws(',', run_id, state, state_operation, state_status), ' ' ORDER BY run_id) \
                 FROM loopbound_runs"
            ),
            "a,open b,awaiting_approval,3 c,ambiguous,12 d,finished,Completed"
        );
        drop(client);
        connection.await.expect("no panic").expect("the connection ends cleanly");
    }
}
